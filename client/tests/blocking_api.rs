//! The blocking API: same shapes, plain threads, no runtime of the caller's.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{holders, raw, Server};
use rlock_client::blocking::{Locks, MultiLocks};
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
    let multi = MultiLocks::new(servers.iter().map(|s| s.client())).unwrap();
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
