//! `rlock lock`: CMD runs under the lock, with its environment; exit statuses; waits; the
//! lease renewed; a lost lock stops CMD; signals go to CMD.

mod common;

use std::time::{Duration, Instant};

use common::*;

#[test]
fn cmd_gets_the_lock_s_environment_and_rlock_exits_with_its_status() {
    for (flavor, server) in each_server() {
        let script = "echo \"$RLOCK_KEY|$RLOCK_OWNER|$RLOCK_TOKEN\" > {log}; exit 7";
        let (file, script) = logging_script(&server, "env", script);
        let lock = ["lock", "jobs:env", "--", "sh", "-c", &script];
        assert_exit(&run_on(&server, &lock, "lock env"), 7, flavor);
        let env = read(&file);
        let parts: Vec<&str> = env.trim().split('|').collect();
        assert_eq!(parts[0], "jobs:env", "{flavor}: {env}");
        assert!(
            parts[1].contains(':'),
            "{flavor}: owner id <uuid>:<n>: {env}"
        );
        assert!(
            parts[2].parse::<u64>().unwrap() >= 1,
            "{flavor}: a token: {env}"
        );
        assert!(!exists(&server, "jobs:env"), "{flavor}: released after CMD");

        // A second run gets a higher token: the lock changed hands.
        run_on(&server, &lock, "lock env again");
        let again: u64 = read(&file)
            .trim()
            .rsplit('|')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(again > parts[2].parse().unwrap(), "{flavor}");

        let killed = ["lock", "jobs:env", "--", "sh", "-c", "kill -KILL $$"];
        let killed = run_on(&server, &killed, "lock killed");
        assert_eq!(
            killed.status.code(),
            Some(128 + 9),
            "{flavor}: 128+signal, as shells"
        );

        let missing = ["lock", "jobs:env", "--", "/no/such/command"];
        let missing = run_on(&server, &missing, "lock missing");
        assert_eq!(missing.status.code(), Some(127), "{flavor}");
        assert!(
            text(&missing.stderr).contains("/no/such/command"),
            "{flavor}"
        );
        assert!(!exists(&server, "jobs:env"), "{flavor}: released after all");

        let usage = run_on(&server, &["lock", "jobs:env"], "no CMD");
        assert_eq!(usage.status.code(), Some(64), "{flavor}: CMD is required");
    }
}

#[test]
fn six_concurrent_runs_never_overlap() {
    for (flavor, server) in each_server() {
        let script = "echo start $$ >> {log}; sleep 0.05; echo end $$ >> {log}";
        let (log, script) = logging_script(&server, "six", script);
        let args = owned(&["lock", "-w", "20s", "shared", "--", "sh", "-c", &script]);
        run_together(&server, &vec![args; 6], LIMIT, "six");
        one_at_a_time(&log, 6, &format!("{flavor}: runs overlapped"));
    }
}

