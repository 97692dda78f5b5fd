//! `rlock lock`: CMD runs under the lock, with its environment; exit statuses; waits; the
//! lease renewed; a lost lock stops CMD; signals go to CMD.

mod common;

use std::time::{Duration, Instant};

use common::*;

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn cmd_gets_the_lock_s_environment_and_rlock_exits_with_its_status() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let dir = scratch(&server, "env");
        let file = dir.join("env");
        let script = format!(
            "echo \"$RLOCK_KEY|$RLOCK_OWNER|$RLOCK_TOKEN\" > {}; exit 7",
            file.display()
        );
        let out = run(
            rlock(&server, &["lock", "jobs:env", "--", "sh", "-c", &script]),
            LIMIT,
            "lock env",
        );
        assert_eq!(
            out.status.code(),
            Some(7),
            "{flavor}: {}",
            text(&out.stderr)
        );
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
        run(
            rlock(&server, &["lock", "jobs:env", "--", "sh", "-c", &script]),
            LIMIT,
            "lock env again",
        );
        let again: u64 = read(&file)
            .trim()
            .rsplit('|')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(again > parts[2].parse().unwrap(), "{flavor}");

        let killed = run(
            rlock(
                &server,
                &["lock", "jobs:env", "--", "sh", "-c", "kill -KILL $$"],
            ),
            LIMIT,
            "lock killed",
        );
        assert_eq!(
            killed.status.code(),
            Some(128 + 9),
            "{flavor}: 128+signal, as shells"
        );

        let missing = run(
            rlock(&server, &["lock", "jobs:env", "--", "/no/such/command"]),
            LIMIT,
            "lock missing",
        );
        assert_eq!(missing.status.code(), Some(127), "{flavor}");
        assert!(
            text(&missing.stderr).contains("/no/such/command"),
            "{flavor}"
        );
        assert!(!exists(&server, "jobs:env"), "{flavor}: released after all");

        let usage = run(rlock(&server, &["lock", "jobs:env"]), LIMIT, "no CMD");
        assert_eq!(usage.status.code(), Some(64), "{flavor}: CMD is required");
    }
}

#[test]
fn six_concurrent_runs_never_overlap() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let dir = scratch(&server, "six");
        let log = dir.join("log");
        let script = format!(
            "echo start $$ >> {0}; sleep 0.05; echo end $$ >> {0}",
            log.display()
        );
        let args: Vec<String> = ["lock", "-w", "20s", "shared", "--", "sh", "-c", &script]
            .map(str::to_owned)
            .to_vec();
        run_together(&server, &vec![args; 6], LIMIT, "six");
        one_at_a_time(&log, 6, &format!("{flavor}: runs overlapped"));
    }
}

