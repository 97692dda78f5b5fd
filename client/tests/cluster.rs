//! Against a 3-primary Redis Cluster started by the test.

mod common;

use std::time::Duration;

use common::{Flavor, Server};
use rlock_client::{Endpoint, Error, Locks};
use rlock_module_tests::{redis, Cluster};

/// The harness's cluster: 3 primaries with a replica each, the module on every node.
fn cluster(flavor: Flavor) -> Cluster {
    Cluster::start(flavor, 3, 1)
}

fn owner_node<'a>(cluster: &'a Cluster, key: &str) -> &'a Server {
    cluster.primary_for(key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c14_locks_work_across_a_cluster() {
    for flavor in common::flavors() {
        let nodes = cluster(flavor);
        let locks = Locks::builder(Endpoint::cluster(vec![nodes.primaries[0].url()]).unwrap())
            .watchdog_lease(Duration::from_millis(900))
            .build();
        // Keys spread over all three primaries, each held and watchdog-renewed.
        let keys: Vec<String> = (0..12).map(|i| format!("c:{i}")).collect();
        let mut guards = Vec::new();
        for k in &keys {
            let g = locks.lock(k.clone()).fenced().acquire().await.unwrap();
            guards.push(g.expect("free"));
        }
        let used: std::collections::HashSet<u16> =
            keys.iter().map(|k| owner_node(&nodes, k).port).collect();
        assert_eq!(used.len(), 3, "the keys cover every primary");
        for k in &keys {
            let hash = common::holders(owner_node(&nodes, k), k);
            assert_eq!(hash.len(), 1, "{flavor}: {k} lives on its slot's primary");
        }
        assert!(locks.lock("c:0").acquire().await.unwrap().is_none());

        // The watchdog renews across nodes (one pipeline per slot).
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert!(guards.iter().all(|g| !g.is_lost()), "{flavor}");

        // A waited acquire is routed (and unblocked) on the key's node.
        let waiter = locks.lock("c:1").wait(Duration::from_secs(5));
        let task = tokio::spawn(async move { waiter.acquire().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let g1 = guards.remove(1);
        g1.release().await.unwrap();
        let handed = task.await.unwrap().unwrap().expect("handed over");
        handed.release().await.unwrap();

        let info = locks.info("c:2").await.unwrap();
        assert_eq!(info.holders.len(), 1);
        assert!(info.token.is_some());
        for g in guards {
            g.release().await.unwrap();
        }
        let lock = locks
            .lock("c:0")
            .sync_replicas(0, Duration::from_millis(10));
        let g = common::granted(lock.acquire()).await;
        assert_eq!(g.replicas_acked(), None, "sync_replicas(0) sends no WAIT");
        // The default: each primary has a replica, which acknowledges the grant.
        let d = locks.lock("c:5").acquire().await.unwrap().expect("free");
        assert_eq!(d.replicas_acked(), Some(1), "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_guarded_writes_run_on_each_locks_primary_and_only_in_its_slot() {
    for flavor in common::flavors() {
        let (nodes, locks) = common::cluster_locks(flavor);
        let keys: Vec<String> = (0..12).map(|i| format!("g:{i}")).collect();
        let used: std::collections::HashSet<u16> =
            keys.iter().map(|k| owner_node(&nodes, k).port).collect();
        assert_eq!(used.len(), 3, "the keys cover every primary");
        for k in &keys {
            let guard = locks.lock(k.clone()).fenced().acquire().await.unwrap();
            let guard = guard.expect("free");
            let data = format!("{{{k}}}:data");
            let mut set = redis::cmd("SET");
            set.arg(&data).arg(k);
            let _: () = guard.guard(&set).await.unwrap();
            let node = owner_node(&nodes, k);
            assert_eq!(
                common::get(node, &data).as_deref(),
                Some(k.as_str()),
                "{flavor}: written on the lock's primary"
            );

            // A key outside the lock's slot: the server refuses it, and writes nothing.
            let outside = keys
                .iter()
                .find(|o| nodes.slot(o) != nodes.slot(k))
                .unwrap();
            let mut stray = redis::cmd("SET");
            stray.arg(outside).arg("stray");
            match guard.guard::<redis::Value>(&stray).await {
                Err(Error::Redis(e)) => assert_eq!(e.code(), Some("CROSSSLOT"), "{e}"),
                other => panic!("{flavor}: {other:?}"),
            }
            assert_eq!(common::get(owner_node(&nodes, outside), outside), None);

            assert!(locks.force_release(k).await.unwrap());
            let refused = guard.guard::<redis::Value>(&set).await;
            assert!(
                matches!(refused, Err(Error::NotHeld { .. })),
                "{flavor}: {refused:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_client_that_resends_commands_is_refused() {
    // redis-rs's default: 16 re-sends. No server is needed: the check comes first.
    let client = redis::cluster::ClusterClient::new(vec!["redis://127.0.0.1:1/"]).unwrap();
    let locks = Locks::new(client);
    match locks.lock("k").acquire().await {
        Err(Error::Redis(e)) => {
            assert_eq!(e.kind(), redis::ErrorKind::InvalidClientConfig, "{e}");
            assert!(e.to_string().contains("retries(0)"), "{e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Stalls the node of `key` for 1 s (`DEBUG SLEEP`) from a thread.
fn stall(node: &Server) -> std::thread::JoinHandle<()> {
    let mut con = node.conn();
    let sleeper = std::thread::spawn(move || {
        let _: redis::Value = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg("1")
            .query(&mut con)
            .unwrap();
    });
    std::thread::sleep(Duration::from_millis(100));
    sleeper
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_client_resends_after_a_timeout_and_locks_turn_that_off() {
    for flavor in common::flavors() {
        let nodes = cluster(flavor);
        let key = "resent";
        let node = owner_node(&nodes, key);

        // What redis-rs does by default: a response timeout is an I/O error it retries, so
        // the same RLOCK.ACQUIRE reaches the server twice: a re-entry nobody asked for.
        let retrying = redis::cluster::ClusterClientBuilder::new(vec![nodes.primaries[0].url()])
            .response_timeout(Duration::from_millis(200))
            .overall_response_timeout(None)
            .build()
            .unwrap();
        let mut con = retrying.get_async_connection().await.unwrap();
        let _: redis::Value = redis::cmd("PING").query_async(&mut con).await.unwrap();
        let sleeper = stall(node);
        let mut acquire_con = con.clone();
        let acquire = tokio::spawn(async move {
            let mut cmd = redis::cmd("RLOCK.ACQUIRE");
            cmd.arg(key).arg("raw-owner").arg("LEASE").arg(20_000);
            cmd.query_async::<redis::Value>(&mut acquire_con).await
        });
        sleeper.join().unwrap();
        let mut count = 0;
        for _ in 0..20 {
            // Other traffic on the connection, as an application would send.
            let _ = tokio::time::timeout(
                Duration::from_secs(1),
                redis::cmd("PING").query_async::<redis::Value>(&mut con),
            )
            .await;
            count = common::holders(node, key).first().map_or(0, |(_, n)| *n);
            if count >= 2 && acquire.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            count, 2,
            "{flavor}: redis-rs's cluster client re-sent the timed-out acquire"
        );
        let reply = acquire.await.unwrap();
        assert_eq!(
            reply.ok(),
            Some(redis::Value::Int(2)),
            "the caller sees a re-entry"
        );

        // Through Locks, with re-sends off: the acquire fails once and is applied once.
        let client = redis::cluster::ClusterClientBuilder::new(vec![nodes.primaries[0].url()])
            .retries(0)
            .response_timeout(Duration::from_millis(200))
            .build()
            .unwrap();
        let locks = Locks::new(client);
        // On the shared connection, as without replicas: the default would wait for the
        // replica's acknowledgement on a pooled connection, which has no response timeout.
        let lock = locks
            .lock("once")
            .lease(Duration::from_secs(20))
            .sync_replicas(0, Duration::from_secs(1));
        assert_eq!(lock.hold_count().await.unwrap(), 0);
        let sleeper = stall(owner_node(&nodes, "once"));
        let result = lock.acquire().await;
        assert!(
            matches!(&result, Err(Error::Redis(e)) if e.is_timeout()),
            "{result:?}"
        );
        sleeper.join().unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            common::holders(owner_node(&nodes, "once"), "once"),
            [(lock.owner().to_string(), 1)],
            "{flavor}: applied once"
        );
    }
}

/// A lock whose slot moves (a classic migration, as `redis-cli --cluster reshard` does)
/// while one client holds it, with watchdog renewals, and another waits for it: the
/// waiter is redirected and keeps waiting on the new node for the time it has left,
/// the renewals follow the slot, and the release there hands the lock to the waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_and_renewals_follow_a_moving_slot() {
    for flavor in common::flavors() {
        let nodes = Cluster::start(flavor, 3, 0);
        let source = &nodes.primaries[0];
        let target = nodes.other_primary(source);
        let key = nodes.key_on(source, "moving:");
        let slot = nodes.slot(&key);
        let locks = Locks::builder(Endpoint::cluster(vec![source.url()]).unwrap())
            .watchdog_lease(Duration::from_millis(900))
            .build();
        let held = common::granted(locks.lock(key.clone()).acquire()).await;
        let waiter = locks.lock(key.clone()).wait(Duration::from_secs(15));
        let task = tokio::spawn(async move { waiter.acquire().await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!task.is_finished(), "{flavor}: waits while held");

        nodes.begin_migration(slot, source, target);
        let moved = nodes.migrate_keys(slot, source, target);
        assert!(moved.contains(&key), "{flavor}: {moved:?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !task.is_finished(),
            "{flavor}: still waiting, on the new node"
        );
        nodes.end_migration(slot, source, target);

        // Renewals every 300 ms for 2 s go to the new node.
        tokio::time::sleep(Duration::from_millis(2000)).await;
        assert!(!held.is_lost(), "{flavor}: the watchdog followed the slot");
        assert_eq!(common::holders(target, &key).len(), 1, "{flavor}");
        assert!(!task.is_finished(), "{flavor}: still waiting");

        held.release().await.unwrap();
        let handed = tokio::time::timeout(Duration::from_secs(3), task)
            .await
            .expect("the waiter was served")
            .unwrap()
            .unwrap()
            .expect("handed over on the new node");
        assert_eq!(nodes.primary_for(&key).port, target.port);
        assert_eq!(common::holders(target, &key).len(), 1);
        handed.release().await.unwrap();
        assert!(common::holders(target, &key).is_empty(), "{flavor}");
    }
}
