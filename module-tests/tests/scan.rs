//! RLOCK.SCAN: `SCAN` over the database showing only Redisson locks and read-write
//! locks, with their holders, lease and blocked waiters; MATCH, COUNT and TYPE as
//! `SCAN` takes them; bad calls refused without a change; reachable with `@read`.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{wait_blocked, Pending};
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

/// One entry of the reply, whichever protocol it came in.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    key: String,
    kind: String,
    mode: Option<String>,
    holders: BTreeMap<String, Option<i64>>,
    pttl: i64,
    waiters: i64,
}

fn entry(v: &Value, resp3: bool) -> Entry {
    let names = ["holders", "key", "mode", "pttl", "type", "waiters"];
    let fields = EntryFields::exactly(v, resp3, &names);
    Entry {
        key: fields.text("key"),
        kind: fields.text("type"),
        mode: fields.text_or_nil("mode"),
        holders: reply_fields(fields.get("holders"), resp3)
            .into_iter()
            .map(|(owner, count)| {
                let count = match count {
                    Value::Int(n) => Some(n),
                    Value::Nil => None,
                    other => panic!("count: {other:?}"),
                };
                (owner, count)
            })
            .collect(),
        pttl: fields.int("pttl"),
        waiters: fields.int("waiters"),
    }
}

/// One call: the next cursor and the entries.
fn scan_once(con: &mut redis::Connection, args: &[&str], resp3: bool) -> (String, Vec<Entry>) {
    let mut call_args = vec!["RLOCK.SCAN"];
    call_args.extend(args);
    let reply = call(con, &call_args).unwrap_or_else(|e| panic!("{call_args:?}: {e}"));
    let Value::Array(parts) = reply else {
        panic!("{call_args:?}: {reply:?}");
    };
    assert_eq!(parts.len(), 2, "{parts:?}");
    let cursor = reply_text(&parts[0]);
    let Value::Array(entries) = &parts[1] else {
        panic!("entries: {parts:?}");
    };
    (cursor, entries.iter().map(|e| entry(e, resp3)).collect())
}

/// A full iteration, from cursor 0 until it comes back to 0; each key once (a key
/// `SCAN` returns twice must say the same both times).
fn scan_all(
    con: &mut redis::Connection,
    options: &[&str],
    resp3: bool,
) -> (BTreeMap<String, Entry>, usize) {
    let mut cursor = "0".to_string();
    let mut found: BTreeMap<String, Entry> = BTreeMap::new();
    let mut calls = 0;
    loop {
        let mut args = vec![cursor.as_str()];
        args.extend(options);
        let (next, entries) = scan_once(con, &args, resp3);
        calls += 1;
        for e in entries {
            if let Some(before) = found.get(&e.key) {
                assert_eq!(before.holders, e.holders, "{} seen twice", e.key);
            }
            found.insert(e.key.clone(), e);
        }
        if next == "0" {
            return (found, calls);
        }
        cursor = next;
        assert!(calls < 100_000, "the scan does not end");
    }
}

