//! What the `rlock` binary's tests share: running it against a test server, with a bound on
//! how long anything may take, and a little load.

#![allow(dead_code, unused_imports)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use rlock_module_tests::{call, each_server, flavors, wait_until, Server};

mod locks;
pub use locks::{blocked_waiter, hold, waiting};

/// How long one `rlock` run may take before a test gives up on it.
pub const LIMIT: Duration = Duration::from_secs(20);

/// The `rlock` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_rlock")
}

/// `rlock ARGS` with nothing but ARGS (no server of the test's; `-u` names one, or none is
/// there), run to its end (at most [`LIMIT`]).
pub fn run_alone(args: &[&str], what: &str) -> Output {
    let mut c = Command::new(bin());
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    run(c, LIMIT, what)
}

/// `rlock ARGS` against `server`, run to its end (at most [`LIMIT`]).
pub fn run_on(server: &Server, args: &[&str], what: &str) -> Output {
    run(rlock(server, args), LIMIT, what)
}

/// Fails unless `out` exited with `code`; the message is `context` and `out`'s stderr.
pub fn assert_exit(out: &Output, code: i32, context: impl std::fmt::Display) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{context}: {}",
        text(&out.stderr)
    );
}

/// Fails unless `out` exited with `code` and its stderr says `says`; the message is `context`
/// and `out`'s stderr.
pub fn assert_exit_saying(out: &Output, code: i32, says: &str, context: impl std::fmt::Display) {
    assert_exit(out, code, &context);
    let stderr = text(&out.stderr);
    assert!(stderr.contains(says), "{context}: {stderr}");
}

/// `rlock ARGS` started against `server`, returned once `key` exists (within 5 s): it holds
/// `key` while it runs.
pub fn spawn_holding(server: &Server, args: &[&str], key: &str) -> Child {
    let child = rlock(server, args).spawn().unwrap();
    assert!(wait_until(Duration::from_secs(5), || exists(server, key)));
    child
}

/// The lines `child` prints on stdout, as they come (from a thread of their own).
pub fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// What `child` printed on stderr, once it exited.
pub fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    child
        .stderr
        .as_mut()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

/// `rlock` arguments as the owned list [`run_together`] takes.
pub fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|&a| a.to_owned()).collect()
}

