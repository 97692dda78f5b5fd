//! Redisson's permit-expiring semaphore (`RPermitExpirableSemaphore`), natively:
//! `RSEM.LEASE`, `RSEM.RETURN`, `RSEM.RENEW` on its keys (`K` and the zset `{K}:timeout`
//! of 16-byte permit ids), against Redisson's own scripts both ways; leases taken back
//! by the server's timer at their deadline, or when their SESSION connection closes,
//! with blocked callers served at once; retried calls; a module-less replica.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::redisson::{
    PERMIT_AVAILABLE, PERMIT_RELEASE, PERMIT_TRY_ACQUIRE, PERMIT_UPDATE_LEASE,
};
use rlock_module_tests::*;

const NO_LEASE: &str = "922337203685477";

fn run(c: &mut Connection, args: &[&str]) -> Value {
    call(c, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

fn run_bytes(c: &mut Connection, args: &[&[u8]]) -> Value {
    call_bytes(c, args).unwrap_or_else(|e| panic!("call failed: {e}"))
}

fn channel(key: &str) -> Vec<u8> {
    helper_key("redisson_sc", key.as_bytes())
}

fn zset(key: &str) -> String {
    format!("{{{key}}}:timeout")
}

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

fn now_ms() -> i64 {
    unix_ms_f64() as i64
}

/// The ids of an `RSEM.LEASE` reply.
fn ids_of(reply: &Value) -> Vec<String> {
    let Value::Array(ids) = reply else {
        panic!("not an array of ids: {reply:?}")
    };
    ids.iter()
        .map(|id| match id {
            Value::BulkString(b) => String::from_utf8(b.clone()).expect("ascii id"),
            other => panic!("not an id: {other:?}"),
        })
        .collect()
}

fn raw(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn hex(raw: &[u8]) -> String {
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

fn score(c: &mut Connection, key: &str, raw_id: &[u8]) -> Option<f64> {
    redis::cmd("ZSCORE")
        .arg(zset(key))
        .arg(raw_id)
        .query(c)
        .expect("ZSCORE")
}

/// Redisson's `tryAcquire(leaseTime)` for one permit with the client-made id `raw_id`.
fn redisson_lease(c: &mut Connection, key: &str, raw_id: &[u8], deadline: i64) -> Value {
    let (z, ch) = (zset(key), channel(key));
    let (deadline, now) = (deadline.to_string(), now_ms().to_string());
    run_bytes(
        c,
        &[
            b"EVAL",
            PERMIT_TRY_ACQUIRE.as_bytes(),
            b"3",
            key.as_bytes(),
            z.as_bytes(),
            &ch,
            b"1",
            deadline.as_bytes(),
            now.as_bytes(),
            NO_LEASE.as_bytes(),
            b"publish",
            raw_id,
        ],
    )
}

/// Redisson's `tryRelease(permitId)`.
fn redisson_release(c: &mut Connection, key: &str, raw_id: &[u8]) -> Value {
    let (z, ch, now) = (zset(key), channel(key), now_ms().to_string());
    run_bytes(
        c,
        &[
            b"EVAL",
            PERMIT_RELEASE.as_bytes(),
            b"3",
            key.as_bytes(),
            &ch,
            z.as_bytes(),
            raw_id,
            b"1",
            now.as_bytes(),
            b"publish",
        ],
    )
}

/// Semaphore `s` with no permits, and `call` (words split at spaces) blocked on it.
fn waiter_on_empty(server: &Server, call: &str) -> Pending {
    run(&mut server.conn(), &["RSEM.TRYSETPERMITS", "s", "0"]);
    Pending::blocked(server, &words(call), 1)
}

#[test]
fn leases_share_redissons_layout_both_ways() {
    for (flavor, server, mut c) in servers() {
        let mut sub = Subscriber::new(&server, &[&channel("s")]);
        run(&mut c, &["RSEM.TRYSETPERMITS", "s", "4"]);
        let before = now_ms();
        let leased = run(
            &mut c,
            &["RSEM.LEASE", "s", "LEASE", "60000", "PERMITS", "2"],
        );
        let ids = ids_of(&leased);
        assert_eq!(ids.len(), 2, "{flavor}");
        assert_ne!(ids[0], ids[1]);
        for id in &ids {
            assert_eq!(id.len(), 32, "{flavor}: {id}");
            assert!(id
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
            // 16 raw bytes in the zset, scored with the deadline.
            let deadline = score(&mut c, "s", &raw(id)).expect("leased id in the zset") as i64;
            assert!(
                (before + 60_000..now_ms() + 60_001).contains(&deadline),
                "{flavor}"
            );
        }
        assert_stored_permits(&mut c, "s", 2, format_args!("{flavor}"));
        // Redisson's availablePermits and release on the module's lease.
        let z = zset("s");
        let ch = String::from_utf8(channel("s")).unwrap();
        let now = now_ms().to_string();
        let available = ["EVAL", PERMIT_AVAILABLE, "3", "s", &z, &ch, &now, "publish"];
        assert_eq!(run(&mut c, &available), Value::BulkString(b"2".to_vec()));
        assert_eq!(redisson_release(&mut c, "s", &raw(&ids[0])), Value::Int(1));
        assert_stored_permits(&mut c, "s", 3, format_args!("{flavor}"));
        assert_eq!(run(&mut c, &["RSEM.RETURN", "s", &ids[0]]), Value::Int(0));
        // Redisson's lease, renewed and returned by the module.
        let theirs = [7u8; 16];
        let r = redisson_lease(&mut c, "s", &theirs, now_ms() + 60_000);
        assert_eq!(r, Value::BulkString(b"OK".to_vec()), "{flavor}");
        let renew = ["RSEM.RENEW", "s", &hex(&theirs), "LEASE", "120000"];
        assert_eq!(run(&mut c, &renew), Value::Int(1), "{flavor}");
        let moved = score(&mut c, "s", &theirs).unwrap() as i64;
        assert!(moved > now_ms() + 100_000, "{flavor}: renewed to {moved}");
        assert_int(&mut c, &["RSEM.RETURN", "s", &hex(&theirs)], 1);
        assert_stored_permits(&mut c, "s", 3, format_args!("{flavor}"));
        // Redisson renews a module lease.
        let now = now_ms().to_string();
        let later = (now_ms() + 90_000).to_string();
        let r = run_bytes(
            &mut c,
            &[
                b"EVAL",
                PERMIT_UPDATE_LEASE.as_bytes(),
                b"3",
                b"s",
                z.as_bytes(),
                ch.as_bytes(),
                &raw(&ids[1]),
                later.as_bytes(),
                now.as_bytes(),
                b"publish",
            ],
        );
        assert_eq!(r, Value::Int(1), "{flavor}");
        assert_eq!(
            run(&mut c, &["RSEM.RETURN", "s", &ids[1].to_uppercase()]),
            Value::Int(1)
        );
        assert_stored_permits(&mut c, "s", 4, format_args!("{flavor}"));
        assert_int(&mut c, &["EXISTS", &z], 0);
        // Each give-back published the new total, as Redisson's release does.
        let heard: Vec<String> = sub
            .drain()
            .into_iter()
            .map(|(_, m)| String::from_utf8_lossy(&m).into_owned())
            .collect();
        assert_eq!(heard, ["4", "3", "3", "4"], "{flavor}");
        let stats = rstats(&server);
        assert_eq!(stats["permit_leases"], 2, "{flavor}");
        assert_eq!(stats["permit_returns"], 2, "{flavor}");
    }
}

#[test]
fn an_ended_lease_comes_back_by_timer_and_serves_a_waiter_at_once() {
    for (flavor, server, mut c) in servers() {
        let mut sub = Subscriber::new(&server, &[&channel("s")]);
        run(&mut c, &["RSEM.TRYSETPERMITS", "s", "1"]);
        assert_eq!(sub.drain().len(), 1, "{flavor}: the permits set");
        // Nobody waits and nobody calls: the permit still comes back at its deadline.
        let id = ids_of(&run(&mut c, &["RSEM.LEASE", "s", "LEASE", "150"]))[0].clone();
        let back = wait_until(Duration::from_secs(2), || {
            get(&mut server.conn(), "s").as_deref() == Some("1")
        });
        assert!(back, "{flavor}: the permit came back");
        assert_eq!(score(&mut c, "s", &raw(&id)), None, "{flavor}");
        let heard: Vec<Vec<u8>> = sub.drain().into_iter().map(|(_, m)| m).collect();
        assert_eq!(
            heard,
            [b"1".to_vec()],
            "{flavor}: the new total, as Redisson's reclaim"
        );
        assert_int(&mut c, &["RSEM.RETURN", "s", &id], 0);
        // A waiter is served the moment a lease ends: the module's, or Redisson's.
        let mut late_ms = Vec::new();
        for round in 0..6 {
            let lease_ms = 200;
            let deadline = if round % 2 == 0 {
                run(&mut c, &["RSEM.LEASE", "s", "LEASE", &lease_ms.to_string()]);
                Instant::now() + Duration::from_millis(lease_ms)
            } else {
                let r = redisson_lease(&mut c, "s", &[round as u8; 16], now_ms() + lease_ms as i64);
                assert_eq!(r, Value::BulkString(b"OK".to_vec()), "{flavor}");
                Instant::now() + Duration::from_millis(lease_ms)
            };
            let mut waiter = Pending::new(&server);
            waiter.send(&["RSEM.LEASE", "s", "LEASE", "30000", "BLOCK", "5000"]);
            let reply = waiter.reply();
            let late = Instant::now().saturating_duration_since(deadline);
            assert_eq!(
                ids_of(&reply.expect("reply")).len(),
                1,
                "{flavor}: round {round}"
            );
            late_ms.push(late.as_secs_f64() * 1000.0);
            run(&mut c, &["DEL", "s", &zset("s")]);
            run(&mut c, &["RSEM.TRYSETPERMITS", "s", "1"]);
        }
        // Served by the lease's end, not the wait's (5 s): within ms as a rule (the
        // median), and never long after on a loaded machine.
        let median = quantile(&mut late_ms, 0.5);
        let worst = late_ms[late_ms.len() - 1];
        assert!(
            median < 50.0 && worst < 1000.0,
            "{flavor}: waiters served {median:.1} ms (median), {worst:.1} ms (worst) after the deadline"
        );
        assert_counted(&server, &[("permit_reclaims", 4)]);
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
    }
}

#[test]
fn a_session_lease_comes_back_when_its_connection_closes() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RSEM.TRYSETPERMITS", "s", "2"]);
        let mut holder = Pending::new(&server);
        holder.send(&words("RSEM.LEASE s LEASE 600000 PERMITS 2 SESSION"));
        let ids = ids_of(&holder.reply().expect("lease"));
        // A plain lease on another connection does not go with it.
        run(&mut c, &["RSEM.ADDPERMITS", "s", "1"]);
        let kept = ids_of(&run(&mut c, &["RSEM.LEASE", "s", "LEASE", "600000"]));
        let mut waiter = Pending::blocked(
            &server,
            &words("RSEM.LEASE s LEASE 600000 PERMITS 2 BLOCK 5000"),
            1,
        );
        run(&mut c, &["CLIENT", "KILL", "ID", &holder.id.to_string()]);
        let served = ids_of(&waiter.reply().expect("served"));
        assert_eq!(served.len(), 2, "{flavor}");
        for id in &ids {
            assert_eq!(score(&mut c, "s", &raw(id)), None, "{flavor}: returned");
        }
        assert!(score(&mut c, "s", &raw(&kept[0])).is_some(), "{flavor}");
        assert_eq!(rstat(&server, "permit_returns"), 2, "{flavor}");
        // A SESSION lease returned by hand is not returned twice.
        let mut other = Pending::new(&server);
        run(&mut c, &["RSEM.RETURN", "s", &kept[0]]);
        other.send(&["RSEM.LEASE", "s", "LEASE", "600000", "SESSION"]);
        let id = ids_of(&other.reply().expect("lease"))[0].clone();
        other.send(&["RSEM.RETURN", "s", &id]);
        assert_eq!(other.reply(), Ok(Value::Int(1)));
        run(&mut c, &["CLIENT", "KILL", "ID", &other.id.to_string()]);
        std::thread::sleep(Duration::from_millis(100));
        assert_stored_permits(&mut c, "s", 1, format_args!("{flavor}"));
        // SESSION would outlive a script's caller.
        let script = "return redis.call('RSEM.LEASE', KEYS[1], 'LEASE', '10', 'SESSION')";
        let refused = ["EVAL", script, "1", "s"];
        assert_refused_with(&mut c, &refused, "ERR SESSION cannot be used", flavor);
    }
}

#[test]
fn blocked_leases_are_served_in_arrival_order_with_acquires() {
    for (flavor, server, mut c) in servers() {
        let mut big = waiter_on_empty(&server, "RSEM.LEASE s LEASE 60000 PERMITS 3 BLOCK 5000");
        let mut small = Pending::blocked(&server, &["RSEM.ACQUIRE", "s", "BLOCK", "5000"], 2);
        // Two permits: the head wants three, and the one behind it waits too.
        run(&mut c, &["RSEM.RELEASE", "s", "PERMITS", "2"]);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(rstat(&server, "blocked"), 2, "{flavor}");
        run(&mut c, &["RSEM.RELEASE", "s", "PERMITS", "2"]);
        assert_eq!(ids_of(&big.reply().expect("big")).len(), 3, "{flavor}");
        assert_eq!(small.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_stored_permits(&mut c, "s", 0, format_args!("{flavor}"));
        // Inside MULTI a lease cannot wait: null at once.
        let r = redis::pipe()
            .atomic()
            .cmd("RSEM.LEASE")
            .arg(&["s", "LEASE", "100", "BLOCK", "0"])
            .query::<Vec<Value>>(&mut c)
            .expect("MULTI");
        assert_eq!(r, vec![Value::Nil], "{flavor}");
        // In a script, a lease that is there is taken.
        run(&mut c, &["RSEM.ADDPERMITS", "s", "1"]);
        let r = run(
            &mut c,
            &[
                "EVAL",
                "return redis.call('RSEM.LEASE', KEYS[1], 'LEASE', '100')",
                "1",
                "s",
            ],
        );
        assert_eq!(ids_of(&r).len(), 1, "{flavor}");
    }
}

#[test]
fn retried_leases_and_returns_with_req_are_applied_once() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RSEM.TRYSETPERMITS", "s", "3"]);
        let lease = words("RSEM.LEASE s LEASE 60000 PERMITS 2 REQ l1");
        let first = ids_of(&run(&mut c, &lease));
        let mut other = server.conn();
        assert_eq!(
            ids_of(&run(&mut other, &lease)),
            first,
            "{flavor}: same ids"
        );
        assert_stored_permits(&mut c, "s", 1, format_args!("{flavor}: taken once"));
        let give = ["RSEM.RETURN", "s", &first[0], "REQ", "t1"];
        assert_eq!(run(&mut c, &give), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &give), Value::Int(1), "{flavor}: replayed");
        assert_stored_permits(&mut c, "s", 2, format_args!("{flavor}: given once"));
        let r = call(&mut c, &["RSEM.LEASE", "s", "LEASE", "10", "REQ", "t1"]);
        assert!(
            matches!(&r, Err(e) if e.contains("REQ id already used")),
            "{r:?}"
        );
        // A blocked lease sent twice is granted once, with the same ids.
        run(&mut c, &["RSEM.ACQUIRE", "s", "PERMITS", "2"]);
        let blocked = words("RSEM.LEASE s LEASE 60000 BLOCK 5000 REQ b1");
        let mut one = Pending::blocked(&server, &blocked, 1);
        let mut two = Pending::blocked(&server, &blocked, 2);
        run(&mut c, &["RSEM.RELEASE", "s"]);
        let (a, b) = (one.reply().expect("one"), two.reply().expect("two"));
        assert_eq!(ids_of(&a), ids_of(&b), "{flavor}");
        assert_stored_permits(&mut c, "s", 0, format_args!("{flavor}"));
        assert_int(&mut c, &["ZCARD", &zset("s")], 2);
    }
}

#[test]
fn bad_lease_calls_change_nothing() {
    for (flavor, _server, mut c) in servers() {
        run(&mut c, &["RSEM.TRYSETPERMITS", "s", "2"]);
        let id = ids_of(&run(&mut c, &["RSEM.LEASE", "s", "LEASE", "60000"]))[0].clone();
        run(&mut c, &["SET", "{w}:timeout", "not a zset"]);
        run(&mut c, &["SET", "w", "3"]);
        let before = keyspace(&mut c);
        let cases: &[(&[&str], &str)] = &[
            (&["RSEM.LEASE", "s"], "ERR wrong number of arguments"),
            (
                &["RSEM.LEASE", "s", "PERMITS", "1"],
                "ERR LEASE ms is required",
            ),
            (&["RSEM.LEASE", "s", "LEASE", "0"], "ERR LEASE must be"),
            (
                &["RSEM.LEASE", "s", "LEASE", "10", "PERMITS", "1025"],
                "ERR PERMITS must be an integer from 1 to 1024",
            ),
            (
                &["RSEM.LEASE", "s", "LEASE", "10", "SESSION", "SESSION"],
                "ERR option SESSION given more than once",
            ),
            (
                &["RSEM.LEASE", "s", "LEASE", "10", "FAIR"],
                "ERR unknown option",
            ),
            (&["RSEM.LEASE", "w", "LEASE", "10"], "WRONGTYPE"),
            (
                &["RSEM.RETURN", "s", "xyz"],
                "ERR permit id must be 32 hex characters",
            ),
            (
                &["RSEM.RETURN", "s", &id, "LEASE", "5"],
                "ERR unknown option",
            ),
            (&["RSEM.RETURN", "w", &id], "WRONGTYPE"),
            (
                &["RSEM.RENEW", "s", &id, "LEASE", "-1"],
                "ERR LEASE must be",
            ),
            (
                &["RSEM.RENEW", "s", &id, "BLOCK", "5"],
                "ERR unknown option",
            ),
            (
                &words("RSEM.RENEW s gggggggggggggggggggggggggggggggg LEASE 5"),
                "ERR permit id must be",
            ),
            (&["RSEM.AVAILABLE", "w"], "WRONGTYPE"),
        ];
        assert_each_refused(flavor, &mut c, cases);
        assert_eq!(keyspace(&mut c), before, "{flavor}: nothing changed");
        assert_eq!(
            run(&mut c, &["RSEM.RENEW", "s", &"0".repeat(32), "LEASE", "5"]),
            Value::Int(0)
        );
        // Renewing on a semaphore without leases leaves no empty zset behind (one broke
        // DEBUG DIGEST on Redis 7.0: found by the fuzzer).
        let renew = ["RSEM.RENEW", "none", &"0".repeat(32), "LEASE", "5"];
        assert_eq!(run(&mut c, &renew), Value::Int(0), "{flavor}");
        assert_int(&mut c, &["EXISTS", &zset("none")], 0);
    }
}

#[test]
fn a_replica_without_the_module_ends_identical_after_leases() {
    for (flavor, primary, replica, mut c) in primaries_and_bare_replicas() {
        set_up(&mut c, &["RSEM.TRYSETPERMITS s 5", "PEXPIRE s 600000"]);
        let ids = ids_of(&run(
            &mut c,
            &["RSEM.LEASE", "s", "LEASE", "60000", "PERMITS", "3"],
        ));
        run(&mut c, &["RSEM.RETURN", "s", &ids[0]]);
        run(&mut c, &["RSEM.RENEW", "s", &ids[1], "LEASE", "90000"]);
        run(&mut c, &["RSEM.LEASE", "s", "LEASE", "100"]);
        let mut holder = Pending::new(&primary);
        holder.send(&["RSEM.LEASE", "s", "LEASE", "600000", "SESSION"]);
        holder.reply().expect("lease");
        run(&mut c, &["CLIENT", "KILL", "ID", &holder.id.to_string()]);
        // The 100 ms lease ends by timer, the session's comes back: both replicated.
        let settled = wait_until(Duration::from_secs(3), || {
            run(&mut primary.conn(), &["ZCARD", &zset("s")]) == Value::Int(2)
        });
        assert!(settled, "{flavor}");
        sync_replica(&primary, &replica);
        let mut r = replica.conn();
        assert_eq!(keyspace(&mut c), keyspace(&mut r), "{flavor}");
        assert_stored_permits(&mut r, "s", 3, format_args!("{flavor}"));
        assert!(
            pttl(&mut r, zset("s").as_bytes()) > 0,
            "{flavor}: the zset has K's TTL"
        );
    }
}

#[test]
fn a_replayed_lease_must_still_be_leased() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RSEM.TRYSETPERMITS", "s", "1"]);
        let lease = ["RSEM.LEASE", "s", "LEASE", "60000", "SESSION", "REQ", "r1"];
        let mut first = Pending::new(&server);
        first.send(&lease);
        let x = ids_of(&first.reply().expect("lease"));
        // Its connection closes: the permit comes back, and someone else takes it.
        run(&mut c, &["CLIENT", "KILL", "ID", &first.id.to_string()]);
        let back = wait_until(Duration::from_secs(2), || {
            get(&mut server.conn(), "s").as_deref() == Some("1")
        });
        assert!(back, "{flavor}");
        let y = ids_of(&run(&mut c, &["RSEM.LEASE", "s", "LEASE", "60000"]));
        assert_ne!(x, y);
        // The retry is a new call now: no permit left, and never the old id.
        assert_eq!(run(&mut server.conn(), &lease), Value::Nil, "{flavor}");
        // Still leased: replayed, and a SESSION replay ties it to the new connection.
        run(&mut c, &["RSEM.RETURN", "s", &y[0]]);
        let mut second = Pending::new(&server);
        second.send(&["RSEM.LEASE", "s", "LEASE", "60000", "SESSION", "REQ", "r2"]);
        let z = ids_of(&second.reply().expect("lease"));
        let mut third = Pending::new(&server);
        third.send(&["RSEM.LEASE", "s", "LEASE", "60000", "SESSION", "REQ", "r2"]);
        assert_eq!(ids_of(&third.reply().expect("replay")), z, "{flavor}");
        run(&mut c, &["CLIENT", "KILL", "ID", &second.id.to_string()]);
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            score(&mut c, "s", &raw(&z[0])).is_some(),
            "{flavor}: kept by the retry"
        );
        run(&mut c, &["CLIENT", "KILL", "ID", &third.id.to_string()]);
        let back = wait_until(Duration::from_secs(2), || {
            get(&mut server.conn(), "s").as_deref() == Some("1")
        });
        assert!(back, "{flavor}: back with the retry's connection");
    }
}

