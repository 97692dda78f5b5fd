//! `rlock elect`: one leader at a time, CMD runs while leader, stopped when leadership is
//! lost; `--observe` prints the leader and every change.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

#[test]
fn one_leader_at_a_time_and_each_term_greater() {
    for (flavor, server) in each_server() {
        let script = "echo start $RLOCK_VALUE $RLOCK_TERM >> {log}; sleep 0.1; \
                      echo end $RLOCK_VALUE $RLOCK_TERM >> {log}";
        let (log, script) = logging_script(&server, "elect", script);
        let candidates: Vec<Vec<String>> = (0..4)
            .map(|i| {
                owned(&[
                    "elect",
                    "sched",
                    &format!("node-{i}"),
                    "--",
                    "sh",
                    "-c",
                    &script,
                ])
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
        let elect = [
            "elect", "--lease", "1s", "sched", "boss", "--", "sleep", "30",
        ];
        let mut leader = spawn_holding(&server, &elect, "sched");
        let other = ["elect", "-w", "0", "sched", "other", "--", "true"];
        assert_exit(&run_on(&server, &other, "other"), 75, flavor);
        let dup = ["elect", "-w", "0", "sched", "boss", "--", "true"];
        let dup = run_on(&server, &dup, "duplicate");
        assert_exit(&dup, 75, flavor);
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

        let invalid = run_on(&server, &["elect", "sched", "", "--", "true"], "empty");
        assert_exit(&invalid, 64, flavor);
        let usage = run_on(&server, &["elect", "sched", "v"], "no CMD");
        assert_eq!(usage.status.code(), Some(64), "{flavor}: CMD is required");
    }
}

#[test]
fn observe_prints_the_leader_then_every_change() {
    for (flavor, server) in each_server() {
        let mut observer = rlock(&server, &["elect", "--observe", "sched"])
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let rx = stdout_lines(&mut observer);
        let next = |what: &str| -> String {
            rx.recv_timeout(Duration::from_secs(5))
                .unwrap_or_else(|_| panic!("{flavor}: no line for {what}"))
        };
        assert!(next("the start").ends_with("no leader"), "{flavor}");
        let t = Instant::now();
        let leader = ["elect", "sched", "node-a", "--", "sleep", "0.6"];
        let leader = run_on(&server, &leader, "leader");
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
