//! ACQUIRE / RELEASE / RENEW / FORCERELEASE / INFO behaviour on the Redisson key layout.

use std::collections::BTreeMap;

mod common;

use common::{lua_lock, lua_unlock};
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

fn owners(pairs: &[(&[u8], &str)]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    pairs
        .iter()
        .map(|(o, c)| (o.to_vec(), c.as_bytes().to_vec()))
        .collect()
}

fn assert_pttl_near(flavor: Flavor, got: i64, lease: i64, what: &str) {
    assert!(
        got <= lease && got > lease - 2000,
        "{flavor}: {what}: PTTL {got}, expected about {lease}"
    );
}

#[test]
fn acquire_reenter_release_on_redisson_layout() {
    for (flavor, _server, mut c) in servers() {
        let k = b"orders".as_slice();

        assert_eq!(
            call(
                &mut c,
                &["RLOCK.ACQUIRE", "orders", "uuid-1:7", "LEASE", "10000"]
            ),
            Ok(Value::Int(1)),
            "{flavor}: first acquire"
        );
        assert_eq!(
            call(&mut c, &["TYPE", "orders"]),
            Ok(Value::SimpleString("hash".into())),
            "{flavor}"
        );
        assert_eq!(
            hgetall(&mut c, k),
            owners(&[(b"uuid-1:7", "1")]),
            "{flavor}: HGETALL after acquire"
        );
        assert_pttl_near(flavor, pttl(&mut c, k), 10_000, "after acquire LEASE 10000");
        let ks = keyspace(&mut c);
        assert!(
            ks.keys().all(|key| key == k || *key == token_key(k)),
            "{flavor}: only the lock key (and at most its token key) may exist: {:?}",
            ks.keys()
                .map(|k| String::from_utf8_lossy(k).to_string())
                .collect::<Vec<_>>()
        );

        // Re-entry counts up and sets the lease to the new LEASE.
        assert_eq!(
            call(
                &mut c,
                &["RLOCK.ACQUIRE", "orders", "uuid-1:7", "LEASE", "60000"]
            ),
            Ok(Value::Int(2)),
            "{flavor}: re-entry"
        );
        assert_eq!(
            hgetall(&mut c, k),
            owners(&[(b"uuid-1:7", "2")]),
            "{flavor}: HGETALL after re-entry"
        );
        assert_pttl_near(
            flavor,
            pttl(&mut c, k),
            60_000,
            "after re-entry LEASE 60000",
        );

        // Another owner: nil, nothing changes.
        let before = keyspace(&mut c);
        assert_eq!(
            call(
                &mut c,
                &["RLOCK.ACQUIRE", "orders", "uuid-2:1", "LEASE", "5000"]
            ),
            Ok(Value::Nil),
            "{flavor}: second owner must get nil"
        );
        assert_eq!(
            keyspace(&mut c),
            before,
            "{flavor}: a failed acquire changed the keyspace"
        );

        // Release by a non-owner: NOTHELD, nothing changes.
        let release = ["RLOCK.RELEASE", "orders", "uuid-2:1"];
        assert_refused_unchanged(flavor, &mut c, &release, "NOTHELD");

        // Undo the re-entry, then release fully.
        assert_int(&mut c, &["RLOCK.RELEASE", "orders", "uuid-1:7"], 0);
        assert_eq!(
            hgetall(&mut c, k),
            owners(&[(b"uuid-1:7", "1")]),
            "{flavor}: after undo"
        );
        assert!(
            pttl(&mut c, k) > 0,
            "{flavor}: lock lost its lease after an undo"
        );
        assert_int(&mut c, &["RLOCK.RELEASE", "orders", "uuid-1:7"], 1);
        assert_eq!(
            call(&mut c, &["EXISTS", "orders"]),
            Ok(Value::Int(0)),
            "{flavor}: key left after full release"
        );
        let r = call(&mut c, &["RLOCK.RELEASE", "orders", "uuid-1:7"]);
        assert!(
            matches!(&r, Err(e) if e.starts_with("NOTHELD")),
            "{flavor}: release of a free lock: expected NOTHELD, got {r:?}"
        );
        assert_eq!(
            call(&mut c, &["EXISTS", "orders"]),
            Ok(Value::Int(0)),
            "{flavor}: NOTHELD created the key"
        );

        // Now the other owner gets it.
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "orders", "uuid-2:1"]),
            Ok(Value::Int(1)),
            "{flavor}: second owner after release"
        );
    }
}

