//! Fencing counters keep growing on every free-to-held transition once a lock is
//! fenced, whatever the module can remember: across AOF and RDB restarts, a module
//! loaded into a server that already holds counters, and counters written or
//! deleted by other clients. A token is greater than every token handed out before
//! on its lock to anyone else, whoever incremented the counter (Redisson's
//! `RFencedLock`, a plain `INCR`), and after a failover that `WAIT` acknowledged.

use std::collections::HashMap;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

/// What Redisson's `RFencedLock` does to take or re-enter a lock, in one script:
/// `INCR` the counter on every acquire, re-entries included, and reply
/// `{-1, token}`, or `{pttl, -1}` when another owner holds it.
/// KEYS: lock, counter. ARGV: lease ms, owner.
const FENCED_LOCK: &str = r#"
local free = redis.call('exists', KEYS[1]) == 0
if free or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local token = redis.call('incr', KEYS[2])
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}
"#;

/// Redisson's plain `RLock` acquire: no counter. Null when acquired, else the pttl.
/// KEYS: lock. ARGV: lease ms, owner.
const PLAIN_LOCK: &str = r#"
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
"#;

/// Redisson's unlock: null when not held by owner, 0 a re-entry undone, 1 freed.
/// KEYS: lock, channel. ARGV: owner.
const UNLOCK: &str = r#"
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
if redis.call('hincrby', KEYS[1], ARGV[1], -1) > 0 then
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1
"#;

/// A Redisson fenced acquire of `key` by `owner`: the token, or None when busy.
fn fenced_lock(c: &mut Connection, key: &str, owner: &str) -> Option<i64> {
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg(FENCED_LOCK)
        .arg(2)
        .arg(key)
        .arg(token_key(key.as_bytes()))
        .arg(60_000)
        .arg(owner)
        .query(c)
        .expect("fenced lock script");
    (reply[0] == -1).then_some(reply[1])
}

/// A Redisson plain acquire: whether it was taken (or re-entered).
fn plain_lock(c: &mut Connection, key: &str, owner: &str) -> bool {
    let reply: Option<i64> = redis::cmd("EVAL")
        .arg(PLAIN_LOCK)
        .arg(1)
        .arg(key)
        .arg(60_000)
        .arg(owner)
        .query(c)
        .expect("plain lock script");
    reply.is_none()
}

/// A Redisson unlock: Some(1) freed, Some(0) re-entry undone, None not held.
fn unlock(c: &mut Connection, key: &str, owner: &str) -> Option<i64> {
    redis::cmd("EVAL")
        .arg(UNLOCK)
        .arg(2)
        .arg(key)
        .arg(unlock_channel(key.as_bytes()))
        .arg(owner)
        .query(c)
        .expect("unlock script")
}

/// `RLOCK.ACQUIRE key owner TOKEN`: the token, or None when busy.
fn token_acquire(c: &mut Connection, key: &str, owner: &str) -> Option<i64> {
    match run(c, &["RLOCK.ACQUIRE", key, owner, "LEASE", "60000", "TOKEN"]) {
        Value::Int(t) => Some(t),
        Value::Nil => None,
        other => panic!("RLOCK.ACQUIRE {key} {owner} TOKEN replied {other:?}"),
    }
}

fn incr(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("INCR")
        .arg(token_key(key.as_bytes()))
        .query(c)
        .expect("INCR")
}

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
            assert_int(&mut c, &["RLOCK.ACQUIRE", "f", "a", "TOKEN"], 1);
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
    for (flavor, _server, mut c) in servers() {
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
        assert_int(&mut c, &["RLOCK.ACQUIRE", "src", "b"], 1);
        assert_eq!(
            token(&mut c, "src"),
            None,
            "{flavor}: deleted counter recreated"
        );
        run(&mut c, &["RLOCK.RELEASE", "src", "b"]);
        assert_int(&mut c, &["RLOCK.ACQUIRE", "src", "b", "TOKEN"], 1);
    }
}

