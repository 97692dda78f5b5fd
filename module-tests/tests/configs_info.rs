//! Module configs (at load and with CONFIG SET), `INFO rlock` counters and `COMMAND DOCS`.

use std::collections::HashMap;

use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

fn config_get(c: &mut Connection, name: &str) -> String {
    let v: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg(name)
        .query(c)
        .expect("CONFIG GET");
    assert_eq!(v.len(), 2, "CONFIG GET {name} gave {v:?}");
    v[1].clone()
}

fn default_lease_pttl(c: &mut Connection, key: &str) -> i64 {
    assert_eq!(
        call(c, &["RLOCK.ACQUIRE", key, "o"]),
        Ok(Value::Int(1)),
        "acquire {key}"
    );
    pttl(c, key.as_bytes())
}

fn near(got: i64, want: i64) -> bool {
    got <= want && got > want - 2000
}

/// Full release of `key` and whether an unlock message was published.
fn release_publishes(server: &Server, c: &mut Connection, key: &str) -> bool {
    let chan = unlock_channel(key.as_bytes());
    let mut sub = Subscriber::new(server, &[&chan]);
    call(c, &["RLOCK.ACQUIRE", key, "o"]).expect("acquire");
    assert_eq!(
        call(c, &["RLOCK.RELEASE", key, "o"]),
        Ok(Value::Int(1)),
        "release {key}"
    );
    let msgs = sub.drain();
    assert!(
        msgs.is_empty() || msgs == vec![(chan, b"0".to_vec())],
        "unexpected messages {msgs:?}"
    );
    !msgs.is_empty()
}

#[test]
fn configs_at_load_time() {
    for flavor in flavors() {
        let server = Server::builder(flavor)
            .module_args(&["lease-ms", "5000", "fair-wait-ms", "1234", "publish", "no"])
            .start();
        let mut c = server.conn();
        assert_eq!(config_get(&mut c, "rlock.lease-ms"), "5000", "{flavor}");
        assert_eq!(config_get(&mut c, "rlock.fair-wait-ms"), "1234", "{flavor}");
        assert_eq!(config_get(&mut c, "rlock.publish"), "no", "{flavor}");
        let p = default_lease_pttl(&mut c, "a");
        assert!(
            near(p, 5000),
            "{flavor}: PTTL {p} with lease-ms 5000 at load"
        );
        assert!(
            !release_publishes(&server, &mut c, "b"),
            "{flavor}: published with publish no at load"
        );

        // Defaults.
        let server = Server::start(flavor);
        let mut c = server.conn();
        assert_eq!(
            config_get(&mut c, "rlock.lease-ms"),
            "30000",
            "{flavor}: default lease-ms"
        );
        assert_eq!(
            config_get(&mut c, "rlock.fair-wait-ms"),
            "300000",
            "{flavor}: default fair-wait-ms"
        );
        assert_eq!(
            config_get(&mut c, "rlock.publish"),
            "yes",
            "{flavor}: default publish"
        );
    }
}

/// Whether `MODULE LIST` names rlock (Valkey lists a built-in `lua` module too).
fn rlock_loaded(c: &mut Connection) -> bool {
    let list = call(c, &["MODULE", "LIST"]).expect("MODULE LIST");
    let Value::Array(mods) = list else {
        panic!("MODULE LIST: {list:?}")
    };
    mods.iter().any(|m| {
        matches!(m, Value::Array(kv) if kv.chunks(2).any(|p| {
            p[0] == Value::BulkString(b"name".to_vec()) && p.get(1) == Some(&Value::BulkString(b"rlock".to_vec()))
        }))
    })
}

#[test]
fn module_load_at_runtime_with_configs() {
    for flavor in flavors() {
        let mut server = Server::builder(flavor).module(false).start();
        let mut c = server.conn();
        let path = module_path().display().to_string();
        for bad in [
            vec!["lease-ms", "0"],
            vec!["lease-ms"],
            vec!["lease-ms", "abc"],
            vec!["publish", "maybe"],
            vec!["no-such-config", "1"],
        ] {
            let mut args = vec!["MODULE", "LOAD", path.as_str()];
            args.extend(bad.iter().copied());
            let r = call(&mut c, &args);
            assert!(
                r.is_err(),
                "{flavor}: MODULE LOAD with {bad:?} should fail, got {r:?}"
            );
            server.assert_alive(&format!("MODULE LOAD with {bad:?}"));
            assert!(
                !rlock_loaded(&mut c),
                "{flavor}: module stayed loaded after a bad MODULE LOAD {bad:?}"
            );
        }
        let r = call(
            &mut c,
            &["MODULE", "LOAD", &path, "lease-ms", "4000", "publish", "no"],
        );
        assert_eq!(r, Ok(Value::Okay), "{flavor}: MODULE LOAD with configs");
        assert!(
            rlock_loaded(&mut c),
            "{flavor}: MODULE LIST does not show rlock"
        );
        assert_eq!(config_get(&mut c, "rlock.lease-ms"), "4000", "{flavor}");
        assert_eq!(config_get(&mut c, "rlock.publish"), "no", "{flavor}");
        let p = default_lease_pttl(&mut c, "a");
        assert!(near(p, 4000), "{flavor}: PTTL {p} with lease-ms 4000");
    }
}