#[test]
fn default_lease_and_option_case() {
    for (flavor, _server, mut c) in servers() {
        assert_int(&mut c, &["RLOCK.ACQUIRE", "a", "o"], 1);
        assert_pttl_near(flavor, pttl(&mut c, b"a"), 30_000, "default rlock.lease-ms");
        // Keywords are case-insensitive and come in any order.
        let r = call(
            &mut c,
            &["RLOCK.ACQUIRE", "b", "o", "token", "lease", "7000"],
        );
        assert!(
            matches!(r, Ok(Value::Int(t)) if t >= 1),
            "{flavor}: lower-case options: {r:?}"
        );
        assert_pttl_near(flavor, pttl(&mut c, b"b"), 7_000, "lower-case lease");
        assert_int(&mut c, &["RLOCK.ACQUIRE", "b", "o", "LeAsE", "8000"], 2);
        assert_pttl_near(flavor, pttl(&mut c, b"b"), 8_000, "mixed-case lease");
    }
}

fn get_token(c: &mut redis::Connection, key: &[u8]) -> Option<i64> {
    redis::cmd("GET")
        .arg(token_key(key))
        .query(c)
        .expect("GET token")
}

fn acquire_token(c: &mut redis::Connection, key: &[u8], owner: &[u8]) -> Value {
    call_bytes(c, &[b"RLOCK.ACQUIRE", key, owner, b"TOKEN"]).expect("ACQUIRE TOKEN")
}

