//! Per-lock queries without a guard, explicit owners, `info()` on keys that are not plain
//! reentrant locks, and the hold count of fenced acquires, on every flavor.

mod common;

use std::time::Duration;

use common::{each_server, holders, raw, servers};
use rlock_client::{Error, LockKind, Locks};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_queries_need_no_guard() {
    for (_, server, locks) in each_server() {
        let lock = locks.lock("q").lease(Duration::from_secs(20));
        let other = locks.lock("q");
        assert!(!lock.is_locked().await.unwrap());
        assert!(!lock.is_held_by(lock.owner()).await.unwrap());
        assert_eq!(lock.hold_count().await.unwrap(), 0);
        assert_eq!(lock.remaining_lease().await.unwrap(), None);
        assert_eq!(lock.info().await.unwrap().kind, LockKind::Free);

        let a = lock.acquire().await.unwrap().expect("free");
        let b = lock.acquire().await.unwrap().expect("re-entry");
        assert!(other.is_locked().await.unwrap(), "{}", server.flavor);
        assert!(other.is_held_by(lock.owner()).await.unwrap());
        assert!(!other.is_held_by(other.owner()).await.unwrap());
        assert_eq!(lock.hold_count().await.unwrap(), 2);
        assert_eq!(
            other.hold_count().await.unwrap(),
            0,
            "counts this handle's owner"
        );
        let left = lock.remaining_lease().await.unwrap().expect("a lease");
        assert!(
            left > Duration::from_secs(15) && left <= Duration::from_secs(20),
            "{left:?}"
        );
        let info = other.info().await.unwrap();
        assert_eq!(info.kind, LockKind::Reentrant);
        assert_eq!(info.holders, [(lock.owner().to_string(), 2)]);

        assert!(!b.release().await.unwrap());
        assert_eq!(lock.hold_count().await.unwrap(), 1);
        // Anyone may force it; the holder's guard then finds the hold gone.
        assert!(other.force_release().await.unwrap());
        assert!(!other.force_release().await.unwrap());
        assert!(!lock.is_locked().await.unwrap());
        assert!(matches!(a.release().await, Err(Error::NotHeld { .. })));
    }
}

