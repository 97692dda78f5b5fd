//! The module's samples in the server's latency monitor: `rlock-scan` (one RLOCK.SCAN
//! call) and `rlock-deferred` (one run of self-started work), added only at or above
//! `latency-monitor-threshold` and never while it is 0, following `CONFIG SET`.

use std::collections::BTreeSet;
use std::time::Duration;

use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

/// The events `LATENCY LATEST` lists.
fn latest(con: &mut redis::Connection) -> BTreeSet<String> {
    let Ok(Value::Array(events)) = call(con, &["LATENCY", "LATEST"]) else {
        panic!("LATENCY LATEST");
    };
    events
        .iter()
        .filter_map(|e| match e {
            Value::Array(fields) => match fields.first() {
                Some(Value::BulkString(name)) => Some(String::from_utf8_lossy(name).into_owned()),
                Some(Value::SimpleString(name)) => Some(name.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn ok(con: &mut redis::Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// With the threshold at 1 ms, `work` (`what`, which takes that or more) leaves an
/// `event` sample; after `LATENCY RESET`, back at 0, it leaves none.
fn sampled_from_1_ms_only(
    flavor: Flavor,
    con: &mut redis::Connection,
    (event, what): (&str, &str),
    mut work: impl FnMut(&mut redis::Connection),
) {
    set_threshold(con, "1");
    work(con);
    assert!(
        latest(con).contains(event),
        "{flavor}: {what} takes 1 ms or more: {:?}",
        latest(con)
    );
    ok(con, &["LATENCY", "RESET"]);
    set_threshold(con, "0");
    work(con);
    assert!(
        !latest(con).contains(event),
        "{flavor}: back to 0, no more samples"
    );
}

/// `latency-monitor-threshold`: record what takes `ms` or more (`0`: nothing).
fn set_threshold(con: &mut redis::Connection, ms: &str) {
    ok(con, &["CONFIG", "SET", "latency-monitor-threshold", ms]);
}

/// ~200k keys: strings, and hashes the scan must look at.
fn big_db(con: &mut redis::Connection) {
    ok(con, &["DEBUG", "POPULATE", "190000", "noise", "8"]);
    ok(
        con,
        &[
            "EVAL",
            "for i = 1, tonumber(ARGV[1]) do redis.call('HSET', 'h:' .. i, 'owner', '1') end",
            "0",
            "10000",
        ],
    );
    assert_eq!(ok(con, &["DBSIZE"]), Value::Int(200_000));
}

fn scan_everything(con: &mut redis::Connection) {
    let Value::Array(reply) = ok(con, &["RLOCK.SCAN", "0", "COUNT", "1000000"]) else {
        panic!("RLOCK.SCAN");
    };
    assert_eq!(
        reply[0],
        Value::BulkString(b"0".to_vec()),
        "one call, whole db"
    );
}

#[test]
fn scan_samples_follow_the_threshold() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        assert_eq!(
            ok(&mut con, &["CONFIG", "GET", "latency-monitor-threshold"]),
            Value::Array(vec![
                Value::BulkString(b"latency-monitor-threshold".to_vec()),
                Value::BulkString(b"0".to_vec()),
            ]),
            "{flavor}: the default is off"
        );
        big_db(&mut con);
        for _ in 0..3 {
            scan_everything(&mut con);
        }
        let events = latest(&mut con);
        assert!(
            !events.contains("rlock-scan") && !events.contains("rlock-deferred"),
            "{flavor}: threshold 0 records nothing: {events:?}"
        );

        let what = "a scan of 200k keys";
        sampled_from_1_ms_only(flavor, &mut con, ("rlock-scan", what), scan_everything);

        // A threshold above what a scan takes records nothing either.
        set_threshold(&mut con, "100000");
        scan_everything(&mut con);
        assert!(!latest(&mut con).contains("rlock-scan"), "{flavor}");
    }
}

/// A connection holding many SESSION locks closes: releasing them all is one deferred
/// run, a sample when it takes the threshold or more; none while the threshold is 0.
#[test]
fn deferred_samples_follow_the_threshold() {
    const LOCKS: usize = 20_000;
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        let storm = |server: &Server| {
            let mut holder = server.conn();
            let mut pipe = redis::pipe();
            for i in 0..LOCKS {
                pipe.cmd("RLOCK.ACQUIRE")
                    .arg(format!("s:{i}"))
                    .arg("o")
                    .arg("SESSION")
                    .ignore();
            }
            let () = pipe.query(&mut holder).expect("SESSION locks");
            drop(holder);
            let mut con = server.conn();
            let freed = wait_until(Duration::from_secs(30), || {
                call(&mut con, &["DBSIZE"]) == Ok(Value::Int(0))
            });
            assert!(freed, "{}: the SESSION locks went", server.flavor);
        };

        storm(&server);
        assert!(
            !latest(&mut con).contains("rlock-deferred"),
            "{flavor}: threshold 0 records nothing"
        );

        let what = format!("releasing {LOCKS} holds");
        sampled_from_1_ms_only(flavor, &mut con, ("rlock-deferred", &what), |_| {
            storm(&server)
        });
    }
}