#[test]
fn fencing_token_increases_and_survives_release() {
    for (flavor, _server, mut c) in servers() {
        for key in [b"tok".as_slice(), b"pre{tag}post".as_slice()] {
            let name = String::from_utf8_lossy(key).to_string();
            let Value::Int(t1) = acquire_token(&mut c, key, b"o1") else {
                panic!("{flavor}: {name}: ACQUIRE TOKEN did not give an integer")
            };
            assert!(t1 >= 1, "{flavor}: {name}: token {t1}");
            assert_eq!(
                hgetall(&mut c, key),
                owners(&[(b"o1", "1")]),
                "{flavor}: {name}: TOKEN acquire layout"
            );
            assert_eq!(
                get_token(&mut c, key),
                Some(t1),
                "{flavor}: {name}: token key content"
            );
            assert_eq!(
                pttl(&mut c, &token_key(key)),
                -1,
                "{flavor}: {name}: token key must have no TTL"
            );
            let wrong_key = if key.contains(&b'{') {
                helper_key("redisson_lock_token", &[b"{", key, b"}"].concat())
            } else {
                [b"redisson_lock_token:".as_slice(), key].concat()
            };
            assert_eq!(
                call_bytes(&mut c, &[b"EXISTS", &wrong_key]),
                Ok(Value::Int(0)),
                "{flavor}: {name}: wrong prefix rule"
            );

            // Re-entry returns the holder's token, not a new one.
            assert_eq!(
                acquire_token(&mut c, key, b"o1"),
                Value::Int(t1),
                "{flavor}: {name}: re-entry TOKEN"
            );
            assert_eq!(
                hgetall(&mut c, key),
                owners(&[(b"o1", "2")]),
                "{flavor}: {name}"
            );
            assert_eq!(
                call_bytes(&mut c, &[b"RLOCK.ACQUIRE", key, b"o1"]),
                Ok(Value::Int(3)),
                "{flavor}: {name}"
            );
            assert_eq!(
                acquire_token(&mut c, key, b"o1"),
                Value::Int(t1),
                "{flavor}: {name}: re-entry TOKEN"
            );
            assert_eq!(
                acquire_token(&mut c, key, b"o2"),
                Value::Nil,
                "{flavor}: {name}: contended TOKEN"
            );
            assert_eq!(
                get_token(&mut c, key),
                Some(t1),
                "{flavor}: {name}: token moved without a free→held"
            );

            for _ in 0..3 {
                call_bytes(&mut c, &[b"RLOCK.RELEASE", key, b"o1"]).expect("release");
            }
            assert_eq!(
                call_bytes(&mut c, &[b"RLOCK.RELEASE", key, b"o1"]),
                Ok(Value::Int(1)),
                "{flavor}: {name}"
            );
            assert_eq!(
                get_token(&mut c, key),
                Some(t1),
                "{flavor}: {name}: token must survive release"
            );
            assert_eq!(
                pttl(&mut c, &token_key(key)),
                -1,
                "{flavor}: {name}: token TTL after release"
            );

            let Value::Int(t2) = acquire_token(&mut c, key, b"o2") else {
                panic!("{flavor}: {name}: second ACQUIRE TOKEN")
            };
            assert!(
                t2 > t1,
                "{flavor}: {name}: token must increase: {t1} then {t2}"
            );
            assert_eq!(
                call_bytes(&mut c, &[b"RLOCK.FORCERELEASE", key]),
                Ok(Value::Int(1)),
                "{flavor}: {name}"
            );
            let Value::Int(t3) = acquire_token(&mut c, key, b"o1") else {
                panic!("{flavor}: {name}: ACQUIRE TOKEN after force-release")
            };
            assert!(
                t3 > t2,
                "{flavor}: {name}: token after force-release: {t2} then {t3}"
            );

            // Expiry frees the lock too; the next holder's token is larger.
            call_bytes(&mut c, &[b"PEXPIRE", key, b"1"]).expect("PEXPIRE");
            assert!(
                wait_until(std::time::Duration::from_secs(5), || call_bytes(
                    &mut c,
                    &[b"EXISTS", key]
                ) == Ok(Value::Int(0))),
                "{flavor}: {name}: lock did not expire"
            );
            let Value::Int(t4) = acquire_token(&mut c, key, b"o3") else {
                panic!("{flavor}: {name}: ACQUIRE TOKEN after expiry")
            };
            assert!(
                t4 > t3,
                "{flavor}: {name}: token after expiry: {t3} then {t4}"
            );
        }
    }
}

/// A hold taken without TOKEN is still a new free→held transition: a later TOKEN re-entry
/// must not hand out the previous holder's token (two holders would share a fence).
#[test]
fn fencing_token_for_hold_taken_without_token() {
    for (flavor, _server, mut c) in servers() {
        let Value::Int(t1) = acquire_token(&mut c, b"f", b"o1") else {
            panic!("{flavor}: ACQUIRE TOKEN")
        };
        assert_int(&mut c, &["RLOCK.RELEASE", "f", "o1"], 1);
        assert_int(&mut c, &["RLOCK.ACQUIRE", "f", "o2"], 1);
        let Value::Int(t2) = acquire_token(&mut c, b"f", b"o2") else {
            panic!("{flavor}: re-entry TOKEN")
        };
        assert!(
            t2 > t1,
            "{flavor}: o2's hold (taken without TOKEN) got token {t2}, o1's was {t1}"
        );
        assert_eq!(
            acquire_token(&mut c, b"f", b"o2"),
            Value::Int(t2),
            "{flavor}: token of the same hold must be stable"
        );
        assert_eq!(hgetall(&mut c, b"f"), owners(&[(b"o2", "3")]), "{flavor}");
    }
}

