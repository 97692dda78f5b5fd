//! `rlock elect`: one leader at a time, CMD runs while leader, stopped when leadership is
//! lost; `--observe` prints the leader and every change.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn one_leader_at_a_time_and_each_term_greater() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let dir = scratch(&server, "elect");
        let log = dir.join("log");
        let script = format!(
            "echo start $RLOCK_VALUE $RLOCK_TERM >> {0}; sleep 0.1; echo end $RLOCK_VALUE $RLOCK_TERM >> {0}",
            log.display()
        );
        let candidates: Vec<Vec<String>> = (0..4)
            .map(|i| {
                [
                    "elect",
                    "sched",
                    &format!("node-{i}"),
                    "--",
                    "sh",
                    "-c",
                    &script,
                ]
                .map(str::to_owned)
                .to_vec()
            })
            .collect();
        run_together(&server, &candidates, LIMIT, "candidate");
        let runs = one_at_a_time(&log, 4, &format!("{flavor}: two leaders"));
        let mut last_term = 0u64;
        let mut values = Vec::new();
        for run in &runs {
            let (value, term) = run.split_once(' ').unwrap();
            let term: u64 = term.parse().unwrap();
            assert!(term > last_term, "{flavor}: terms grow: {runs:?}");
            last_term = term;
            values.push(value.to_owned());
        }
        values.sort();
        assert_eq!(values, ["node-0", "node-1", "node-2", "node-3"], "{flavor}");
        assert!(!exists(&server, "sched"), "{flavor}: the last resigned");

        // Someone leads: --wait 0 is 75, a duplicate value too, CMD not run.
        let mut leader = rlock(
            &server,
            &[
                "elect", "--lease", "1s", "sched", "boss", "--", "sleep", "30",
            ],
        )
        .spawn()
        .unwrap();
        assert!(wait_until(Duration::from_secs(5), || exists(
            &server, "sched"
        )));
        let other = run(
            rlock(
                &server,
                &["elect", "-w", "0", "sched", "other", "--", "true"],
            ),
            LIMIT,
            "other",
        );
        assert_eq!(
            other.status.code(),
            Some(75),
            "{flavor}: {}",
            text(&other.stderr)
        );
        let dup = run(
            rlock(
                &server,
                &["elect", "-w", "0", "sched", "boss", "--", "true"],
            ),
            LIMIT,
            "duplicate",
        );
        assert_eq!(
            dup.status.code(),
            Some(75),
            "{flavor}: {}",
            text(&dup.stderr)
        );
        assert!(
            text(&dup.stderr).contains("boss"),
            "{flavor}: {}",
            text(&dup.stderr)
        );

        // Leadership lost (force release): CMD stopped, exit 70.
        let mut c = server.conn();
        call(&mut c, &["RLOCK.FORCERELEASE", "sched"]).unwrap();
        let t = Instant::now();
        let status = wait_for(&mut leader, LIMIT, "leader");
        assert_eq!(status.code(), Some(70), "{flavor}");
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "{flavor}: within a third of the lease"
        );

        let invalid = run(
            rlock(&server, &["elect", "sched", "", "--", "true"]),
            LIMIT,
            "empty",
        );
        assert_eq!(
            invalid.status.code(),
            Some(64),
            "{flavor}: {}",
            text(&invalid.stderr)
        );
        let usage = run(rlock(&server, &["elect", "sched", "v"]), LIMIT, "no CMD");
        assert_eq!(usage.status.code(), Some(64), "{flavor}: CMD is required");
    }
}

#[test]
fn observe_prints_the_leader_then_every_change() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let mut observer = rlock(&server, &["elect", "--observe", "sched"])
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = observer.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let next = |what: &str| -> String {
            rx.recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("{flavor}: no line for {what}"))
        };
        assert!(next("the start").ends_with("no leader"), "{flavor}");
        let t = Instant::now();
        let leader = run(
            rlock(&server, &["elect", "sched", "node-a", "--", "sleep", "0.6"]),
            LIMIT,
            "leader",
        );
        assert_eq!(leader.status.code(), Some(0), "{flavor}");
        let elected = next("the election");
        assert!(
            elected.contains("leader node-a  term "),
            "{flavor}: {elected}"
        );
        assert!(next("the resignation").ends_with("no leader"), "{flavor}");
        assert!(t.elapsed() < Duration::from_secs(5), "{flavor}");
        let _ = observer.kill();
        let _ = observer.wait();

        let mut j = rlock(&server, &["elect", "--observe", "sched", "--json"])
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(j.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let _ = j.kill();
        let _ = j.wait();
        let v: serde_json::Value = serde_json::from_str(&first).unwrap();
        assert!(
            v["leader"].is_null() && v["term"].is_null(),
            "{flavor}: {first}"
        );
        assert!(
            v["time"].as_str().unwrap().ends_with('Z'),
            "{flavor}: {first}"
        );
    }
}