/// `rlock ARGS` against `server`, its output captured, stdin closed.
pub fn rlock(server: &Server, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.env("RLOCK_URL", server.url())
        .env_remove("RLOCK_USER")
        .env_remove("RLOCK_PASSWORD")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for `child` up to `limit`; kills it and panics past that.
pub fn wait_for(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `cmd` to its end (at most `limit`): status, stdout, stderr.
pub fn run(mut cmd: Command, limit: Duration, what: &str) -> Output {
    let mut child = cmd.spawn().expect("spawn rlock");
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = out.read_to_end(&mut text);
        text
    });
    let err_reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = err.read_to_end(&mut text);
        text
    });
    let status = wait_for(&mut child, limit, what);
    Output {
        status,
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// Starts `rlock ARGS` once for each argument list, all at once (output discarded), and
/// waits (each up to `limit`) until every one exited 0.
pub fn run_together(server: &Server, runs: &[Vec<String>], limit: Duration, what: &str) {
    let mut children: Vec<Child> = runs
        .iter()
        .map(|args| {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            rlock(server, &args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn rlock")
        })
        .collect();
    for child in &mut children {
        let status = wait_for(child, limit, what);
        assert_eq!(status.code(), Some(0), "{}: {what}", server.flavor);
    }
}

/// The `runs` runs logged in `log` as `start X` / `end X` lines: each run's X, in order.
/// Fails unless every start is followed by its own end (no two runs at once).
pub fn one_at_a_time(log: &Path, runs: usize, what: &str) -> Vec<String> {
    let lines: Vec<String> = read(log).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 2 * runs, "{what}: {lines:?}");
    lines
        .chunks(2)
        .map(|pair| {
            let start = pair[0].strip_prefix("start ").expect("a start first");
            let end = pair[1].strip_prefix("end ").expect("then its end");
            assert_eq!(start, end, "{what}: two at once: {lines:?}");
            start.to_owned()
        })
        .collect()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The path of a log in a fresh scratch directory `dir`, and `script` with `{log}` standing
/// for it: a shell script for runs that say what they do in the log.
pub fn logging_script(server: &Server, dir: &str, script: &str) -> (PathBuf, String) {
    let log = scratch(server, dir).join("log");
    let script = script.replace("{log}", &log.display().to_string());
    (log, script)
}

/// `rlock -u redis://127.0.0.1:1 ARGS`, where nothing listens: fails unless it exits 69
/// (unavailable). Its stderr.
pub fn run_without_server(args: &[&str], what: &str) -> String {
    let out = run_alone(&[&["-u", "redis://127.0.0.1:1"], args].concat(), what);
    assert_eq!(out.status.code(), Some(69));
    text(&out.stderr)
}

/// A fresh scratch directory under the server's own (removed with it).
pub fn scratch(server: &Server, name: &str) -> PathBuf {
    let d = server.dir().join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn exists(server: &Server, key: &str) -> bool {
    let mut c = server.conn();
    matches!(call(&mut c, &["EXISTS", key]), Ok(redis::Value::Int(1)))
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Sends `signal` (`INT`, `TERM`) to process `pid`.
pub fn signal(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill -{signal} {pid}");
}

/// Contention on `key` until dropped: `threads` clients take it in turn (`BLOCK`), hold it
/// a few ms and release it.
pub struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    pub fn start(server: &Server, key: &str, threads: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|i| {
                let (stop, key) = (stop.clone(), key.to_owned());
                let mut c = server.conn();
                std::thread::spawn(move || {
                    let owner = format!("load-{i}");
                    let deadline = Instant::now() + Duration::from_secs(60);
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let got = call(&mut c, &["RLOCK.ACQUIRE", &key, &owner, "BLOCK", "2000"]);
                        if matches!(got, Ok(redis::Value::Int(_))) {
                            std::thread::sleep(Duration::from_millis(5));
                            let _ = call(&mut c, &["RLOCK.RELEASE", &key, &owner]);
                        }
                    }
                })
            })
            .collect();
        Load { stop, threads }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A tmux server of this test's own (its own socket), killed on drop: a real terminal for
/// what needs one. Fails, never skips, without tmux.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn new() -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            matches!(&found, Ok(o) if o.status.success()),
            "tmux is needed for the tests that run rlock in a terminal (`rlock top`'s full \
             screen, `release --force`'s question) and was not found: install it \
             (scripts/deps.sh tmux, or apt-get install tmux)"
        );
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        Tmux {
            socket: format!(
                "rlock-cli-test-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }

    pub fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux")
    }

    /// Session `name` running `command` in a terminal of `width` x `height`.
    pub fn start(&self, name: &str, width: u16, height: u16, command: &str) {
        let (width, height) = (width.to_string(), height.to_string());
        let started = self.cmd(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            &width,
            "-y",
            &height,
            command,
        ]);
        assert!(started.status.success(), "{}", text(&started.stderr));
    }

    /// Waits up to 10 s until session `name` shows what `wanted` accepts: whether it did, and
    /// the last screen seen.
    pub fn wait_for_screen(&self, name: &str, wanted: impl Fn(&str) -> bool) -> (bool, String) {
        let mut screen = String::new();
        let shown = wait_until(Duration::from_secs(10), || {
            screen = self.screen(name);
            wanted(&screen)
        });
        (shown, screen)
    }

    /// What session `name` shows now.
    pub fn screen(&self, name: &str) -> String {
        text(&self.cmd(&["capture-pane", "-p", "-t", name]).stdout)
    }

    pub fn alive(&self, name: &str) -> bool {
        self.cmd(&["has-session", "-t", name]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}
