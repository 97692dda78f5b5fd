//! RLOCK.ACQUIRE ... BLOCK: waiting in the server, first come first served, timeouts,
//! CLIENT UNBLOCK / KILL, closed waiters, no blocking in MULTI / Lua / functions, demotion.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

#[test]
fn block_runs_out_with_null_and_leaves_no_waiter() {
    for (flavor, server, mut c) in servers() {
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "k", "holder", "LEASE", "60000"]),
            Ok(Value::Int(1)),
            "{flavor}"
        );
        let mut w = Pending::new(&server);
        let start = Instant::now();
        w.send(&["RLOCK.ACQUIRE", "k", "w", "BLOCK", "300"]);
        wait_blocked(flavor, &mut c, "k", 1);
        assert_eq!(rstat(&server, "blocked"), 1, "{flavor}: INFO rlock blocked");
        assert_eq!(w.reply(), Ok(Value::Nil), "{flavor}: BLOCK ran out");
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(295) && waited < Duration::from_secs(3),
            "{flavor}: BLOCK 300 replied after {waited:?}"
        );
        assert_eq!(lock_info(&mut c, "k").blocked, 0, "{flavor}");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        assert_eq!(holders(&mut c, "k"), held_by("holder", 1), "{flavor}");
        // The timed-out waiter is never granted the lock later.
        assert_int(&mut c, &["RLOCK.RELEASE", "k", "holder"], 1);
        assert!(holders(&mut c, "k").is_empty(), "{flavor}");
        // The connection that timed out is usable, and acquires a free lock at once.
        assert_eq!(
            call(&mut w.con, &["RLOCK.ACQUIRE", "k", "w", "BLOCK", "300"]),
            Ok(Value::Int(1)),
            "{flavor}: BLOCK on a free lock"
        );
    }
}

#[test]
fn waiters_served_in_arrival_order_with_their_acquire_reply() {
    for (flavor, server, mut c) in servers() {
        assert_eq!(
            call(
                &mut c,
                &["RLOCK.ACQUIRE", "q", "w0", "LEASE", "60000", "TOKEN"]
            ),
            Ok(Value::Int(1))
        );
        let before = rstat(&server, "handoffs");
        // w1..w6; the odd ones ask for a token, the even ones for a count.
        let mut waiters = Vec::new();
        for i in 1..=6 {
            let mut w = Pending::new(&server);
            let owner = format!("w{i}");
            let mut args = vec!["RLOCK.ACQUIRE", "q", &owner, "BLOCK", "0", "LEASE", "40000"];
            if i % 2 == 1 {
                args.push("TOKEN");
            }
            w.send(&args);
            wait_blocked(flavor, &mut c, "q", i);
            waiters.push(w);
        }
        assert_eq!(rstat(&server, "blocked"), 6, "{flavor}");
        assert_eq!(rstat(&server, "tracked_locks"), 1, "{flavor}");
        // A newcomer does not jump the line, blocking or not.
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "q", "late"]);
        let mut holder = "w0".to_string();
        for (i, w) in waiters.iter_mut().enumerate() {
            let i = i as i64 + 1;
            assert_eq!(
                call(&mut c, &["RLOCK.RELEASE", "q", &holder]),
                Ok(Value::Int(1)),
                "{flavor}: release by {holder}"
            );
            // Same turn: the release's reply comes after the hand-off.
            holder = format!("w{i}");
            assert_eq!(
                holders(&mut c, "q"),
                held_by(&holder, 1),
                "{flavor}: after the release the lock is already {holder}'s"
            );
            let pt = pttl(&mut c, b"q");
            assert!(
                (39_000..=40_000).contains(&pt),
                "{flavor}: {holder}'s lease, pttl {pt}"
            );
            let expected = if i % 2 == 1 { i + 1 } else { 1 }; // token i+1, or count 1
            assert_eq!(
                w.reply(),
                Ok(Value::Int(expected)),
                "{flavor}: reply to w{i}"
            );
            assert_eq!(lock_info(&mut c, "q").blocked, 6 - i, "{flavor}");
            // The waiter may re-enter: the hold is really its own.
            assert_eq!(
                call(&mut w.con, &["RLOCK.ACQUIRE", "q", &holder]),
                Ok(Value::Int(2)),
                "{flavor}: {holder} re-enters"
            );
            assert_int(&mut w.con, &["RLOCK.RELEASE", "q", &holder], 0);
        }
        assert_eq!(rstat(&server, "handoffs") - before, 6, "{flavor}: handoffs");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        // The last lock handed over is followed (its turns with Redisson clients) until
        // it is free.
        assert_eq!(rstat(&server, "tracked_locks"), 1, "{flavor}");
        call(&mut c, &["RLOCK.RELEASE", "q", &holder]).expect("release");
        assert_eq!(rstat(&server, "tracked_locks"), 0, "{flavor}");
    }
}

