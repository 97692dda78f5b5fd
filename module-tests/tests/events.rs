//! Keyspace events of class module (`d`): each `rlock.*`, `rsem.*` and `rlatch.*` event
//! fires on the key concerned while `notify-keyspace-events` holds `d` and `K` or `E`;
//! none by default or without `d`; and the module's own work is the same with them on.

mod common;

use std::time::{Duration, Instant};

use common::{rstat, wait_total_blocked, Pending};
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

const EVENTS: &[&str] = &[
    "rlock.acquire",
    "rlock.release",
    "rlock.expire",
    "rlock.forcerelease",
    "rlock.sessionend",
    "rlock.timeout",
    "rlock.deadlock",
    "rsem.acquire",
    "rsem.release",
    "rsem.lease",
    "rsem.return",
    "rsem.reclaim",
    "rlatch.countdown",
    "rlatch.open",
];

fn ok(con: &mut redis::Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// A subscriber to every event's `__keyevent@0__` channel.
fn subscribe(server: &Server) -> Subscriber {
    let channels: Vec<Vec<u8>> = EVENTS
        .iter()
        .map(|e| format!("__keyevent@0__:{e}").into_bytes())
        .collect();
    let channels: Vec<&[u8]> = channels.iter().map(Vec::as_slice).collect();
    Subscriber::new(server, &channels)
}

/// What arrived since the last look, as (event, key).
fn seen(sub: &mut Subscriber) -> Vec<(String, String)> {
    sub.drain()
        .into_iter()
        .map(|(channel, key)| {
            let channel = String::from_utf8_lossy(&channel).into_owned();
            let event = channel
                .strip_prefix("__keyevent@0__:")
                .unwrap_or(&channel)
                .to_string();
            (event, String::from_utf8_lossy(&key).into_owned())
        })
        .collect()
}

fn events(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(e, k)| (e.to_string(), k.to_string()))
        .collect()
}

/// Waits (up to 5 s) for events that come from the module's own timers or callbacks.
fn expect_soon(flavor: Flavor, sub: &mut Subscriber, want: &[(&str, &str)], what: &str) {
    let want = events(want);
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < want.len() && start.elapsed() < Duration::from_secs(5) {
        got.extend(seen(sub));
        std::thread::sleep(Duration::from_millis(20));
    }
    got.extend(seen(sub));
    assert_eq!(got, want, "{flavor}: {what}");
}

fn expect(flavor: Flavor, sub: &mut Subscriber, want: &[(&str, &str)], what: &str) {
    assert_eq!(seen(sub), events(want), "{flavor}: {what}");
}

/// One call of every kind that raises an event, with the module's timers and callbacks.
fn exercise(server: &Server, c: &mut redis::Connection) {
    ok(c, &["RLOCK.ACQUIRE", "x:lock", "a"]);
    ok(c, &["RLOCK.RELEASE", "x:lock", "a"]);
    ok(c, &["RLOCK.ACQUIRE", "x:force", "a"]);
    ok(c, &["RLOCK.FORCERELEASE", "x:force"]);
    ok(c, &["RLOCK.ACQUIRE", "x:held", "a"]);
    ok(c, &["RLOCK.ACQUIRE", "x:held", "b", "BLOCK", "50"]);
    ok(c, &["RSEM.TRYSETPERMITS", "x:sem", "1"]);
    ok(c, &["RSEM.ACQUIRE", "x:sem"]);
    ok(c, &["RSEM.RELEASE", "x:sem"]);
    let id = match ok(c, &["RSEM.LEASE", "x:sem", "LEASE", "1000"]) {
        Value::Array(ids) => String::from_utf8_lossy(&match &ids[0] {
            Value::BulkString(b) => b.clone(),
            other => panic!("{other:?}"),
        })
        .into_owned(),
        other => panic!("RSEM.LEASE: {other:?}"),
    };
    ok(c, &["RSEM.RETURN", "x:sem", &id]);
    ok(c, &["RLATCH.TRYSETCOUNT", "x:latch", "1"]);
    ok(c, &["RLATCH.COUNTDOWN", "x:latch"]);
    let mut p = Pending::new(server);
    ok(&mut p.con, &["RLOCK.ACQUIRE", "x:session", "s", "SESSION"]);
    drop(p);
    let ok_gone = wait_until(Duration::from_secs(5), || {
        call(c, &["EXISTS", "x:session"]) == Ok(Value::Int(0))
    });
    assert!(ok_gone, "{}: SESSION hold released", server.flavor);
}

