//! RLOCK.ACQUIRE ... SESSION: the hold ends, every re-entry included, when the
//! connection that took it closes (FIN, CLIENT KILL, idle `timeout`).

mod common;

use std::time::{Duration, Instant};

use common::*;
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

/// How soon after the close the next waiter must hold the lock.
const SESSION_HANDOFF_MS: f64 = 10.0;
/// The most any one hand-off after a close may take, on a loaded machine.
const SESSION_HANDOFF_MAX_MS: f64 = 1000.0;

fn run(con: &mut redis::Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

/// Takes `key` with SESSION on a new connection, re-enters it (with and without
/// SESSION), queues a waiter, closes the holder's connection with `close`, and
/// returns how many ms after the close the waiter had the lock.
fn session_close_handoff(
    server: &Server,
    key: &str,
    close: &mut dyn FnMut(Pending, &mut redis::Connection) -> Option<f64>,
) -> f64 {
    let flavor = server.flavor;
    let mut c = server.conn();
    let mut holder = Pending::new(server);
    let lease = ["LEASE", "60000"];
    let mut args = vec!["RLOCK.ACQUIRE", key, "sess", "SESSION"];
    args.extend(lease);
    assert_eq!(call(&mut holder.con, &args), Ok(Value::Int(1)), "{flavor}");
    assert_eq!(call(&mut holder.con, &args), Ok(Value::Int(2)), "{flavor}");
    assert_eq!(
        call(
            &mut holder.con,
            &["RLOCK.ACQUIRE", key, "sess", "LEASE", "60000"]
        ),
        Ok(Value::Int(3)),
        "{flavor}: re-entry without SESSION"
    );
    let releases = rstat(server, "session_releases");
    let w = Pending::new(server).spawn(&[
        "RLOCK.ACQUIRE",
        key,
        "next",
        "BLOCK",
        "10000",
        "LEASE",
        "20000",
    ]);
    wait_blocked(flavor, &mut c, key, 1);
    let mut other = server.conn();
    let start = unix_ms_f64();
    // `close` reports when the close happened if the server chose the moment.
    let closed_at = close(holder, &mut other).unwrap_or(start);
    let got = w.join();
    assert_eq!(
        got.reply,
        Ok(Value::Int(1)),
        "{flavor}: the waiter after the session closed"
    );
    // A fresh connection: with an idle `timeout` the first may have been closed.
    let mut c = server.conn();
    assert_eq!(holders(&mut c, key), held_by("next", 1), "{flavor}");
    let pt = pttl(&mut c, key.as_bytes());
    assert!((19_000..=20_000).contains(&pt), "{flavor}: pttl {pt}");
    assert_eq!(
        rstat(server, "session_releases") - releases,
        1,
        "{flavor}: INFO rlock session_releases"
    );
    let mut con = got.con;
    assert_int(&mut con.con, &["RLOCK.RELEASE", key, "next"], 1);
    got.unix_ms - closed_at
}

/// Twenty rounds of [`session_close_handoff`] on keys `{prefix}0` to `{prefix}19`.
fn session_close_handoffs(
    server: &Server,
    prefix: &str,
    close: &mut dyn FnMut(Pending, &mut redis::Connection) -> Option<f64>,
) -> Vec<f64> {
    (0..20)
        .map(|i| session_close_handoff(server, &format!("{prefix}{i}"), close))
        .collect()
}

fn check_latencies(flavor: Flavor, how: &str, mut late: Vec<f64>) {
    let p50 = quantile(&mut late, 0.5);
    let p90 = quantile(&mut late, 0.9);
    let max = late[late.len() - 1];
    eprintln!("{flavor}: {how}: next waiter served p50 {p50:.1} p90 {p90:.1} max {max:.1} ms after the close");
    // The hold's lease is 60 s: a waiter served at all within its 10 s wait was served by
    // the close. How soon is the figure; the median holds it, not a tail a loaded
    // machine stretches.
    assert!(
        p50 <= SESSION_HANDOFF_MS && max <= SESSION_HANDOFF_MAX_MS,
        "{flavor}: {how}: the next waiter was served {p50:.1} ms (p50; p90 {p90:.1}, \
         max {max:.1}) after the SESSION connection closed; must be <= {SESSION_HANDOFF_MS} ms \
         (p50) and {SESSION_HANDOFF_MAX_MS} ms (max)"
    );
}

#[test]
fn closing_the_connection_releases_every_reentry_and_serves_the_next() {
    for (flavor, server) in each_server() {
        let late = session_close_handoffs(&server, "fin", &mut |holder, _| {
            drop(holder);
            None
        });
        check_latencies(flavor, "connection closed", late);
    }
}

#[test]
fn client_kill_releases_the_session_hold() {
    for (flavor, server) in each_server() {
        let late = session_close_handoffs(&server, "kill", &mut |holder, other| {
            let r = call(other, &["CLIENT", "KILL", "ID", &holder.id.to_string()]);
            assert_eq!(r, Ok(Value::Int(1)), "{flavor}: CLIENT KILL");
            None
        });
        check_latencies(flavor, "CLIENT KILL", late);
    }
}

#[test]
fn idle_timeout_releases_the_session_hold() {
    for flavor in flavors() {
        let server = Server::builder(flavor).config("timeout", "1").start();
        let mut late = Vec::new();
        for i in 0..2 {
            late.push(session_close_handoff(
                &server,
                &format!("idle{i}"),
                &mut |mut holder, _| {
                    // The server closes the idle holder: see when its socket ends.
                    let start = Instant::now();
                    let r = holder.recv();
                    assert!(r.is_err(), "{flavor}: idle holder got {r:?}");
                    let at = unix_ms_f64();
                    assert!(
                        start.elapsed() < Duration::from_secs(5),
                        "{flavor}: the idle connection was closed after {:?}",
                        start.elapsed()
                    );
                    Some(at)
                },
            ));
        }
        eprintln!("{flavor}: idle timeout: next waiter served {late:?} ms after the close");
        for l in late {
            assert!(
                l <= SESSION_HANDOFF_MAX_MS,
                "{flavor}: idle timeout: the next waiter was served {l:.1} ms after the close"
            );
        }
    }
}

#[test]
fn session_hold_granted_by_hand_off_ends_with_its_connection() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["SELECT", "2"]);
        run(&mut c, &["RLOCK.ACQUIRE", "h", "first", "LEASE", "60000"]);
        let mut w1 = Pending::new(&server);
        run(&mut w1.con, &["SELECT", "2"]);
        w1.send(&[
            "RLOCK.ACQUIRE",
            "h",
            "w1",
            "BLOCK",
            "0",
            "SESSION",
            "LEASE",
            "60000",
        ]);
        wait_blocked(flavor, &mut c, "h", 1);
        let mut w2 = Pending::new(&server);
        run(&mut w2.con, &["SELECT", "2"]);
        let w2 = w2.spawn(&["RLOCK.ACQUIRE", "h", "w2", "BLOCK", "10000"]);
        wait_blocked(flavor, &mut c, "h", 2);
        assert_int(&mut c, &["RLOCK.RELEASE", "h", "first"], 1);
        assert_eq!(w1.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_eq!(holders(&mut c, "h"), held_by("w1", 1), "{flavor}");
        let releases = rstat(&server, "session_releases");
        drop(w1);
        assert_eq!(w2.join().reply, Ok(Value::Int(1)), "{flavor}");
        assert_eq!(holders(&mut c, "h"), held_by("w2", 1), "{flavor}");
        assert_eq!(rstat(&server, "session_releases") - releases, 1, "{flavor}");
    }
}

