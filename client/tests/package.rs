//! C22, the package: the `.crate` that `cargo package` makes (or `make dist` left in dist/),
//! unpacked into an empty project that depends on it by path, built there and run against a
//! real server: it takes a lock and releases it. A file the build needs and `include` leaves out
//! fails the build here.
//!
//! The empty project gets the workspace's Cargo.lock (so the same versions resolve, without the
//! network) and builds in the workspace's target directory (so the compiled dependencies are
//! reused): only the unpacked crate and the small program are compiled.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Server;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The program of the empty project: the lock's key and the server's URL on its command line.
const MAIN: &str = r#"use rlock_client::blocking::Locks;

fn main() -> rlock_client::Result<()> {
    let mut args = std::env::args().skip(1);
    let (key, url) = (args.next().expect("key"), args.next().expect("url"));
    let locks = Locks::from_url(&url)?;
    let lock = locks.lock(key.as_str()).fenced();
    let guard = lock.acquire()?.expect("the lock is free");
    println!("rlock-client {} token {}", rlock_client::VERSION, guard.token().unwrap());
    assert_eq!(lock.hold_count()?, 1);
    assert!(guard.release()?, "released");
    println!("released");
    Ok(())
}
"#;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the client lives in the workspace")
        .to_path_buf()
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// Runs `cmd`, failing the test with its output if it fails; its stdout.
fn run(mut cmd: Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// dist/'s crate when `make dist` made one, else a fresh `cargo package`. Its build is left to
/// the empty project (`--no-verify`): building the unpacked source there is the same check.
fn packaged_crate(root: &Path, target: &Path) -> PathBuf {
    let name = format!("rlock-client-{VERSION}.crate");
    let dist = root.join("dist").join(&name);
    if dist.is_file() {
        return dist;
    }
    let mut package = cargo();
    package
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target)
        .args(["package", "-q", "-p", "rlock-client", "--allow-dirty"])
        .arg("--no-verify");
    run(package, "cargo package");
    target.join("package").join(name)
}

#[test]
fn c22_the_packaged_crate_builds_in_an_empty_project_and_takes_a_lock() {
    let root = workspace();
    let target = target_dir(&root);
    let crate_file = packaged_crate(&root, &target);

    // A fixed place in the target's scratch directory, emptied first: the same paths each run.
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("c22");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let mut untar = Command::new("tar");
    untar.arg("-xzf").arg(&crate_file).arg("-C").arg(&scratch);
    run(untar, "tar -xzf the .crate");
    let unpacked = scratch.join(format!("rlock-client-{VERSION}"));
    assert!(unpacked.join("Cargo.toml").is_file(), "{unpacked:?}");

    let app = scratch.join("app");
    std::fs::create_dir_all(app.join("src")).unwrap();
    std::fs::write(
        app.join("Cargo.toml"),
        format!(
            "[package]\nname = \"c22-app\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\nrlock-client = {{ path = \"../rlock-client-{VERSION}\" }}\n\n\
             # Its own workspace: not a member of any around it.\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::write(app.join("src/main.rs"), MAIN).unwrap();
    std::fs::copy(root.join("Cargo.lock"), app.join("Cargo.lock")).unwrap();

    let mut build = cargo();
    build
        .current_dir(&app)
        .env("CARGO_TARGET_DIR", &target)
        .args(["build", "-q"]);
    run(build, "cargo build of the empty project");
    let program = target.join("debug").join("c22-app");

    for flavor in common::flavors() {
        let server = Server::start(flavor);
        let key = format!("c22:{flavor}");
        let mut call = Command::new(&program);
        call.arg(&key).arg(server.url());
        let out = run(call, "the program");
        let token = format!("rlock-client {VERSION} token ");
        let got: u64 = out
            .lines()
            .find_map(|l| l.strip_prefix(token.as_str()))
            .unwrap_or_else(|| panic!("{flavor}: {out}"))
            .parse()
            .unwrap();
        assert!(out.lines().any(|l| l == "released"), "{flavor}: {out}");
        // The server saw the hold: its fencing counter is the token, and the lock is free.
        let locks = rlock_client::blocking::Locks::new(server.client()).unwrap();
        let info = locks.lock(key.as_str()).info().unwrap();
        assert_eq!(info.token, Some(got), "{flavor}");
        assert!(info.holders.is_empty(), "{flavor}: {:?}", info.holders);
    }
}
