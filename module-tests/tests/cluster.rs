//! The module on every node of a real cluster (3 primaries, a replica each): locks on
//! every shard, a classic slot migration with a held lock and waiters, and the unlock
//! messages on sharded pub/sub, where Redisson listens in a cluster.

use std::time::{Duration, Instant};

use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// The error a blocked waiter was answered with; a grant or other reply fails the test.
fn waiter_error(con: &mut redis::Connection, who: &str) -> String {
    match con.recv_response() {
        Err(e) => error_text(&e),
        Ok(Value::ServerError(e)) => error_text(&e.into()),
        Ok(other) => panic!("{who} got {other:?}"),
    }
}

#[test]
fn locks_work_on_every_shard_and_replicate_to_its_replica() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 1);
        for (i, primary) in cluster.primaries.iter().enumerate() {
            let key = cluster.key_on(primary, "shard-lock:");
            let mut con = primary.conn();
            assert_eq!(
                call(&mut con, &["RLOCK.ACQUIRE", &key, "me", "TOKEN"]),
                Ok(Value::Int(1)),
                "{flavor}: primary {i}"
            );
            assert_eq!(call(&mut con, &["WAIT", "1", "2000"]), Ok(Value::Int(1)));
            let replica = &cluster.replicas[i];
            let mut rcon = replica.conn();
            let _ = call(&mut rcon, &["READONLY"]);
            assert_eq!(
                hgetall(&mut rcon, key.as_bytes()).get(&b"me"[..]),
                Some(&b"1".to_vec()),
                "{flavor}: replica {i} has the hold"
            );
            // A node that does not serve the slot redirects, as for any command.
            let other = cluster.other_primary(primary);
            let reply = call(&mut other.conn(), &["RLOCK.ACQUIRE", &key, "you"]);
            assert!(
                matches!(&reply, Err(e) if e.starts_with("MOVED")),
                "{flavor}: {reply:?}"
            );
            assert_eq!(
                call(&mut con, &["RLOCK.RELEASE", &key, "me"]),
                Ok(Value::Int(1))
            );
            // Multi-key calls take keys of one slot (hash tags), and are refused across
            // slots by the server, which finds the keys from the key spec.
            let (a, b) = (format!("{{{key}}}:a"), format!("{{{key}}}:b"));
            let both = ["RLOCK.MACQUIRE", "me", "2", &a, &b];
            assert_eq!(call(&mut con, &both), Ok(Value::Int(2)), "{flavor}");
            let elsewhere = cluster.key_on(other, "shard-lock:");
            let across = call(&mut con, &["RLOCK.MACQUIRE", "me", "2", &a, &elsewhere]);
            assert!(
                matches!(&across, Err(e) if e.starts_with("CROSSSLOT")),
                "{flavor}: {across:?}"
            );
            let moved = call(&mut other.conn(), &["RLOCK.MRELEASE", "me", "2", &a, &b]);
            assert!(
                matches!(&moved, Err(e) if e.starts_with("MOVED")),
                "{flavor}: {moved:?}"
            );
            let release = ["RLOCK.MRELEASE", "me", "2", &a, &b];
            assert_eq!(call(&mut con, &release), Ok(Value::Int(2)), "{flavor}");
            // A permit-expiring semaphore: its zset `{K}:timeout` sits in K's slot, leases
            // reach the replica, and a waiter is served when a lease ends, by timer.
            let sem = cluster.key_on(primary, "shard-sem:");
            let leases = format!("{{{sem}}}:timeout");
            call(&mut con, &["RSEM.TRYSETPERMITS", &sem, "1"]).unwrap();
            let leased = call(&mut con, &["RSEM.LEASE", &sem, "LEASE", "300"]);
            assert!(
                matches!(&leased, Ok(Value::Array(ids)) if ids.len() == 1),
                "{leased:?}"
            );
            assert_eq!(call(&mut con, &["WAIT", "1", "2000"]), Ok(Value::Int(1)));
            assert_eq!(
                call(&mut rcon, &["ZCARD", &leases]),
                Ok(Value::Int(1)),
                "{flavor}"
            );
            let elsewhere = call(&mut other.conn(), &["RSEM.LEASE", &sem, "LEASE", "10"]);
            assert!(
                matches!(&elsewhere, Err(e) if e.starts_with("MOVED")),
                "{flavor}: {elsewhere:?}"
            );
            let started = std::time::Instant::now();
            let waited = call(
                &mut con,
                &["RSEM.LEASE", &sem, "LEASE", "60000", "BLOCK", "5000"],
            );
            assert!(
                matches!(&waited, Ok(Value::Array(ids)) if ids.len() == 1),
                "{waited:?}"
            );
            assert!(started.elapsed().as_millis() < 1_000, "{flavor}");
            assert_eq!(call(&mut con, &["WAIT", "1", "2000"]), Ok(Value::Int(1)));
            assert_eq!(
                call(&mut rcon, &["ZCARD", &leases]),
                Ok(Value::Int(1)),
                "{flavor}"
            );
            assert_eq!(
                call(&mut rcon, &["GET", &sem]),
                Ok(Value::BulkString(b"0".to_vec()))
            );
        }
    }
}

