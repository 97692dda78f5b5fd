//! Every way a lock frees wakes the head waiter: RELEASE, FORCERELEASE, DEL, UNLINK,
//! a Redisson Lua unlock, FLUSHDB, FLUSHALL, RENAME away, SWAPDB, lease expiry.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

/// How soon after an event (DEL, FLUSHDB...) the head waiter must have the lock:
/// the hand-off runs on a 0 ms timer, so a few ms; slack for a shared 2-core machine.
const EVENT_HANDOFF: Duration = Duration::from_millis(50);

/// Holds `key` as "holder", queues waiters "first" and "second", runs `free` from
/// another connection, and checks that "first" (only) gets the lock, promptly.
fn check_frees(flavor: Flavor, what: &str, free: impl FnOnce(&mut Connection)) {
    let server = Server::start(flavor);
    let mut c = server.conn();
    let key = "fk";
    assert_eq!(
        call(&mut c, &["RLOCK.ACQUIRE", key, "holder", "LEASE", "60000"]),
        Ok(Value::Int(1)),
        "{flavor}"
    );
    // Re-entered: a free must drop every hold.
    assert_eq!(
        call(&mut c, &["RLOCK.ACQUIRE", key, "holder", "LEASE", "60000"]),
        Ok(Value::Int(2)),
        "{flavor}"
    );
    let first = Pending::new(&server).spawn(&[
        "RLOCK.ACQUIRE",
        key,
        "first",
        "BLOCK",
        "20000",
        "LEASE",
        "45000",
    ]);
    wait_blocked(flavor, &mut c, key, 1);
    let second = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", key, "second", "BLOCK", "0"]);
    wait_blocked(flavor, &mut c, key, 2);
    let handoffs = rstat(&server, "handoffs");

    let mut other = server.conn();
    let start = Instant::now();
    free(&mut other);
    let got = first.join();
    let took = got.at.duration_since(start);
    assert_eq!(
        got.reply,
        Ok(Value::Int(1)),
        "{flavor}: {what}: the head waiter's reply"
    );
    assert!(
        took <= EVENT_HANDOFF,
        "{flavor}: {what}: the head waiter got the lock {took:?} after the free"
    );
    assert_eq!(
        holders(&mut c, key),
        held_by("first", 1),
        "{flavor}: {what}: holder after the free"
    );
    let pt = pttl(&mut c, key.as_bytes());
    assert!(
        (44_000..=45_000).contains(&pt),
        "{flavor}: {what}: the new holder's lease, pttl {pt}"
    );
    assert_eq!(
        rstat(&server, "handoffs") - handoffs,
        1,
        "{flavor}: {what}: handoffs"
    );
    // The second waiter keeps its place, and is next.
    assert_eq!(lock_info(&mut c, key).blocked, 1, "{flavor}: {what}");
    assert!(
        !second.is_finished(),
        "{flavor}: {what}: second replied early"
    );
    let mut first_con = got.con;
    assert_eq!(
        call(&mut first_con.con, &["RLOCK.RELEASE", key, "first"]),
        Ok(Value::Int(1)),
        "{flavor}: {what}"
    );
    assert_eq!(second.join().reply, Ok(Value::Int(1)), "{flavor}: {what}");
    assert_eq!(
        holders(&mut c, key),
        held_by("second", 1),
        "{flavor}: {what}"
    );
    assert_eq!(rstat(&server, "blocked"), 0, "{flavor}: {what}");
}

fn run(con: &mut Connection, args: &[&str]) {
    let r = call(con, args);
    assert!(r.is_ok(), "`{}` failed: {r:?}", args.join(" "));
}

#[test]
fn release_wakes_the_head_waiter() {
    for flavor in flavors() {
        check_frees(flavor, "RLOCK.RELEASE x2", |c| {
            assert_eq!(
                call(c, &["RLOCK.RELEASE", "fk", "holder"]),
                Ok(Value::Int(0))
            );
            assert_eq!(
                call(c, &["RLOCK.RELEASE", "fk", "holder"]),
                Ok(Value::Int(1))
            );
        });
    }
}

#[test]
fn force_release_wakes_the_head_waiter() {
    for flavor in flavors() {
        check_frees(flavor, "RLOCK.FORCERELEASE", |c| {
            assert_eq!(call(c, &["RLOCK.FORCERELEASE", "fk"]), Ok(Value::Int(1)));
        });
    }
}