#[test]
fn unlock_message_on_full_release_and_force_release_only() {
    for (flavor, server, mut c) in servers() {
        let keys: [&[u8]; 2] = [b"pub", b"x{y}z"];
        let chans: Vec<Vec<u8>> = keys.iter().map(|k| unlock_channel(k)).collect();
        let chan_refs: Vec<&[u8]> = chans.iter().map(Vec::as_slice).collect();
        let mut sub = Subscriber::new(&server, &chan_refs);
        for (key, chan) in keys.iter().zip(&chans) {
            let name = String::from_utf8_lossy(key).to_string();
            call_bytes(&mut c, &[b"RLOCK.ACQUIRE", key, b"o"]).expect("acquire");
            call_bytes(&mut c, &[b"RLOCK.ACQUIRE", key, b"o"]).expect("re-enter");
            assert_eq!(
                sub.drain(),
                vec![],
                "{flavor}: {name}: acquire must not publish"
            );
            assert_eq!(
                call_bytes(&mut c, &[b"RLOCK.RELEASE", key, b"o"]),
                Ok(Value::Int(0)),
                "{flavor}: {name}"
            );
            assert_eq!(
                sub.drain(),
                vec![],
                "{flavor}: {name}: a re-entry undo must not publish"
            );
            let _ = call_bytes(&mut c, &[b"RLOCK.RELEASE", key, b"other"]);
            assert_eq!(
                sub.drain(),
                vec![],
                "{flavor}: {name}: a NOTHELD release must not publish"
            );
            assert_eq!(
                call_bytes(&mut c, &[b"RLOCK.RELEASE", key, b"o"]),
                Ok(Value::Int(1)),
                "{flavor}: {name}"
            );
            assert_eq!(
                sub.drain(),
                vec![(chan.clone(), b"0".to_vec())],
                "{flavor}: {name}: full release"
            );

            call_bytes(&mut c, &[b"RLOCK.ACQUIRE", key, b"o"]).expect("acquire");
            assert_eq!(
                call_bytes(&mut c, &[b"RLOCK.FORCERELEASE", key]),
                Ok(Value::Int(1)),
                "{flavor}: {name}"
            );
            assert_eq!(
                sub.drain(),
                vec![(chan.clone(), b"0".to_vec())],
                "{flavor}: {name}: force-release"
            );
            assert_eq!(
                call_bytes(&mut c, &[b"RLOCK.FORCERELEASE", key]),
                Ok(Value::Int(0)),
                "{flavor}: {name}"
            );
            assert_eq!(
                sub.drain(),
                vec![],
                "{flavor}: {name}: force-release of nothing must not publish"
            );
        }
    }
}

#[test]
fn renew_resets_lease_for_owner_only() {
    for (flavor, _server, mut c) in servers() {
        call(&mut c, &["RLOCK.ACQUIRE", "r", "o", "LEASE", "10000"]).expect("acquire");
        call(&mut c, &["RLOCK.ACQUIRE", "r", "o", "LEASE", "10000"]).expect("re-enter");
        assert_int(&mut c, &["RLOCK.RENEW", "r", "o", "LEASE", "90000"], 1);
        assert_pttl_near(flavor, pttl(&mut c, b"r"), 90_000, "RENEW LEASE 90000");
        assert_eq!(
            hgetall(&mut c, b"r"),
            owners(&[(b"o", "2")]),
            "{flavor}: RENEW must not change the count"
        );
        assert_int(&mut c, &["RLOCK.RENEW", "r", "o"], 1);
        assert_pttl_near(
            flavor,
            pttl(&mut c, b"r"),
            30_000,
            "RENEW with default lease",
        );
        assert_int(&mut c, &["RLOCK.RENEW", "r", "o", "lease", "45000"], 1);
        assert_pttl_near(flavor, pttl(&mut c, b"r"), 45_000, "RENEW lease 45000");

        let what = format!("{flavor}: a RENEW that answered 0");
        assert_keyspace_kept(&mut c, what, |c| {
            assert_int(c, &["RLOCK.RENEW", "r", "other", "LEASE", "90000"], 0);
            assert_int(c, &["RLOCK.RENEW", "missing", "o"], 0);
        });
    }
}

