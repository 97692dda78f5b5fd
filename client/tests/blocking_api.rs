//! The blocking API: same shapes, plain threads, no runtime of the caller's.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{holders, raw, Server};
use rlock_client::blocking::{Locks, RedLocks};
use rlock_client::Error;

#[test]
fn acquire_reenter_release_from_plain_threads() {
    for flavor in common::flavors() {
        let server = Server::start(flavor);
        let locks = Locks::new(server.client()).unwrap();
        let lock = locks.lock("sync").fenced();
        let a = lock.acquire().unwrap().expect("free");
        let b = lock.acquire().unwrap().expect("re-entry");
        assert_eq!(a.token(), b.token());
        let rival = locks.lock("sync");
        let t = std::thread::spawn(move || rival.acquire().unwrap().is_none());
        assert!(t.join().unwrap(), "{flavor}: another owner is refused");
        assert!(!b.release().unwrap());
        assert!(a.release().unwrap());
        assert!(holders(&server, "sync").is_empty());
        assert_eq!(locks.info("sync").unwrap().pttl, -2);
    }
}

#[test]
fn dropped_guards_release_and_with_lock_serialises_threads() {
    for flavor in common::flavors() {
        let server = Server::start(flavor);
        let locks = Locks::new(server.client()).unwrap();
        drop(locks.lock("d").acquire().unwrap().unwrap());
        assert!(rlock_module_tests::wait_until(
            Duration::from_secs(2),
            || holders(&server, "d").is_empty()
        ));

        let log = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (locks, log) = (locks.clone(), log.clone());
                std::thread::spawn(move || {
                    locks
                        .with_lock("w", |_| {
                            log.lock().unwrap().push(i);
                            std::thread::sleep(Duration::from_millis(20));
                            log.lock().unwrap().push(i);
                        })
                        .unwrap()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let log = log.lock().unwrap().clone();
        assert_eq!(log.len(), 8);
        for pair in log.chunks(2) {
            assert_eq!(pair[0], pair[1], "{flavor}: no overlap: {log:?}");
        }
    }
}

#[test]
fn wait_lost_reports_a_deleted_lock() {
    let server = Server::start(common::flavors()[0]);
    let locks = Locks::builder(server.client())
        .watchdog_lease(Duration::from_millis(600))
        .build()
        .unwrap();
    let g = locks.lock("bye").acquire().unwrap().unwrap();
    assert!(g.wait_lost(Duration::ZERO).is_none());
    raw(&server, &["DEL", "bye"]).unwrap();
    let lost = g.wait_lost(Duration::from_secs(2)).expect("noticed");
    assert!(lost.is_lost());
    assert!(matches!(g.renew(), Err(Error::Lost { .. })));
}

#[test]
fn multi_locks_blocking() {
    let flavor = common::flavors()[0];
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start(flavor)).collect();
    servers[0].stop();
    let multi = RedLocks::new(servers.iter().map(|s| s.client())).unwrap();
    let mut g = multi
        .lock("m")
        .lease(Duration::from_secs(5))
        .fenced()
        .acquire()
        .unwrap()
        .expect("2 of 3");
    assert_eq!(g.held_on(), [false, true, true]);
    g.renew().unwrap();
    assert_eq!(g.release(), 2);
}

/// Everything a blocking caller does, from inside an async runtime: it used to panic there
/// ("Cannot start a runtime from within a runtime").
fn blocking_calls_inside_a_runtime(server: &Server) {
    let locks = Locks::new(server.client()).unwrap();
    let lock = locks.lock("in-rt").fenced();
    let g = lock.acquire().unwrap().expect("free");
    let again = lock.acquire().unwrap().expect("re-entry");
    assert_eq!(again.hold_count(), Some(2));
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_locked().unwrap());
    assert_eq!(locks.info("in-rt").unwrap().holders.len(), 1);
    g.renew().unwrap();
    assert!(g.wait_lost(Duration::from_millis(10)).is_none());
    assert!(!again.release().unwrap());
    assert!(g.release().unwrap());
    let key = lock.with_lock(|hold| hold.key().to_owned()).unwrap();
    assert_eq!(key, "in-rt");
    drop(lock.acquire().unwrap().expect("free")); // released in the background
    assert!(rlock_module_tests::wait_until(
        Duration::from_secs(2),
        || { holders(server, "in-rt").is_empty() }
    ));
    drop(locks); // dropping the private runtime here must not panic either
}

#[tokio::test(flavor = "current_thread")]
async fn the_blocking_api_works_inside_a_current_thread_runtime() {
    for flavor in common::flavors() {
        let server = Server::start(flavor);
        blocking_calls_inside_a_runtime(&server);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blocking_api_works_inside_a_multi_thread_runtime_and_spawn_blocking() {
    for flavor in common::flavors() {
        let server = Arc::new(Server::start(flavor));
        blocking_calls_inside_a_runtime(&server);
        let s = server.clone();
        tokio::task::spawn_blocking(move || blocking_calls_inside_a_runtime(&s))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_has_the_same_shape_in_both_apis() {
    for flavor in common::flavors() {
        let server = Server::start(flavor);
        // One closure body over the hold's reads in both twins: the blocking twin's hold derefs
        // to the async one (its own `guard` blocks); the async twin wraps it in a future.
        let work = |hold: &rlock_client::Hold| (hold.key().to_owned(), hold.token().is_some());
        let sync = Locks::new(server.client()).unwrap();
        let from_sync = tokio::task::block_in_place(|| {
            let scoped = sync.lock("shape").fenced();
            scoped.with_lock(|hold| work(&hold)).unwrap()
        });
        let locks = rlock_client::Locks::new(server.client());
        let from_async = locks
            .lock("shape")
            .fenced()
            .with_lock(|hold| async move { work(&hold) })
            .await
            .unwrap();
        assert_eq!(from_sync, ("shape".to_string(), true), "{flavor}");
        assert_eq!(from_sync, from_async);
        // Both report a busy lock the same way (a scoped call tries once with a zero wait).
        let _held = locks.lock("shape").acquire().await.unwrap().unwrap();
        let once = Duration::ZERO;
        let busy_async = locks.lock("shape").wait(once).with_lock(|_| async {}).await;
        let busy_sync = sync.lock("shape").wait(once).with_lock(|_| {});
        assert!(matches!(busy_async, Err(Error::NotAcquired { .. })));
        assert!(matches!(busy_sync, Err(Error::NotAcquired { .. })));
    }
}