/// The defect: `MIGRATE` removed a held lock from the source, the module granted it to
/// the client blocked there and re-created the key in the migrating slot, while the
/// holder still held it on the target. Now the waiter is redirected (`-ASK`, as the
/// server redirects its own commands on a missing key of a migrating slot), within
/// 1 s, and the source writes nothing; the lock arrives whole on the target.
#[test]
fn a_slot_migration_moves_the_lock_and_redirects_its_waiters() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 0);
        let source = &cluster.primaries[0];
        let target = cluster.other_primary(source);
        let key = cluster.key_on(source, "migrating:");
        let slot = cluster.slot(&key);
        let mut admin = source.conn();
        assert_eq!(
            call(
                &mut admin,
                &[
                    "RLOCK.ACQUIRE",
                    &key,
                    "holder",
                    "LEASE",
                    "30000",
                    "TOKEN",
                    "FAIR"
                ]
            ),
            Ok(Value::Int(1))
        );
        assert_eq!(
            call(
                &mut admin,
                &["RLOCK.ACQUIRE", &key, "holder", "LEASE", "30000"]
            ),
            Ok(Value::Int(2)),
            "{flavor}: re-entered"
        );
        // Two waiters blocked on the source, one of them fair.
        let mut plain = source.conn();
        plain
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut fair = source.conn();
        fair.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let send = |con: &mut redis::Connection, args: &[&str]| {
            let mut cmd = redis::cmd(args[0]);
            for a in &args[1..] {
                cmd.arg(*a);
            }
            con.send_packed_command(&cmd.get_packed_command()).unwrap();
        };
        send(
            &mut plain,
            &["RLOCK.ACQUIRE", &key, "plain", "BLOCK", "8000"],
        );
        send(
            &mut fair,
            &["RLOCK.ACQUIRE", &key, "fair", "BLOCK", "8000", "FAIR"],
        );
        assert!(
            wait_until(Duration::from_secs(2), || {
                source
                    .info("rlock")
                    .get("rlock_blocked")
                    .map(String::as_str)
                    == Some("2")
            }),
            "{flavor}: both waiters blocked"
        );
        let pttl_before = pttl(&mut admin, key.as_bytes());

        cluster.begin_migration(slot, source, target);
        let moved = cluster.migrate_keys(slot, source, target);
        let migrated = Instant::now();
        assert!(moved.contains(&key), "{flavor}: {moved:?}");
        for con in [&mut plain, &mut fair] {
            let error = waiter_error(con, &format!("{flavor}: a waiter on the source"));
            assert_eq!(
                error,
                format!("ASK {slot} 127.0.0.1:{}", target.port),
                "{flavor}: the waiter is sent where the lock went"
            );
        }
        assert!(
            migrated.elapsed() < Duration::from_secs(1),
            "{flavor}: redirected within 1 s"
        );
        thread_sleep(100);
        assert!(
            !keyspace(&mut admin).contains_key(key.as_bytes()),
            "{flavor}: the source did not re-create the lock"
        );
        assert_eq!(
            source
                .info("rlock")
                .get("rlock_blocked")
                .map(String::as_str),
            Some("0")
        );
        cluster.end_migration(slot, source, target);

        // Owners, counts, lease, fair queue and token counter arrived together.
        let mut tcon = target.conn();
        let holders = hgetall(&mut tcon, key.as_bytes());
        assert_eq!(holders.len(), 1, "{flavor}: {holders:?}");
        assert_eq!(holders.get(&b"holder"[..]), Some(&b"2".to_vec()));
        let left = pttl(&mut tcon, key.as_bytes());
        assert!(
            left > 0 && left <= pttl_before,
            "{flavor}: the lease moved: {left} after {pttl_before}"
        );
        assert!(
            call(
                &mut tcon,
                &[
                    "EXISTS",
                    &String::from_utf8(token_key(key.as_bytes())).unwrap()
                ]
            ) == Ok(Value::Int(1)),
            "{flavor}: the fencing counter moved"
        );
        // The lock works on its new node: a redirected waiter takes it when it frees.
        assert_eq!(
            call(&mut tcon, &["RLOCK.RELEASE", &key, "holder"]),
            Ok(Value::Int(0))
        );
        assert_eq!(
            call(&mut tcon, &["RLOCK.RELEASE", &key, "holder"]),
            Ok(Value::Int(1))
        );
        assert_eq!(
            call(&mut tcon, &["RLOCK.ACQUIRE", &key, "plain", "TOKEN"]),
            Ok(Value::Int(2)),
            "{flavor}: the next token follows the moved counter"
        );
        // The old node answers for it with MOVED, as for any key.
        let reply = call(&mut admin, &["RLOCK.ACQUIRE", &key, "late", "BLOCK", "100"]);
        assert!(
            matches!(&reply, Err(e) if e.starts_with("MOVED")),
            "{flavor}: {reply:?}"
        );
    }
}