#[test]
fn force_release_deletes_whoever_holds() {
    for (flavor, _server, mut c) in servers() {
        for _ in 0..3 {
            call(&mut c, &["RLOCK.ACQUIRE", "fr", "o"]).expect("acquire");
        }
        assert_int(&mut c, &["RLOCK.FORCERELEASE", "fr"], 1);
        assert_int(&mut c, &["EXISTS", "fr"], 0);
        assert_int(&mut c, &["RLOCK.FORCERELEASE", "fr"], 0);
        assert_int(&mut c, &["RLOCK.FORCERELEASE", "never"], 0);
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "fr", "p"]),
            Ok(Value::Int(1)),
            "{flavor}: free after force-release"
        );
        // A lock written by someone else (Redisson) is force-released too.
        call(&mut c, &["HSET", "ext", "redisson-uuid:3", "2"]).expect("HSET");
        assert_int(&mut c, &["RLOCK.FORCERELEASE", "ext"], 1);
        assert_int(&mut c, &["EXISTS", "ext"], 0);
    }
}

#[test]
fn info_in_resp2_and_resp3() {
    for (flavor, server) in each_server() {
        let mut c2 = server.conn();
        let mut c3 = server.conn_resp3();
        let empty = LockInfo {
            holders: vec![],
            pttl: -2,
            queue: vec![],
            blocked: 0,
            token: None,
            mode: None,
        };
        for (c, resp3) in [(&mut c2, false), (&mut c3, true)] {
            let v = call(c, &["RLOCK.INFO", "none"]).expect("RLOCK.INFO");
            assert_eq!(
                parse_lock_info(&v, resp3),
                Ok(empty.clone()),
                "{flavor}: RESP{}: INFO of no lock",
                if resp3 { 3 } else { 2 }
            );
        }

        call(&mut c2, &["RLOCK.ACQUIRE", "i", "o1", "LEASE", "50000"]).expect("acquire");
        call(&mut c2, &["RLOCK.ACQUIRE", "i", "o1", "LEASE", "50000"]).expect("re-enter");
        let t = call(&mut c2, &["RLOCK.ACQUIRE", "t", "o2", "TOKEN"]).expect("acquire token");
        let Value::Int(t) = t else {
            panic!("{flavor}: TOKEN reply {t:?}")
        };
        let before = keyspace(&mut c2);
        let mut raw_tokens = Vec::new();
        for (c, resp3) in [(&mut c2, false), (&mut c3, true)] {
            let p = if resp3 { 3 } else { 2 };
            let info = parse_lock_info(&call(c, &["RLOCK.INFO", "i"]).expect("INFO"), resp3)
                .unwrap_or_else(|e| panic!("{flavor}: RESP{p}: {e}"));
            assert_eq!(
                info.holders,
                vec![(b"o1".to_vec(), 2)],
                "{flavor}: RESP{p}: holders"
            );
            assert!(
                info.pttl > 48_000 && info.pttl <= 50_000,
                "{flavor}: RESP{p}: pttl {}",
                info.pttl
            );
            // `token` of a lock never taken with TOKEN is not pinned down by the contract.
            assert_eq!(
                (info.queue.len(), info.blocked),
                (0, 0),
                "{flavor}: RESP{p}: {info:?}"
            );

            let info = parse_lock_info(&call(c, &["RLOCK.INFO", "t"]).expect("INFO"), resp3)
                .unwrap_or_else(|e| panic!("{flavor}: RESP{p}: {e}"));
            assert_eq!(
                info.holders,
                vec![(b"o2".to_vec(), 1)],
                "{flavor}: RESP{p}: holders"
            );
            assert_eq!(info.token, Some(t), "{flavor}: RESP{p}: token");
            let raw = lock_info_field(
                &call(c, &["RLOCK.INFO", "t"]).expect("INFO"),
                resp3,
                "token",
            );
            raw_tokens.push((p, raw));
        }
        for (p, raw) in raw_tokens {
            assert_eq!(
                raw,
                Ok(Value::Int(t)),
                "{flavor}: RESP{p}: RLOCK.INFO token must be an integer reply"
            );
        }
        assert_eq!(
            keyspace(&mut c2),
            before,
            "{flavor}: RLOCK.INFO changed the keyspace"
        );
        // After release the token stays and the lock is gone.
        call(&mut c2, &["RLOCK.RELEASE", "t", "o2"]).expect("release");
        let info = parse_lock_info(&call(&mut c3, &["RLOCK.INFO", "t"]).expect("INFO"), true)
            .expect("parse");
        assert_eq!(
            info,
            LockInfo {
                token: Some(t),
                ..empty.clone()
            },
            "{flavor}: INFO after release"
        );
    }
}