#[test]
fn block_zero_waits_until_served() {
    for (flavor, server, mut c) in servers() {
        call(&mut c, &["RLOCK.ACQUIRE", "z", "h", "LEASE", "60000"]).expect("acquire");
        let w = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "z", "w", "BLOCK", "0"]);
        wait_blocked(flavor, &mut c, "z", 1);
        // Nothing to poll for "still waiting": give a BLOCK 0 time it would not survive
        // if it were taken as a tiny timeout.
        std::thread::sleep(Duration::from_millis(1200));
        assert!(!w.is_finished(), "{flavor}: BLOCK 0 replied early");
        assert_eq!(lock_info(&mut c, "z").blocked, 1, "{flavor}");
        assert_int(&mut c, &["RLOCK.RELEASE", "z", "h"], 1);
        assert_eq!(w.join().reply, Ok(Value::Int(1)), "{flavor}");
        assert_eq!(holders(&mut c, "z"), held_by("w", 1), "{flavor}");
    }
}

#[test]
fn client_unblock_timeout_and_error() {
    for (flavor, server, mut c) in servers() {
        call(&mut c, &["RLOCK.ACQUIRE", "u", "h", "LEASE", "60000"]).expect("acquire");
        let mut a = Pending::blocked_acquire(&server, &mut c, ("u", "a"), "0", 1);
        let mut b = Pending::blocked_acquire(&server, &mut c, ("u", "b"), "0", 2);

        if !unblock_supported(flavor) {
            for (id, reason) in [(a.id, "TIMEOUT"), (b.id, "ERROR")] {
                let r = call(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), reason]);
                assert_eq!(r, Ok(Value::Int(0)), "{flavor}: CLIENT UNBLOCK {reason}");
            }
            assert_eq!(
                lock_info(&mut c, "u").blocked,
                2,
                "{flavor}: both still wait"
            );
            run_ok(&mut c, &["RLOCK.RELEASE", "u", "h"]);
            assert_eq!(a.reply(), Ok(Value::Int(1)), "{flavor}: a is served");
            run_ok(&mut a.con, &["RLOCK.RELEASE", "u", "a"]);
            assert_eq!(b.reply(), Ok(Value::Int(1)), "{flavor}: then b");
            continue;
        }
        let r = call(&mut c, &["CLIENT", "UNBLOCK", &a.id.to_string()]);
        assert_eq!(r, Ok(Value::Int(1)), "{flavor}: CLIENT UNBLOCK a");
        assert_eq!(a.reply(), Ok(Value::Nil), "{flavor}: unblocked (TIMEOUT)");
        let r = call(&mut c, &["CLIENT", "UNBLOCK", &b.id.to_string(), "ERROR"]);
        assert_eq!(r, Ok(Value::Int(1)), "{flavor}: CLIENT UNBLOCK b ERROR");
        let r = b.reply();
        assert!(
            matches!(&r, Err(e) if e.starts_with("UNBLOCKED")),
            "{flavor}: CLIENT UNBLOCK ERROR gave {r:?}"
        );
        assert_eq!(lock_info(&mut c, "u").blocked, 0, "{flavor}");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        assert_eq!(rstat(&server, "tracked_locks"), 0, "{flavor}");
        // Neither is granted the lock afterwards.
        assert_int(&mut c, &["RLOCK.RELEASE", "u", "h"], 1);
        assert!(
            holders(&mut c, "u").is_empty(),
            "{flavor}: {:?}",
            holders(&mut c, "u")
        );
        // Both connections still work.
        assert_int(&mut a.con, &["RLOCK.ACQUIRE", "u", "a"], 1);
        assert_nil(&mut b.con, &["RLOCK.ACQUIRE", "u", "b"]);
    }
}