fn thread_sleep(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// In a cluster Redisson listens with `SSUBSCRIBE`; the module publishes there, and
/// only there. (Outside a cluster it publishes with `PUBLISH`: see the Redisson
/// interop tests.)
#[test]
fn unlock_messages_go_to_sharded_subscribers_in_a_cluster() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 0);
        let node = &cluster.primaries[1];
        let key = cluster.key_on(node, "sharded:");
        let channel = String::from_utf8(unlock_channel(key.as_bytes())).unwrap();

        let mut sharded = node.conn();
        sharded
            .send_packed_command(&redis::cmd("SSUBSCRIBE").arg(&channel).get_packed_command())
            .unwrap();
        let confirm = sharded.recv_response().unwrap();
        assert!(format!("{confirm:?}").contains("ssubscribe"), "{confirm:?}");
        let mut plain = node.conn();
        plain
            .send_packed_command(&redis::cmd("SUBSCRIBE").arg(&channel).get_packed_command())
            .unwrap();
        let _ = plain.recv_response().unwrap();

        let mut con = node.conn();
        assert_eq!(
            call(&mut con, &["RLOCK.ACQUIRE", &key, "a"]),
            Ok(Value::Int(1))
        );
        assert_eq!(
            call(&mut con, &["RLOCK.RELEASE", &key, "a"]),
            Ok(Value::Int(1))
        );
        sharded
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let message = sharded.recv_response().expect("an smessage");
        let Value::Array(parts) = &message else {
            panic!("{flavor}: {message:?}");
        };
        let parts: Vec<Option<String>> = parts.iter().map(text).collect();
        assert_eq!(
            parts,
            [
                Some("smessage".into()),
                Some(channel.clone()),
                Some("0".into())
            ],
            "{flavor}: Redisson's unlock message, sharded"
        );
        plain
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        assert!(
            plain.recv_response().is_err(),
            "{flavor}: nothing on plain pub/sub in a cluster"
        );
    }
}

/// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`) is refused while a loaded
/// module has not declared that it handles it; rlock declares it. The held lock moves
/// with its owners, counts, lease and token counter (the source streams its writes,
/// the module's included, until it hands the slot over), and the waiters blocked on
/// the source are told `-MOVED` once the target serves the slot: at once, on the
/// event that says the slot was handed over.
#[test]
fn valkey_atomic_slot_migration_moves_the_lock_and_redirects_its_waiters() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 0);
        if flavor != Flavor::Valkey {
            // Redis 7.0 and 8.2 have no atomic slot migration (Redis adds its own in 8.4,
            // with other commands and events): the command is unknown there.
            let reply = call(
                &mut cluster.primaries[0].conn(),
                &[
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    "0",
                    "0",
                    "NODE",
                    "x",
                ],
            );
            assert!(
                matches!(&reply, Err(e) if e.to_ascii_lowercase().contains("unknown")),
                "{flavor}: CLUSTER MIGRATESLOTS: {reply:?}"
            );
            continue;
        }
        let source = &cluster.primaries[0];
        let target = cluster.other_primary(source);
        let key = cluster.key_on(source, "atomic:");
        let slot = cluster.slot(&key);
        let mut admin = source.conn();
        assert_eq!(
            call(
                &mut admin,
                &["RLOCK.ACQUIRE", &key, "holder", "LEASE", "30000", "TOKEN"]
            ),
            Ok(Value::Int(1))
        );
        assert_eq!(
            call(
                &mut admin,
                &["RLOCK.ACQUIRE", &key, "holder", "LEASE", "30000"]
            ),
            Ok(Value::Int(2))
        );
        let mut waiters: Vec<redis::Connection> = (0..2).map(|_| source.conn()).collect();
        for (i, con) in waiters.iter_mut().enumerate() {
            con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut cmd = redis::cmd("RLOCK.ACQUIRE");
            cmd.arg(&key).arg(format!("w{i}")).arg("BLOCK").arg(8000);
            if i == 1 {
                cmd.arg("FAIR");
            }
            con.send_packed_command(&cmd.get_packed_command()).unwrap();
        }
        assert!(wait_until(Duration::from_secs(2), || {
            source
                .info("rlock")
                .get("rlock_blocked")
                .map(String::as_str)
                == Some("2")
        }));
        let started = Instant::now();
        assert_eq!(
            call(
                &mut admin,
                &[
                    "CLUSTER",
                    "MIGRATESLOTS",
                    "SLOTSRANGE",
                    &slot.to_string(),
                    &slot.to_string(),
                    "NODE",
                    &cluster.node_id(target),
                ]
            ),
            Ok(Value::Okay),
            "{flavor}: the module does not block atomic slot migration"
        );
        for con in waiters.iter_mut() {
            let error = waiter_error(con, &format!("{flavor}: a waiter on the source"));
            assert_eq!(error, format!("MOVED {slot} 127.0.0.1:{}", target.port));
        }
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "{flavor}: redirected {:?} after the migration began",
            started.elapsed()
        );
        // The module heard the hand-over (and swept at once, not at its next round).
        let exports = |node: &Server| node.info("rlock").get("rlock_slot_exports").cloned();
        assert_eq!(
            exports(source).as_deref(),
            Some("1"),
            "{flavor}: the source"
        );
        assert_eq!(
            exports(target).as_deref(),
            Some("0"),
            "{flavor}: the target"
        );
        cluster.wait_ok();
        let mut tcon = target.conn();
        assert_eq!(
            hgetall(&mut tcon, key.as_bytes()).get(&b"holder"[..]),
            Some(&b"2".to_vec()),
            "{flavor}: owners and counts moved"
        );
        assert!(
            pttl(&mut tcon, key.as_bytes()) > 20_000,
            "{flavor}: the lease moved"
        );
        assert_eq!(
            call(
                &mut tcon,
                &[
                    "EXISTS",
                    &String::from_utf8(token_key(key.as_bytes())).unwrap()
                ]
            ),
            Ok(Value::Int(1)),
            "{flavor}: the token counter moved"
        );
        assert!(
            !keyspace(&mut admin).contains_key(key.as_bytes()),
            "{flavor}: nothing left on the source"
        );
        assert_eq!(
            source
                .info("rlock")
                .get("rlock_blocked")
                .map(String::as_str),
            Some("0")
        );
    }
}

