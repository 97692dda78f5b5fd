//! What blocked calls cost, as `INFO rlock`, `# rlock_latency`, `RLOCK.TOP` and
//! `RLOCK.RESETSTAT` show it, on every server.

mod common;

use std::collections::HashMap;
use std::thread::sleep;
use std::time::Duration;

use common::*;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

/// The wait each test imposes on a blocked call.
const WAIT: Duration = Duration::from_millis(200);
/// A generous band around it, in microseconds: these machines are shared.
const BAND: std::ops::RangeInclusive<f64> = 150_000.0..=1_500_000.0;

/// `INFO rlock`'s `# rlock_latency` as field (without `rlock_`) -> its `k=v` pairs.
fn latency(server: &Server) -> HashMap<String, HashMap<String, String>> {
    server
        .info("rlock")
        .into_iter()
        .filter_map(|(name, value)| {
            let name = name.strip_prefix("rlock_")?;
            let is_latency = ["wait_usec_", "waitstat_", "handoff_usec"]
                .iter()
                .any(|p| name.starts_with(p));
            is_latency.then(|| {
                let pairs = value
                    .trim()
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                (name.to_string(), pairs)
            })
        })
        .collect()
}

/// A percentile field: `p50=200191.000` has three decimals, as latencystats prints.
fn percentile(fields: &HashMap<String, String>, p: &str) -> f64 {
    let text = fields
        .get(p)
        .unwrap_or_else(|| panic!("no {p} in {fields:?}"));
    let (_, decimals) = text.split_once('.').expect("a decimal point");
    assert_eq!(decimals.len(), 3, "{text}: three decimals");
    text.parse().expect("a number")
}