#[test]
fn redisson_lua_script_and_rlock_exclude_each_other() {
    for (flavor, server, mut c) in servers() {
        let mut sub = Subscriber::new(&server, &[&unlock_channel(b"shared")]);

        // Redisson first: rlock is excluded, and may re-enter as the same owner.
        assert_eq!(
            lua_lock(&mut c, "shared", "uuid-r:1"),
            Value::Nil,
            "{flavor}: lua lock"
        );
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "shared", "uuid-n:1"]),
            Ok(Value::Nil),
            "{flavor}: rlock must be excluded by a Redisson hold"
        );
        let release = ["RLOCK.RELEASE", "shared", "uuid-n:1"];
        assert_refused_with(&mut c, &release, "NOTHELD", flavor);
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "shared", "uuid-r:1"]),
            Ok(Value::Int(2)),
            "{flavor}: rlock re-entry on a Redisson hold"
        );
        assert_eq!(
            lua_lock(&mut c, "shared", "uuid-r:1"),
            Value::Nil,
            "{flavor}: lua re-entry"
        );
        assert_eq!(
            hgetall(&mut c, b"shared"),
            owners(&[(b"uuid-r:1", "3")]),
            "{flavor}"
        );
        assert_int(&mut c, &["RLOCK.RELEASE", "shared", "uuid-r:1"], 0);
        assert_eq!(
            lua_unlock(&mut c, "shared", "uuid-r:1").expect("lua unlock"),
            Value::Int(0),
            "{flavor}"
        );
        assert_eq!(
            call(&mut c, &["RLOCK.RELEASE", "shared", "uuid-r:1"]),
            Ok(Value::Int(1)),
            "{flavor}: rlock full release of a Redisson hold"
        );
        assert_eq!(
            sub.drain(),
            vec![(unlock_channel(b"shared"), b"0".to_vec())],
            "{flavor}: unlock message"
        );

        // rlock first: the Redisson script is excluded (gets the PTTL), then gets it after release.
        assert_eq!(
            call(
                &mut c,
                &["RLOCK.ACQUIRE", "shared", "uuid-n:1", "LEASE", "20000"]
            ),
            Ok(Value::Int(1)),
            "{flavor}"
        );
        let v = lua_lock(&mut c, "shared", "uuid-r:1");
        assert!(
            matches!(v, Value::Int(p) if p > 0 && p <= 20_000),
            "{flavor}: Redisson must see the rlock hold, got {v:?}"
        );
        assert_eq!(
            lua_unlock(&mut c, "shared", "uuid-r:1").expect("lua unlock"),
            Value::Nil,
            "{flavor}: Redisson unlock of an rlock hold"
        );
        assert_eq!(
            lua_lock(&mut c, "shared", "uuid-n:1"),
            Value::Nil,
            "{flavor}: Redisson re-entry on an rlock hold"
        );
        assert_eq!(
            hgetall(&mut c, b"shared"),
            owners(&[(b"uuid-n:1", "2")]),
            "{flavor}"
        );
        assert_eq!(
            lua_unlock(&mut c, "shared", "uuid-n:1").expect("lua unlock"),
            Value::Int(0),
            "{flavor}"
        );
        assert_int(&mut c, &["RLOCK.RELEASE", "shared", "uuid-n:1"], 1);
        assert_eq!(
            lua_lock(&mut c, "shared", "uuid-r:1"),
            Value::Nil,
            "{flavor}: Redisson acquires after rlock release"
        );
        assert_eq!(
            sub.drain(),
            vec![(unlock_channel(b"shared"), b"0".to_vec())],
            "{flavor}: unlock message"
        );
    }
}

