//! `rlock guard`: one command that runs only while the lock is held (RLOCK.GUARD).

mod common;

use common::*;
use rlock_module_tests::redis::Value;
use serde_json::Value as Json;

fn get(server: &Server, key: &str) -> Value {
    call(&mut server.conn(), &["GET", key]).unwrap()
}

#[test]
fn guard_runs_the_command_only_for_the_holder() {
    for (flavor, server) in each_server() {
        let mut c = server.conn();
        call(&mut c, &["RLOCK.ACQUIRE", "job", "alice", "TOKEN"]).unwrap();
        let out = run_on(
            &server,
            &[
                "guard", "job", "--owner", "alice", "--token", "1", "--", "SET", "x{job}", "v",
            ],
            "guard as holder",
        );
        assert_exit(&out, 0, format_args!("{flavor}: holder"));
        assert_eq!(text(&out.stdout).trim(), "OK", "{flavor}");
        let out = run_on(
            &server,
            &[
                "guard",
                "job",
                "--owner",
                "alice",
                "--",
                "LRANGE",
                "none{job}",
                "0",
                "-1",
            ],
            "empty array",
        );
        assert_exit(&out, 0, format_args!("{flavor}: array"));
        // Another owner, a stale token: nothing runs, exit 75.
        let out = run_on(
            &server,
            &[
                "guard", "job", "--owner", "bob", "--", "SET", "x{job}", "bob",
            ],
            "not held",
        );
        assert_exit_saying(&out, 75, "NOTHELD", format_args!("{flavor}: not held"));
        let out = run_on(
            &server,
            &[
                "guard", "job", "--owner", "alice", "--token", "9", "--", "SET", "x{job}", "old",
            ],
            "stale",
        );
        assert_exit_saying(&out, 75, "STALETOKEN", format_args!("{flavor}: stale"));
        assert_eq!(
            get(&server, "x{job}"),
            Value::BulkString(b"v".to_vec()),
            "{flavor}"
        );
        // The inner command's own error: exit 69, its words on stderr.
        call(&mut c, &["RPUSH", "l{job}", "a"]).unwrap();
        let out = run_on(
            &server,
            &["guard", "job", "--owner", "alice", "--", "GET", "l{job}"],
            "wrongtype",
        );
        assert_exit_saying(&out, 69, "WRONGTYPE", format_args!("{flavor}: inner error"));
        // JSON.
        let out = run_on(
            &server,
            &[
                "guard", "job", "--owner", "alice", "--json", "--", "INCR", "n{job}",
            ],
            "json",
        );
        assert_exit(&out, 0, format_args!("{flavor}: json"));
        let v: Json = serde_json::from_str(text(&out.stdout).trim()).unwrap();
        assert_eq!(v["reply"], Json::from(1), "{flavor}: {v}");
        assert_eq!(v["ran"], Json::from(true), "{flavor}: {v}");
        // Bad arguments are refused before anything is sent.
        let out = run_on(&server, &["guard", "job", "--owner", "alice"], "no command");
        assert_exit(&out, 64, format_args!("{flavor}: no command"));
        let out = run_on(
            &server,
            &[
                "guard", "job", "--owner", "alice", "--token", "x", "--", "GET", "a",
            ],
            "bad token",
        );
        assert_exit(&out, 64, format_args!("{flavor}: bad token"));
    }
}

/// Inside a CMD of `rlock lock`, the owner and token come from its environment.
#[test]
fn guard_inside_rlock_lock_uses_the_holds_owner_and_token() {
    for (flavor, server) in each_server() {
        let script = format!("{} guard nightly -- INCR runs{{nightly}}", bin());
        let out = run_on(
            &server,
            &["lock", "nightly", "--", "sh", "-c", &script],
            "lock then guard",
        );
        assert_exit(&out, 0, format_args!("{flavor}: lock + guard"));
        assert_eq!(
            get(&server, "runs{nightly}"),
            Value::BulkString(b"1".to_vec()),
            "{flavor}"
        );
        // Once the lock is gone, the same guard is refused.
        let out = run_on(
            &server,
            &[
                "guard",
                "nightly",
                "--owner",
                "someone",
                "--",
                "INCR",
                "runs{nightly}",
            ],
            "after",
        );
        assert_exit(&out, 75, format_args!("{flavor}: after the lock"));
    }
}