fn ok(con: &mut Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Sends `blocked` on a connection of its own, waits until the server counts it blocked,
/// waits `WAIT`, runs `free` and returns the blocked call's reply.
fn impose_wait(server: &Server, blocked: &[&str], free: &[&[&str]]) -> Value {
    let before = rstat(server, "blocked");
    let waiting = Pending::new(server).spawn(blocked);
    wait_total_blocked(server, before + 1);
    sleep(WAIT);
    let mut con = server.conn();
    for args in free {
        ok(&mut con, args);
    }
    let replied = waiting.join();
    replied
        .reply
        .unwrap_or_else(|e| panic!("{}: {blocked:?}: {e}", server.flavor))
}

#[test]
fn every_family_gets_its_percentiles() {
    for (flavor, server, mut c) in servers() {
        assert!(
            latency(&server).is_empty(),
            "{flavor}: nothing before a wait"
        );
        // A call granted at once is not a wait.
        ok(&mut c, &["RLOCK.ACQUIRE", "free", "a", "BLOCK", "1000"]);
        assert!(latency(&server).is_empty(), "{flavor}: no wait recorded");

        ok(&mut c, &["RLOCK.ACQUIRE", "lock", "a"]);
        impose_wait(
            &server,
            &["RLOCK.ACQUIRE", "lock", "b", "BLOCK", "10000"],
            &[&["RLOCK.RELEASE", "lock", "a"]],
        );
        ok(&mut c, &["RLOCK.ACQUIRE", "fair", "a", "FAIR"]);
        impose_wait(
            &server,
            &["RLOCK.ACQUIRE", "fair", "b", "FAIR", "BLOCK", "10000"],
            &[&["RLOCK.RELEASE", "fair", "a"]],
        );
        ok(&mut c, &["RLOCK.ACQUIRE", "rw", "w", "WRITE"]);
        impose_wait(
            &server,
            &["RLOCK.ACQUIRE", "rw", "r", "READ", "BLOCK", "10000"],
            &[&["RLOCK.RELEASE", "rw", "w", "WRITE"]],
        );
        impose_wait(
            &server,
            &["RLOCK.ACQUIRE", "rw", "w2", "WRITE", "BLOCK", "10000"],
            &[&["RLOCK.RELEASE", "rw", "r", "READ"]],
        );
        ok(&mut c, &["RLOCK.ACQUIRE", "{m}1", "a"]);
        impose_wait(
            &server,
            &["RLOCK.MACQUIRE", "b", "2", "{m}1", "{m}2", "BLOCK", "10000"],
            &[&["RLOCK.RELEASE", "{m}1", "a"]],
        );
        ok(&mut c, &["RSEM.TRYSETPERMITS", "sem", "0"]);
        impose_wait(
            &server,
            &["RSEM.ACQUIRE", "sem", "BLOCK", "10000"],
            &[&["RSEM.RELEASE", "sem"]],
        );
        ok(&mut c, &["RSEM.TRYSETPERMITS", "leased", "0"]);
        let ids = impose_wait(
            &server,
            &["RSEM.LEASE", "leased", "LEASE", "10000", "BLOCK", "10000"],
            &[&["RSEM.RELEASE", "leased"]],
        );
        assert!(
            matches!(ids, Value::Array(ref ids) if ids.len() == 1),
            "{flavor}: {ids:?}"
        );
        ok(&mut c, &["RLATCH.TRYSETCOUNT", "latch", "1"]);
        impose_wait(
            &server,
            &["RLATCH.AWAIT", "latch", "BLOCK", "10000"],
            &[&["RLATCH.COUNTDOWN", "latch"]],
        );

        let fields = latency(&server);
        for family in [
            "lock", "fair", "read", "write", "multi", "permits", "lease", "latch",
        ] {
            let wait = fields
                .get(&format!("wait_usec_{family}"))
                .unwrap_or_else(|| panic!("{flavor}: no wait_usec_{family} in {fields:?}"));
            let p50 = percentile(wait, "p50");
            assert!(BAND.contains(&p50), "{flavor}: {family} p50 {p50}");
            assert!(percentile(wait, "p99") >= p50, "{flavor}: {family}");
            assert!(percentile(wait, "p99.9") >= percentile(wait, "p99"));
            let outcome = &fields[&format!("waitstat_{family}")];
            assert_eq!(outcome["granted"], "1", "{flavor}: {family} {outcome:?}");
            assert_eq!(outcome["timeouts"], "0", "{flavor}: {family}");
            assert_eq!(outcome["cancels"], "0", "{flavor}: {family}");
            let usec: f64 = outcome["usec"].parse().unwrap();
            assert!(BAND.contains(&usec), "{flavor}: {family} usec {usec}");
        }
        // Hand-offs in the same turn as the release: well under the wait.
        let handoff = percentile(&fields["handoff_usec"], "p50");
        assert!(handoff < 100_000.0, "{flavor}: hand-off p50 {handoff}");
    }
}

#[test]
fn a_lease_that_runs_out_is_handed_off_from_its_deadline() {
    for (flavor, server, mut c) in servers() {
        ok(&mut c, &["RLOCK.ACQUIRE", "k", "a", "LEASE", "200"]);
        let waiting = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "k", "b", "BLOCK", "10000"]);
        assert_eq!(waiting.join().reply, Ok(Value::Int(1)), "{flavor}");
        let handoff = percentile(&latency(&server)["handoff_usec"], "p50");
        // The timer runs within milliseconds of the deadline.
        assert!(handoff < 100_000.0, "{flavor}: hand-off p50 {handoff}");
    }
}

#[test]
fn timeouts_and_cancels_are_counted() {
    for (flavor, server, mut c) in servers() {
        ok(&mut c, &["RLOCK.ACQUIRE", "k", "holder"]);
        assert_eq!(
            ok(&mut c, &["RLOCK.ACQUIRE", "k", "x", "BLOCK", "50"]),
            Value::Nil
        );
        assert_eq!(rstat(&server, "wait_timeouts"), 1, "{flavor}");
        assert_eq!(rstat(&server, "wait_cancels"), 0, "{flavor}");

        // waiting_longest_ms grows while a call waits, and is 0 once none does.
        assert_eq!(rstat(&server, "waiting_longest_ms"), 0, "{flavor}");
        let killed = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "k", "y", "BLOCK", "0"]);
        wait_total_blocked(&server, 1);
        sleep(Duration::from_millis(300));
        let longest = rstat(&server, "waiting_longest_ms");
        assert!((250..5000).contains(&longest), "{flavor}: {longest}");
        ok(&mut c, &["CLIENT", "KILL", "ID", &killed.id.to_string()]);
        wait_total_blocked(&server, 0);
        assert_eq!(rstat(&server, "waiting_longest_ms"), 0, "{flavor}");
        assert_eq!(rstat(&server, "wait_cancels"), 1, "{flavor}: CLIENT KILL");
        drop(killed);

        let unblocked = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "k", "z", "BLOCK", "0"]);
        wait_total_blocked(&server, 1);
        let id = unblocked.id.to_string();
        if unblock_supported(flavor) {
            assert_eq!(ok(&mut c, &["CLIENT", "UNBLOCK", &id]), Value::Int(1));
            assert_eq!(unblocked.join().reply, Ok(Value::Nil), "{flavor}");
            assert_eq!(
                rstat(&server, "wait_cancels"),
                2,
                "{flavor}: CLIENT UNBLOCK"
            );
        } else {
            // Older servers leave rlock's waits alone (see blocking.rs).
            assert_eq!(ok(&mut c, &["CLIENT", "UNBLOCK", &id]), Value::Int(0));
            ok(&mut c, &["CLIENT", "KILL", "ID", &id]);
            wait_total_blocked(&server, 0);
            assert_eq!(rstat(&server, "wait_cancels"), 2, "{flavor}");
        }
        let outcome = &latency(&server)["waitstat_lock"];
        assert_eq!(outcome["granted"], "0", "{flavor}");
        assert_eq!(outcome["timeouts"], "1", "{flavor}");
        assert_eq!(outcome["cancels"], "2", "{flavor}");
        assert_eq!(outcome["usec"], "0", "{flavor}");
        // No call was granted after a wait: no percentiles.
        assert!(!latency(&server).contains_key("wait_usec_lock"), "{flavor}");
        assert_eq!(rstat(&server, "deadlocks"), 0, "{flavor}");
    }
}