fn ok(con: &mut redis::Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Locks of every kind, and keys that are not locks: strings, other hashes, hashes of
/// values that are not hold counts, a large hash of counts, a semaphore, a latch, a
/// fair queue's and a fencing counter's helper keys, read-hold timeout keys.
fn fill(con: &mut redis::Connection) {
    ok(con, &["RLOCK.ACQUIRE", "lock:a", "alice", "LEASE", "60000"]);
    ok(con, &["RLOCK.ACQUIRE", "lock:a", "alice", "LEASE", "60000"]);
    ok(
        con,
        &["RLOCK.ACQUIRE", "lock:b", "bob", "LEASE", "60000", "TOKEN"],
    );
    ok(con, &["RLOCK.ACQUIRE", "lock:f", "fay", "FAIR"]);
    ok(con, &["RLOCK.ACQUIRE", "rw:r", "r1", "READ"]);
    ok(con, &["RLOCK.ACQUIRE", "rw:r", "r2", "READ"]);
    ok(
        con,
        &["RLOCK.ACQUIRE", "rw:w", "w1", "WRITE", "LEASE", "50000"],
    );
    // A Redisson lock written by hand, no lease.
    ok(con, &["HSET", "redisson:x", "uuid-1:7", "1"]);
    // A fair queue's helper keys, as a Redisson client that waits leaves them.
    ok(con, &["RPUSH", "redisson_lock_queue:{lock:f}", "gus"]);
    ok(
        con,
        &[
            "ZADD",
            "redisson_lock_timeout:{lock:f}",
            "99999999999999",
            "gus",
        ],
    );
    ok(con, &["RSEM.TRYSETPERMITS", "sem", "3"]);
    ok(con, &["RLATCH.TRYSETCOUNT", "latch", "2"]);
    ok(con, &["HSET", "user:1", "name", "bob", "age", "x"]);
    ok(con, &["HSET", "h:zero", "a", "0"]);
    ok(con, &["HSET", "h:neg", "a", "-1"]);
    ok(con, &["HSET", "h:mixed", "a", "1", "b", "one"]);
    ok(con, &["HSET", "h:padded", "a", "01"]);
    ok(con, &["HSET", "h:mode", "mode", "other", "a", "1"]);
    let mut big = vec!["HSET".to_string(), "h:counts".to_string()];
    for i in 0..100 {
        big.push(format!("f{i}"));
        big.push("1".to_string());
    }
    let big: Vec<&str> = big.iter().map(String::as_str).collect();
    ok(con, &big);
    ok(con, &["SADD", "set", "a"]);
    ok(con, &["ZADD", "zset", "1", "a"]);
    for i in 0..300 {
        ok(con, &["SET", &format!("noise:{i}"), "1"]);
    }
}

#[test]
fn a_full_iteration_finds_exactly_the_locks() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        fill(&mut con);
        let mut waiter = Pending::new(&server);
        waiter.send(&["RLOCK.ACQUIRE", "lock:b", "carol", "BLOCK", "0"]);
        wait_blocked(flavor, &mut con, "lock:b", 1);

        for resp3 in [false, true] {
            let mut c = if resp3 {
                server.conn_resp3()
            } else {
                server.conn()
            };
            let (found, calls) = scan_all(&mut c, &["COUNT", "7"], resp3);
            assert!(calls > 5, "{flavor}: {calls} calls with COUNT 7");
            let keys: Vec<&str> = found.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                ["lock:a", "lock:b", "lock:f", "redisson:x", "rw:r", "rw:w"],
                "{flavor} resp3={resp3}"
            );
            let a = &found["lock:a"];
            assert_eq!(a.kind, "lock");
            assert_eq!(a.mode, None);
            assert_eq!(a.holders, BTreeMap::from([("alice".into(), Some(2))]));
            assert!(a.pttl > 50_000 && a.pttl <= 60_000, "{flavor}: {a:?}");
            assert_eq!(a.waiters, 0);
            let b = &found["lock:b"];
            assert_eq!(b.holders, BTreeMap::from([("bob".into(), Some(1))]));
            assert_eq!(b.waiters, 1, "{flavor}: carol waits on lock:b");
            let x = &found["redisson:x"];
            assert_eq!(x.pttl, -1);
            assert_eq!(x.holders, BTreeMap::from([("uuid-1:7".into(), Some(1))]));
            let r = &found["rw:r"];
            assert_eq!(
                (r.kind.as_str(), r.mode.as_deref()),
                ("rwlock", Some("read"))
            );
            assert_eq!(
                r.holders,
                BTreeMap::from([("r1".into(), Some(1)), ("r2".into(), Some(1))])
            );
            assert!(r.pttl > 0);
            let w = &found["rw:w"];
            assert_eq!(
                (w.kind.as_str(), w.mode.as_deref()),
                ("rwlock", Some("write"))
            );
            assert_eq!(w.holders, BTreeMap::from([("w1:write".into(), Some(1))]));
            assert!(w.pttl > 40_000 && w.pttl <= 50_000, "{flavor}: {w:?}");
        }

        // The waiter is still there, and served as ever.
        ok(&mut con, &["RLOCK.RELEASE", "lock:b", "bob"]);
        assert_eq!(waiter.recv(), Ok(Value::Int(1)), "{flavor}: carol granted");
    }
}