#[test]
fn del_and_unlink_wake_the_head_waiter() {
    for flavor in flavors() {
        check_frees(flavor, "DEL", |c| {
            assert_eq!(call(c, &["DEL", "fk"]), Ok(Value::Int(1)));
        });
        check_frees(flavor, "UNLINK", |c| {
            assert_eq!(call(c, &["UNLINK", "fk"]), Ok(Value::Int(1)));
        });
        check_frees(flavor, "PEXPIRE 0", |c| {
            assert_eq!(call(c, &["PEXPIRE", "fk", "0"]), Ok(Value::Int(1)));
        });
    }
}

#[test]
fn redisson_lua_unlock_wakes_the_head_waiter() {
    for flavor in flavors() {
        check_frees(flavor, "Redisson Lua unlock x2", |c| {
            assert_eq!(lua_unlock(c, "fk", "holder"), Ok(Value::Int(0)));
            assert_eq!(lua_unlock(c, "fk", "holder"), Ok(Value::Int(1)));
        });
    }
}

#[test]
fn flushdb_and_flushall_wake_the_head_waiter() {
    for flavor in flavors() {
        check_frees(flavor, "FLUSHDB", |c| run(c, &["FLUSHDB"]));
        check_frees(flavor, "FLUSHALL", |c| run(c, &["FLUSHALL"]));
        check_frees(flavor, "FLUSHALL ASYNC", |c| run(c, &["FLUSHALL", "ASYNC"]));
    }
}

#[test]
fn rename_away_wakes_the_head_waiter() {
    for flavor in flavors() {
        check_frees(flavor, "RENAME", |c| run(c, &["RENAME", "fk", "elsewhere"]));
        check_frees(flavor, "MOVE", |c| run(c, &["MOVE", "fk", "3"]));
    }
}

#[test]
fn swapdb_wakes_the_head_waiter() {
    for flavor in flavors() {
        // db 1 is empty: after the swap, db 0 has no lock.
        check_frees(flavor, "SWAPDB", |c| run(c, &["SWAPDB", "0", "1"]));
    }
}

/// SWAPDB that brings another hold of the same key in: the waiter keeps waiting,
/// for that hold's release or its lease deadline.
#[test]
fn swapdb_bringing_a_held_lock_keeps_waiters_waiting() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "s", "zero", "LEASE", "60000"]);
        let mut c1 = server.conn();
        run(&mut c1, &["SELECT", "1"]);
        run(&mut c1, &["RLOCK.ACQUIRE", "s", "one", "LEASE", "1500"]);
        let w = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "s", "w", "BLOCK", "10000"]);
        wait_blocked(flavor, &mut c, "s", 1);
        run(&mut c, &["SWAPDB", "0", "1"]);
        // db 0 now holds "one"'s lock, with its lease.
        assert_eq!(holders(&mut c, "s"), held_by("one", 1), "{flavor}");
        let deadline_ms = pexpiretime(&mut c, b"s");
        assert!(deadline_ms > 0, "{flavor}");
        let got = w.join();
        assert_eq!(got.reply, Ok(Value::Int(1)), "{flavor}");
        let late = got.unix_ms - deadline_ms as f64;
        assert!(
            (-1.0..=500.0).contains(&late),
            "{flavor}: after SWAPDB, the waiter got the lock {late:.1} ms after the \
             swapped-in lease's deadline"
        );
        assert_eq!(holders(&mut c, "s"), held_by("w", 1), "{flavor}");
        // db 1 has "zero"'s hold, untouched.
        assert_eq!(holders(&mut c1, "s"), held_by("zero", 1), "{flavor}");
    }
}