#[test]
fn one_connection_many_session_holds_all_end() {
    for (flavor, server, mut c) in servers() {
        let mut s = server.conn();
        for key in ["a1", "a2", "a3"] {
            run(&mut s, &["RLOCK.ACQUIRE", key, "o", "SESSION"]);
        }
        run(&mut s, &["RLOCK.ACQUIRE", "kept", "o"]);
        assert_eq!(rstat(&server, "tracked_locks"), 3, "{flavor}");
        let releases = rstat(&server, "session_releases");
        drop(s);
        let ok = wait_until(Duration::from_secs(5), || {
            rstat(&server, "session_releases") - releases == 3
        });
        assert!(ok, "{flavor}: session_releases did not grow by 3");
        for key in ["a1", "a2", "a3"] {
            assert!(holders(&mut c, key).is_empty(), "{flavor}: {key}");
        }
        // Without SESSION, a hold outlives its connection (the lease still applies).
        assert_eq!(holders(&mut c, "kept"), held_by("o", 1), "{flavor}");
        assert_eq!(rstat(&server, "tracked_locks"), 0, "{flavor}");
    }
}

/// A session hold that ended some other way is not released again on close,
/// whoever holds the key by then.
#[test]
fn closing_after_the_hold_ended_releases_nothing() {
    for (flavor, server, mut c) in servers() {
        let cases: [(&str, &[&str]); 4] = [
            ("released", &["RLOCK.RELEASE", "k0", "o"]),
            ("deleted", &["DEL", "k1"]),
            ("force-released", &["RLOCK.FORCERELEASE", "k2"]),
            ("expired", &["PEXPIRE", "k3", "1"]),
        ];
        let mut s = server.conn();
        for (i, (_, end)) in cases.iter().enumerate() {
            let key = format!("k{i}");
            run(&mut s, &["RLOCK.ACQUIRE", &key, "o", "SESSION"]);
            run(&mut c, end);
        }
        // Let the 1 ms lease run out, and make Redis see it.
        assert!(wait_until(Duration::from_secs(2), || pttl(&mut c, b"k3") == -2));
        // The same owner takes them again on another connection, without SESSION.
        let mut t = server.conn();
        for i in 0..cases.len() {
            run(&mut t, &["RLOCK.ACQUIRE", &format!("k{i}"), "o"]);
        }
        let releases = rstat(&server, "session_releases");
        let sid = match run(&mut s, &["CLIENT", "ID"]) {
            Value::Int(id) => id,
            other => panic!("CLIENT ID: {other:?}"),
        };
        drop(s);
        let gone = wait_until(Duration::from_secs(5), || {
            let list = run(&mut c, &["CLIENT", "LIST", "ID", &sid.to_string()]);
            !matches!(list, Value::BulkString(b) if !b.is_empty())
        });
        assert!(gone, "{flavor}: the closed connection is still listed");
        // Absence of a release: give the deferred work (a 0 ms timer) ample time.
        for _ in 0..2 {
            std::thread::sleep(Duration::from_millis(50));
            for (i, (how, _)) in cases.iter().enumerate() {
                assert_eq!(
                    holders(&mut c, &format!("k{i}")),
                    held_by("o", 1),
                    "{flavor}: session hold {how}, then re-taken without SESSION, \
                     was released when the first connection closed"
                );
            }
        }
        assert_eq!(rstat(&server, "session_releases"), releases, "{flavor}");
    }
}