#[test]
fn commands_work_inside_multi_and_scripts() {
    for (flavor, _server, mut c) in servers() {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("RLOCK.ACQUIRE")
            .arg("m")
            .arg("o")
            .arg("LEASE")
            .arg(20000)
            .cmd("RLOCK.ACQUIRE")
            .arg("m")
            .arg("o")
            .cmd("RLOCK.ACQUIRE")
            .arg("m")
            .arg("p")
            .cmd("RLOCK.RELEASE")
            .arg("m")
            .arg("o")
            .cmd("RLOCK.RENEW")
            .arg("m")
            .arg("o")
            .arg("LEASE")
            .arg(40000);
        let r: Result<Vec<Value>, _> = pipe.query(&mut c);
        assert_eq!(
            r.map_err(|e| error_text(&e)),
            Ok(vec![
                Value::Int(1),
                Value::Int(2),
                Value::Nil,
                Value::Int(0),
                Value::Int(1)
            ]),
            "{flavor}: MULTI/EXEC"
        );
        assert_eq!(hgetall(&mut c, b"m"), owners(&[(b"o", "1")]), "{flavor}");
        assert_pttl_near(flavor, pttl(&mut c, b"m"), 40_000, "RENEW inside MULTI");

        let script = "local a = redis.call('RLOCK.ACQUIRE', KEYS[1], ARGV[1], 'LEASE', '15000') \
                      local b = redis.call('RLOCK.ACQUIRE', KEYS[1], ARGV[1]) \
                      local c = redis.call('RLOCK.RELEASE', KEYS[1], ARGV[1]) \
                      return {a, b, c}";
        assert_eq!(
            call(&mut c, &["EVAL", script, "1", "s", "lua-owner"]),
            Ok(Value::Array(vec![
                Value::Int(1),
                Value::Int(2),
                Value::Int(0)
            ])),
            "{flavor}: RLOCK.* from a Lua script"
        );
        assert_eq!(
            hgetall(&mut c, b"s"),
            owners(&[(b"lua-owner", "1")]),
            "{flavor}"
        );
        assert_pttl_near(
            flavor,
            pttl(&mut c, b"s"),
            30_000,
            "re-entry without LEASE in a script sets the default lease",
        );
    }
}

