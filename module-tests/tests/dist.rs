//! The module tarball of `make dist` (scripts/dist.sh), as a user installs it: its checksum
//! holds, it unpacks to the module, the `rlock` tool, a README and the licence, and a server
//! started with the unpacked `.so` serves locks that the unpacked tool takes.
//! The tarball is built here when dist/ lacks it.

use std::path::{Path, PathBuf};
use std::process::Command;

use rlock_module_tests::{assert_int, call, flavors, output_text, redis::Value, Server};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository root")
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    assert!(out.status.success(), "{what} failed: {}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// dist/rlock-<version>-linux-<arch>.tar.gz, built by scripts/dist.sh when absent.
fn tarball() -> (String, PathBuf) {
    let root = root();
    let version = run(
        Command::new("python3")
            .arg("scripts/versions.py")
            .arg("--print")
            .current_dir(&root),
        "scripts/versions.py --print",
    )
    .trim()
    .to_string();
    let name = format!("rlock-{version}-linux-{}", std::env::consts::ARCH);
    let path = root.join("dist").join(format!("{name}.tar.gz"));
    if !path.is_file() {
        run(
            Command::new("scripts/dist.sh")
                .arg("module")
                .current_dir(&root),
            "scripts/dist.sh module",
        );
    }
    (name, path)
}

#[test]
fn the_module_tarball_unpacks_and_loads_on_every_server() {
    let (name, tarball) = tarball();
    let dist = tarball.parent().expect("dist/");
    run(
        Command::new("sha256sum")
            .arg("--check")
            .arg(format!("{name}.tar.gz.sha256"))
            .current_dir(dist),
        "sha256sum --check of the tarball",
    );
    let unpacked = tempfile::tempdir().expect("temp dir");
    run(
        Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(unpacked.path()),
        "tar -xzf",
    );
    let home = unpacked.path().join(&name);
    for file in [
        "librlock.so",
        "rlock",
        "README.md",
        "LICENSE",
        "CHANGELOG.md",
        "SHA256SUMS",
    ] {
        assert!(home.join(file).is_file(), "{name}.tar.gz has no {file}");
    }
    run(
        Command::new("sha256sum")
            .args(["--check", "SHA256SUMS"])
            .current_dir(&home),
        "sha256sum --check SHA256SUMS inside the tarball",
    );
    let version = name.split('-').nth(1).expect("rlock-<version>-...");
    let readme = std::fs::read_to_string(home.join("README.md")).expect("README.md");
    assert!(
        readme.contains(version) && readme.contains("--loadmodule"),
        "the README names neither the version nor how to load the module:\n{readme}"
    );
    let tool = home.join("rlock");
    let said = run(Command::new(&tool).arg("--version"), "rlock --version");
    assert!(said.contains(version), "rlock --version: {said}");

    let module = home.join("librlock.so");
    for flavor in flavors() {
        let server = Server::builder(flavor)
            .module(false)
            .config("loadmodule", module.to_str().expect("a UTF-8 path"))
            .start();
        let mut con = server.conn();
        let info = server.info("rlock");
        assert_eq!(
            info.get("rlock_version").map(String::as_str),
            Some(version),
            "{flavor}: INFO rlock of the unpacked module"
        );
        assert_int(
            &mut con,
            &["RLOCK.ACQUIRE", "dist-check", "owner-1", "LEASE", "30000"],
            1,
        );
        // The unpacked tool sees the hold the raw command took, then takes the lock itself once
        // it is free.
        let shown = run(
            Command::new(&tool).args(["-u", &server.url(), "info", "dist-check"]),
            "rlock info",
        );
        assert!(shown.contains("owner-1"), "{flavor}: rlock info: {shown}");
        assert_int(&mut con, &["RLOCK.RELEASE", "dist-check", "owner-1"], 1);
        run(
            Command::new(&tool).args(["-u", &server.url(), "lock", "dist-check", "--", "true"]),
            "rlock lock dist-check -- true",
        );
        assert_eq!(
            call(&mut con, &["EXISTS", "dist-check"]),
            Ok(Value::Int(0)),
            "{flavor}: the tool's hold was released"
        );
    }
}