/// SESSION inside MULTI and inside a script ties the hold to the calling connection.
#[test]
fn session_from_multi_and_script_ends_with_the_caller() {
    for (flavor, server, mut c) in servers() {
        let mut s = server.conn();
        let r: Value = redis::pipe()
            .atomic()
            .cmd("RLOCK.ACQUIRE")
            .arg("tx")
            .arg("o")
            .arg("SESSION")
            .query(&mut s)
            .expect("MULTI");
        assert_eq!(r, Value::Array(vec![Value::Int(1)]), "{flavor}");
        // In a script the module may refuse SESSION; if it accepts it, the hold
        // must end with the connection that ran the script.
        let eval = "return redis.call('RLOCK.ACQUIRE', KEYS[1], ARGV[1], 'SESSION')";
        let lib = "#!lua name=rlocksession\n\
            redis.register_function('acq', function(keys, args) \
            return redis.call('RLOCK.ACQUIRE', keys[1], args[1], 'SESSION') end)";
        assert!(call(&mut c, &["FUNCTION", "LOAD", lib]).is_ok(), "{flavor}");
        let mut keys = vec!["tx"];
        for (key, r) in [
            ("lua", call(&mut s, &["EVAL", eval, "1", "lua", "o"])),
            (
                "function",
                call(&mut s, &["FCALL", "acq", "1", "function", "o"]),
            ),
        ] {
            match r {
                Ok(Value::Int(1)) => keys.push(key),
                Err(e) => assert!(
                    holders(&mut c, key).is_empty(),
                    "{flavor}: SESSION in {key} refused ({e}) yet the lock is held"
                ),
                other => panic!("{flavor}: SESSION in {key} replied {other:?}"),
            }
        }
        drop(s);
        let mut outlived = Vec::new();
        for key in keys {
            let mut now = holders(&mut c, key);
            let ok = wait_until(Duration::from_secs(2), || {
                now = holders(&mut c, key);
                now.is_empty()
            });
            if !ok {
                outlived.push(format!("{key}: {now:?}"));
            }
        }
        assert!(
            outlived.is_empty(),
            "{flavor}: SESSION holds outlived the connection that took them: {outlived:?}"
        );
    }
}