#[test]
fn waits_time_out_with_75_or_e_and_a_waiter_proceeds_on_release() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let mut c = server.conn();
        call(
            &mut c,
            &["RLOCK.ACQUIRE", "busy", "someone", "LEASE", "30000"],
        )
        .unwrap();

        let t = Instant::now();
        let out = run(
            rlock(
                &server,
                &[
                    "lock",
                    "--wait",
                    "400ms",
                    "busy",
                    "--",
                    "touch",
                    "/dev/null",
                ],
            ),
            LIMIT,
            "wait 400ms",
        );
        let took = t.elapsed();
        assert_eq!(
            out.status.code(),
            Some(75),
            "{flavor}: {}",
            text(&out.stderr)
        );
        assert!(text(&out.stderr).contains("not acquired"), "{flavor}");
        assert!(
            took >= Duration::from_millis(380) && took < Duration::from_secs(3),
            "{flavor}: waited {took:?} for a 400ms wait"
        );

        let dir = scratch(&server, "wait");
        let marker = dir.join("ran");
        let touch = format!("touch {}", marker.display());
        let out = run(
            rlock(
                &server,
                &[
                    "lock", "-w", "0", "-E", "9", "busy", "--", "sh", "-c", &touch,
                ],
            ),
            LIMIT,
            "-E",
        );
        assert_eq!(out.status.code(), Some(9), "{flavor}: -E 9");
        assert!(!marker.exists(), "{flavor}: CMD did not run");

        // A run that waits (no --wait: forever) goes once the holder lets go.
        let mut waiter = rlock(&server, &["lock", "busy", "--", "sh", "-c", &touch])
            .spawn()
            .unwrap();
        assert!(
            wait_until(Duration::from_secs(5), || {
                matches!(call(&mut c, &["RLOCK.WAITERS", "busy"]), Ok(redis::Value::Array(a)) if a.len() == 1)
            }),
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
    for flavor in flavors() {
        let server = Server::start(flavor);
        let mut long = rlock(
            &server,
            &["lock", "--lease", "1s", "long", "--", "sleep", "3"],
        )
        .spawn()
        .unwrap();
        assert!(wait_until(Duration::from_secs(5), || exists(
            &server, "long"
        )));
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(700));
            let other = run(
                rlock(&server, &["lock", "--wait", "100ms", "long", "--", "true"]),
                LIMIT,
                "other",
            );
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
    for flavor in flavors() {
        let server = Server::start(flavor);
        let dir = scratch(&server, "lost");
        let marker = dir.join("term");
        let script = format!(
            "trap 'echo term > {}; exit 0' TERM; while true; do sleep 0.05; done",
            marker.display()
        );
        let mut holder = rlock(
            &server,
            &[
                "lock", "--lease", "1500ms", "precious", "--", "sh", "-c", &script,
            ],
        )
        .spawn()
        .unwrap();
        assert!(wait_until(Duration::from_secs(5), || exists(
            &server, "precious"
        )));
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
        let mut err = String::new();
        std::io::Read::read_to_string(holder.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(
            err.contains("lost") && err.contains("force-released") && err.contains("SIGTERM"),
            "{flavor}: says why: {err}"
        );
    }
}

#[test]
fn sigkill_follows_when_cmd_ignores_sigterm() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let mut holder = rlock(
            &server,
            &[
                "lock",
                "--lease",
                "900ms",
                "--kill-after",
                "300ms",
                "stubborn",
                "--",
                "sh",
                "-c",
                "trap '' TERM; while true; do sleep 0.05; done",
            ],
        )
        .spawn()
        .unwrap();
        assert!(wait_until(Duration::from_secs(5), || exists(
            &server, "stubborn"
        )));
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
    for flavor in flavors() {
        let server = Server::start(flavor);
        let dir = scratch(&server, "signals");
        for (sig, code) in [("INT", 5), ("TERM", 6)] {
            let marker = dir.join(sig);
            let script = format!(
                "trap 'sleep 0.3; echo {sig} > {}; exit {code}' {sig}; while true; do sleep 0.05; done",
                marker.display()
            );
            let mut holder = rlock(&server, &["lock", "sig", "--", "sh", "-c", &script])
                .spawn()
                .unwrap();
            assert!(wait_until(Duration::from_secs(5), || exists(
                &server, "sig"
            )));
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
    for flavor in flavors() {
        let server = Server::start(flavor);
        let mut reader = rlock(&server, &["lock", "--read", "catalog", "--", "sleep", "1"])
            .spawn()
            .unwrap();
        assert!(wait_until(Duration::from_secs(5), || exists(
            &server, "catalog"
        )));
        let second = run(
            rlock(
                &server,
                &["lock", "--read", "-w", "0", "catalog", "--", "true"],
            ),
            LIMIT,
            "second reader",
        );
        assert_eq!(second.status.code(), Some(0), "{flavor}: readers share");
        let writer = run(
            rlock(
                &server,
                &["lock", "--write", "-w", "100ms", "catalog", "--", "true"],
            ),
            LIMIT,
            "writer",
        );
        assert_eq!(
            writer.status.code(),
            Some(75),
            "{flavor}: a writer is alone"
        );
        assert_eq!(wait_for(&mut reader, LIMIT, "reader").code(), Some(0));
        let usage = run(
            rlock(
                &server,
                &["lock", "--read", "--write", "catalog", "--", "true"],
            ),
            LIMIT,
            "both",
        );
        assert_eq!(usage.status.code(), Some(64), "{flavor}");
    }
}

#[test]
fn a_server_that_stalls_within_the_lease_loses_nothing_one_gone_past_it_loses_the_lock() {
    for flavor in flavors() {
        let mut server = Server::start(flavor);
        // Stalled (CLIENT PAUSE) for 1.6 s of a 3 s lease: the renewal due at 1 s times out
        // (a third of the lease), the retry gets through when the pause ends.
        let mut holder = rlock(
            &server,
            &["lock", "--lease", "3s", "steady", "--", "sleep", "3"],
        )
        .spawn()
        .unwrap();
        assert!(wait_until(Duration::from_secs(5), || exists(
            &server, "steady"
        )));
        std::thread::sleep(Duration::from_millis(700));
        let mut c = server.conn();
        call(&mut c, &["CLIENT", "PAUSE", "1600", "ALL"]).unwrap();
        let status = wait_for(&mut holder, LIMIT, "steady");
        let mut err = String::new();
        std::io::Read::read_to_string(holder.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(
            status.code(),
            Some(0),
            "{flavor}: a stall within the lease: {err}"
        );

        // Gone for good: lost when the 1 s lease runs out, not before, not much after.
        let mut holder = rlock(
            &server,
            &["lock", "--lease", "1s", "orphan", "--", "sleep", "30"],
        )
        .spawn()
        .unwrap();
        assert!(wait_until(Duration::from_secs(5), || exists(
            &server, "orphan"
        )));
        let t = Instant::now();
        server.stop();
        let status = wait_for(&mut holder, LIMIT, "orphan");
        let took = t.elapsed();
        let mut err = String::new();
        std::io::Read::read_to_string(holder.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(70), "{flavor}: {err}");
        assert!(
            took < Duration::from_millis(2500),
            "{flavor}: lost after {took:?}"
        );
        assert!(err.contains("lease ran out"), "{flavor}: says why: {err}");
    }
}
