//! `rlock semaphore`: never more than N runs at once, and the same exit codes as `lock`.

mod common;

use common::*;

#[test]
fn never_more_than_n_at_once() {
    for (flavor, server) in each_server() {
        let script =
            "test -n \"$RLOCK_PERMIT\" || exit 99; echo + >> {log}; sleep 0.3; echo - >> {log}";
        let (log, script) = logging_script(&server, "sem", script);
        let args = owned(&[
            "semaphore",
            "slots",
            "--permits",
            "2",
            "--",
            "sh",
            "-c",
            &script,
        ]);
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
        let full = ["semaphore", "slots", "-p", "2", "-w", "200ms", "--", "true"];
        assert_exit(&run_on(&server, &full, "full"), 75, flavor);
    }
}