#[test]
fn every_event_fires_on_its_key() {
    for (flavor, server, mut c) in servers() {
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ed"]);
        let mut sub = subscribe(&server);

        // A lock: every grant, re-entries included; only the last release.
        ok(&mut c, &["RLOCK.ACQUIRE", "orders", "a"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "orders", "a"]);
        ok(&mut c, &["RLOCK.RELEASE", "orders", "a"]);
        ok(&mut c, &["RLOCK.RELEASE", "orders", "a"]);
        expect(
            flavor,
            &mut sub,
            &[
                ("rlock.acquire", "orders"),
                ("rlock.acquire", "orders"),
                ("rlock.release", "orders"),
            ],
            "acquire, re-entry, release",
        );
        // Held by another: no grant, no event. FAIR, READ/WRITE, and each key of MACQUIRE.
        ok(&mut c, &["RLOCK.ACQUIRE", "orders", "a"]);
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "orders", "b"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "fair", "a", "FAIR"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "catalog", "r", "READ"]);
        ok(&mut c, &["RLOCK.RELEASE", "catalog", "r", "READ"]);
        ok(&mut c, &["RLOCK.MACQUIRE", "m", "2", "one", "two"]);
        ok(&mut c, &["RLOCK.MRELEASE", "m", "2", "one", "two"]);
        expect(
            flavor,
            &mut sub,
            &[
                ("rlock.acquire", "orders"),
                ("rlock.acquire", "fair"),
                ("rlock.acquire", "catalog"),
                ("rlock.release", "catalog"),
                ("rlock.acquire", "one"),
                ("rlock.acquire", "two"),
                ("rlock.release", "one"),
                ("rlock.release", "two"),
            ],
            "FAIR, READ, MACQUIRE",
        );
        // A blocked call granted on release; one whose BLOCK runs out.
        let waiter =
            Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "orders", "b", "BLOCK", "5000"]);
        wait_total_blocked(&server, 1);
        ok(&mut c, &["RLOCK.RELEASE", "orders", "a"]);
        assert_eq!(waiter.join().reply, Ok(Value::Int(1)), "{flavor}");
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "orders", "c", "BLOCK", "50"]);
        assert_nil(&mut c, &["RSEM.ACQUIRE", "empty", "BLOCK", "50"]);
        expect(
            flavor,
            &mut sub,
            &[
                ("rlock.release", "orders"),
                ("rlock.acquire", "orders"),
                ("rlock.timeout", "orders"),
                ("rlock.timeout", "empty"),
            ],
            "a grant after BLOCK, and BLOCKs that ran out",
        );
        // FORCERELEASE of a held lock; of a free one, nothing.
        ok(&mut c, &["RLOCK.FORCERELEASE", "orders"]);
        ok(&mut c, &["RLOCK.FORCERELEASE", "orders"]);
        expect(
            flavor,
            &mut sub,
            &[("rlock.forcerelease", "orders")],
            "FORCERELEASE",
        );
        // A lease that runs out while a call waits: the module ends it, then grants.
        ok(&mut c, &["RLOCK.ACQUIRE", "leased", "a", "LEASE", "200"]);
        let waiter =
            Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "leased", "b", "BLOCK", "5000"]);
        wait_total_blocked(&server, 1);
        assert_eq!(waiter.join().reply, Ok(Value::Int(1)), "{flavor}");
        expect_soon(
            flavor,
            &mut sub,
            &[
                ("rlock.acquire", "leased"),
                ("rlock.expire", "leased"),
                ("rlock.acquire", "leased"),
            ],
            "a lease ended under a waiter",
        );
        // A SESSION connection closes with its hold.
        let mut p = Pending::new(&server);
        ok(&mut p.con, &["RLOCK.ACQUIRE", "session", "s", "SESSION"]);
        drop(p);
        expect_soon(
            flavor,
            &mut sub,
            &[
                ("rlock.acquire", "session"),
                ("rlock.sessionend", "session"),
            ],
            "SESSION closed",
        );

        // Semaphores: taken, given back, leased, returned, taken back at a lease's end.
        ok(&mut c, &["RSEM.TRYSETPERMITS", "pool", "2"]);
        ok(&mut c, &["RSEM.ACQUIRE", "pool", "PERMITS", "2"]);
        assert_nil(&mut c, &["RSEM.ACQUIRE", "pool"]);
        ok(&mut c, &["RSEM.RELEASE", "pool", "PERMITS", "2"]);
        let id = match ok(&mut c, &["RSEM.LEASE", "pool", "LEASE", "60000"]) {
            Value::Array(ids) => match &ids[0] {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("{other:?}"),
            },
            other => panic!("RSEM.LEASE: {other:?}"),
        };
        ok(&mut c, &["RSEM.RETURN", "pool", &id]);
        assert_int(&mut c, &["RSEM.RETURN", "pool", &id], 0);
        expect(
            flavor,
            &mut sub,
            &[
                ("rsem.acquire", "pool"),
                ("rsem.release", "pool"),
                ("rsem.lease", "pool"),
                ("rsem.return", "pool"),
            ],
            "semaphore calls",
        );
        ok(&mut c, &["RSEM.LEASE", "pool", "LEASE", "100"]);
        expect_soon(
            flavor,
            &mut sub,
            &[("rsem.lease", "pool"), ("rsem.reclaim", "pool")],
            "a lease taken back at its end",
        );
        // A blocked acquire served by a release.
        ok(&mut c, &["RSEM.ACQUIRE", "pool", "PERMITS", "2"]);
        let waiter = Pending::new(&server).spawn(&["RSEM.ACQUIRE", "pool", "BLOCK", "5000"]);
        wait_total_blocked(&server, 1);
        ok(&mut c, &["RSEM.RELEASE", "pool"]);
        assert_eq!(waiter.join().reply, Ok(Value::Int(1)), "{flavor}");
        expect(
            flavor,
            &mut sub,
            &[
                ("rsem.acquire", "pool"),
                ("rsem.release", "pool"),
                ("rsem.acquire", "pool"),
            ],
            "a blocked acquire served",
        );

        // Latches: each count down, and the one that opens it; none without a count.
        ok(&mut c, &["RLATCH.TRYSETCOUNT", "gate", "2"]);
        ok(&mut c, &["RLATCH.COUNTDOWN", "gate"]);
        ok(&mut c, &["RLATCH.COUNTDOWN", "gate"]);
        ok(&mut c, &["RLATCH.COUNTDOWN", "gate"]);
        expect(
            flavor,
            &mut sub,
            &[
                ("rlatch.countdown", "gate"),
                ("rlatch.countdown", "gate"),
                ("rlatch.open", "gate"),
            ],
            "latch",
        );
    }
}

