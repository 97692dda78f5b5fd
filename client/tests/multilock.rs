//! Several locks at once, all or none (`locks.multi`), on `RLOCK.MACQUIRE`: on a server
//! and across the slots of a cluster, with waits, the watchdog and the blocking twin.

mod common;

use std::time::Duration;

use common::{each_server, holders, pttl, raw, servers};
use rlock_client::{Locks, MultiLock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c12_multi_key_all_or_none_with_waits() {
    for (flavor, server, locks) in each_server() {
        let set = locks.multi(["{o}:b", "{o}:a", "{o}:a"]);
        assert_eq!(set.keys().collect::<Vec<_>>(), ["{o}:a", "{o}:b"]);
        let both = set.acquire().await.unwrap().expect("free");
        assert_eq!(holders(&server, "{o}:a"), [(set.owner().to_string(), 1)]);
        assert_eq!(holders(&server, "{o}:b"), [(set.owner().to_string(), 1)]);
        // Overlapping: nothing is taken.
        let other = locks.multi(["{o}:b", "{o}:c"]);
        assert!(other.acquire().await.unwrap().is_none(), "{flavor}");
        assert!(holders(&server, "{o}:c").is_empty(), "{flavor}");
        // Waiting: served once both are free.
        let waiting = other.clone().wait(Duration::from_secs(5));
        let task = tokio::spawn(async move { waiting.acquire().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        both.release().await.unwrap();
        let got = task.await.unwrap().unwrap().expect("served");
        assert_eq!(holders(&server, "{o}:c"), [(other.owner().to_string(), 1)]);
        // A wait that runs out takes nothing.
        let late = locks
            .multi(["{o}:a", "{o}:b"])
            .wait(Duration::from_millis(150));
        assert!(late.acquire().await.unwrap().is_none(), "{flavor}");
        assert!(holders(&server, "{o}:a").is_empty(), "{flavor}");
        // Dropping the guard releases in the background.
        drop(got);
        let freed = common::eventually(Duration::from_secs(2), || {
            holders(&server, "{o}:b").is_empty() && holders(&server, "{o}:c").is_empty()
        })
        .await;
        assert!(freed, "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c06_a_cancelled_multi_key_wait_leaves_nothing_behind() {
    for (flavor, server, locks) in each_server() {
        raw(&server, &["RLOCK.ACQUIRE", "{q}:b", "someone"]).unwrap();
        let set = locks.multi(["{q}:a", "{q}:b"]).wait_forever();
        let gave_up = tokio::time::timeout(Duration::from_millis(200), set.acquire()).await;
        assert!(gave_up.is_err(), "{flavor}: still waiting");
        let gone = common::eventually(Duration::from_secs(3), || {
            matches!(
                raw(&server, &["INFO", "rlock"]),
                Ok(rlock_module_tests::redis::Value::BulkString(ref b))
                    if String::from_utf8_lossy(b).contains("rlock_blocked:0")
            )
        })
        .await;
        assert!(gone, "{flavor}: the server forgot the waiter");
        raw(&server, &["RLOCK.RELEASE", "{q}:b", "someone"]).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(holders(&server, "{q}:a").is_empty(), "{flavor}");
        assert!(holders(&server, "{q}:b").is_empty(), "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_every_lock() {
    const LEASE: Duration = Duration::from_millis(600);
    for (flavor, server, locks) in common::each_server_with(|s| common::locks_with_lease(s, LEASE))
    {
        let guard = locks
            .multi(["{w}:1", "{w}:2", "{w}:3"])
            .acquire()
            .await
            .unwrap()
            .expect("free");
        tokio::time::sleep(LEASE * 3).await;
        assert!(!guard.is_lost(), "{flavor}");
        for key in ["{w}:1", "{w}:2", "{w}:3"] {
            assert!(pttl(&server, key) > 0, "{flavor}: {key}");
        }
        raw(&server, &["DEL", "{w}:2"]).unwrap();
        let lost = tokio::time::timeout(LEASE * 2, guard.lost()).await;
        assert!(lost.is_ok(), "{flavor}: a lost lock is reported");
        assert!(guard.release().await.is_err(), "{flavor}");
    }
}

#[test]
fn the_blocking_twin() {
    for (_, server, locks) in common::each_server_blocking() {
        let set = locks.multi(["{t}:a", "{t}:b"]);
        let guard = set.acquire().unwrap().expect("free");
        assert!(locks.multi(["{t}:b"]).acquire().unwrap().is_none());
        // The scoped call: with a zero wait it tries once and never runs `f` unlocked.
        let busy = locks.multi(["{t}:b"]).wait(Duration::ZERO).with_lock(|| ());
        assert!(
            matches!(busy, Err(rlock_client::Error::NotAcquired { .. })),
            "{busy:?}"
        );
        guard.release().unwrap();
        assert!(holders(&server, "{t}:a").is_empty(), "{}", server.flavor);
        // Without a wait set it waits until granted, and releases after `f`.
        let held = holders(&server, "{t}:a");
        let seen = set.with_lock(|| holders(&server, "{t}:a")).unwrap();
        assert!(held.is_empty() && seen.len() == 1, "{seen:?}");
        assert!(holders(&server, "{t}:a").is_empty(), "{}", server.flavor);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c14_multi_key_across_the_slots_of_a_cluster_without_deadlock() {
    for flavor in common::flavors() {
        let (nodes, locks) = common::cluster_locks(flavor);
        let keys: Vec<String> = (0..9).map(|i| format!("m:{i}")).collect();
        let set = locks.multi(keys.clone());
        let guard = set.acquire().await.unwrap().expect("free");
        for key in &keys {
            let owner = common::holders(nodes.primary_for(key), key);
            assert_eq!(owner, [(set.owner().to_string(), 1)], "{flavor}: {key}");
        }
        // Two contenders naming overlapping keys in opposite orders, both waiting.
        let mut reversed = keys.clone();
        reversed.reverse();
        let first = locks
            .multi(keys[..6].to_vec())
            .wait(Duration::from_secs(10));
        let second = locks
            .multi(reversed[..6].to_vec())
            .wait(Duration::from_secs(10));
        let a = tokio::spawn(hold_briefly(first));
        let b = tokio::spawn(hold_briefly(second));
        tokio::time::sleep(Duration::from_millis(200)).await;
        guard.release().await.unwrap();
        assert!(a.await.unwrap().unwrap(), "{flavor}: first served");
        assert!(b.await.unwrap().unwrap(), "{flavor}: second served");
        for key in &keys {
            assert!(
                common::holders(nodes.primary_for(key), key).is_empty(),
                "{flavor}"
            );
        }
    }
}

/// Acquires `set`, holds it 50 ms and releases it: true once served, false if never.
async fn hold_briefly(set: MultiLock) -> rlock_client::Result<bool> {
    let g = set.acquire().await;
    if let Ok(Some(g)) = g {
        tokio::time::sleep(Duration::from_millis(50)).await;
        g.release().await.map(|_| true)
    } else {
        g.map(|g| g.is_some())
    }
}

/// C06 and issue 38 §5: multi-key waits given up at moments around their grant, for the
/// default user (whose cancel kills the waiting connection) and for a user whose ACL refuses
/// `CLIENT KILL` (whose connection is closed instead, a grant perhaps already written to it):
/// every grant is found (read, or by the wait's `REQ` id) and given back, none is left held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c06_multi_key_waits_given_up_around_their_grant_leave_nothing_held() {
    for server in servers() {
        let flavor = server.flavor;
        common::add_user_without_client_kill(&server);
        let limited = rlock_module_tests::redis::Client::open(format!(
            "redis://nokill:pw@127.0.0.1:{}/",
            server.port
        ))
        .unwrap();
        for (who, locks) in [
            ("default user", Locks::new(server.client())),
            ("no CLIENT KILL", Locks::new(limited)),
        ] {
            for i in 0..16u64 {
                // Waits out the previous round's recovery: a wait given up before its grant
                // is sent again without BLOCK under its REQ id, which may take the free locks
                // for a moment before it gives them back; what it must never do is keep them.
                let taken = raw(
                    &server,
                    &[
                        "RLOCK.ACQUIRE",
                        "{r}:b",
                        "someone",
                        "LEASE",
                        "30000",
                        "BLOCK",
                        "5000",
                    ],
                )
                .unwrap();
                assert_ne!(
                    taken,
                    rlock_module_tests::redis::Value::Nil,
                    "{flavor} {who} #{i}: {{r}}:b still held 5 s after the last round"
                );
                let set = locks.multi(["{r}:a", "{r}:b"]).wait_forever();
                let task = tokio::spawn(async move { set.acquire().await });
                tokio::time::sleep(Duration::from_millis(30)).await;
                // The release and the give-up a few hundred microseconds apart, either first.
                let (release_at, abort_at) = ((i % 4) * 300, ((i / 4) % 4) * 300);
                let release = async {
                    tokio::time::sleep(Duration::from_micros(release_at)).await;
                    raw(&server, &["RLOCK.RELEASE", "{r}:b", "someone"]).unwrap();
                };
                let abort = async {
                    tokio::time::sleep(Duration::from_micros(abort_at)).await;
                    task.abort();
                };
                tokio::join!(release, abort);
                // Granted before the abort: the caller got the guard, and dropping it releases.
                drop(task.await);
                let freed = common::eventually(Duration::from_secs(5), || {
                    holders(&server, "{r}:a").is_empty() && holders(&server, "{r}:b").is_empty()
                })
                .await;
                assert!(
                    freed,
                    "{flavor} {who} #{i}: left held: {:?} {:?}",
                    holders(&server, "{r}:a"),
                    holders(&server, "{r}:b")
                );
            }
        }
    }
}
