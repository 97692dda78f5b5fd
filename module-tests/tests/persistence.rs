//! Held locks, counts, tokens and remaining leases survive a restart (AOF and RDB).

use std::collections::BTreeMap;
use std::time::Instant;

use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

#[derive(Debug, PartialEq)]
struct Saved {
    fields: BTreeMap<Vec<u8>, Vec<u8>>,
    pexpiretime: i64,
    pttl: i64,
    token: Option<Vec<u8>>,
}

fn save(c: &mut Connection, key: &[u8]) -> Saved {
    let token: Option<Vec<u8>> = redis::cmd("GET").arg(token_key(key)).query(c).expect("GET");
    Saved {
        fields: hgetall(c, key),
        pexpiretime: pexpiretime(c, key),
        pttl: pttl(c, key),
        token,
    }
}

fn name(i: usize) -> Vec<u8> {
    if i == 5 {
        b"p{slot}lock".to_vec()
    } else {
        format!("plock:{i}").into_bytes()
    }
}

/// Takes 12 locks with leases of minutes, re-entered 1..3 times, half with TOKEN;
/// then fully releases locks 0 and 1 and undoes one re-entry of lock 2.
fn workload(flavor: Flavor, c: &mut Connection) {
    for i in 0..12 {
        let (k, owner) = (name(i), format!("svc-{}:{i}", i % 3));
        let lease = (120_000 + i * 10_000).to_string();
        for _ in 0..=(i % 3) {
            let mut args: Vec<&[u8]> = vec![
                b"RLOCK.ACQUIRE",
                &k,
                owner.as_bytes(),
                b"LEASE",
                lease.as_bytes(),
            ];
            if i % 2 == 0 {
                args.push(b"TOKEN");
            }
            let r = call_bytes(c, &args);
            assert!(
                matches!(r, Ok(Value::Int(_))),
                "{flavor}: acquire {i}: {r:?}"
            );
        }
    }
    for (i, times) in [(0, 1), (1, 2), (2, 1)] {
        let owner = format!("svc-{}:{i}", i % 3);
        for _ in 0..times {
            call_bytes(c, &[b"RLOCK.RELEASE", &name(i), owner.as_bytes()]).expect("release");
        }
    }
    assert_eq!(
        hgetall(c, &name(2)).into_values().collect::<Vec<_>>(),
        vec![b"2".to_vec()],
        "{flavor}: lock 2 count"
    );
}

fn check_after_restart(
    flavor: Flavor,
    what: &str,
    c: &mut Connection,
    before: &[Saved],
    saved_at: Instant,
) {
    for (i, b) in before.iter().enumerate() {
        let k = String::from_utf8_lossy(&name(i)).to_string();
        let a = save(c, &name(i));
        // Upper bound of the time between the two PTTL reads, restart included.
        let elapsed_ms = saved_at.elapsed().as_millis() as i64;
        assert_eq!(a.fields, b.fields, "{flavor}: {what}: owners/counts of {k}");
        assert_eq!(a.token, b.token, "{flavor}: {what}: token of {k}");
        assert!(
            (a.pexpiretime - b.pexpiretime).abs() <= 50,
            "{flavor}: {what}: absolute expiry of {k}: {} then {}",
            b.pexpiretime,
            a.pexpiretime
        );
        if b.pttl > 0 {
            assert!(
                a.pttl <= b.pttl && a.pttl >= b.pttl - elapsed_ms - 5,
                "{flavor}: {what}: PTTL of {k}: {} before, {} after {elapsed_ms} ms (restart included)",
                b.pttl,
                a.pttl
            );
        } else {
            assert_eq!(a.pttl, -2, "{flavor}: {what}: {k} came back");
        }
    }
}