/// `K` alone: the events arrive on the key's own channel, named in the message.
#[test]
fn keyspace_channel_carries_the_event_name() {
    for (flavor, server, mut c) in servers() {
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Kd"]);
        let mut sub = Subscriber::new(&server, &[b"__keyspace@0__:orders"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "orders", "a"]);
        ok(&mut c, &["RLOCK.RELEASE", "orders", "a"]);
        let got: Vec<(Vec<u8>, Vec<u8>)> = sub.drain();
        assert_eq!(
            got,
            vec![
                (b"__keyspace@0__:orders".to_vec(), b"rlock.acquire".to_vec()),
                (b"__keyspace@0__:orders".to_vec(), b"rlock.release".to_vec()),
            ],
            "{flavor}"
        );
        // In another database, on its own channel.
        ok(&mut c, &["SELECT", "3"]);
        let mut sub3 = Subscriber::new(&server, &[b"__keyspace@3__:orders"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "orders", "a"]);
        assert_eq!(
            sub3.drain(),
            vec![(b"__keyspace@3__:orders".to_vec(), b"rlock.acquire".to_vec())],
            "{flavor}: db 3"
        );
        assert_eq!(sub.drain(), vec![], "{flavor}: nothing in db 0");
    }
}

/// Off by default, and off while `notify-keyspace-events` lacks `d` or lacks both `K`
/// and `E`: nothing published.
#[test]
fn none_while_off() {
    for (flavor, server, mut c) in servers() {
        let mut sub = subscribe(&server);
        let mut keys = Subscriber::new(&server, &[b"__keyspace@0__:x:lock"]);
        for config in ["", "KEg$lshzxet", "d"] {
            ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", config]);
            exercise(&server, &mut c);
            assert_eq!(seen(&mut sub), vec![], "{flavor}: {config:?}");
            let mine: Vec<_> = keys
                .drain()
                .into_iter()
                .filter(|(_, event)| event.starts_with(b"rlock."))
                .collect();
            assert_eq!(mine, vec![], "{flavor}: {config:?}");
        }
        // On: the same calls are heard.
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        exercise(&server, &mut c);
        let got = seen(&mut sub);
        for event in [
            "rlock.acquire",
            "rlock.release",
            "rlock.forcerelease",
            "rlock.timeout",
            "rlock.sessionend",
            "rsem.acquire",
            "rsem.release",
            "rsem.lease",
            "rsem.return",
            "rlatch.countdown",
            "rlatch.open",
        ] {
            assert!(
                got.iter().any(|(e, _)| e == event),
                "{flavor}: {event} with KEA: {got:?}"
            );
        }
    }
}