#[test]
fn config_set_get_and_ranges() {
    for (flavor, mut server, mut c) in servers() {
        assert_okay(&mut c, &["CONFIG", "SET", "rlock.lease-ms", "12345"]);
        assert_eq!(config_get(&mut c, "rlock.lease-ms"), "12345", "{flavor}");
        let p = default_lease_pttl(&mut c, "a");
        assert!(
            near(p, 12_345),
            "{flavor}: PTTL {p} after CONFIG SET rlock.lease-ms 12345"
        );
        call(&mut c, &["RLOCK.RENEW", "a", "o", "LEASE", "90000"]).expect("renew");
        assert_int(&mut c, &["RLOCK.RENEW", "a", "o"], 1);
        let p = pttl(&mut c, b"a");
        assert!(
            near(p, 12_345),
            "{flavor}: RENEW without LEASE gave PTTL {p}, want lease-ms 12345"
        );

        assert_okay(&mut c, &["CONFIG", "SET", "rlock.fair-wait-ms", "5000"]);
        assert_eq!(config_get(&mut c, "rlock.fair-wait-ms"), "5000", "{flavor}");

        for (name, bad) in [
            ("rlock.lease-ms", "0"),
            ("rlock.lease-ms", "-1"),
            ("rlock.lease-ms", "abc"),
            ("rlock.lease-ms", "1.5"),
            ("rlock.lease-ms", "1099511627777"),
            ("rlock.fair-wait-ms", "-1"),
            ("rlock.fair-wait-ms", "abc"),
            ("rlock.publish", "maybe"),
            ("rlock.publish", ""),
        ] {
            let old = config_get(&mut c, name);
            let r = call(&mut c, &["CONFIG", "SET", name, bad]);
            assert!(
                matches!(&r, Err(e) if e.starts_with("ERR")),
                "{flavor}: CONFIG SET {name} {bad:?} should fail, got {r:?}"
            );
            assert_eq!(
                config_get(&mut c, name),
                old,
                "{flavor}: {name} changed by a rejected CONFIG SET"
            );
            server.assert_alive(&format!("CONFIG SET {name} {bad:?}"));
        }

        assert!(
            release_publishes(&server, &mut c, "p1"),
            "{flavor}: publish yes (default) did not publish"
        );
        assert_okay(&mut c, &["CONFIG", "SET", "rlock.publish", "no"]);
        assert!(
            !release_publishes(&server, &mut c, "p2"),
            "{flavor}: published with rlock.publish no"
        );
        // Force-release is silent too.
        let chan = unlock_channel(b"p3");
        let mut sub = Subscriber::new(&server, &[&chan]);
        call(&mut c, &["RLOCK.ACQUIRE", "p3", "o"]).expect("acquire");
        assert_int(&mut c, &["RLOCK.FORCERELEASE", "p3"], 1);
        assert_eq!(
            sub.drain(),
            vec![],
            "{flavor}: force-release published with rlock.publish no"
        );
        assert_okay(&mut c, &["CONFIG", "SET", "rlock.publish", "yes"]);
        assert!(
            release_publishes(&server, &mut c, "p4"),
            "{flavor}: publish yes again did not publish"
        );
    }
}

/// `INFO rlock` counter by name; the server prefixes module fields with `rlock_`.
fn counter(info: &HashMap<String, String>, name: &str) -> Option<i64> {
    info.get(name)
        .or_else(|| info.get(&format!("rlock_{name}")))
        .and_then(|v| v.parse().ok())
}

