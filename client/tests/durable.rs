//! C15, durable by default: with replicas attached, an acquire returns once `WAIT` says a
//! replica has the grant; with none attached, no `WAIT` is sent.

mod common;

use std::time::Duration;

use common::{holders, Frozen, Server};
use rlock_client::{redis, Error, Locks};

fn wait_calls(server: &Server) -> u64 {
    calls(server, "wait")
}

fn info_calls(server: &Server) -> u64 {
    calls(server, "info")
}

fn calls(server: &Server, command: &str) -> u64 {
    server
        .info("commandstats")
        .get(&format!("cmdstat_{command}"))
        .and_then(|s| {
            s.split(',')
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Starts a replica of `primary` and waits until the primary counts it online (the state in
/// which it acknowledges writes), as a replica attached for a while is.
fn replica_of(primary: &Server) -> Server {
    let replica = Server::builder(primary.flavor)
        .replica_of(primary.port)
        .start();
    let online = rlock_module_tests::wait_until(Duration::from_secs(10), || {
        primary
            .info("replication")
            .values()
            .any(|v| v.contains("state=online"))
    });
    assert!(online, "{}: the replica never came online", primary.flavor);
    replica
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c15_a_default_acquire_returns_once_a_replica_has_the_grant() {
    for flavor in common::flavors() {
        let primary = Server::start(flavor);
        let replica = replica_of(&primary);
        let locks = Locks::new(primary.client());
        for key in ["durable", "durable:fenced"] {
            let lock = locks.lock(key);
            let lock = if key.ends_with("fenced") {
                lock.fenced()
            } else {
                lock
            };
            let g = lock.acquire().await.unwrap().expect("free");
            assert_eq!(g.replicas_acked(), Some(1), "{flavor} {key}");
            // The replica had it when the acquire returned: read it there at once.
            assert_eq!(
                holders(&replica, key),
                [(g.owner().to_string(), 1)],
                "{flavor} {key}"
            );
            g.release().await.unwrap();
        }
        // A wait is acknowledged too.
        let lock = locks.lock("durable:wait").wait(Duration::from_millis(500));
        let waited = common::granted(lock.acquire()).await;
        assert_eq!(waited.replicas_acked(), Some(1), "{flavor}");
        waited.release().await.unwrap();

        // sync_replicas(0): no WAIT at all.
        let before = wait_calls(&primary);
        let lock = locks
            .lock("durable:off")
            .sync_replicas(0, Duration::from_secs(1));
        let g = common::granted(lock.acquire()).await;
        assert_eq!(g.replicas_acked(), None, "{flavor}");
        g.release().await.unwrap();
        let off = Locks::builder(primary.client())
            .sync_replicas(0, Duration::from_secs(1))
            .build();
        let g = off.lock("durable:off").acquire().await.unwrap().unwrap();
        assert_eq!(g.replicas_acked(), None, "{flavor}");
        g.release().await.unwrap();
        assert_eq!(wait_calls(&primary), before, "{flavor}: no WAIT was sent");

        // Asking for more replicas than answer: released, and NotAcknowledged.
        let more = locks
            .lock("durable:two")
            .sync_replicas(2, Duration::from_millis(100))
            .acquire()
            .await;
        match more {
            Err(Error::NotAcknowledged { acked, wanted, .. }) => {
                assert_eq!((acked, wanted), (1, 2), "{flavor}")
            }
            other => panic!("{flavor}: {other:?}"),
        }
        assert!(holders(&primary, "durable:two").is_empty(), "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c15_a_grant_no_replica_acknowledges_is_released_and_refused() {
    for flavor in common::flavors() {
        let primary = Server::start(flavor);
        let replica = replica_of(&primary);
        let locks = Locks::builder(primary.client())
            .sync_replicas(1, Duration::from_millis(300))
            .build();
        // Learn the replica while it answers (a longer timeout here: a replica just attached
        // on a loaded machine may take more than 300 ms); then it stops answering.
        let g = locks
            .lock("warm")
            .sync_replicas(1, Duration::from_secs(5))
            .acquire()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(g.replicas_acked(), Some(1), "{flavor}");
        g.release().await.unwrap();
        let frozen = Frozen::new(&replica);
        match locks.lock("unacked").acquire().await {
            Err(Error::NotAcknowledged { acked, wanted, .. }) => {
                assert_eq!((acked, wanted), (0, 1), "{flavor}")
            }
            other => panic!("{flavor}: {other:?}"),
        }
        assert!(
            holders(&primary, "unacked").is_empty(),
            "{flavor}: released"
        );
        drop(frozen);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c15_with_no_replica_attached_no_wait_is_sent() {
    for server in common::servers() {
        let infos_before = info_calls(&server);
        let locks = Locks::new(server.client());
        for i in 0..20 {
            let g = locks.lock(format!("alone:{i}")).fenced().acquire().await;
            let g = g.unwrap().expect("free");
            assert_eq!(g.replicas_acked(), None, "{}", server.flavor);
            g.release().await.unwrap();
        }
        assert_eq!(wait_calls(&server), 0, "{}", server.flavor);
        // One read of the replica count for all of them, not one per acquire.
        // The test's own INFO calls count too: two (wait_calls, info_calls) besides the client's.
        let infos = info_calls(&server) - infos_before - 2;
        assert_eq!(infos, 1, "{}: {infos} INFO calls", server.flavor);
    }
}

/// Issue 30 §4 gap 1: a wait given up after its grant, while the `WAIT` pipelined after it
/// blocks (the replica frozen), ends as every cancelled wait does: the grant is read (by its
/// `REQ` id, since redis-rs fails the whole pipeline) and released, not left for its lease.
/// Gap 2: the same for a user whose ACL refuses `CLIENT KILL`, whose connection is closed
/// instead, with the grant already written to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c06_a_wait_cancelled_in_its_replica_wait_releases_the_grant() {
    for flavor in common::flavors() {
        let primary = Server::start(flavor);
        let replica = replica_of(&primary);
        common::add_user_without_client_kill(&primary);
        let limited =
            redis::Client::open(format!("redis://nokill:pw@127.0.0.1:{}/", primary.port)).unwrap();
        for (who, locks) in [
            ("default user", Locks::new(primary.client())),
            ("no CLIENT KILL", Locks::new(limited)),
        ] {
            for fenced in [false, true] {
                let key = format!("cancelled:{fenced}");
                let held = locks
                    .lock(key.clone())
                    .sync_replicas(0, Duration::from_secs(1))
                    .acquire()
                    .await
                    .unwrap()
                    .unwrap();
                let frozen = Frozen::new(&replica);
                let waiter = locks
                    .lock(key.clone())
                    .wait(Duration::from_secs(10))
                    .sync_replicas(1, Duration::from_secs(20));
                let waiter = if fenced { waiter.fenced() } else { waiter };
                let owner = waiter.owner().to_string();
                let task = tokio::spawn(async move { waiter.acquire().await });
                tokio::time::sleep(Duration::from_millis(100)).await;
                held.release().await.unwrap();
                // Granted, and now blocked in WAIT on the frozen replica.
                let granted = common::eventually(Duration::from_secs(2), || {
                    holders(&primary, &key) == [(owner.clone(), 1)]
                })
                .await;
                assert!(granted, "{flavor} {who} fenced={fenced}: granted");
                tokio::time::sleep(Duration::from_millis(100)).await;
                task.abort();
                let _ = task.await;
                let freed = common::eventually(Duration::from_secs(5), || {
                    holders(&primary, &key).is_empty()
                })
                .await;
                drop(frozen);
                assert!(
                    freed,
                    "{flavor} {who} fenced={fenced}: the grant was left held: {:?}",
                    holders(&primary, &key)
                );
            }
        }
    }
}
