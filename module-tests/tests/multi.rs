//! All-or-nothing multi-key acquire: `RLOCK.MACQUIRE` and `RLOCK.MRELEASE` take every
//! lock or none, wait in arrival order on every lock, never deadlock, and leave a
//! module-less replica identical.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::redisson::{TRY_LOCK, UNLOCK};
use rlock_module_tests::*;

fn run(c: &mut Connection, args: &[&str]) -> Value {
    call(c, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

fn exists(c: &mut Connection, key: &str) -> bool {
    run(c, &["EXISTS", key]) == Value::Int(1)
}

fn redisson_lock(c: &mut Connection, key: &str, owner: &str) -> Value {
    run(c, &["EVAL", TRY_LOCK, "1", key, "30000", owner])
}

fn redisson_unlock(c: &mut Connection, key: &str, owner: &str) -> Value {
    let channel = String::from_utf8(unlock_channel(key.as_bytes())).unwrap();
    run(
        c,
        &["EVAL", UNLOCK, "2", key, &channel, "0", "30000", owner],
    )
}

/// Each of `granted` got its grant (1); each (key, owner) of `held`: the owner holds
/// the key, once; and nobody is left blocked.
fn assert_settled(
    server: &Server,
    c: &mut Connection,
    granted: Vec<Pending>,
    held: &[(&str, &str)],
) {
    let flavor = server.flavor;
    for mut waiter in granted {
        assert_eq!(waiter.reply(), Ok(Value::Int(1)), "{flavor}: {}", waiter.id);
    }
    for (key, owner) in held {
        assert_eq!(holders(c, key), held_by(owner, 1), "{flavor}: {key}");
    }
    assert_eq!(rstat(server, "blocked"), 0, "{flavor}: still blocked");
}

#[test]
fn every_lock_or_none() {
    for (flavor, server, mut c) in servers() {
        let taken = run(
            &mut c,
            &["RLOCK.MACQUIRE", "o", "3", "a", "b", "c", "LEASE", "10000"],
        );
        assert_eq!(taken, Value::Int(3), "{flavor}");
        for key in ["a", "b", "c"] {
            assert_eq!(holders(&mut c, key), held_by("o", 1), "{flavor}: {key}");
            let ttl = pttl(&mut c, key.as_bytes());
            assert!((9_000..=10_000).contains(&ttl), "{flavor}: {key} {ttl}");
        }
        // One key held by someone else: nothing is taken.
        let busy = run(&mut c, &["RLOCK.MACQUIRE", "p", "2", "d", "c"]);
        assert_eq!(busy, Value::Nil, "{flavor}");
        assert!(!exists(&mut c, "d"), "{flavor}: d must not be taken");
        // Held by a Redisson client: the same.
        assert_eq!(redisson_lock(&mut c, "r", "java:1"), Value::Nil);
        assert_nil(&mut c, &["RLOCK.MACQUIRE", "p", "2", "e", "r"]);
        assert!(!exists(&mut c, "e"), "{flavor}");
        // The owner re-enters, as it would one by one.
        assert_int(&mut c, &["RLOCK.MACQUIRE", "o", "2", "a", "b"], 2);
        assert_eq!(holders(&mut c, "a"), held_by("o", 2), "{flavor}");
        assert_int(&mut c, &["RLOCK.MRELEASE", "o", "2", "a", "b"], 0);
        assert_eq!(holders(&mut c, "a"), held_by("o", 1), "{flavor}");
        assert_int(&mut c, &["RLOCK.MRELEASE", "o", "3", "c", "b", "a"], 3);
        for key in ["a", "b", "c"] {
            assert!(!exists(&mut c, key), "{flavor}: {key}");
        }
        assert_counted(&server, &[("multi_acquires", 2), ("multi_releases", 2)]);
    }
}

#[test]
fn bad_calls_change_nothing() {
    for (flavor, server, mut c) in servers() {
        set_up(
            &mut c,
            &[
                "RLOCK.ACQUIRE held o",
                "RLOCK.ACQUIRE rw o READ",
                "SET str x",
            ],
        );
        let cases: &[(&[&str], &str)] = &[
            (&["RLOCK.MACQUIRE", "o", "0", "a"], "ERR numkeys must be"),
            (&["RLOCK.MACQUIRE", "o", "x", "a"], "ERR numkeys must be"),
            (
                &["RLOCK.MACQUIRE", "o", "3", "a", "b"],
                "ERR fewer keys than numkeys",
            ),
            (
                &["RLOCK.MACQUIRE", "o", "2", "a", "a"],
                "ERR a key is named more than once",
            ),
            (
                &["RLOCK.MACQUIRE", "o", "1", "a", "FAIR"],
                "ERR option FAIR does not apply",
            ),
            (
                &["RLOCK.MACQUIRE", "o", "1", "a", "TOKEN"],
                "ERR option TOKEN does not apply",
            ),
            (
                &["RLOCK.MACQUIRE", "o", "1", "a", "NX"],
                "ERR unknown option",
            ),
            (
                &["RLOCK.MACQUIRE", "o", "1", "a", "LEASE", "0"],
                "ERR LEASE must be",
            ),
            (
                &["RLOCK.MACQUIRE", "", "1", "a"],
                "ERR owner must not be empty",
            ),
            (&["RLOCK.MACQUIRE", "o", "2", "a", "rw"], "WRONGTYPE"),
            (&["RLOCK.MACQUIRE", "o", "2", "a", "str"], "WRONGTYPE"),
            (
                &["RLOCK.MACQUIRE", "o", "1"],
                "ERR wrong number of arguments",
            ),
            (&["RLOCK.MRELEASE", "o", "2", "held", "a"], "NOTHELD"),
            (&["RLOCK.MRELEASE", "p", "1", "held"], "NOTHELD"),
            (
                &["RLOCK.MRELEASE", "o", "1", "held", "x"],
                "ERR unknown option",
            ),
            (&["RLOCK.MRELEASE", "o", "2", "held", "str"], "WRONGTYPE"),
        ];
        assert_each_refused_unchanged(flavor, &mut c, cases);
        server_alive(&server);
    }
}

fn server_alive(server: &Server) {
    let mut c = server.conn();
    assert_eq!(run(&mut c, &["PING"]), Value::SimpleString("PONG".into()));
}

#[test]
fn a_blocked_call_waits_until_every_lock_is_free() {
    for (flavor, server, mut c) in servers() {
        set_up(&mut c, &["RLOCK.ACQUIRE a h1", "RLOCK.ACQUIRE b h2"]);
        let mut m = Pending::blocked_on(
            &server,
            &mut c,
            &["RLOCK.MACQUIRE", "m", "2", "a", "b", "BLOCK", "10000"],
            ("a", 1),
        );
        wait_blocked(flavor, &mut c, "b", 1);
        run(&mut c, &["RLOCK.RELEASE", "a", "h1"]);
        // `a` is free but kept for the caller that waited first: a newcomer waits.
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "a", "late"]);
        assert!(!exists(&mut c, "a"), "{flavor}: nothing taken early");
        let started = Instant::now();
        run(&mut c, &["RLOCK.RELEASE", "b", "h2"]);
        assert_eq!(m.reply(), Ok(Value::Int(2)), "{flavor}");
        assert!(started.elapsed() < Duration::from_secs(1), "{flavor}");
        assert_eq!(holders(&mut c, "a"), held_by("m", 1), "{flavor}");
        assert_eq!(holders(&mut c, "b"), held_by("m", 1), "{flavor}");
        // A Redisson unlock (DEL and a message) wakes it too.
        redisson_lock(&mut c, "r", "java:1");
        let mut n = Pending::blocked_on(
            &server,
            &mut c,
            &["RLOCK.MACQUIRE", "n", "2", "s", "r", "BLOCK", "10000"],
            ("r", 1),
        );
        assert_eq!(redisson_unlock(&mut c, "r", "java:1"), Value::Int(1));
        assert_eq!(n.reply(), Ok(Value::Int(2)), "{flavor}");
        assert_eq!(holders(&mut c, "r"), held_by("n", 1), "{flavor}");
        // BLOCK runs out: null, and nothing is kept for it any longer.
        let r = run(
            &mut c,
            &["RLOCK.MACQUIRE", "x", "2", "a", "free", "BLOCK", "100"],
        );
        assert_eq!(r, Value::Nil, "{flavor}");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        assert!(!exists(&mut c, "free"), "{flavor}");
    }
}