#[test]
fn info_rlock_counters() {
    const COUNTERS: [&str; 8] = [
        "acquires",
        "reentries",
        "releases",
        "handoffs",
        "expiries",
        "session_releases",
        "blocked",
        "tracked_locks",
    ];
    for (flavor, server) in each_server() {
        let info = server.info("rlock");
        for name in COUNTERS {
            assert!(
                counter(&info, name).is_some(),
                "{flavor}: INFO rlock has no integer `{name}`: {info:?}"
            );
        }
        let before = server.info("rlock");
        let mut c = server.conn();
        for args in [
            vec!["RLOCK.ACQUIRE", "k1", "o"],
            vec!["RLOCK.ACQUIRE", "k2", "o", "TOKEN"],
            vec!["RLOCK.ACQUIRE", "k1", "o"],
            vec!["RLOCK.ACQUIRE", "k1", "other"],
            vec!["RLOCK.RENEW", "k1", "o"],
            vec!["RLOCK.RELEASE", "k1", "o"],
            vec!["RLOCK.RELEASE", "k1", "o"],
            vec!["RLOCK.RELEASE", "k2", "o"],
        ] {
            call(&mut c, &args).unwrap_or_else(|e| panic!("{flavor}: {args:?}: {e}"));
        }
        let _ = call(&mut c, &["RLOCK.RELEASE", "k2", "o"]); // NOTHELD: counts nothing
        let _ = call(&mut c, &["RLOCK.ACQUIRE", "k2", "o", "LEASE", "0"]); // bad call: counts nothing
        let after = server.info("rlock");
        let delta =
            |name: &str| counter(&after, name).unwrap_or(-1) - counter(&before, name).unwrap_or(-1);
        assert_eq!(
            delta("acquires"),
            2,
            "{flavor}: acquires (free → held) after 2 acquires, 1 re-entry, 1 miss\n{after:?}"
        );
        assert_eq!(delta("reentries"), 1, "{flavor}: reentries\n{after:?}");
        assert_eq!(
            delta("releases"),
            2,
            "{flavor}: releases (full) after 2 full releases and 1 undo\n{after:?}"
        );
        assert_eq!(delta("handoffs"), 0, "{flavor}: handoffs");
        assert_eq!(delta("session_releases"), 0, "{flavor}: session_releases");
        assert_eq!(counter(&after, "blocked"), Some(0), "{flavor}: blocked");
    }
}

/// Argument names of a `COMMAND DOCS` entry, nested blocks included, lower-cased.
fn arg_names(args: &Value, out: &mut Vec<String>) {
    let Value::Array(list) = args else { return };
    for arg in list {
        let Value::Array(kv) = arg else { continue };
        for pair in kv.chunks(2) {
            match (&pair[0], pair.get(1)) {
                (Value::BulkString(k), Some(Value::BulkString(v))) if k == b"name" => {
                    out.push(String::from_utf8_lossy(v).to_lowercase())
                }
                (Value::BulkString(k), Some(v)) if k == b"arguments" => arg_names(v, out),
                _ => {}
            }
        }
    }
}

#[test]
fn command_docs_describe_arguments() {
    let expected: [(&str, &[&str]); 5] = [
        ("rlock.acquire", &["key", "owner", "ms", "token"]),
        ("rlock.release", &["key", "owner"]),
        ("rlock.renew", &["key", "owner", "ms"]),
        ("rlock.forcerelease", &["key"]),
        ("rlock.info", &["key"]),
    ];
    for (flavor, _server, mut c) in servers() {
        for (cmd, want) in expected {
            let docs = call(&mut c, &["COMMAND", "DOCS", cmd])
                .unwrap_or_else(|e| panic!("{flavor}: COMMAND DOCS {cmd}: {e}"));
            let Value::Array(top) = &docs else {
                panic!("{flavor}: COMMAND DOCS {cmd}: {docs:?}")
            };
            assert_eq!(
                top.len(),
                2,
                "{flavor}: COMMAND DOCS {cmd} has no entry: {docs:?}"
            );
            let Value::Array(fields) = &top[1] else {
                panic!("{flavor}: {docs:?}")
            };
            let mut summary = None;
            let mut names = Vec::new();
            for pair in fields.chunks(2) {
                match (&pair[0], pair.get(1)) {
                    (Value::BulkString(k), Some(v)) if k == b"summary" => summary = Some(v.clone()),
                    (Value::BulkString(k), Some(v)) if k == b"arguments" => {
                        arg_names(v, &mut names)
                    }
                    _ => {}
                }
            }
            assert!(
                matches!(&summary, Some(Value::BulkString(s)) if !s.is_empty()),
                "{flavor}: COMMAND DOCS {cmd} has no summary: {docs:?}"
            );
            for w in want {
                assert!(
                    names.iter().any(|n| n == w),
                    "{flavor}: COMMAND DOCS {cmd} arguments {names:?} lack `{w}`"
                );
            }
            // The key is declared, so cluster routing and ACL key patterns work.
            let mut args = vec!["COMMAND", "GETKEYS", cmd, "the-key"];
            if cmd != "rlock.forcerelease" && cmd != "rlock.info" {
                args.push("owner");
            }
            assert_eq!(
                call(&mut c, &args),
                Ok(Value::Array(vec![Value::BulkString(b"the-key".to_vec())])),
                "{flavor}: COMMAND GETKEYS {cmd}"
            );
        }
    }
}