#[test]
fn lock_queries_blocking() {
    for (flavor, _, locks) in common::each_server_blocking() {
        let lock = locks.lock("qb").lease(Duration::from_secs(20));
        assert!(!lock.is_locked().unwrap());
        assert_eq!(lock.remaining_lease().unwrap(), None);
        let g = lock.acquire().unwrap().expect("free");
        assert!(lock.is_locked().unwrap());
        assert!(lock.is_held_by(lock.owner()).unwrap());
        assert!(!lock.is_held_by("someone else").unwrap());
        assert_eq!(lock.hold_count().unwrap(), 1);
        assert!(lock.remaining_lease().unwrap().unwrap() > Duration::from_secs(15));
        assert_eq!(
            lock.info().unwrap().holders,
            [(lock.owner().to_string(), 1)],
            "{flavor}"
        );
        assert!(lock.force_release().unwrap());
        assert_eq!(lock.hold_count().unwrap(), 0);
        assert!(matches!(g.release(), Err(Error::NotHeld { .. })));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_reports_a_redisson_read_write_lock_instead_of_failing() {
    for (_, server, locks) in each_server() {
        // Redisson's RReadWriteLock layout: `mode`, a reader's count, the writer's `:write`.
        raw(&server, &["HSET", "rw", "mode", "read", "u:1", "2"]).unwrap();
        raw(&server, &["PEXPIRE", "rw", "30000"]).unwrap();
        let info = locks.info("rw").await.unwrap();
        assert_eq!(
            info.kind,
            LockKind::ReadWrite {
                mode: "read".into()
            },
            "{}: {info:?}",
            server.flavor
        );
        assert_eq!(info.holders, [("u:1".to_string(), 2)]);
        assert_eq!(info.other_fields, [("mode".into(), "read".into())]);
        assert!(info.pttl > 25_000, "{info:?}");

        raw(&server, &["HSET", "w", "mode", "write", "u:2:write", "1"]).unwrap();
        let info = locks.lock("w").info().await.unwrap();
        assert_eq!(
            info.kind,
            LockKind::ReadWrite {
                mode: "write".into()
            }
        );
        assert_eq!(info.holders, [("u:2:write".to_string(), 1)]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_reports_keys_that_are_not_locks() {
    for (_, server, locks) in each_server() {
        raw(&server, &["HSET", "h", "foo", "bar"]).unwrap();
        let info = locks.info("h").await.unwrap();
        assert_eq!(info.kind, LockKind::OtherHash, "{}", server.flavor);
        assert_eq!(info.other_fields, [("foo".into(), "bar".into())]);
        assert!(info.holders.is_empty());

        // The server refuses RLOCK.INFO on a string (WRONGTYPE); info() still answers.
        raw(&server, &["SET", "s", "x"]).unwrap();
        assert!(raw(&server, &["RLOCK.INFO", "s"]).is_err());
        let info = locks.info("s").await.unwrap();
        assert_eq!(
            info.kind,
            LockKind::NotALock {
                key_type: "string".into()
            }
        );
        let blocking = rlock_client::blocking::Locks::new(server.client()).unwrap();
        assert_eq!(blocking.info("s").unwrap().kind, info.kind);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_guard_knows_its_hold_count() {
    for (_, server, locks) in each_server() {
        // On the shared connection, on a pooled one (a wait), and with WAIT pipelined too.
        let plain = locks.lock("f1").fenced();
        let waited = locks.lock("f2").fenced().wait(Duration::from_secs(2));
        let replicas = locks
            .lock("f3")
            .fenced()
            .sync_replicas(0, Duration::from_millis(10));
        for lock in [plain, waited, replicas] {
            let a = lock.acquire().await.unwrap().expect("free");
            let b = lock.acquire().await.unwrap().expect("re-entry");
            let c = lock.acquire().await.unwrap().expect("re-entry");
            assert_eq!(
                [a.hold_count(), b.hold_count(), c.hold_count()],
                [Some(1), Some(2), Some(3)],
                "{}: {lock:?}",
                server.flavor
            );
            assert!(a.token().is_some());
            assert_eq!((a.token(), b.token()), (c.token(), c.token()));
            assert_eq!(holders(&server, lock.key()), [(lock.owner().into(), 3)]);
            c.release().await.unwrap();
            b.release().await.unwrap();
            assert!(a.release().await.unwrap());
        }
        // A waiter granted on release learns its count as well.
        let held = locks.lock("f4").acquire().await.unwrap().unwrap();
        let waiter = locks.lock("f4").fenced().wait(Duration::from_secs(5));
        let task = tokio::spawn(async move { waiter.acquire().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        held.release().await.unwrap();
        let g = task.await.unwrap().unwrap().expect("handed over");
        assert_eq!(g.hold_count(), Some(1));
        assert!(g.token().is_some());
        g.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_owner_reenters_and_releases_an_existing_hold() {
    for server in servers() {
        // A Redisson service holds the lock as `<uuid>:<thread-id>`.
        let owner = "6f0c9c1e-4a51-4c1c-9d3e-2b8d7c1d0a11:57";
        raw(
            &server,
            &["RLOCK.ACQUIRE", "shared", owner, "LEASE", "30000"],
        )
        .unwrap();
        let locks = Locks::new(server.client());
        let lock = locks.lock_as("shared", owner);
        assert_eq!(lock.owner(), owner);
        assert!(lock.is_held_by(owner).await.unwrap());
        assert_eq!(lock.hold_count().await.unwrap(), 1);
        assert!(
            locks.lock("shared").acquire().await.unwrap().is_none(),
            "{}: others are still excluded",
            server.flavor
        );
        let g = lock.acquire().await.unwrap().expect("same owner: re-entry");
        assert_eq!(g.hold_count(), Some(2));
        assert!(!g.release().await.unwrap(), "the Redisson hold remains");
        assert!(lock.unlock().await.unwrap(), "and is released by owner");
        assert!(holders(&server, "shared").is_empty());
        assert!(matches!(lock.unlock().await, Err(Error::NotHeld { .. })));

        // Resume after a restart: a hold taken by owner X in one process is re-entered and
        // released through a new handle with owner X in a new `Locks`.
        let before = Locks::new(server.client());
        let guard = before
            .lock_as("job", "worker-7")
            .acquire()
            .await
            .unwrap()
            .unwrap();
        std::mem::forget(guard); // the process "dies" without releasing
        drop(before);
        let after = Locks::new(server.client());
        let resumed = after.lock_as("job", "worker-7");
        assert_eq!(resumed.hold_count().await.unwrap(), 1);
        let again = resumed.acquire().await.unwrap().expect("re-entry");
        assert_eq!(again.hold_count(), Some(2));
        again.release().await.unwrap();
        assert!(resumed.unlock().await.unwrap());
        assert!(!resumed.is_locked().await.unwrap());
    }
}

#[test]
fn an_explicit_owner_blocking() {
    for (flavor, _, locks) in common::each_server_blocking() {
        let first = locks.lock_as("b", "svc:1");
        let g = first.acquire().unwrap().expect("free");
        let second = locks.lock_as("b", "svc:1");
        assert!(second.is_held_by("svc:1").unwrap());
        let g2 = second.acquire().unwrap().expect("same owner re-enters");
        assert_eq!(g2.hold_count(), Some(2));
        assert!(
            locks.lock_as("b", "svc:2").acquire().unwrap().is_none(),
            "{flavor}"
        );
        assert!(!g2.release().unwrap());
        assert!(g.release().unwrap());
        assert_eq!(second.hold_count().unwrap(), 0);
    }
}