#[test]
fn a_request_granted_while_it_waited_is_not_granted_again() {
    for (flavor, server, mut c) in servers() {
        let mut blocked = waiter_on_empty(&server, "RSEM.LEASE s LEASE 60000 BLOCK 0 REQ r2");
        // Permits appear and the same request arrives before the module's poll: one grant.
        let replies = redis::pipe()
            .atomic()
            .cmd("INCRBY")
            .arg(&["s", "2"])
            .cmd("RSEM.LEASE")
            .arg(&["s", "LEASE", "60000", "REQ", "r2"])
            .query::<Vec<Value>>(&mut c)
            .expect("MULTI");
        let waited = ids_of(&blocked.reply().expect("served"));
        assert_eq!(ids_of(&replies[1]), waited, "{flavor}");
        assert_int(&mut c, &["ZCARD", &zset("s")], 1);
        assert_stored_permits(&mut c, "s", 1, format_args!("{flavor}"));
    }
}

#[test]
fn a_score_below_zero_is_nobodys_deadline() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RSEM.TRYSETPERMITS", "s", "2"]);
        run(&mut c, &["ZADD", &zset("s"), "-5", "aaaaaaaaaaaaaaaa"]);
        run(&mut c, &["RSEM.LEASE", "s", "LEASE", "60000"]);
        let cpu = |server: &Server| -> f64 {
            let info = server.info("cpu");
            info["used_cpu_user"].parse::<f64>().unwrap()
                + info["used_cpu_sys"].parse::<f64>().unwrap()
        };
        let before = cpu(&server);
        std::thread::sleep(Duration::from_millis(1000));
        let spent = cpu(&server) - before;
        assert!(
            spent < 0.3,
            "{flavor}: the idle server spent {spent} s of CPU in 1 s"
        );
        // As Redisson does, nobody takes it back.
        assert_int(&mut c, &["ZCARD", &zset("s")], 2);
    }
}

