//! The order between plain and fair waiters on one lock. FAIR callers take turns in
//! the fair queue; callers without FAIR never wait for it. A free lock goes to the
//! longest-blocked waiter that may take it, and a newcomer never takes a lock that
//! a blocked waiter may take.

mod common;

use common::*;
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

fn run(c: &mut redis::Connection, args: &[&str]) -> Value {
    call(c, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

#[test]
fn a_polling_fair_head_does_not_hold_back_a_plain_waiter() {
    for (flavor, server, mut c) in servers() {
        hold_with_a_polling_fair_head(&mut c, "k");
        let mut w = Pending::blocked_acquire(&server, &mut c, ("k", "w"), "5000", 1);
        run(&mut c, &["RLOCK.RELEASE", "k", "h"]);
        assert_eq!(w.reply(), Ok(Value::Int(1)), "{flavor}: the plain waiter");
        // A newcomer without BLOCK gets nothing, and the poller keeps its place.
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "k", "n"]);
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "k", "p", "FAIR"]);
        let queue: Vec<String> = redis::cmd("LRANGE")
            .arg("redisson_lock_queue:{k}")
            .arg(0)
            .arg(-1)
            .query(&mut c)
            .expect("LRANGE");
        assert_eq!(queue, vec!["p".to_string()], "{flavor}");
        // Once the plain waiter is done, the queue's head takes its turn.
        run(&mut w.con, &["RLOCK.RELEASE", "k", "w"]);
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "k", "n", "FAIR"]);
        assert_int(&mut c, &["RLOCK.ACQUIRE", "k", "p", "FAIR"], 1);
    }
}

#[test]
fn plain_and_fair_waiters_are_served_in_arrival_order() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "m", "h", "LEASE", "60000"]);
        let mut line = Vec::new();
        for (i, owner) in ["f1", "p1", "f2", "p2", "f3"].iter().enumerate() {
            let mut w = Pending::new(&server);
            let mut args = vec!["RLOCK.ACQUIRE", "m", owner, "BLOCK", "10000"];
            if owner.starts_with('f') {
                args.push("FAIR");
            }
            w.send(&args);
            wait_blocked(flavor, &mut c, "m", i as i64 + 1);
            line.push((owner.to_string(), w));
        }
        run(&mut c, &["RLOCK.RELEASE", "m", "h"]);
        for (owner, mut w) in line {
            assert_eq!(w.reply(), Ok(Value::Int(1)), "{flavor}: {owner}'s turn");
            assert_eq!(holders(&mut c, "m"), held_by(&owner, 1), "{flavor}");
            run(&mut w.con, &["RLOCK.RELEASE", "m", &owner]);
        }
    }
}

/// The lease runs out while the server sleeps, so the lock is free before the
/// module's timer passes it on: the newcomer's own call must serve the waiter first.
#[test]
fn a_newcomer_never_takes_a_lock_a_blocked_waiter_may_take() {
    for (flavor, server, mut c) in servers() {
        for fair_newcomer in [false, true] {
            let case = format!("{flavor} fair_newcomer={fair_newcomer}");
            let key = format!("n-{fair_newcomer}");
            let key = key.as_str();
            run(&mut c, &["RLOCK.ACQUIRE", key, "h", "LEASE", "100"]);
            let mut w = Pending::blocked_acquire(&server, &mut c, (key, "w"), "10000", 1);
            let mut newcomer = Pending::new(&server);
            let mut acquire = vec!["RLOCK.ACQUIRE", key, "n"];
            if fair_newcomer {
                acquire.push("FAIR");
            }
            let mut packet = redis::pipe();
            packet.cmd("DEBUG").arg("SLEEP").arg("0.2");
            let mut cmd = redis::cmd(acquire[0]);
            for a in &acquire[1..] {
                cmd.arg(*a);
            }
            packet.add_command(cmd);
            let replies: Vec<Value> = packet.query(&mut newcomer.con).expect("pipeline");
            assert_eq!(replies[1], Value::Nil, "{case}: the newcomer");
            assert_eq!(w.reply(), Ok(Value::Int(1)), "{case}: the blocked waiter");
            assert_eq!(holders(&mut c, key), held_by("w", 1), "{case}");
        }
    }
}

/// FLUSHDB deletes the lock and its fair queue while FAIR waiters are blocked: they
/// are put back in line, oldest first, and served in that order.
#[test]
fn fair_waiters_are_served_after_their_queue_is_flushed() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "q", "h", "FAIR"]);
        let mut line = Vec::new();
        for (i, owner) in ["f1", "f2"].iter().enumerate() {
            let w = Pending::blocked_on(
                &server,
                &mut c,
                &["RLOCK.ACQUIRE", "q", owner, "FAIR", "BLOCK", "10000"],
                ("q", i as i64 + 1),
            );
            line.push((owner.to_string(), w));
        }
        run(&mut c, &["FLUSHDB"]);
        for (owner, mut w) in line {
            assert_eq!(w.reply(), Ok(Value::Int(1)), "{flavor}: {owner}'s turn");
            assert_eq!(holders(&mut c, "q"), held_by(&owner, 1), "{flavor}");
            run(&mut w.con, &["RLOCK.RELEASE", "q", &owner]);
        }
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
    }
}