/// With every event on, the module's own subscription sees none of its events and
/// serves waiters as before: on release, on a delete, on a lease's end, in a fair queue.
#[test]
fn the_module_works_the_same_with_events_on() {
    for (flavor, server, mut c) in servers() {
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "k", "a"]);
        let b = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "k", "b", "BLOCK", "5000"]);
        wait_total_blocked(&server, 1);
        ok(&mut c, &["RLOCK.RELEASE", "k", "a"]);
        assert_eq!(b.join().reply, Ok(Value::Int(1)), "{flavor}: on release");
        let d = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "k", "d", "BLOCK", "5000"]);
        wait_total_blocked(&server, 1);
        ok(&mut c, &["DEL", "k"]);
        assert_eq!(d.join().reply, Ok(Value::Int(1)), "{flavor}: on DEL");
        ok(&mut c, &["RLOCK.FORCERELEASE", "k"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "k", "a", "LEASE", "100"]);
        let e = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "k", "e", "BLOCK", "5000"]);
        wait_total_blocked(&server, 1);
        assert_eq!(
            e.join().reply,
            Ok(Value::Int(1)),
            "{flavor}: on the lease's end"
        );
        ok(&mut c, &["RLOCK.FORCERELEASE", "k"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "f", "a", "FAIR"]);
        let f1 =
            Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "f", "f1", "FAIR", "BLOCK", "5000"]);
        wait_total_blocked(&server, 1);
        let f2 =
            Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "f", "f2", "FAIR", "BLOCK", "5000"]);
        wait_total_blocked(&server, 2);
        ok(&mut c, &["RLOCK.RELEASE", "f", "a"]);
        assert_eq!(f1.join().reply, Ok(Value::Int(1)), "{flavor}: fair head");
        ok(&mut c, &["RLOCK.RELEASE", "f", "f1"]);
        assert_eq!(f2.join().reply, Ok(Value::Int(1)), "{flavor}: fair next");
        ok(&mut c, &["RLOCK.RELEASE", "f", "f2"]);
        let stats = server.info("rlock");
        assert_eq!(
            stats.get("rlock_blocked").map(String::as_str),
            Some("0"),
            "{flavor}"
        );
        server
            .log()
            .lines()
            .filter(|l| l.contains("rlock:"))
            .for_each(|l| {
                assert!(!l.contains("panic"), "{flavor}: {l}");
            });
    }
}