/// The keys are the truth: databases are separate, and FLUSHALL, DEL, expiry and
/// DEBUG RELOAD leave the module agreeing with the keyspace.
#[test]
fn state_follows_the_keyspace() {
    for (flavor, server, mut c) in servers() {
        let mut d1 = server.conn();
        call(&mut d1, &["SELECT", "1"]).expect("SELECT 1");
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "db", "o"]),
            Ok(Value::Int(1)),
            "{flavor}: db 0"
        );
        assert_eq!(
            call(&mut d1, &["RLOCK.ACQUIRE", "db", "p"]),
            Ok(Value::Int(1)),
            "{flavor}: same name in db 1 is another lock"
        );
        assert_eq!(
            hgetall(&mut d1, b"db"),
            owners(&[(b"p", "1")]),
            "{flavor}: db 1"
        );
        assert_eq!(
            hgetall(&mut c, b"db"),
            owners(&[(b"o", "1")]),
            "{flavor}: db 0"
        );

        call(&mut c, &["RLOCK.ACQUIRE", "re", "o", "LEASE", "60000"]).expect("acquire");
        call(&mut c, &["RLOCK.ACQUIRE", "re", "o", "LEASE", "60000"]).expect("re-enter");
        assert_eq!(
            call(&mut c, &["DEBUG", "RELOAD"]),
            Ok(Value::Okay),
            "{flavor}: DEBUG RELOAD"
        );
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "re", "o"]),
            Ok(Value::Int(3)),
            "{flavor}: re-entry after DEBUG RELOAD"
        );
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "re", "x"]),
            Ok(Value::Nil),
            "{flavor}: exclusion after DEBUG RELOAD"
        );

        call(&mut c, &["DEL", "re"]).expect("DEL");
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "re", "x"]),
            Ok(Value::Int(1)),
            "{flavor}: after DEL"
        );
        assert_okay(&mut c, &["FLUSHALL"]);
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "re", "y"]),
            Ok(Value::Int(1)),
            "{flavor}: after FLUSHALL"
        );
        assert_eq!(
            call(&mut d1, &["RLOCK.ACQUIRE", "db", "q"]),
            Ok(Value::Int(1)),
            "{flavor}: db 1 after FLUSHALL"
        );

        // An expired hold is gone: the same owner starts again at 1.
        call(&mut c, &["RLOCK.ACQUIRE", "ex", "o", "LEASE", "1"]).expect("acquire");
        let gone = wait_key_gone(&mut c, "ex", std::time::Duration::from_secs(5));
        assert!(gone, "{flavor}: LEASE 1 did not expire");
        assert_eq!(
            call(&mut c, &["RLOCK.ACQUIRE", "ex", "o"]),
            Ok(Value::Int(1)),
            "{flavor}: same owner after expiry"
        );
        let r = call(&mut c, &["RLOCK.RELEASE", "ex", "o"]);
        assert_eq!(
            r,
            Ok(Value::Int(1)),
            "{flavor}: one release after expiry and re-acquire"
        );
    }
}

/// A Redisson read-write lock (`RReadWriteLock`: the hash's `mode` field, a count per
/// reader, a timeout key per read hold) is not a reentrant lock: the reentrant commands
/// refuse it with `WRONGTYPE` and change nothing, where they once took a reader's count
/// for a re-entry. An owner named `mode` of a reentrant lock is not mistaken for one.
#[test]
fn a_redisson_read_write_lock_is_wrongtype_for_the_reentrant_commands() {
    for (flavor, _server, mut c) in servers() {
        for (field, value) in [("mode", "read"), ("uuid:1", "1")] {
            call(&mut c, &["HSET", "rw", field, value]).expect("HSET");
        }
        call(&mut c, &["PEXPIRE", "rw", "30000"]).expect("PEXPIRE");
        call(
            &mut c,
            &["SET", "{rw}:uuid:1:rwlock_timeout:1", "1", "PX", "30000"],
        )
        .expect("SET");
        let before = keyspace(&mut c);
        for args in [
            &["RLOCK.ACQUIRE", "rw", "uuid:1"][..],
            &["RLOCK.ACQUIRE", "rw", "other", "FAIR"][..],
            &["RLOCK.ACQUIRE", "rw", "other", "BLOCK", "10"][..],
            &["RLOCK.RELEASE", "rw", "uuid:1"][..],
            &["RLOCK.RENEW", "rw", "uuid:1"][..],
        ] {
            let reply = call(&mut c, args);
            assert!(
                matches!(&reply, Err(e) if e.starts_with("WRONGTYPE") && e.contains("read-write")),
                "{flavor}: {args:?} replied {reply:?}"
            );
        }
        assert_eq!(keyspace(&mut c), before, "{flavor}: nothing changed");
        // An owner called `mode` on a reentrant lock holds a count, not a mode.
        assert_int(&mut c, &["RLOCK.ACQUIRE", "plain", "mode"], 1);
        assert_int(&mut c, &["RLOCK.ACQUIRE", "plain", "mode"], 2);
        assert_int(&mut c, &["RLOCK.RELEASE", "plain", "mode"], 0);
    }
}