#[test]
fn match_and_type_filter() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        fill(&mut con);
        let keys = |found: BTreeMap<String, Entry>| found.into_keys().collect::<Vec<_>>();
        let (found, _) = scan_all(&mut con, &["MATCH", "rw:*", "COUNT", "5"], false);
        assert_eq!(keys(found), ["rw:r", "rw:w"], "{flavor}: MATCH rw:*");
        let (found, _) = scan_all(&mut con, &["TYPE", "lock"], false);
        assert_eq!(
            keys(found),
            ["lock:a", "lock:b", "lock:f", "redisson:x"],
            "{flavor}: TYPE lock"
        );
        let (found, _) = scan_all(&mut con, &["type", "RWLOCK", "match", "*:w"], false);
        assert_eq!(keys(found), ["rw:w"], "{flavor}: TYPE RWLOCK MATCH *:w");
        let (found, _) = scan_all(&mut con, &["MATCH", "nothing*", "COUNT", "1000"], false);
        assert!(found.is_empty(), "{flavor}");
        // One call with a COUNT past the size of the db is the whole iteration.
        let (cursor, entries) = scan_once(&mut con, &["0", "COUNT", "100000"], false);
        assert_eq!(cursor, "0", "{flavor}");
        assert_eq!(entries.len(), 6, "{flavor}");
    }
}

#[test]
fn an_empty_database_and_other_databases() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        assert_eq!(
            scan_once(&mut con, &["0"], false),
            ("0".to_string(), vec![])
        );
        ok(&mut con, &["RLOCK.ACQUIRE", "db0", "o"]);
        ok(&mut con, &["SELECT", "3"]);
        ok(&mut con, &["RLOCK.ACQUIRE", "db3", "o"]);
        let (found, _) = scan_all(&mut con, &[], false);
        assert_eq!(found.into_keys().collect::<Vec<_>>(), ["db3"], "{flavor}");
    }
}

#[test]
fn bad_calls_are_refused_and_change_nothing() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        fill(&mut con);
        let before = keyspace(&mut con);
        let cases: &[(&[&str], &str)] = &[
            (&["RLOCK.SCAN"], "ERR wrong number of arguments"),
            (&["RLOCK.SCAN", "x"], "ERR invalid cursor"),
            (&["RLOCK.SCAN", "-1"], "ERR invalid cursor"),
            (&["RLOCK.SCAN", "1.5"], "ERR invalid cursor"),
            (&["RLOCK.SCAN", "0", "COUNT", "0"], "ERR syntax error"),
            (&["RLOCK.SCAN", "0", "COUNT", "-1"], "ERR syntax error"),
            (
                &["RLOCK.SCAN", "0", "COUNT", "x"],
                "ERR value is not an integer or out of range",
            ),
            (&["RLOCK.SCAN", "0", "COUNT"], "ERR syntax error"),
            (&["RLOCK.SCAN", "0", "MATCH"], "ERR syntax error"),
            (&["RLOCK.SCAN", "0", "LIMIT", "2"], "ERR syntax error"),
            (
                &["RLOCK.SCAN", "0", "TYPE", "hash"],
                "ERR unknown TYPE 'hash' (use lock or rwlock)",
            ),
            (
                &["RLOCK.SCAN", "0", "TYPE", "lock", "TYPE", "lock"],
                "ERR option TYPE given more than once",
            ),
        ];
        assert_each_refused(flavor, &mut con, cases);
        // The same mistakes, the same words as SCAN's.
        for (ours, scans) in [
            (&["RLOCK.SCAN", "x"][..], &["SCAN", "x"][..]),
            (
                &["RLOCK.SCAN", "0", "COUNT", "0"],
                &["SCAN", "0", "COUNT", "0"],
            ),
            (
                &["RLOCK.SCAN", "0", "COUNT", "x"],
                &["SCAN", "0", "COUNT", "x"],
            ),
        ] {
            assert_eq!(
                call(&mut con, ours),
                call(&mut con, scans),
                "{flavor}: {ours:?}"
            );
        }
        assert_eq!(
            keyspace(&mut con),
            before,
            "{flavor}: a bad call changed nothing"
        );
        // Nor does a good one.
        scan_all(&mut con, &["COUNT", "3"], false);
        assert_eq!(
            keyspace(&mut con),
            before,
            "{flavor}: a scan changed nothing"
        );
    }
}