#[test]
fn counters_created_by_others_are_bumped() {
    // Started empty: the module remembers counters instead of looking them up.
    for (flavor, _server, mut c) in servers() {
        // Redisson's fenced lock creates the counter with INCR inside a script.
        assert_eq!(fenced_lock(&mut c, "r", "uuid:1"), Some(1), "{flavor}");
        assert_eq!(unlock(&mut c, "r", "uuid:1"), Some(1), "{flavor}");
        check_bumps(flavor, "created by a Redisson script", &mut c, "r", 1);
        // A plain INCR from another client.
        assert_eq!(incr(&mut c, "i"), 1, "{flavor}");
        check_bumps(flavor, "created by INCR", &mut c, "i", 1);
        // A plain SET, and a counter created inside MULTI.
        run(&mut c, &["SET", "redisson_lock_token:{s}", "10"]);
        check_bumps(flavor, "created by SET", &mut c, "s", 10);
        let _: Vec<i64> = redis::pipe()
            .atomic()
            .cmd("INCRBY")
            .arg("redisson_lock_token:{m}")
            .arg(7)
            .query(&mut c)
            .expect("MULTI INCRBY");
        check_bumps(flavor, "created inside MULTI", &mut c, "m", 7);
        // Created by someone else while the lock was held by rlock without fencing.
        run(&mut c, &["RLOCK.ACQUIRE", "h", "a"]);
        assert_eq!(incr(&mut c, "h"), 1, "{flavor}");
        run(&mut c, &["RLOCK.RELEASE", "h", "a"]);
        check_bumps(flavor, "created while held", &mut c, "h", 1);
    }
}

#[test]
fn token_reentries_never_repeat_a_token_handed_to_another() {
    for (flavor, _server, mut c) in servers() {
        assert_eq!(token_acquire(&mut c, "k", "a"), Some(1), "{flavor}");
        assert_eq!(
            token_acquire(&mut c, "k", "a"),
            Some(1),
            "{flavor}: a re-entry keeps the hold's token while nobody else took one"
        );
        // Another client hands out 2 (a fenced client that INCRs on its own).
        assert_eq!(incr(&mut c, "k"), 2, "{flavor}");
        assert_eq!(
            token_acquire(&mut c, "k", "a"),
            Some(3),
            "{flavor}: token 2 was handed out since: the re-entry must get a new one"
        );
        assert_eq!(
            token_acquire(&mut c, "k", "a"),
            Some(3),
            "{flavor}: and keeps it"
        );
        // Redisson's fenced lock re-enters with the same owner: its INCR hands out 4.
        assert_eq!(fenced_lock(&mut c, "k", "a"), Some(4), "{flavor}");
        assert_eq!(token_acquire(&mut c, "k", "a"), Some(5), "{flavor}");
        run(&mut c, &["RLOCK.FORCERELEASE", "k"]);
        // A hold taken by Redisson's plain lock (no INCR) is not the hold token 5 was
        // granted to.
        assert!(plain_lock(&mut c, "k", "x"), "{flavor}");
        assert_eq!(
            token_acquire(&mut c, "k", "x"),
            Some(6),
            "{flavor}: a hold rlock did not grant gets a new token"
        );
        assert_eq!(token_acquire(&mut c, "k", "x"), Some(6), "{flavor}");
        assert_eq!(token(&mut c, "k"), Some(6), "{flavor}");
    }
}