fn used_memory(server: &Server) -> i64 {
    server.info("memory")["used_memory"]
        .parse()
        .expect("used_memory")
}

/// The bookkeeping of SESSION holds goes when they end: after 150,000 holds,
/// released one by one or by closing their connection, memory is back where it was.
#[test]
fn session_bookkeeping_returns_its_memory() {
    const HOLDS: usize = 150_000;
    for (flavor, server, mut c) in servers() {
        let mut holder = server.conn();
        // Let the fresh connections' buffers settle before the baseline.
        std::thread::sleep(Duration::from_millis(300));
        let before = used_memory(&server);
        for (round, release) in [(0, true), (1, false)] {
            for chunk in (0..HOLDS / 2).collect::<Vec<_>>().chunks(5_000) {
                let mut p = redis::pipe();
                for i in chunk {
                    p.cmd("RLOCK.ACQUIRE")
                        .arg(format!("s{round}:{i}"))
                        .arg("owner")
                        .arg("SESSION")
                        .arg("LEASE")
                        .arg(600_000);
                }
                let _: Vec<i64> = p.query(&mut holder).expect("SESSION acquires");
            }
            if release {
                for chunk in (0..HOLDS / 2).collect::<Vec<_>>().chunks(5_000) {
                    let mut p = redis::pipe();
                    for i in chunk {
                        p.cmd("RLOCK.RELEASE")
                            .arg(format!("s{round}:{i}"))
                            .arg("owner");
                    }
                    let _: Vec<i64> = p.query(&mut holder).expect("releases");
                }
            }
        }
        drop(holder);
        let emptied = wait_until(Duration::from_secs(20), || {
            rstat(&server, "tracked_locks") == 0
                && redis::cmd("DBSIZE").query::<i64>(&mut c).unwrap_or(-1) == 0
        });
        assert!(emptied, "{flavor}: the holds never all ended");
        std::thread::sleep(Duration::from_millis(300));
        let after = used_memory(&server);
        let kept = after - before;
        eprintln!("{flavor}: {HOLDS} SESSION holds later, {kept} bytes more allocated");
        assert!(
            kept < 1_000_000,
            "{flavor}: {kept} bytes still allocated after {HOLDS} SESSION holds ended"
        );
    }
}
