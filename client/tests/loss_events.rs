//! With the module's keyspace events on, the watchdog hears of a lost hold within 100 ms
//! instead of at its next renewal (lease/3).

mod common;

use std::time::Duration;

use common::{eventually, raw, servers, Server};
use rlock_client::Locks;
use rlock_module_tests::redis;
use tokio::time::Instant;

/// Long enough that lease/3 (2 s) cannot pass for the event path.
const LEASE: Duration = Duration::from_secs(6);
const WITHIN: Duration = Duration::from_millis(100);

fn numsub(server: &Server, channel: &str) -> i64 {
    match raw(server, &["PUBSUB", "NUMSUB", channel]).expect("PUBSUB NUMSUB") {
        redis::Value::Array(v) => match v.get(1) {
            Some(redis::Value::Int(n)) => *n,
            other => panic!("NUMSUB count {other:?}"),
        },
        redis::Value::Map(m) => match m.first() {
            Some((_, redis::Value::Int(n))) => *n,
            other => panic!("NUMSUB count {other:?}"),
        },
        other => panic!("NUMSUB replied {other:?}"),
    }
}

fn pubsub_clients(server: &Server) -> usize {
    let list = match raw(server, &["CLIENT", "LIST", "TYPE", "pubsub"]).expect("CLIENT LIST") {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("CLIENT LIST replied {other:?}"),
    };
    list.lines().filter(|l| !l.is_empty()).count()
}

/// Waits until the listener follows `key` with `flags`' channel class.
async fn following(server: &Server, flags: &str, key: &str) {
    let channel = if flags.starts_with('K') {
        format!("__keyspace@0__:{key}")
    } else {
        "__keyevent@0__:rlock.forcerelease".to_owned()
    };
    assert!(
        eventually(Duration::from_secs(3), || numsub(server, &channel) >= 1).await,
        "{}: {flags}: nobody subscribed {channel}",
        server.flavor
    );
}

async fn lost_within(server: &Server, flags: &str, what: &str, hold: &rlock_client::Hold) {
    let started = Instant::now();
    let lost = tokio::time::timeout(WITHIN, hold.lost())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{}: {flags}: {what} not told within {WITHIN:?}",
                server.flavor
            )
        });
    assert!(lost.is_lost(), "{lost}");
    assert!(lost.to_string().contains("keyspace event"), "{lost}");
    assert!(started.elapsed() <= WITHIN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_a_force_release_is_told_within_100ms_with_keyspace_events() {
    for server in servers() {
        for flags in ["Kd", "Ed"] {
            raw(&server, &["CONFIG", "SET", "notify-keyspace-events", flags]).unwrap();
            let locks = common::locks_with_lease(&server, LEASE);
            let key = format!("ev:{flags}");
            let renewed = locks.lock(&key).acquire().await.unwrap().unwrap();
            let reentry = locks.lock_as(&key, renewed.owner()).acquire().await;
            let reentry = reentry.unwrap().unwrap();
            // A hold with a fixed lease is checked without touching its lease.
            let fixed_key = format!("ev:{flags}:fixed");
            let fixed = locks.lock(&fixed_key).lease(LEASE).acquire().await;
            let fixed = fixed.unwrap().unwrap();
            // Other holds, on keys nobody touches, are left alone.
            let bystanders: Vec<_> = hold_others(&locks, &key, 5).await;
            following(&server, flags, &key).await;
            following(&server, flags, &fixed_key).await;
            // One subscription for the Locks and its seven holds (the previous round's Locks
            // is gone, its connection closing).
            assert!(
                eventually(Duration::from_secs(2), || pubsub_clients(&server) == 1).await,
                "{}: {flags}: {} pub/sub connections",
                server.flavor,
                pubsub_clients(&server)
            );

            assert!(locks.force_release(&key).await.unwrap());
            lost_within(&server, flags, "a force release", &renewed.hold()).await;
            lost_within(
                &server,
                flags,
                "a force release (re-entry)",
                &reentry.hold(),
            )
            .await;
            assert!(!fixed.is_lost());

            assert!(locks.force_release(&fixed_key).await.unwrap());
            lost_within(
                &server,
                flags,
                "a fixed lease's force release",
                &fixed.hold(),
            )
            .await;
            for g in &bystanders {
                assert!(!g.is_lost(), "{}: {flags}: a bystander lost", server.flavor);
            }
            for g in bystanders {
                assert!(g.release().await.unwrap());
            }
        }
    }
}

async fn hold_others(locks: &Locks, prefix: &str, n: usize) -> Vec<rlock_client::Guard> {
    let mut out = Vec::new();
    for i in 0..n {
        let g = locks.lock(format!("{prefix}:other:{i}")).acquire().await;
        out.push(g.unwrap().unwrap());
    }
    out
}

/// The server's own removals come through when their classes are on (`g`: `DEL`; `x`: a
/// lease run out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_a_deletion_and_an_expiry_are_told_within_100ms_with_their_events() {
    for server in servers() {
        raw(
            &server,
            &["CONFIG", "SET", "notify-keyspace-events", "Kgxd"],
        )
        .unwrap();
        let locks = common::locks_with_lease(&server, LEASE);
        let g = locks.lock("ev:del").acquire().await.unwrap().unwrap();
        following(&server, "K", "ev:del").await;
        raw(&server, &["DEL", "ev:del"]).unwrap();
        lost_within(&server, "Kgxd", "a DEL", &g.hold()).await;

        let g = locks.lock("ev:exp").acquire().await.unwrap().unwrap();
        following(&server, "K", "ev:exp").await;
        raw(&server, &["PEXPIRE", "ev:exp", "1"]).unwrap();
        // The server expires the key lazily or in its next active cycle (100 ms apart); the
        // hold is lost within 100 ms of the expiry.
        let lost = tokio::time::timeout(Duration::from_millis(400), g.lost())
            .await
            .unwrap_or_else(|_| panic!("{}: an expiry not told", server.flavor));
        assert!(lost.to_string().contains("keyspace event"), "{lost}");
    }
}

/// Without events the loss is told by the next renewal, as before; no subscription is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_without_events_no_subscription_is_made() {
    for server in servers() {
        let locks = common::locks_with_lease(&server, Duration::from_millis(600));
        let g = locks.lock("ev:none").acquire().await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(pubsub_clients(&server), 0, "{}", server.flavor);
        assert!(locks.force_release("ev:none").await.unwrap());
        let lost = tokio::time::timeout(Duration::from_millis(300), g.lost())
            .await
            .unwrap_or_else(|_| panic!("{}: not told within lease/3", server.flavor));
        assert!(!lost.to_string().contains("keyspace event"), "{lost}");
    }
}

/// `FLUSHDB` raises no keyspace event on any of the servers, even with every class on: the hold
/// is told at the next renewal, as without events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c05_a_flush_raises_no_event_and_is_told_at_the_next_renewal() {
    for server in servers() {
        raw(&server, &["CONFIG", "SET", "notify-keyspace-events", "KA"]).unwrap();
        let lease = Duration::from_millis(900);
        let locks = common::locks_with_lease(&server, lease);
        let g = locks.lock("ev:flush").acquire().await.unwrap().unwrap();
        following(&server, "K", "ev:flush").await;
        raw(&server, &["FLUSHDB"]).unwrap();
        let lost = tokio::time::timeout(lease / 3 + Duration::from_millis(200), g.lost())
            .await
            .unwrap_or_else(|_| panic!("{}: a flush not told within lease/3", server.flavor));
        assert!(lost.to_string().contains("refused"), "{lost}");
    }
}