/// Owners taking one lock through rlock (with and without TOKEN), Redisson's fenced
/// and plain scripts, and bare INCRs, in random order: every token handed out is
/// greater than every token handed out before to another owner.
#[test]
fn mixed_redisson_and_rlock_tokens_only_grow() {
    const OWNERS: [&str; 4] = ["a", "b", "uuid:1", "uuid:2"];
    let seed = test_seed();
    eprintln!("RLOCK_SEED={seed}");
    for flavor in flavors() {
        for (loaded_late, what) in [(false, "fresh server"), (true, "module loaded into data")] {
            let server = Server::builder(flavor).module(!loaded_late).start();
            let mut c = server.conn();
            if loaded_late {
                run(&mut c, &["SET", "unrelated", "1"]);
                let module = module_path();
                run(&mut c, &["MODULE", "LOAD", module.to_str().unwrap()]);
            }
            let mut rng = StdRng::seed_from_u64(seed);
            // Owner -> the greatest token it was handed.
            let mut handed: HashMap<&'static str, i64> = HashMap::new();
            let mut check = |owner: &'static str, token: i64, how: &str, step: usize| {
                let others = handed
                    .iter()
                    .filter(|(o, _)| **o != owner)
                    .map(|(_, t)| *t)
                    .max()
                    .unwrap_or(0);
                assert!(
                    token > others,
                    "{flavor} {what} seed {seed} step {step}: {how} handed {owner} token {token}, \
                     but {others} was already handed to another ({handed:?})"
                );
                let own = handed.entry(owner).or_insert(0);
                *own = (*own).max(token);
            };
            for step in 0..400 {
                let owner = OWNERS[rng.random_range(0..OWNERS.len())];
                match rng.random_range(0..10) {
                    0 | 1 => {
                        if let Some(t) = token_acquire(&mut c, "l", owner) {
                            check(owner, t, "RLOCK.ACQUIRE TOKEN", step);
                        }
                    }
                    2 => {
                        run(&mut c, &["RLOCK.ACQUIRE", "l", owner, "LEASE", "60000"]);
                    }
                    3 | 4 => {
                        if let Some(t) = fenced_lock(&mut c, "l", owner) {
                            check(owner, t, "the fenced lock script", step);
                        }
                    }
                    5 => {
                        plain_lock(&mut c, "l", owner);
                    }
                    6 => {
                        let t = incr(&mut c, "l");
                        check("INCR", t, "INCR", step);
                    }
                    7 => {
                        let _ = call(&mut c, &["RLOCK.RELEASE", "l", owner]);
                    }
                    8 => {
                        unlock(&mut c, "l", owner);
                    }
                    _ => {
                        if rng.random_bool(0.3) {
                            run(&mut c, &["RLOCK.FORCERELEASE", "l"]);
                        }
                    }
                }
            }
        }
    }
}

/// A primary with the module and a replica with the module.
fn primary_and_replica(flavor: Flavor) -> (Server, Server) {
    let primary = Server::start(flavor);
    let replica = Server::builder(flavor).replica_of(primary.port).start();
    (primary, replica)
}

fn wait_acked(flavor: Flavor, c: &mut Connection) {
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(c).expect("WAIT");
    assert_eq!(acked, 1, "{flavor}: the replica did not acknowledge");
}