/// After the restart the module still knows the holds: re-entry, exclusion, release, tokens.
fn check_locks_still_work(flavor: Flavor, what: &str, c: &mut Connection, before: &[Saved]) {
    let undo = ["RLOCK.RELEASE", "p{slot}lock", "svc-2:5"];
    for (args, want, step) in [
        (
            &["RLOCK.ACQUIRE", "plock:2", "svc-2:2"][..],
            Value::Int(3),
            "re-entry",
        ),
        (
            &["RLOCK.ACQUIRE", "plock:3", "svc-9:9"],
            Value::Nil,
            "exclusion",
        ),
        (&undo, Value::Int(0), "undo"),
        (&undo, Value::Int(0), "undo"),
        (&undo, Value::Int(1), "full release"),
    ] {
        assert_reply(c, args, want, format_args!("{flavor}: {what}: {step}"));
    }
    let old: i64 = String::from_utf8_lossy(before[4].token.as_ref().expect("token of lock 4"))
        .parse()
        .expect("int");
    // The module cannot know whom the counter's value went to before the restart,
    // so the holder's re-entry takes a new token, and keeps that one.
    let renewed = call(c, &["RLOCK.ACQUIRE", "plock:4", "svc-1:4", "TOKEN"]);
    assert_eq!(
        renewed,
        Ok(Value::Int(old + 1)),
        "{flavor}: {what}: re-entry after a restart takes a new token"
    );
    assert_eq!(
        call(c, &["RLOCK.ACQUIRE", "plock:4", "svc-1:4", "TOKEN"]),
        renewed,
        "{flavor}: {what}: and keeps it"
    );
    let r = call(c, &["RLOCK.ACQUIRE", "plock:0", "x", "TOKEN"]);
    let old0: i64 = String::from_utf8_lossy(before[0].token.as_ref().expect("token of lock 0"))
        .parse()
        .expect("int");
    assert!(
        matches!(r, Ok(Value::Int(t)) if t > old0),
        "{flavor}: {what}: token after restart {r:?}, was {old0}"
    );
}

/// A server that appends every write to its AOF and syncs it at once.
fn aof_server(flavor: Flavor) -> Server {
    Server::builder(flavor)
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .start()
}

/// Runs the workload, then saves what its twelve locks hold, and when.
fn workload_saved(flavor: Flavor, c: &mut Connection) -> (Vec<Saved>, Instant) {
    workload(flavor, c);
    let saved_at = Instant::now();
    ((0..12).map(|i| save(c, &name(i))).collect(), saved_at)
}

/// [`workload_saved`] on an [`aof_server`].
fn aof_server_after_workload(flavor: Flavor) -> (Server, Vec<Saved>, Instant) {
    let server = aof_server(flavor);
    let (before, saved_at) = workload_saved(flavor, &mut server.conn());
    (server, before, saved_at)
}

#[test]
fn aof_restart_keeps_locks_and_leases() {
    for flavor in flavors() {
        let (mut server, before, saved_at) = aof_server_after_workload(flavor);
        server.restart();
        let mut c = server.conn();
        check_after_restart(flavor, "AOF restart", &mut c, &before, saved_at);
        check_locks_still_work(flavor, "AOF restart", &mut c, &before);
    }
}

/// The AOF holds plain commands only: a server WITHOUT the module loads it.
#[test]
fn aof_loads_without_the_module() {
    for flavor in flavors() {
        let (mut server, before, saved_at) = aof_server_after_workload(flavor);
        server.stop();
        let dir = server.dir().display().to_string();
        let plain = Server::builder(flavor)
            .module(false)
            .config("appendonly", "yes")
            .config("dir", &dir)
            .start();
        let mut c = plain.conn();
        check_after_restart(
            flavor,
            "AOF loaded without the module",
            &mut c,
            &before,
            saved_at,
        );
        let log = plain.log();
        assert!(
            !log.contains("Unknown command"),
            "{flavor}: the AOF has module commands:\n{log}"
        );
    }
}

#[test]
fn rdb_restart_keeps_locks_and_leases() {
    for (flavor, mut server, mut c) in servers() {
        let (before, saved_at) = workload_saved(flavor, &mut c);
        assert_eq!(call(&mut c, &["SAVE"]), Ok(Value::Okay), "{flavor}: SAVE");
        server.restart();
        let mut c = server.conn();
        check_after_restart(flavor, "RDB restart", &mut c, &before, saved_at);
        check_locks_still_work(flavor, "RDB restart", &mut c, &before);
    }
}