/// A slot can leave with no migration at all: another node claims it with a newer
/// epoch, and this node drops its keys when it learns (Redis 7.0 with no event the
/// module hears). The waiters blocked here still hear `-MOVED`, from the module's
/// sweep of waited slots, and nothing is granted or re-created here.
#[test]
fn a_slot_claimed_by_another_node_redirects_the_waiters_left_behind() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 0);
        let source = &cluster.primaries[0];
        let target = cluster.other_primary(source);
        let key = cluster.key_on(source, "claimed:");
        let slot = cluster.slot(&key);
        let mut admin = source.conn();
        assert_eq!(
            call(
                &mut admin,
                &["RLOCK.ACQUIRE", &key, "holder", "LEASE", "30000"]
            ),
            Ok(Value::Int(1))
        );
        let mut waiter = source.conn();
        waiter
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        waiter
            .send_packed_command(
                &redis::cmd("RLOCK.ACQUIRE")
                    .arg(&key)
                    .arg("w")
                    .arg("BLOCK")
                    .arg(15000)
                    .get_packed_command(),
            )
            .unwrap();
        assert!(wait_until(Duration::from_secs(2), || {
            source
                .info("rlock")
                .get("rlock_blocked")
                .map(String::as_str)
                == Some("1")
        }));
        let mut tcon = target.conn();
        let id = cluster.node_id(target);
        assert_eq!(
            call(
                &mut tcon,
                &["CLUSTER", "SETSLOT", &slot.to_string(), "NODE", &id]
            ),
            Ok(Value::Okay)
        );
        let _ = call(&mut tcon, &["CLUSTER", "BUMPEPOCH"]);
        let error = waiter_error(&mut waiter, &format!("{flavor}: the waiter left behind"));
        assert_eq!(error, format!("MOVED {slot} 127.0.0.1:{}", target.port));
        assert!(
            !keyspace(&mut admin).contains_key(key.as_bytes()),
            "{flavor}: the source keeps nothing of the slot"
        );
    }
}

/// `CLUSTER FAILOVER` on a shard that holds a lock and has a waiter: the waiter gets an
/// error from the demoted node, never a silent hang; the holder keeps its hold on the
/// promoted replica; and a token granted after the failover is greater than one whose
/// grant `WAIT` saw acknowledged.
#[test]
fn a_cluster_failover_answers_waiters_and_keeps_holds_and_tokens() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 1);
        let primary = &cluster.primaries[0];
        let replica = &cluster.replicas[0];
        let key = cluster.key_on(primary, "failover:");
        let mut con = primary.conn();
        let Ok(Value::Int(token)) = call(
            &mut con,
            &["RLOCK.ACQUIRE", &key, "holder", "LEASE", "30000", "TOKEN"],
        ) else {
            panic!("{flavor}: no token");
        };
        assert_eq!(call(&mut con, &["WAIT", "1", "2000"]), Ok(Value::Int(1)));
        let mut waiter = primary.conn();
        waiter
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        waiter
            .send_packed_command(
                &redis::cmd("RLOCK.ACQUIRE")
                    .arg(&key)
                    .arg("waiter")
                    .arg("BLOCK")
                    .arg(15000)
                    .get_packed_command(),
            )
            .unwrap();
        assert!(wait_until(Duration::from_secs(2), || {
            primary
                .info("rlock")
                .get("rlock_blocked")
                .map(String::as_str)
                == Some("1")
        }));
        let started = Instant::now();
        assert_eq!(
            call(&mut replica.conn(), &["CLUSTER", "FAILOVER"]),
            Ok(Value::Okay)
        );
        let error = waiter_error(&mut waiter, &format!("{flavor}: the waiter"));
        assert!(
            error.starts_with("UNBLOCKED") || error.starts_with("MOVED"),
            "{flavor}: {error}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{flavor}: answered {:?} after the failover began",
            started.elapsed()
        );
        assert!(wait_until(Duration::from_secs(10), || {
            replica.info("replication").get("role").map(String::as_str) == Some("master")
        }));
        let mut promoted = replica.conn();
        assert_eq!(
            hgetall(&mut promoted, key.as_bytes()).get(&b"holder"[..]),
            Some(&b"1".to_vec()),
            "{flavor}: the hold survived the failover"
        );
        assert!(pttl(&mut promoted, key.as_bytes()) > 0);
        assert_eq!(
            call(&mut promoted, &["RLOCK.RELEASE", &key, "holder"]),
            Ok(Value::Int(1))
        );
        let Ok(Value::Int(next)) = call(&mut promoted, &["RLOCK.ACQUIRE", &key, "next", "TOKEN"])
        else {
            panic!("{flavor}: no token after the failover");
        };
        assert!(next > token, "{flavor}: token {next} after {token}");
    }
}