#[test]
fn tokens_after_failover_exceed_acknowledged_ones() {
    for flavor in flavors() {
        let (mut primary, replica) = primary_and_replica(flavor);
        let mut p = primary.conn();
        // Held across the failover; another client hands out a token meanwhile.
        assert_eq!(token_acquire(&mut p, "held", "a"), Some(1), "{flavor}");
        assert_eq!(incr(&mut p, "held"), 2, "{flavor}");
        // Expires during the failover.
        assert_eq!(
            run(
                &mut p,
                &["RLOCK.ACQUIRE", "exp", "b", "LEASE", "300", "TOKEN"]
            ),
            Value::Int(1),
            "{flavor}"
        );
        // Taken and given back by Redisson's fenced lock.
        assert_eq!(fenced_lock(&mut p, "red", "uuid:1"), Some(1), "{flavor}");
        assert_eq!(fenced_lock(&mut p, "red", "uuid:1"), Some(2), "{flavor}");
        unlock(&mut p, "red", "uuid:1");
        unlock(&mut p, "red", "uuid:1");
        // Passed from one rlock holder to another.
        assert_eq!(token_acquire(&mut p, "moved", "c"), Some(1), "{flavor}");
        run(&mut p, &["RLOCK.RELEASE", "moved", "c"]);
        assert_eq!(token_acquire(&mut p, "moved", "d"), Some(2), "{flavor}");
        wait_acked(flavor, &mut p);
        let acked = [("held", 2), ("exp", 1), ("red", 2), ("moved", 2)];

        primary.stop();
        let mut r = replica.conn();
        run(&mut r, &["REPLICAOF", "NO", "ONE"]);
        assert!(
            wait_until(Duration::from_secs(10), || {
                replica.info("replication").get("role").map(String::as_str) == Some("master")
            }),
            "{flavor}: the replica was not promoted"
        );
        std::thread::sleep(Duration::from_millis(350));
        // The holder re-enters: token 2 went to someone else, so it gets a new one.
        let held = token_acquire(&mut r, "held", "a").expect("a still holds");
        // Expired: taken from free without TOKEN, then fenced by a re-entry.
        assert_eq!(
            run(&mut r, &["RLOCK.ACQUIRE", "exp", "e", "LEASE", "60000"]),
            Value::Int(1),
            "{flavor}: the lease ran out during the failover"
        );
        let exp = token_acquire(&mut r, "exp", "e").expect("e holds");
        let red = token_acquire(&mut r, "red", "f").expect("red is free");
        run(&mut r, &["RLOCK.FORCERELEASE", "moved"]);
        let moved = token_acquire(&mut r, "moved", "g").expect("moved is free");
        for ((key, before), after) in acked.iter().zip([held, exp, red, moved]) {
            assert!(
                after > *before,
                "{flavor}: {key}: token {after} after the failover, but {before} was acknowledged before it"
            );
        }
    }
}

#[test]
fn allkeys_eviction_is_reported() {
    fn unsafe_flag(server: &Server) -> Option<String> {
        server.info("rlock").get("rlock_eviction_unsafe").cloned()
    }
    let warned = |server: &Server, policy: &str| {
        server
            .log()
            .lines()
            .filter(|l| l.contains("rlock") && l.contains(policy) && l.contains("evict"))
            .count()
    };
    for (flavor, server) in each_server() {
        assert_eq!(unsafe_flag(&server).as_deref(), Some("0"), "{flavor}");
        assert_eq!(warned(&server, "noeviction"), 0, "{flavor}");

        let server = Server::builder(flavor)
            .config("maxmemory-policy", "allkeys-lru")
            .start();
        assert_eq!(
            unsafe_flag(&server).as_deref(),
            Some("1"),
            "{flavor}: allkeys-lru at startup"
        );
        assert_eq!(
            warned(&server, "allkeys-lru"),
            1,
            "{flavor}: no warning at load:\n{}",
            server.log_tail(20)
        );
        let mut c = server.conn();
        for (policy, flag) in [
            ("noeviction", "0"),
            ("volatile-lru", "0"),
            ("allkeys-random", "1"),
            ("volatile-ttl", "0"),
            ("allkeys-lfu", "1"),
        ] {
            run(&mut c, &["CONFIG", "SET", "maxmemory-policy", policy]);
            assert_eq!(
                unsafe_flag(&server).as_deref(),
                Some(flag),
                "{flavor}: after CONFIG SET maxmemory-policy {policy}"
            );
        }
        assert_eq!(
            warned(&server, "allkeys-random"),
            1,
            "{flavor}: no warning on CONFIG SET:\n{}",
            server.log_tail(20)
        );
        assert_eq!(warned(&server, "allkeys-lfu"), 1, "{flavor}");
        // Other configs changed alone do not warn again.
        run(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
        assert_eq!(warned(&server, "allkeys-lfu"), 1, "{flavor}");

        // Loaded at run time into a server that already evicts any key.
        let server = Server::builder(flavor)
            .module(false)
            .config("maxmemory-policy", "allkeys-lfu")
            .start();
        let mut c = server.conn();
        let module = module_path();
        run(&mut c, &["MODULE", "LOAD", module.to_str().unwrap()]);
        assert_eq!(unsafe_flag(&server).as_deref(), Some("1"), "{flavor}");
        assert_eq!(warned(&server, "allkeys-lfu"), 1, "{flavor}");
    }
}