/// A grant made to a blocked call whose client is killed before the reply is given
/// back by the module, and says so: `rlock.release` (`rsem.release` for permits) after
/// the `rlock.acquire` the grant raised, so an observer never sees a holder that stays.
/// The kill comes in the packet of the call that frees the key: the turn of the grant.
#[test]
fn a_grant_given_back_because_its_client_left_is_released() {
    for (flavor, server, mut c) in servers() {
        ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ed"]);
        ok(&mut c, &["RSEM.TRYSETPERMITS", "gone-sem", "1"]);
        let mut sub = subscribe(&server);
        type Case<'a> = (&'a str, [&'a [&'a str]; 3], [&'a str; 4]);
        let cases: [Case; 3] = [
            (
                "gone",
                [
                    &["RLOCK.ACQUIRE", "gone", "h"],
                    &["RLOCK.ACQUIRE", "gone", "w", "BLOCK", "0"],
                    &["RLOCK.RELEASE", "gone", "h"],
                ],
                [
                    "rlock.acquire",
                    "rlock.release",
                    "rlock.acquire",
                    "rlock.release",
                ],
            ),
            (
                "gone-rw",
                [
                    &["RLOCK.ACQUIRE", "gone-rw", "h", "READ"],
                    &["RLOCK.ACQUIRE", "gone-rw", "w", "WRITE", "BLOCK", "0"],
                    &["RLOCK.RELEASE", "gone-rw", "h", "READ"],
                ],
                [
                    "rlock.acquire",
                    "rlock.release",
                    "rlock.acquire",
                    "rlock.release",
                ],
            ),
            (
                "gone-sem",
                [
                    &["RSEM.ACQUIRE", "gone-sem"],
                    &["RSEM.ACQUIRE", "gone-sem", "BLOCK", "0"],
                    &["RSEM.RELEASE", "gone-sem"],
                ],
                [
                    "rsem.acquire",
                    "rsem.release",
                    "rsem.acquire",
                    "rsem.release",
                ],
            ),
        ];
        for (key, [hold, wait, free], want) in cases {
            ok(&mut c, hold);
            let waiter = Pending::new(&server);
            let id = waiter.id.to_string();
            let waiter = waiter.spawn(wait);
            wait_total_blocked(&server, 1);
            let mut free_then_kill = redis::pipe();
            free_then_kill.cmd(free[0]);
            for arg in &free[1..] {
                free_then_kill.arg(*arg);
            }
            free_then_kill.cmd("CLIENT").arg("KILL").arg("ID").arg(&id);
            let replies: Vec<Value> = free_then_kill
                .query(&mut c)
                .unwrap_or_else(|e| panic!("{flavor} {key}: {e}"));
            assert_eq!(replies, vec![Value::Int(1); 2], "{flavor} {key}");
            assert!(waiter.join().reply.is_err(), "{flavor} {key}: killed");
            let want: Vec<(&str, &str)> = want.iter().map(|e| (*e, key)).collect();
            expect_soon(flavor, &mut sub, &want, key);
        }
        // Every grant came back: both locks free, the permit available.
        for key in ["gone", "gone-rw"] {
            assert_int(&mut c, &["EXISTS", key], 0);
        }
        assert_int(&mut c, &["RSEM.AVAILABLE", "gone-sem"], 1);
        assert_eq!(rstat(&server, "releases"), 4, "{flavor}: rlock_releases");
    }
}