#[test]
fn the_table_declares_a_keyless_read_only_command() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        let Ok(Value::Array(info)) = call(&mut con, &["COMMAND", "INFO", "rlock.scan"]) else {
            panic!("{flavor}: COMMAND INFO");
        };
        let Value::Array(info) = &info[0] else {
            panic!("{flavor}: {info:?}");
        };
        assert_eq!(info[1], Value::Int(-2), "{flavor}: arity");
        let flags: BTreeSet<String> = match &info[2] {
            Value::Array(f) | Value::Set(f) => f.iter().map(reply_text).collect(),
            other => panic!("{other:?}"),
        };
        assert!(flags.contains("readonly"), "{flavor}: {flags:?}");
        assert!(!flags.contains("write"), "{flavor}: {flags:?}");
        assert_eq!(&info[3..6], &[Value::Int(0), Value::Int(0), Value::Int(0)]);
        // No key spec: the cursor is not a key.
        assert_eq!(
            call(&mut con, &["COMMAND", "GETKEYS", "RLOCK.SCAN", "0"]).ok(),
            None,
            "{flavor}: GETKEYS finds no key"
        );
    }
}

fn refused(reply: Result<Value, String>) -> bool {
    matches!(&reply, Err(e) if e.starts_with("NOPERM"))
}

#[test]
fn a_reader_may_scan() {
    for (flavor, server) in each_server() {
        let mut admin = server.conn();
        ok(&mut admin, &["RLOCK.ACQUIRE", "orders", "admin"]);
        let categories = flavor == Flavor::Valkey || flavor.version() >= (7, 2, 0);
        if categories {
            let cat = |con: &mut redis::Connection, name: &str| -> Vec<String> {
                redis::cmd("ACL")
                    .arg("CAT")
                    .arg(name)
                    .query(con)
                    .expect("ACL CAT")
            };
            for name in ["read", "keyspace", "slow"] {
                assert!(
                    cat(&mut admin, name).iter().any(|c| c == "rlock.scan"),
                    "{flavor}: rlock.scan in @{name}"
                );
            }
            assert!(!cat(&mut admin, "write").iter().any(|c| c == "rlock.scan"));
            let mut reader = server.conn_as_user(&mut admin, "reader", &["~*", "+@read"]);
            let (found, _) = scan_all(&mut reader, &[], false);
            assert!(found.contains_key("orders"), "{flavor}");
            let mut writer = server.conn_as_user(&mut admin, "writer", &["~*", "+@all", "-@read"]);
            assert!(
                refused(call(&mut writer, &["RLOCK.SCAN", "0"])),
                "{flavor}: -@read"
            );
        } else {
            // Redis 7.0: module commands sit in no category; rules name them.
            let mut reader = server.conn_as_user(&mut admin, "reader", &["~*", "+@read"]);
            assert!(
                refused(call(&mut reader, &["RLOCK.SCAN", "0"])),
                "{flavor}: +@read"
            );
            let mut named = server.conn_as_user(&mut admin, "named", &["~*", "+rlock.scan"]);
            let (found, _) = scan_all(&mut named, &[], false);
            assert!(found.contains_key("orders"), "{flavor}");
            let mut denied =
                server.conn_as_user(&mut admin, "denied", &["~*", "+@all", "-rlock.scan"]);
            assert!(refused(call(&mut denied, &["RLOCK.SCAN", "0"])), "{flavor}");
        }
    }
}

/// `SCAN` shows any key's name, but a lock's holders and lease are its value: a user
/// sees only the locks its key patterns let it read.
#[test]
fn a_user_sees_only_the_locks_it_may_read() {
    for (flavor, server) in each_server() {
        let mut admin = server.conn();
        ok(&mut admin, &["RLOCK.ACQUIRE", "app:orders", "w1"]);
        ok(&mut admin, &["RLOCK.ACQUIRE", "billing:ledger", "w2"]);
        ok(&mut admin, &["RLOCK.ACQUIRE", "app:cart", "w3", "WRITE"]);
        let mut app = server.conn_as_user(&mut admin, "app", &["~app:*", "+rlock.scan"]);
        let (found, _) = scan_all(&mut app, &[], false);
        let keys: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(keys, ["app:cart", "app:orders"], "{flavor}");
        // Write-only patterns (7.0+: %W~) give no read.
        let mut writer = server.conn_as_user(&mut admin, "w", &["%W~*", "+rlock.scan"]);
        let (found, _) = scan_all(&mut writer, &[], false);
        assert!(found.is_empty(), "{flavor}: {found:?}");
        let (found, _) = scan_all(&mut admin, &[], false);
        assert_eq!(found.len(), 3, "{flavor}");
    }
}