/// While a lock's slot is being migrated, its helper keys can move before the lock:
/// `MIGRATE` takes keys one at a time. The module then refuses to create a helper key
/// that is missing here (it may be on the target already): the call gets `-TRYAGAIN`,
/// as the server answers a command whose keys a resharding split, and nothing is
/// written. Before, a grant re-created the fencing counter at 1 on the source: tokens
/// went back, and the migration stopped at `BUSYKEY`. The same for a fair queue whose
/// list went ahead of its deadline zset: the queue is left as it is, to arrive whole.
#[test]
fn a_helper_key_that_moved_ahead_of_its_lock_is_not_recreated() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 0);
        for fair in [false, true] {
            let source = &cluster.primaries[0];
            let target = cluster.other_primary(source);
            let key = cluster.key_on(source, if fair { "split-fair:" } else { "split:" });
            let case = format!("{flavor}, {}", if fair { "fair" } else { "plain" });
            let ahead = String::from_utf8(if fair {
                helper_key("redisson_lock_queue", key.as_bytes())
            } else {
                token_key(key.as_bytes())
            })
            .unwrap();
            let fair_word: &[&str] = if fair { &["FAIR"] } else { &[] };
            let slot = cluster.slot(&key);
            let mut con = source.conn();
            let acquire = |owner: &str, more: &[&str]| -> Vec<String> {
                let mut args = vec!["RLOCK.ACQUIRE".to_string(), key.clone(), owner.to_string()];
                args.extend(more.iter().map(|a| a.to_string()));
                args.push("TOKEN".into());
                args.extend(fair_word.iter().map(|a| a.to_string()));
                args
            };
            let holder = acquire("holder", &["LEASE", "30000"]);
            let holder: Vec<&str> = holder.iter().map(String::as_str).collect();
            assert_eq!(call(&mut con, &holder), Ok(Value::Int(1)), "{case}");
            let mut waiter = source.conn();
            waiter
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut cmd = redis::cmd("RLOCK.ACQUIRE");
            for a in &acquire("waiter", &["BLOCK", "8000"])[1..] {
                cmd.arg(a);
            }
            waiter
                .send_packed_command(&cmd.get_packed_command())
                .unwrap();
            assert!(wait_until(Duration::from_secs(2), || {
                source
                    .info("rlock")
                    .get("rlock_blocked")
                    .map(String::as_str)
                    == Some("1")
            }));
            let before_on_target = keyspace(&mut target.conn());
            cluster.begin_migration(slot, source, target);
            // One helper key goes first; the lock stays on the source, held.
            let moved: Value = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(target.port)
                .arg(&ahead)
                .arg(0)
                .arg(5000)
                .query(&mut source.conn())
                .unwrap();
            assert_eq!(moved, Value::Okay, "{case}");
            let left_behind = keyspace(&mut con);
            assert_eq!(
                call(&mut con, &["RLOCK.RELEASE", &key, "holder"]),
                Ok(Value::Int(1)),
                "{case}"
            );
            // The grant would have created the counter, or written to half a queue.
            // The fencing counter is checked before a grant: try again. The half queue
            // is found on serving a freed lock, whose key has gone: the waiter is sent
            // after it, as the server does for a missing key in a migrating slot.
            let error = waiter_error(&mut waiter, &format!("{case}: the waiter"));
            if fair {
                assert_eq!(
                    error,
                    format!("ASK {slot} 127.0.0.1:{}", target.port),
                    "{case}"
                );
            } else {
                assert!(error.starts_with("TRYAGAIN"), "{case}: {error}");
            }
            thread_sleep(50);
            let mut expected = left_behind;
            expected.remove(key.as_bytes());
            assert_eq!(
                keyspace(&mut con),
                expected,
                "{case}: nothing re-created or changed on the source but the lock's removal"
            );
            // The migration completes, and the counter (and queue) go on from where
            // they were.
            cluster.migrate_keys(slot, source, target);
            cluster.end_migration(slot, source, target);
            let mut tcon = target.conn();
            let arrived = keyspace(&mut tcon);
            assert!(
                arrived.len() > before_on_target.len(),
                "{case}: the helper keys arrived: {arrived:?}"
            );
            let again = acquire("waiter", &[]);
            let again: Vec<&str> = again.iter().map(String::as_str).collect();
            assert_eq!(
                call(&mut tcon, &again),
                Ok(Value::Int(2)),
                "{case}: tokens go on from the moved counter; a fair waiter keeps its place"
            );
            assert_eq!(
                call(&mut tcon, &["RLOCK.RELEASE", &key, "waiter"]),
                Ok(Value::Int(1)),
                "{case}"
            );
            if fair {
                for prefix in ["redisson_lock_queue", "redisson_lock_timeout"] {
                    let helper = String::from_utf8(helper_key(prefix, key.as_bytes())).unwrap();
                    assert_eq!(
                        call(&mut tcon, &["EXISTS", &helper]),
                        Ok(Value::Int(0)),
                        "{case}: the queue emptied on the target: {helper}"
                    );
                }
            }
        }
    }
}