#[test]
fn waiters_are_served_in_arrival_order_without_deadlock() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.MACQUIRE", "h", "2", "a", "b"]);
        // Two multi-key callers naming the keys in opposite orders, then single callers.
        let mut m1 = Pending::blocked_on(
            &server,
            &mut c,
            &["RLOCK.MACQUIRE", "m1", "2", "a", "b", "BLOCK", "10000"],
            ("a", 1),
        );
        let mut m2 = Pending::blocked_on(
            &server,
            &mut c,
            &["RLOCK.MACQUIRE", "m2", "2", "b", "a", "BLOCK", "10000"],
            ("a", 2),
        );
        let s = Pending::blocked_acquire(&server, &mut c, ("a", "s"), "10000", 3);
        let t = Pending::blocked_acquire(&server, &mut c, ("b", "t"), "10000", 3);

        assert_int(&mut c, &["RLOCK.MRELEASE", "h", "2", "a", "b"], 2);
        assert_eq!(m1.reply(), Ok(Value::Int(2)), "{flavor}: first in line");
        assert_eq!(holders(&mut c, "b"), held_by("m1", 1), "{flavor}");
        run(&mut c, &["RLOCK.MRELEASE", "m1", "2", "b", "a"]);
        assert_eq!(m2.reply(), Ok(Value::Int(2)), "{flavor}: second");
        assert_eq!(holders(&mut c, "a"), held_by("m2", 1), "{flavor}");
        run(&mut c, &["RLOCK.MRELEASE", "m2", "2", "a", "b"]);
        assert_settled(&server, &mut c, vec![s, t], &[("a", "s"), ("b", "t")]);
    }
}