/// `RLOCK.TOP`'s entries as field -> value, RESP2 pairs or RESP3 maps alike.
fn top(con: &mut Connection, args: &[&str], resp3: bool) -> Vec<HashMap<String, Value>> {
    let mut command = vec!["RLOCK.TOP"];
    command.extend(args);
    let Value::Array(entries) = ok(con, &command) else {
        panic!("RLOCK.TOP: not an array");
    };
    entries
        .iter()
        .map(|entry| {
            if resp3 {
                assert!(matches!(entry, Value::Map(_)), "RESP3: a map: {entry:?}");
            } else {
                assert!(matches!(entry, Value::Array(_)), "RESP2: pairs: {entry:?}");
            }
            pairs_of(entry, resp3)
                .expect("pairs")
                .into_iter()
                .map(|(k, v)| {
                    let name = text_of(&k).expect("a field name");
                    (String::from_utf8(name).expect("utf8"), v)
                })
                .collect()
        })
        .collect()
}

fn int(entry: &HashMap<String, Value>, field: &str) -> i64 {
    match entry.get(field) {
        Some(Value::Int(n)) => *n,
        other => panic!("{field}: {other:?} in {entry:?}"),
    }
}

fn text(entry: &HashMap<String, Value>, field: &str) -> String {
    let value = entry.get(field).unwrap_or_else(|| panic!("no {field}"));
    String::from_utf8(text_of(value).expect("text")).expect("utf8")
}