#[test]
fn an_acquire_and_a_lease_on_one_request_id_do_not_answer_each_other() {
    for (flavor, server, mut c) in servers() {
        let mut acquire = waiter_on_empty(&server, "RSEM.ACQUIRE s BLOCK 5000 REQ same");
        let mut lease = Pending::blocked(
            &server,
            &words("RSEM.LEASE s LEASE 60000 BLOCK 5000 REQ same"),
            2,
        );
        run(&mut c, &["RSEM.RELEASE", "s"]);
        assert_eq!(acquire.reply(), Ok(Value::Int(1)), "{flavor}");
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            rstat(&server, "blocked"),
            1,
            "{flavor}: the lease still waits"
        );
        run(&mut c, &["RSEM.RELEASE", "s"]);
        assert_eq!(ids_of(&lease.reply().expect("lease")).len(), 1, "{flavor}");
    }
}

#[test]
fn leases_moved_by_swapdb_still_end_by_timer() {
    for (flavor, server, mut c) in servers() {
        set_up(
            &mut c,
            &[
                "RSEM.TRYSETPERMITS s 1",
                "RSEM.LEASE s LEASE 300",
                "SWAPDB 0 1",
                "SELECT 1",
            ],
        );
        let back = wait_until(Duration::from_secs(2), || {
            let mut probe = server.conn();
            run(&mut probe, &["SELECT", "1"]);
            get(&mut probe, "s").as_deref() == Some("1")
        });
        assert!(back, "{flavor}: the lease in database 1 came back");
        assert_int(&mut c, &["EXISTS", &zset("s")], 0);
    }
}
