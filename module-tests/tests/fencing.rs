//! Fencing counters keep growing on every free-to-held transition once a lock is
//! fenced, whatever the module can remember: across AOF and RDB restarts, a module
//! loaded into a server that already holds counters, and counters written or
//! deleted by other clients.

use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

fn run(c: &mut Connection, args: &[&str]) -> Value {
    call(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn token(c: &mut Connection, key: &str) -> Option<i64> {
    redis::cmd("GET")
        .arg(token_key(key.as_bytes()))
        .query::<Option<i64>>(c)
        .expect("GET token")
}

/// A take without TOKEN bumps an existing counter, and a TOKEN re-entry returns it.
fn check_bumps(flavor: Flavor, what: &str, c: &mut Connection, key: &str, before: i64) {
    assert_eq!(
        run(c, &["RLOCK.ACQUIRE", key, "plain", "LEASE", "60000"]),
        Value::Int(1),
        "{flavor} {what}"
    );
    assert_eq!(
        token(c, key),
        Some(before + 1),
        "{flavor} {what}: a take from free must bump the counter"
    );
    assert_eq!(
        run(c, &["RLOCK.ACQUIRE", key, "plain", "TOKEN"]),
        Value::Int(before + 1),
        "{flavor} {what}: a TOKEN re-entry returns the holder's token"
    );
    run(c, &["RLOCK.FORCERELEASE", key]);
}

#[test]
fn counters_survive_aof_and_rdb_restarts() {
    for flavor in flavors() {
        for aof in [true, false] {
            let what = if aof { "AOF" } else { "RDB" };
            let mut server = Server::builder(flavor)
                .config("appendonly", if aof { "yes" } else { "no" })
                .config("appendfsync", "always")
                .start();
            let mut c = server.conn();
            assert_eq!(
                run(&mut c, &["RLOCK.ACQUIRE", "f", "a", "TOKEN"]),
                Value::Int(1)
            );
            run(&mut c, &["RLOCK.RELEASE", "f", "a"]);
            if !aof {
                run(&mut c, &["SAVE"]);
            }
            server.restart();
            let mut c = server.conn();
            check_bumps(flavor, what, &mut c, "f", 1);
        }
    }
}

#[test]
fn counters_that_predate_the_module_are_bumped() {
    for flavor in flavors() {
        let server = Server::builder(flavor).module(false).start();
        let mut c = server.conn();
        run(&mut c, &["SET", "redisson_lock_token:{old}", "41"]);
        let module = module_path();
        run(&mut c, &["MODULE", "LOAD", module.to_str().unwrap()]);
        check_bumps(flavor, "loaded at run time", &mut c, "old", 41);
    }
}

#[test]
fn counters_restored_or_deleted_by_others() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let mut c = server.conn();
        // A counter restored from a dump is seen.
        run(&mut c, &["RLOCK.ACQUIRE", "src", "a", "TOKEN"]);
        run(&mut c, &["RLOCK.RELEASE", "src", "a"]);
        let dump: Vec<u8> = redis::cmd("DUMP")
            .arg("redisson_lock_token:{src}")
            .query(&mut c)
            .expect("DUMP");
        redis::cmd("RESTORE")
            .arg("redisson_lock_token:{dst}")
            .arg(0)
            .arg(dump)
            .query::<()>(&mut c)
            .expect("RESTORE");
        check_bumps(flavor, "restored", &mut c, "dst", 1);
        // A counter renamed in is seen.
        run(
            &mut c,
            &[
                "RENAME",
                "redisson_lock_token:{dst}",
                "redisson_lock_token:{moved}",
            ],
        );
        check_bumps(flavor, "renamed", &mut c, "moved", 2);
        // A deleted counter is not recreated by a take without TOKEN.
        run(&mut c, &["DEL", "redisson_lock_token:{src}"]);
        assert_eq!(
            run(&mut c, &["RLOCK.ACQUIRE", "src", "b"]),
            Value::Int(1),
            "{flavor}"
        );
        assert_eq!(
            token(&mut c, "src"),
            None,
            "{flavor}: deleted counter recreated"
        );
        run(&mut c, &["RLOCK.RELEASE", "src", "b"]);
        assert_eq!(
            run(&mut c, &["RLOCK.ACQUIRE", "src", "b", "TOKEN"]),
            Value::Int(1),
            "{flavor}"
        );
    }
}