#[test]
fn top_shows_contention_now_and_in_the_window() {
    for (flavor, server, mut c) in servers() {
        let mut c3 = server.conn_resp3();
        assert!(top(&mut c, &[], false).is_empty(), "{flavor}: nothing yet");
        ok(&mut c, &["RLOCK.ACQUIRE", "hot", "holder"]);
        ok(&mut c, &["RLOCK.ACQUIRE", "warm", "holder", "WRITE"]);
        let hot1 = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "hot", "h1", "BLOCK", "0"]);
        let hot2 = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "hot", "h2", "BLOCK", "0"]);
        let warm =
            Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "warm", "w", "READ", "BLOCK", "0"]);
        wait_total_blocked(&server, 3);
        sleep(Duration::from_millis(100));
        for resp3 in [false, true] {
            let con = if resp3 { &mut c3 } else { &mut c };
            let now = top(con, &[], resp3);
            assert_eq!(now.len(), 2, "{flavor}: {now:?}");
            assert_eq!(text(&now[0], "key"), "hot", "{flavor}");
            assert_eq!(int(&now[0], "db"), 0);
            assert_eq!(text(&now[0], "kind"), "lock");
            assert_eq!(int(&now[0], "waiters"), 2, "{flavor}");
            assert!(int(&now[0], "longest-wait-ms") >= 90, "{flavor}: {now:?}");
            assert_eq!(int(&now[0], "waits"), 0);
            assert_eq!(int(&now[0], "timeouts"), 0);
            assert_eq!(now[0].get("wait-p99-usec"), Some(&Value::Nil), "{flavor}");
            assert_eq!(text(&now[1], "key"), "warm");
            assert_eq!(text(&now[1], "kind"), "rwlock");
            assert_eq!(int(&now[1], "waiters"), 1);
            assert_eq!(top(con, &["COUNT", "1"], resp3).len(), 1);
        }
        ok(&mut c, &["RLOCK.RELEASE", "hot", "holder"]);
        let first = hot1.join();
        assert_eq!(first.reply, Ok(Value::Int(1)), "{flavor}");
        let mut first_con = first.con.con;
        ok(&mut first_con, &["RLOCK.RELEASE", "hot", "h1"]);
        assert_eq!(hot2.join().reply, Ok(Value::Int(1)), "{flavor}");
        ok(&mut c, &["RLOCK.RELEASE", "warm", "holder", "WRITE"]);
        assert_eq!(warm.join().reply, Ok(Value::Int(1)), "{flavor}");
        // A semaphore wait that times out.
        ok(&mut c, &["RSEM.TRYSETPERMITS", "pool", "0"]);
        ok(&mut c, &["RSEM.ACQUIRE", "pool", "BLOCK", "20"]);

        // Nobody waits now: the window remembers.
        let after = top(&mut c, &[], false);
        assert_eq!(after.len(), 3, "{flavor}: {after:?}");
        let by_key: HashMap<String, &HashMap<String, Value>> =
            after.iter().map(|e| (text(e, "key"), e)).collect();
        let hot = by_key["hot"];
        assert_eq!(int(hot, "waiters"), 0);
        assert_eq!(int(hot, "longest-wait-ms"), 0);
        assert_eq!(int(hot, "waits"), 2, "{flavor}");
        let p99 = int(hot, "wait-p99-usec");
        assert!((90_000..5_000_000).contains(&p99), "{flavor}: p99 {p99}");
        assert_eq!(int(by_key["warm"], "waits"), 1);
        let pool = by_key["pool"];
        assert_eq!(text(pool, "kind"), "semaphore");
        assert_eq!((int(pool, "waits"), int(pool, "timeouts")), (0, 1));
        assert_eq!(pool.get("wait-p99-usec"), Some(&Value::Nil));
        // Most blocked time first: hot's two waits outweigh warm's one.
        assert_eq!(text(&after[0], "key"), "hot", "{flavor}");

        for bad in [
            &["COUNT", "0"][..],
            &["COUNT", "1001"],
            &["COUNT", "ten"],
            &["COUNT"],
            &["LIMIT", "1"],
            &["COUNT", "1", "COUNT", "2"],
        ] {
            let mut args = vec!["RLOCK.TOP"];
            args.extend(bad);
            assert!(call(&mut c, &args).is_err(), "{flavor}: {bad:?}");
        }
        assert_eq!(
            call(&mut c, &["RLOCK.TOP", "COUNT", "0"]),
            Err("ERR COUNT must be an integer from 1 to 1000".into())
        );
        assert_eq!(top(&mut c, &["COUNT", "1000"], false).len(), 3);
    }
}

#[test]
fn resetstat_zeroes_counters_histograms_and_history() {
    for (flavor, server, mut c) in servers() {
        ok(&mut c, &["RLOCK.ACQUIRE", "k", "a"]);
        impose_wait(
            &server,
            &["RLOCK.ACQUIRE", "k", "b", "BLOCK", "10000"],
            &[&["RLOCK.RELEASE", "k", "a"]],
        );
        assert_eq!(
            ok(&mut c, &["RLOCK.ACQUIRE", "k", "x", "BLOCK", "20"]),
            Value::Nil
        );
        assert!(rstat(&server, "acquires") > 0);
        assert!(!latency(&server).is_empty());
        assert_eq!(top(&mut c, &[], false).len(), 1);

        assert_eq!(ok(&mut c, &["RLOCK.RESETSTAT"]), Value::Okay, "{flavor}");
        for counter in [
            "acquires",
            "releases",
            "handoffs",
            "wait_timeouts",
            "wait_cancels",
        ] {
            assert_eq!(rstat(&server, counter), 0, "{flavor}: {counter}");
        }
        assert!(
            latency(&server).is_empty(),
            "{flavor}: {:?}",
            latency(&server)
        );
        assert!(top(&mut c, &[], false).is_empty(), "{flavor}");
        assert!(
            call(&mut c, &["RLOCK.RESETSTAT", "now"]).is_err(),
            "{flavor}: arity"
        );
        // The lock itself is untouched.
        assert_eq!(holders(&mut c, "k"), held_by("b", 1), "{flavor}");
    }
}