#[test]
fn waits_time_out_with_75_or_e_and_a_waiter_proceeds_on_release() {
    for (flavor, server) in each_server() {
        let mut c = server.conn();
        hold(&mut c, "busy", "someone", "30000");

        let t = Instant::now();
        let wait = [
            "lock",
            "--wait",
            "400ms",
            "busy",
            "--",
            "touch",
            "/dev/null",
        ];
        let out = run_on(&server, &wait, "wait 400ms");
        let took = t.elapsed();
        assert_exit(&out, 75, flavor);
        assert!(text(&out.stderr).contains("not acquired"), "{flavor}");
        assert!(
            took >= Duration::from_millis(380) && took < Duration::from_secs(3),
            "{flavor}: waited {took:?} for a 400ms wait"
        );

        let dir = scratch(&server, "wait");
        let marker = dir.join("ran");
        let touch = format!("touch {}", marker.display());
        let try_once = [
            "lock", "-w", "0", "-E", "9", "busy", "--", "sh", "-c", &touch,
        ];
        let out = run_on(&server, &try_once, "-E");
        assert_eq!(out.status.code(), Some(9), "{flavor}: -E 9");
        assert!(!marker.exists(), "{flavor}: CMD did not run");

        // A run that waits (no --wait: forever) goes once the holder lets go.
        let mut waiter = rlock(&server, &["lock", "busy", "--", "sh", "-c", &touch])
            .spawn()
            .unwrap();
        assert!(
            wait_until(Duration::from_secs(5), || waiting(&mut c, "busy") == 1),
            "{flavor}: the run waits in the server"
        );
        std::thread::sleep(Duration::from_millis(300));
        assert!(!marker.exists(), "{flavor}: not while held");
        let released = Instant::now();
        call(&mut c, &["RLOCK.RELEASE", "busy", "someone"]).unwrap();
        assert_eq!(
            wait_for(&mut waiter, LIMIT, "waiter").code(),
            Some(0),
            "{flavor}"
        );
        assert!(marker.exists(), "{flavor}: CMD ran");
        assert!(released.elapsed() < Duration::from_secs(3), "{flavor}");
    }
}

#[test]
fn a_run_longer_than_its_lease_keeps_the_lock() {
    for (flavor, server) in each_server() {
        let lock = ["lock", "--lease", "1s", "long", "--", "sleep", "3"];
        let mut long = spawn_holding(&server, &lock, "long");
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(700));
            let other = ["lock", "--wait", "100ms", "long", "--", "true"];
            let other = run_on(&server, &other, "other");
            assert_eq!(
                other.status.code(),
                Some(75),
                "{flavor}: still held past its 1s lease"
            );
        }
        assert_eq!(
            wait_for(&mut long, LIMIT, "long").code(),
            Some(0),
            "{flavor}"
        );
        assert!(!exists(&server, "long"), "{flavor}");
    }
}

#[test]
fn a_force_release_stops_cmd_and_rlock_exits_70_within_the_lease() {
    for (flavor, server) in each_server() {
        let script = "trap 'echo term > {log}; exit 0' TERM; while true; do sleep 0.05; done";
        let (marker, script) = logging_script(&server, "lost", script);
        let lock = [
            "lock", "--lease", "1500ms", "precious", "--", "sh", "-c", &script,
        ];
        let mut holder = spawn_holding(&server, &lock, "precious");
        std::thread::sleep(Duration::from_millis(200));
        let mut c = server.conn();
        let t = Instant::now();
        call(&mut c, &["RLOCK.FORCERELEASE", "precious"]).unwrap();
        let status = wait_for(&mut holder, LIMIT, "holder");
        let took = t.elapsed();
        assert_eq!(status.code(), Some(70), "{flavor}");
        assert!(
            took < Duration::from_millis(1500),
            "{flavor}: noticed in {took:?}"
        );
        assert_eq!(read(&marker).trim(), "term", "{flavor}: CMD got SIGTERM");
        let err = stderr_of(&mut holder);
        assert!(
            err.contains("lost") && err.contains("force-released") && err.contains("SIGTERM"),
            "{flavor}: says why: {err}"
        );
    }
}

#[test]
fn sigkill_follows_when_cmd_ignores_sigterm() {
    for (flavor, server) in each_server() {
        let script = "trap '' TERM; while true; do sleep 0.05; done";
        let lock = [
            "lock",
            "--lease",
            "900ms",
            "--kill-after",
            "300ms",
            "stubborn",
            "--",
            "sh",
            "-c",
            script,
        ];
        let mut holder = spawn_holding(&server, &lock, "stubborn");
        let mut c = server.conn();
        call(&mut c, &["RLOCK.FORCERELEASE", "stubborn"]).unwrap();
        let t = Instant::now();
        assert_eq!(
            wait_for(&mut holder, LIMIT, "stubborn").code(),
            Some(70),
            "{flavor}"
        );
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{flavor}: killed after 300ms"
        );
    }
}