/// Classic resharding moves a read-write lock's keys one by one: a read hold's timeout key
/// gone with a migrating slot is not a hold that lapsed. Another reader's release on the
/// source keeps the lock (before, it freed it there, and a blocked writer on the source was
/// granted while the first reader's hold lived on: the chaos suite saw it once).
#[test]
fn a_read_timeout_key_moved_by_a_migration_is_not_a_lapsed_hold() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 0);
        let source = &cluster.primaries[0];
        let target = cluster.other_primary(source);
        let key = cluster.key_on(source, "rwmig:");
        let slot = cluster.slot(&key);
        let mut c = source.conn();
        for reader in ["r1", "r2"] {
            assert_eq!(
                call(
                    &mut c,
                    &["RLOCK.ACQUIRE", &key, reader, "READ", "LEASE", "60000"]
                ),
                Ok(Value::Int(1)),
                "{flavor}: {reader} reads"
            );
        }
        cluster.begin_migration(slot, source, target);
        let r1_timeout = format!("{{{key}}}:r1:rwlock_timeout:1");
        let moved: Result<Value, String> = call(
            &mut c,
            &[
                "MIGRATE",
                "127.0.0.1",
                &target.port.to_string(),
                &r1_timeout,
                "0",
                "5000",
            ],
        );
        assert_eq!(moved, Ok(Value::Okay), "{flavor}: MIGRATE {r1_timeout}");
        assert_eq!(
            call(&mut c, &["RLOCK.RELEASE", &key, "r2", "READ"]),
            Ok(Value::Int(1)),
            "{flavor}: r2 releases on the source"
        );
        assert_eq!(
            call(&mut c, &["HGET", &key, "r1"]),
            Ok(Value::BulkString(b"1".to_vec())),
            "{flavor}: r1 still reads: the lock was not freed on the source"
        );
    }
}
