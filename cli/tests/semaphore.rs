//! `rlock semaphore`: never more than N runs at once, and the same exit codes as `lock`.

mod common;

use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn never_more_than_n_at_once() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let dir = scratch(&server, "sem");
        let log = dir.join("log");
        let script = format!(
            "test -n \"$RLOCK_PERMIT\" || exit 99; echo + >> {0}; sleep 0.3; echo - >> {0}",
            log.display()
        );
        let args: Vec<String> = [
            "semaphore",
            "slots",
            "--permits",
            "2",
            "--",
            "sh",
            "-c",
            &script,
        ]
        .map(str::to_owned)
        .to_vec();
        run_together(&server, &vec![args; 6], LIMIT, "semaphore");
        let (mut now, mut most) = (0i32, 0i32);
        let log = read(&log);
        for line in log.lines() {
            now += if line == "+" { 1 } else { -1 };
            most = most.max(now);
        }
        assert_eq!(log.lines().count(), 12, "{flavor}: {log}");
        assert_eq!(most, 2, "{flavor}: 2 at once, never more: {log}");

        // All permits taken: no wait means 75, CMD not run.
        let mut c = server.conn();
        call(
            &mut c,
            &["RSEM.LEASE", "slots", "LEASE", "30000", "PERMITS", "2"],
        )
        .unwrap();
        let out = run(
            rlock(
                &server,
                &["semaphore", "slots", "-p", "2", "-w", "200ms", "--", "true"],
            ),
            LIMIT,
            "full",
        );
        assert_eq!(
            out.status.code(),
            Some(75),
            "{flavor}: {}",
            text(&out.stderr)
        );
    }
}