/// Lease expiry hands the lock to the head waiter by the module's own timer, never before
/// the deadline, with Redis's active expiry on and off. With it off nothing but that timer
/// frees the lock, so a waiter served at all (well inside its `BLOCK 5000`) was served by it.
/// The p50 bound catches a timer that fires at the wrong time; the figure the project
/// quotes (p99 within 10 ms of the deadline) is measured by `make bench` (scenario 3, path
/// B, the server and the load pinned apart), not here: a test shares its two cores with
/// every other suite, and its p99 is that load's (20 ms seen in CI under `make -j2`).
/// The two measurements still run one at a time.
static TIMED: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn expiry_latency(flavor: Flavor, active_expire: bool) {
    let _alone = TIMED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    const SAMPLES: usize = 60;
    let server = Server::start(flavor);
    let mut c = server.conn();
    if !active_expire {
        run(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    }
    let expiries = rstat(&server, "expiries");
    let handoffs = rstat(&server, "handoffs");
    let mut late = Vec::new();
    let mut holder = Pending::new(&server);
    let mut waiter = Some(Pending::new(&server));
    for i in 0..SAMPLES {
        let key = format!("exp{}", i % 4);
        let lease = (50 + (i % 6) * 10).to_string();
        assert_eq!(
            call(
                &mut holder.con,
                &["RLOCK.ACQUIRE", &key, "holder", "LEASE", &lease]
            ),
            Ok(Value::Int(1)),
            "{flavor}: sample {i}"
        );
        let deadline = pexpiretime(&mut c, key.as_bytes());
        let w = waiter.take().expect("waiter").spawn(&[
            "RLOCK.ACQUIRE",
            &key,
            "waiter",
            "BLOCK",
            "5000",
            "LEASE",
            "30000",
        ]);
        let got = w.join();
        assert_eq!(got.reply, Ok(Value::Int(1)), "{flavor}: sample {i}");
        late.push(got.unix_ms - deadline as f64);
        let mut con = got.con;
        assert_eq!(
            call(&mut con.con, &["RLOCK.RELEASE", &key, "waiter"]),
            Ok(Value::Int(1)),
            "{flavor}: sample {i}"
        );
        waiter = Some(con);
    }
    let p50 = quantile(&mut late, 0.5);
    let p99 = quantile(&mut late, 0.99);
    let (min, max) = (late[0], late[late.len() - 1]);
    eprintln!(
        "{flavor}: active-expire {active_expire}: hand-off after the lease deadline: \
         min {min:.1} p50 {p50:.1} p99 {p99:.1} max {max:.1} ms"
    );
    assert!(
        min > -1.5,
        "{flavor}: a waiter got the lock {min:.1} ms BEFORE the holder's deadline"
    );
    assert!(
        p50 <= 10.0,
        "{flavor} (active-expire {active_expire}): p50 of the hand-off after the lease \
         deadline is {p50:.1} ms (p99 {p99:.1}, max {max:.1}); must be <= 10 ms"
    );
    assert!(
        max <= 1000.0,
        "{flavor} (active-expire {active_expire}): a hand-off came {max:.1} ms after the \
         lease deadline (p50 {p50:.1}, p99 {p99:.1}); the module's timer should have fired"
    );
    let s = rstats(&server);
    assert_eq!(
        s["expiries"] - expiries,
        SAMPLES as i64,
        "{flavor}: INFO rlock expiries"
    );
    assert_eq!(
        s["handoffs"] - handoffs,
        SAMPLES as i64,
        "{flavor}: INFO rlock handoffs"
    );
}

#[test]
fn lease_expiry_hands_off_at_the_deadline() {
    for flavor in flavors() {
        expiry_latency(flavor, true);
    }
}

#[test]
fn lease_expiry_hands_off_on_time_without_active_expiry() {
    for flavor in flavors() {
        expiry_latency(flavor, false);
    }
}

/// `w`, blocked on `key`, gets it at `key`'s deadline as it stands now: not before
/// (bar clock rounding) and within 1 s after. Returns what `w` got.
fn served_at_the_deadline(
    flavor: Flavor,
    c: &mut Connection,
    key: &str,
    w: Waiting,
    after: &str,
) -> Replied {
    let deadline = pexpiretime(c, key.as_bytes());
    let got = w.join();
    assert_eq!(got.reply, Ok(Value::Int(1)), "{flavor}");
    let late = got.unix_ms - deadline as f64;
    assert!(
        (-1.5..=1000.0).contains(&late),
        "{flavor}: after {after} the waiter got the lock {late:.1} ms after the deadline"
    );
    got
}

/// A lease changed under a waiter (a Redisson watchdog's PEXPIRE, a PERSIST) moves
/// the hand-off with it.
#[test]
fn lease_changed_by_pexpire_moves_the_hand_off() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        run(&mut c, &["RLOCK.ACQUIRE", "p", "h", "LEASE", "60000"]);
        let w = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "p", "w", "BLOCK", "10000"]);
        wait_blocked(flavor, &mut c, "p", 1);
        run(&mut c, &["PEXPIRE", "p", "150"]);
        let got = served_at_the_deadline(flavor, &mut c, "p", w, "PEXPIRE 150");
        // RENEW by the holder pushes the hand-off back.
        let w2 = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "p", "w2", "BLOCK", "10000"]);
        wait_blocked(flavor, &mut c, "p", 1);
        let mut wcon = got.con;
        run(&mut wcon.con, &["RLOCK.RENEW", "p", "w", "LEASE", "100"]);
        run(&mut wcon.con, &["RLOCK.RENEW", "p", "w", "LEASE", "400"]);
        served_at_the_deadline(flavor, &mut c, "p", w2, "RENEW LEASE 400");
    }
}