#[test]
fn a_waiter_that_leaves_lets_the_line_move() {
    for (flavor, server, mut c) in servers() {
        set_up(&mut c, &["RLOCK.ACQUIRE b h", "RLOCK.ACQUIRE a h"]);
        let m = Pending::blocked_on(
            &server,
            &mut c,
            &["RLOCK.MACQUIRE", "m", "2", "a", "b", "BLOCK", "0"],
            ("a", 1),
        );
        let s = Pending::blocked_acquire(&server, &mut c, ("a", "s"), "10000", 2);
        run(&mut c, &["RLOCK.RELEASE", "a", "h"]);
        assert!(!exists(&mut c, "a"), "{flavor}: kept for m");
        // m's connection dies: s, behind it, gets `a` at once.
        run(&mut c, &["CLIENT", "KILL", "ID", &m.id.to_string()]);
        assert_settled(&server, &mut c, vec![s], &[("a", "s"), ("b", "h")]);
    }
}

#[test]
fn session_holds_end_with_the_connection() {
    for (flavor, server, mut c) in servers() {
        let mut holder = server.conn();
        let r = run(
            &mut holder,
            &["RLOCK.MACQUIRE", "o", "2", "a", "b", "SESSION"],
        );
        assert_eq!(r, Value::Int(2), "{flavor}");
        // A blocked session grant too.
        run(&mut c, &["RLOCK.ACQUIRE", "d", "h"]);
        let mut w = Pending::blocked_on(
            &server,
            &mut c,
            &words("RLOCK.MACQUIRE w 2 c d SESSION BLOCK 10000"),
            ("d", 1),
        );
        run(&mut c, &["RLOCK.RELEASE", "d", "h"]);
        assert_eq!(w.reply(), Ok(Value::Int(2)), "{flavor}");
        drop(holder);
        drop(w);
        let gone = wait_until(Duration::from_secs(5), || {
            ["a", "b", "c", "d"].iter().all(|key| !exists(&mut c, key))
        });
        assert!(gone, "{flavor}: session holds outlived their connections");
        // Not in a script, whose client never closes.
        let script = "return redis.call('RLOCK.MACQUIRE', 'o', '1', 'k', 'SESSION')";
        let refused = ["EVAL", script, "0"];
        assert_refused_with(&mut c, &refused, "ERR SESSION cannot be used", flavor);
    }
}

#[test]
fn scripts_and_transactions_never_block() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "b", "h"]);
        let script = "return redis.call('RLOCK.MACQUIRE', 'o', '2', 'a', 'b', 'BLOCK', '0')";
        assert_nil(&mut c, &["EVAL", script, "0"]);
        let script = "return redis.call('RLOCK.MACQUIRE', 'o', '2', 'a', 'c')";
        assert_int(&mut c, &["EVAL", script, "0"], 2);
        set_up(
            &mut c,
            &[
                "MULTI",
                "RLOCK.MRELEASE o 2 a c",
                "RLOCK.MACQUIRE p 1 b BLOCK 0",
            ],
        );
        let replies = run(&mut c, &["EXEC"]);
        assert_eq!(
            replies,
            Value::Array(vec![Value::Int(2), Value::Nil]),
            "{flavor}"
        );
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
    }
}

#[test]
fn a_replica_without_the_module_ends_identical() {
    for (flavor, primary, replica, mut c) in primaries_and_bare_replicas() {
        run(
            &mut c,
            &["RLOCK.MACQUIRE", "o", "3", "x", "y", "z", "LEASE", "60000"],
        );
        // With REQ: the records replicate as plain writes too.
        run(&mut c, &words("RLOCK.MACQUIRE o 2 x y LEASE 50000 REQ r1"));
        set_up(
            &mut c,
            &["RLOCK.MRELEASE o 2 y z REQ r2", "RLOCK.ACQUIRE w h"],
        );
        let mut m = Pending::new(&primary);
        m.send(&words(
            "RLOCK.MACQUIRE m 2 v w BLOCK 10000 LEASE 70000 REQ r3",
        ));
        wait_blocked(flavor, &mut c, "w", 1);
        run(&mut c, &["RLOCK.RELEASE", "w", "h"]);
        assert_eq!(m.reply(), Ok(Value::Int(2)), "{flavor}");
        sync_replica(&primary, &replica);
        let mut r = replica.conn();
        assert_eq!(keyspace(&mut c), keyspace(&mut r), "{flavor}");
        assert_eq!(holders(&mut r, "x"), held_by("o", 2), "{flavor}");
        assert_eq!(holders(&mut r, "v"), held_by("m", 1), "{flavor}");
        for (record, value) in [
            ("rlock_request:{x}:r1", "M:2:o"),
            ("rlock_request:{y}:r2", "U:1:o"),
            ("rlock_request:{v}:r3", "M:2:m"),
        ] {
            assert_eq!(
                run(&mut r, &["GET", record]),
                Value::BulkString(value.as_bytes().to_vec()),
                "{flavor}: {record}"
            );
        }
    }
}