#[test]
fn sigint_and_sigterm_to_rlock_go_to_cmd_and_the_lock_is_released_after() {
    for (flavor, server) in each_server() {
        let dir = scratch(&server, "signals");
        for (sig, code) in [("INT", 5), ("TERM", 6)] {
            let marker = dir.join(sig);
            let script = format!(
                "trap 'sleep 0.3; echo {sig} > {}; exit {code}' {sig}; while true; do sleep 0.05; done",
                marker.display()
            );
            let lock = ["lock", "sig", "--", "sh", "-c", &script];
            let mut holder = spawn_holding(&server, &lock, "sig");
            std::thread::sleep(Duration::from_millis(200));
            signal(holder.id(), sig);
            // CMD takes 0.3 s to finish: the lock stays held meanwhile.
            std::thread::sleep(Duration::from_millis(100));
            assert!(exists(&server, "sig"), "{flavor}: held until CMD exits");
            let status = wait_for(&mut holder, LIMIT, sig);
            assert_eq!(
                status.code(),
                Some(code),
                "{flavor}: CMD's status after {sig}"
            );
            assert_eq!(read(&marker).trim(), sig, "{flavor}: CMD got SIG{sig}");
            assert!(!exists(&server, "sig"), "{flavor}: released after {sig}");
        }
    }
}

#[test]
fn read_sides_share_and_a_writer_waits() {
    for (flavor, server) in each_server() {
        let read = ["lock", "--read", "catalog", "--", "sleep", "1"];
        let mut reader = spawn_holding(&server, &read, "catalog");
        let second = ["lock", "--read", "-w", "0", "catalog", "--", "true"];
        let second = run_on(&server, &second, "second reader");
        assert_eq!(second.status.code(), Some(0), "{flavor}: readers share");
        let writer = ["lock", "--write", "-w", "100ms", "catalog", "--", "true"];
        let writer = run_on(&server, &writer, "writer");
        assert_eq!(
            writer.status.code(),
            Some(75),
            "{flavor}: a writer is alone"
        );
        assert_eq!(wait_for(&mut reader, LIMIT, "reader").code(), Some(0));
        let both = ["lock", "--read", "--write", "catalog", "--", "true"];
        let usage = run_on(&server, &both, "both");
        assert_eq!(usage.status.code(), Some(64), "{flavor}");
    }
}

#[test]
fn a_server_that_stalls_within_the_lease_loses_nothing_one_gone_past_it_loses_the_lock() {
    for (flavor, mut server) in each_server() {
        // Stalled (CLIENT PAUSE) for 1.6 s of a 3 s lease: the renewal due at 1 s times out
        // (a third of the lease), the retry gets through when the pause ends.
        let steady = ["lock", "--lease", "3s", "steady", "--", "sleep", "3"];
        let mut holder = spawn_holding(&server, &steady, "steady");
        std::thread::sleep(Duration::from_millis(700));
        let mut c = server.conn();
        call(&mut c, &["CLIENT", "PAUSE", "1600", "ALL"]).unwrap();
        let status = wait_for(&mut holder, LIMIT, "steady");
        let err = stderr_of(&mut holder);
        assert_eq!(
            status.code(),
            Some(0),
            "{flavor}: a stall within the lease: {err}"
        );

        // Gone for good: lost when the 1 s lease runs out, not before, not much after.
        let orphan = ["lock", "--lease", "1s", "orphan", "--", "sleep", "30"];
        let mut holder = spawn_holding(&server, &orphan, "orphan");
        let t = Instant::now();
        server.stop();
        let status = wait_for(&mut holder, LIMIT, "orphan");
        let took = t.elapsed();
        let err = stderr_of(&mut holder);
        assert_eq!(status.code(), Some(70), "{flavor}: {err}");
        assert!(
            took < Duration::from_millis(2500),
            "{flavor}: lost after {took:?}"
        );
        assert!(err.contains("lease ran out"), "{flavor}: says why: {err}");
    }
}