fn run_ok(c: &mut redis::Connection, args: &[&str]) {
    call(c, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")));
}

#[test]
fn killed_and_closed_waiters_are_forgotten_at_once() {
    for (flavor, server, mut c) in servers() {
        call(&mut c, &["RLOCK.ACQUIRE", "x", "h", "LEASE", "60000"]).expect("acquire");
        let mut ws: Vec<Pending> = Vec::new();
        for (i, owner) in ["killed", "closed", "served"].iter().enumerate() {
            let w = Pending::blocked_acquire(&server, &mut c, ("x", owner), "0", i as i64 + 1);
            ws.push(w);
        }
        let mut served = ws.pop().expect("served");
        let closed = ws.pop().expect("closed");
        let killed = ws.pop().expect("killed");

        let r = call(&mut c, &["CLIENT", "KILL", "ID", &killed.id.to_string()]);
        assert_eq!(r, Ok(Value::Int(1)), "{flavor}: CLIENT KILL");
        wait_blocked(flavor, &mut c, "x", 2);
        drop(closed);
        wait_blocked(flavor, &mut c, "x", 1);
        assert_eq!(rstat(&server, "blocked"), 1, "{flavor}");

        assert_int(&mut c, &["RLOCK.RELEASE", "x", "h"], 1);
        assert_eq!(holders(&mut c, "x"), held_by("served", 1), "{flavor}");
        assert_eq!(served.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        drop(killed);
    }
}

/// A waiter that closes just as the lock is released to it. If the server saw the
/// close first, the waiter is forgotten and the next one is served; if it granted
/// first and delivered the reply, the closed waiter holds (no SESSION). Either way
/// nobody is stranded: the lock is never lost, and the next waiter gets it.
#[test]
fn waiter_closing_during_hand_off_never_strands_the_lock() {
    for (flavor, server, mut c) in servers() {
        let mut kept = 0;
        for round in 0..25 {
            let key = format!("race{round}");
            call(&mut c, &["RLOCK.ACQUIRE", &key, "h", "LEASE", "60000"]).expect("acquire");
            let gone = Pending::blocked_acquire(&server, &mut c, (&key, "gone"), "0", 1);
            let next = Pending::new(&server);
            let next = next.spawn(&["RLOCK.ACQUIRE", &key, "next", "BLOCK", "10000"]);
            wait_blocked(flavor, &mut c, &key, 2);
            let release = redis::cmd("RLOCK.RELEASE")
                .arg(&key)
                .arg("h")
                .get_packed_command();
            if round % 2 == 0 {
                drop(gone);
                c.send_packed_command(&release).expect("send");
            } else {
                c.send_packed_command(&release).expect("send");
                drop(gone);
            }
            assert_eq!(
                c.recv_response().expect("release reply"),
                Value::Int(1),
                "{flavor}"
            );
            let mut state = (std::collections::BTreeMap::new(), -1);
            let settled = wait_until(Duration::from_secs(5), || {
                state = (holders(&mut c, &key), lock_info(&mut c, &key).blocked);
                state == (held_by("next", 1), 0) || state == (held_by("gone", 1), 1)
            });
            assert!(
                settled,
                "{flavor} round {round}: after the release, holders/blocked are {state:?}"
            );
            if state.0 == held_by("gone", 1) {
                kept += 1;
                assert_int(&mut c, &["RLOCK.FORCERELEASE", &key], 1);
            }
            let got = next.join();
            assert_eq!(
                got.reply,
                Ok(Value::Int(1)),
                "{flavor} round {round}: next waiter"
            );
            assert_eq!(
                holders(&mut c, &key),
                held_by("next", 1),
                "{flavor} round {round}"
            );
        }
        eprintln!("{flavor}: the closed waiter was granted first in {kept}/25 rounds");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
    }
}

#[test]
fn block_tries_once_in_multi_lua_and_functions() {
    for (flavor, server, mut c) in servers() {
        call(&mut c, &["RLOCK.ACQUIRE", "m", "h", "LEASE", "60000"]).expect("acquire");
        let lib = "#!lua name=rlocktest\n\
            redis.register_function('acq', function(keys, args) \
            return redis.call('RLOCK.ACQUIRE', keys[1], args[1], 'BLOCK', args[2]) end)";
        assert!(
            call(&mut c, &["FUNCTION", "LOAD", lib]).is_ok(),
            "{flavor}: FUNCTION LOAD"
        );
        let eval = "return redis.call('RLOCK.ACQUIRE', KEYS[1], ARGV[1], 'BLOCK', ARGV[2])";
        let mut other = server.conn();

        for busy in [true, false] {
            let want = if busy { Value::Nil } else { Value::Int(1) };
            let key = |what: &str| {
                if busy {
                    "m".to_string()
                } else {
                    format!("free-{what}")
                }
            };
            let start = Instant::now();
            let r: Value = redis::pipe()
                .atomic()
                .cmd("RLOCK.ACQUIRE")
                .arg(key("multi"))
                .arg("tx")
                .arg("BLOCK")
                .arg("5000")
                .query(&mut other)
                .unwrap_or_else(|e| panic!("{flavor}: MULTI: {e}"));
            assert_eq!(r, Value::Array(vec![want.clone()]), "{flavor}: in MULTI");
            let r = call(&mut other, &["EVAL", eval, "1", &key("lua"), "lua", "5000"]);
            assert_eq!(r, Ok(want.clone()), "{flavor}: in EVAL");
            // BLOCK 0 inside Lua must not hang either.
            let r = call(&mut other, &["EVAL", eval, "1", &key("lua0"), "lua0", "0"]);
            assert_eq!(r, Ok(want.clone()), "{flavor}: BLOCK 0 in EVAL");
            let r = call(&mut other, &["FCALL", "acq", "1", &key("fn"), "fn", "5000"]);
            assert_eq!(r, Ok(want.clone()), "{flavor}: in FCALL");
            let took = start.elapsed();
            assert!(
                took < Duration::from_millis(1000),
                "{flavor}: tries inside MULTI/Lua/functions took {took:?}: they blocked"
            );
            assert_eq!(lock_info(&mut c, "m").blocked, 0, "{flavor}");
            assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        }
        assert_eq!(holders(&mut c, "free-multi"), held_by("tx", 1), "{flavor}");
        assert_eq!(holders(&mut c, "free-fn"), held_by("fn", 1), "{flavor}");
        assert_eq!(holders(&mut c, "m"), held_by("h", 1), "{flavor}");
    }
}

#[test]
fn info_counts_blocked_waiters_and_tracked_locks() {
    for (flavor, server, mut c) in servers() {
        let base = rstats(&server);
        assert_eq!(base["blocked"], 0, "{flavor}");
        assert_eq!(base["tracked_locks"], 0, "{flavor}");
        for key in ["i1", "i2"] {
            call(&mut c, &["RLOCK.ACQUIRE", key, "h", "LEASE", "60000"]).expect("acquire");
        }
        let mut ws = Vec::new();
        for (key, n) in [("i1", 1), ("i1", 2), ("i2", 1)] {
            let w = Pending::blocked_acquire(&server, &mut c, (key, &format!("w{n}")), "0", n);
            ws.push(w);
        }
        let s = rstats(&server);
        assert_eq!(s["blocked"], 3, "{flavor}: {s:?}");
        assert_eq!(s["tracked_locks"], 2, "{flavor}: {s:?}");
        call(&mut c, &["RLOCK.RELEASE", "i1", "h"]).expect("release");
        call(&mut c, &["RLOCK.FORCERELEASE", "i2"]).expect("forcerelease");
        let s = rstats(&server);
        assert_eq!(s["blocked"], 1, "{flavor}: {s:?}");
        // i1 has a waiter; i2 was handed to one and is followed until it is free.
        assert_eq!(s["tracked_locks"], 2, "{flavor}: {s:?}");
        assert_eq!(s["handoffs"] - base["handoffs"], 2, "{flavor}: {s:?}");
        call(&mut c, &["RLOCK.RELEASE", "i1", "w1"]).expect("release");
        for mut w in ws {
            assert_eq!(w.reply(), Ok(Value::Int(1)), "{flavor}");
        }
        let s = rstats(&server);
        assert_eq!(s["blocked"], 0, "{flavor}: {s:?}");
        assert_eq!(s["tracked_locks"], 2, "{flavor}: both handed over: {s:?}");
        assert_eq!(s["handoffs"] - base["handoffs"], 3, "{flavor}: {s:?}");
        call(&mut c, &["RLOCK.RELEASE", "i1", "w2"]).expect("release");
        call(&mut c, &["RLOCK.FORCERELEASE", "i2"]).expect("forcerelease");
        assert_eq!(rstat(&server, "tracked_locks"), 0, "{flavor}");
    }
}

#[test]
fn demotion_releases_waiters_with_unblocked_error() {
    for flavor in flavors() {
        let new_primary = Server::builder(flavor).module(false).start();
        let server = Server::start(flavor);
        let mut c = server.conn();
        call(&mut c, &["RLOCK.ACQUIRE", "d", "h", "LEASE", "60000"]).expect("acquire");
        let mut ws = Vec::new();
        for (i, block) in ["0", "30000"].iter().enumerate() {
            let w = Pending::blocked_acquire(
                &server,
                &mut c,
                ("d", &format!("w{i}")),
                block,
                i as i64 + 1,
            );
            ws.push(w);
        }
        let port = new_primary.port.to_string();
        assert!(
            call(&mut c, &["REPLICAOF", "127.0.0.1", &port]).is_ok(),
            "{flavor}: REPLICAOF"
        );
        for (i, mut w) in ws.into_iter().enumerate() {
            let r = w.reply();
            assert!(
                matches!(&r, Err(e) if e.starts_with("UNBLOCKED")),
                "{flavor}: waiter {i} on demotion got {r:?}"
            );
        }
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        // On a replica, BLOCK cannot wait: the write is refused.
        let r = call(&mut c, &["RLOCK.ACQUIRE", "d2", "w", "BLOCK", "100"]);
        assert!(
            matches!(&r, Err(e) if e.starts_with("READONLY")),
            "{flavor}: RLOCK.ACQUIRE BLOCK on a replica gave {r:?}"
        );
        let mut s = server;
        s.assert_alive("demotion");
    }
}
