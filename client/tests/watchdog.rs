//! The watchdog renews leases, and never fails silently.

mod common;

use std::time::Duration;

use common::{holders, pttl, raw, servers};
use rlock_client::{Error, Locks};

const LEASE: Duration = Duration::from_millis(600);
/// A loss is told within lease/3 (the renewal period), plus a round trip and scheduling.
const SLACK: Duration = Duration::from_millis(100);

fn locks(server: &common::Server) -> Locks {
    Locks::builder(server.client())
        .watchdog_lease(LEASE)
        .response_timeout(Duration::from_millis(300))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c04_keeps_many_locks_past_their_lease() {
    for server in servers() {
        let locks = locks(&server);
        let mut guards = Vec::new();
        for i in 0..40 {
            let g = locks
                .lock(format!("wd:{i}"))
                .fenced()
                .acquire()
                .await
                .unwrap();
            guards.push(g.expect("free"));
        }
        let tokens: Vec<_> = guards.iter().map(|g| g.token()).collect();
        tokio::time::sleep(LEASE * 3).await;
        for (i, g) in guards.iter().enumerate() {
            assert!(!g.is_lost(), "{}: wd:{i} lost", server.flavor);
            let ttl = pttl(&server, &format!("wd:{i}"));
            assert!(ttl > 0, "{}: wd:{i} pttl {ttl}", server.flavor);
            let info = locks.info(&format!("wd:{i}")).await.unwrap();
            assert_eq!(info.token, tokens[i], "{}: same token", server.flavor);
        }
        // Renewed, and no more often than once per lease/3 each (3 leases: 9 ticks, 1 spare).
        let stats = server.info("commandstats");
        let calls: u64 = stats
            .get("cmdstat_rlock.renew")
            .expect("renewals were sent")
            .split(',')
            .find_map(|f| f.strip_prefix("calls="))
            .and_then(|n| n.parse().ok())
            .expect("calls=");
        assert!(
            (40..=40 * 10).contains(&calls),
            "{}: {calls} renewals for 40 holds over 3 leases",
            server.flavor
        );
        for g in guards {
            assert!(g.release().await.unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_a_deleted_key_is_reported_lost() {
    for server in servers() {
        let locks = locks(&server);
        let g = locks.lock("gone").acquire().await.unwrap().unwrap();
        raw(&server, &["DEL", "gone"]).unwrap();
        let lost = tokio::time::timeout(LEASE / 3 + SLACK, g.lost())
            .await
            .unwrap_or_else(|_| panic!("{}: deletion not noticed", server.flavor));
        assert!(lost.to_string().contains("refused"), "{lost}");
        assert!(g.is_lost());
        assert!(matches!(g.renew().await, Err(Error::Lost { .. })));
        // Somebody else may take it now, and our stale guard must not free theirs.
        let other = locks.lock("gone").acquire().await.unwrap().expect("free");
        assert!(matches!(g.release().await, Err(Error::Lost { .. })));
        assert_eq!(holders(&server, "gone"), [(other.owner().to_string(), 1)]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_a_force_release_is_reported_to_every_reentry() {
    for server in servers() {
        let locks = locks(&server);
        let lock = locks.lock("forced");
        let a = lock.acquire().await.unwrap().unwrap();
        let b = lock.acquire().await.unwrap().unwrap();
        assert!(locks.force_release("forced").await.unwrap());
        for g in [&a, &b] {
            tokio::time::timeout(LEASE / 3 + SLACK, g.lost())
                .await
                .expect("both re-entries learn it");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_server_is_reported_lost_within_the_lease() {
    for mut server in servers() {
        let locks = locks(&server);
        let g = locks.lock("island").acquire().await.unwrap().unwrap();
        let hold = g.hold();
        server.stop();
        let started = tokio::time::Instant::now();
        let lost = tokio::time::timeout(LEASE * 3, hold.lost())
            .await
            .unwrap_or_else(|_| panic!("{}: stopped server not noticed", server.flavor));
        assert!(started.elapsed() <= LEASE + Duration::from_millis(300));
        assert!(lost.to_string().contains("renewals failed"), "{lost}");
        assert!(matches!(g.release().await, Err(Error::Lost { .. })));
    }
}
