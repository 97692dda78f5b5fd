//! What the runner keeps of a server that died unexpectedly: its whole log, what it printed
//! before the log opened, any core file in its dir, and how it ended (the signal), in a
//! directory of its own that the finding names. A bug report's head is in the finding too.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{SystemTime, UNIX_EPOCH};

use rlock_module_tests::Server;

/// Where the kept logs go: `RLOCK_CHAOS_KEEP`, or `target/chaos-deaths` in the workspace.
fn root() -> PathBuf {
    match std::env::var_os("RLOCK_CHAOS_KEEP") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/chaos-deaths"),
    }
}

/// `status` said as a person reads it: the signal's number and name, or the exit code.
pub fn describe(status: ExitStatus) -> String {
    match status.signal() {
        Some(signal) => {
            let name = match signal {
                4 => "SIGILL",
                6 => "SIGABRT",
                7 => "SIGBUS",
                8 => "SIGFPE",
                9 => "SIGKILL",
                11 => "SIGSEGV",
                15 => "SIGTERM",
                _ => "",
            };
            format!("killed by signal {signal} {name}")
        }
        None => format!("exited with code {}", status.code().unwrap_or(-1)),
    }
}

/// If `server` (`what`: its role) has died, keeps its logs and returns the finding: how it
/// ended, where its whole log is, the bug report's head and the log's tail. `None` while
/// it runs.
pub fn dead(server: &mut Server, what: &str) -> Option<String> {
    dead_into(server, what, &root())
}

/// The finding on a fuzz or churn server at the end of its run: its death (how it
/// ended, the crash report's head with the command and the stack, and its tail), or a
/// panic in its log (the log's tail). `None` if neither.
pub fn dead_or_panicked(server: &mut Server) -> Option<String> {
    if let Some(death) = dead(server, "server") {
        return Some(death);
    }
    if server.log().contains("panicked") {
        return Some(format!("a panic in the log:\n{}", server.log_tail(30)));
    }
    None
}

fn dead_into(server: &mut Server, what: &str, root: &Path) -> Option<String> {
    let status = server.exit_status()?;
    Some(report(server, what, &describe(status), root))
}

/// The finding for a server known dead (`how`: how it ended), its logs kept under `root`.
fn report(server: &Server, what: &str, how: &str, root: &Path) -> String {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let dir = root.join(format!("{stamp}-{}-{}", server.flavor.name(), server.port));
    let kept = match server.keep_logs(&dir) {
        Ok(files) => {
            let _ = std::fs::write(dir.join("exit.txt"), format!("{what}: {how}\n"));
            format!(
                "its whole log ({} file{}) is kept in {}",
                files.len(),
                if files.len() == 1 { "" } else { "s" },
                dir.display()
            )
        }
        Err(e) => format!("its log could not be kept in {}: {e}", dir.display()),
    };
    let log = server.log();
    let bug = log
        .find("BUG REPORT START")
        .map(|at| log[at..].lines().take(60).collect::<Vec<_>>().join("\n"))
        .unwrap_or_default();
    format!(
        "the {what} ({} on port {}) died, {how}; {kept}\n{bug}\n...\n{}",
        server.flavor,
        server.port,
        server.log_tail(30)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_server_that_dies_leaves_its_whole_log_and_its_signal() {
        for flavor in rlock_module_tests::flavors() {
            let mut server = Server::start(flavor);
            assert!(dead(&mut server, "server").is_none(), "{flavor}: alive");
            let mut c = crate::resp::Conn::connect(server.port, Duration::from_secs(5)).unwrap();
            let _ = c.call(&[b"DEBUG", b"SEGFAULT"]);
            assert!(
                rlock_module_tests::wait_until(Duration::from_secs(10), || server
                    .exit_status()
                    .is_some()),
                "{flavor}: DEBUG SEGFAULT did not end the server"
            );
            let keep = std::env::temp_dir().join(format!(
                "rlock-chaos-evidence-{}-{}",
                std::process::id(),
                server.port
            ));
            let finding = dead_into(&mut server, "server", &keep).expect("dead");
            assert!(finding.contains("signal 11 SIGSEGV"), "{flavor}: {finding}");
            let dirs: Vec<_> = std::fs::read_dir(&keep).unwrap().collect();
            assert_eq!(dirs.len(), 1, "{flavor}: one dir per death");
            let dir = dirs[0].as_ref().unwrap().path();
            assert!(finding.contains(&dir.display().to_string()), "{finding}");
            let log = std::fs::read_to_string(dir.join("server.log")).unwrap();
            // The whole log: from the start-up banner to the crash report.
            assert!(log.contains("Server initialized"), "{flavor}: {log}");
            assert!(log.contains("BUG REPORT START"), "{flavor}: {log}");
            let exit = std::fs::read_to_string(dir.join("exit.txt")).unwrap();
            assert!(exit.contains("signal 11"), "{flavor}: {exit}");
            std::fs::remove_dir_all(&keep).unwrap();
        }
    }
}