#[test]
fn the_stats_window_follows_its_config() {
    for (flavor, server, mut c) in servers() {
        let get = |c: &mut Connection| ok(c, &["CONFIG", "GET", "rlock.stats-window-ms"]);
        let pair = |v: &str| {
            Value::Array(vec![
                Value::BulkString(b"rlock.stats-window-ms".to_vec()),
                Value::BulkString(v.as_bytes().to_vec()),
            ])
        };
        assert_eq!(get(&mut c), pair("60000"), "{flavor}");
        for bad in ["999", "3600001", "soon"] {
            let set = call(&mut c, &["CONFIG", "SET", "rlock.stats-window-ms", bad]);
            assert!(set.is_err(), "{flavor}: {bad}");
        }
        ok(&mut c, &["CONFIG", "SET", "rlock.stats-window-ms", "1000"]);
        assert_eq!(get(&mut c), pair("1000"));
        ok(&mut c, &["RLOCK.ACQUIRE", "k", "a", "LEASE", "100"]);
        let waiting = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "k", "b", "BLOCK", "10000"]);
        assert_eq!(waiting.join().reply, Ok(Value::Int(1)));
        assert!(latency(&server).contains_key("wait_usec_lock"), "{flavor}");
        assert_eq!(top(&mut c, &[], false).len(), 1);
        // A 1 s window: gone a little over a second later; the totals stay.
        sleep(Duration::from_millis(1300));
        let fields = latency(&server);
        assert!(
            !fields.contains_key("wait_usec_lock"),
            "{flavor}: {fields:?}"
        );
        assert!(!fields.contains_key("handoff_usec"), "{flavor}");
        assert_eq!(fields["waitstat_lock"]["granted"], "1");
        assert!(top(&mut c, &[], false).is_empty(), "{flavor}");
    }
}

/// Where the server takes module categories: `RLOCK.TOP` is `@read` `@keyspace`, and
/// `RLOCK.RESETSTAT` `@admin` `@dangerous`; `@rlock` where the server has it.
#[test]
fn acl_categories_of_top_and_resetstat() {
    for (flavor, server) in each_server() {
        let mut admin = server.conn();
        let own = flavor == Flavor::Valkey || flavor.version() >= (7, 4, 0);
        let categories = flavor == Flavor::Valkey || flavor.version() >= (7, 2, 0);
        let rules: &[&str] = if own {
            &["~*", "-@all", "+@rlock", "-@dangerous"]
        } else if categories {
            &[
                "~*",
                "-@all",
                "+@read",
                "+@keyspace",
                "+@admin",
                "-@dangerous",
            ]
        } else {
            // Redis 7.0: module commands are in no category; named instead.
            &["~*", "-@all", "+rlock.top"]
        };
        let mut args = vec!["ACL", "SETUSER", "watcher", "on", "nopass"];
        args.extend(rules);
        assert_eq!(call(&mut admin, &args), Ok(Value::Okay), "{flavor}");
        let mut watcher = server.conn();
        ok(&mut watcher, &["AUTH", "watcher", "x"]);
        assert!(call(&mut watcher, &["RLOCK.TOP"]).is_ok(), "{flavor}");
        let reset = call(&mut watcher, &["RLOCK.RESETSTAT"]);
        assert!(
            matches!(&reset, Err(e) if e.starts_with("NOPERM")),
            "{flavor}: {reset:?}"
        );
        if categories {
            // -@read stops RLOCK.TOP; +@admin alone does not grant it.
            let args = [
                "ACL", "SETUSER", "watcher", "reset", "on", "nopass", "~*", "+@admin", "-@read",
            ];
            assert_eq!(call(&mut admin, &args), Ok(Value::Okay));
            let mut watcher = server.conn();
            ok(&mut watcher, &["AUTH", "watcher", "x"]);
            let refused = call(&mut watcher, &["RLOCK.TOP"]);
            assert!(
                matches!(&refused, Err(e) if e.starts_with("NOPERM")),
                "{flavor}: {refused:?}"
            );
            assert_eq!(
                ok(&mut watcher, &["RLOCK.RESETSTAT"]),
                Value::Okay,
                "{flavor}"
            );
        }
    }
}
