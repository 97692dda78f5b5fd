//! Server-side waits (`BLOCK`), fair queueing (`FAIR`), sessions (`SESSION`) and replica
//! acknowledgement (`WAIT`).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{each_server, eventually, holders, raw, servers, Server};
use rlock_client::Locks;
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c02_waiters_get_the_lock_when_it_is_released_in_arrival_order() {
    for (flavor, server, locks) in each_server() {
        let held = locks.lock("queue").acquire().await.unwrap().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let waiter = locks.lock("queue").wait(Duration::from_secs(5));
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let g = waiter.acquire().await.unwrap().expect("handed over");
                order.lock().unwrap().push((i, Instant::now()));
                tokio::time::sleep(Duration::from_millis(20)).await;
                g.release().await.unwrap();
            }));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            tasks.iter().all(|t| !t.is_finished()),
            "{flavor}: wait while held"
        );
        held.release().await.unwrap();
        let released = Instant::now();
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        let ids: Vec<usize> = order.iter().map(|(i, _)| *i).collect();
        assert_eq!(ids, [0, 1, 2], "{flavor}: arrival order");
        let first = order[0].1.saturating_duration_since(released);
        assert!(
            first < Duration::from_millis(50),
            "{}: granted {first:?} after the release",
            server.flavor
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c03_a_wait_that_runs_out_returns_none() {
    for (flavor, _, locks) in each_server() {
        let _held = locks.lock("busy").acquire().await.unwrap().unwrap();
        let started = Instant::now();
        let got = locks
            .lock("busy")
            .wait(Duration::from_millis(300))
            .acquire()
            .await
            .unwrap();
        assert!(got.is_none());
        assert!(started.elapsed() >= Duration::from_millis(290));
        assert_eq!(locks.info("busy").await.unwrap().blocked, 0);
        // with_lock never runs its body unlocked: it fails with NotAcquired instead.
        let ran = Arc::new(Mutex::new(false));
        let flag = ran.clone();
        let outcome = locks
            .lock("busy")
            .wait(Duration::from_millis(100))
            .with_lock(|_| async move { *flag.lock().unwrap() = true })
            .await;
        assert!(
            matches!(outcome, Err(rlock_client::Error::NotAcquired { .. })),
            "{outcome:?}"
        );
        assert!(!*ran.lock().unwrap(), "{flavor}: the body never ran");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_acquire_does_not_stall_other_commands() {
    for (flavor, _, locks) in each_server() {
        let _held = locks.lock("stuck").acquire().await.unwrap().unwrap();
        let waiter = locks.lock("stuck").wait_forever();
        let task = tokio::spawn(async move { waiter.acquire().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        for i in 0..20 {
            let g = locks.lock(format!("other:{i}")).acquire().await.unwrap();
            g.unwrap().release().await.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{flavor}: the shared connection kept flowing"
        );
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c06_dropping_a_waiting_acquire_leaves_no_waiter_and_no_orphan() {
    for (flavor, server, locks) in each_server() {
        let held = locks.lock("cancel").acquire().await.unwrap().unwrap();
        let waiter = locks.lock("cancel").wait_forever();
        let gave_up = tokio::time::timeout(Duration::from_millis(300), waiter.acquire()).await;
        assert!(gave_up.is_err(), "still waiting when dropped");
        assert!(
            eventually(Duration::from_secs(2), || {
                raw(&server, &["RLOCK.INFO", "cancel"]).is_ok() && blocked(&server, "cancel") == 0
            })
            .await,
            "{flavor}: the dropped waiter was unblocked"
        );
        held.release().await.unwrap();
        assert!(holders(&server, "cancel").is_empty(), "nobody got it");
    }
}

/// Redis "unblocks" a write that `CLIENT PAUSE WRITE` holds back: `CLIENT UNBLOCK id TIMEOUT`
/// then aborts the server. A wait cancelled during a pause (or a `FAILOVER`) must not do that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_wait_while_writes_are_paused_leaves_the_server_up() {
    for (flavor, server, locks) in each_server() {
        let held = locks.lock("paused").acquire().await.unwrap().unwrap();
        raw(&server, &["CLIENT", "PAUSE", "1500", "WRITE"]).unwrap();
        let paused = Instant::now();
        let waiter = locks.lock("paused").wait(Duration::from_secs(10));
        let gave_up = tokio::time::timeout(Duration::from_millis(300), waiter.acquire()).await;
        assert!(gave_up.is_err(), "still waiting when dropped");
        tokio::time::sleep_until(paused + Duration::from_millis(1700)).await;
        assert!(
            raw(&server, &["PING"]).is_ok(),
            "{flavor}: the server survived the cancel"
        );
        assert!(
            eventually(Duration::from_secs(2), || blocked(&server, "paused") == 0).await,
            "{flavor}: the cancelled wait is gone"
        );
        held.release().await.unwrap();
        assert!(
            holders(&server, "paused").is_empty(),
            "{flavor}: the cancelled waiter never got the lock"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c06_a_grant_racing_a_cancel_is_released_not_orphaned() {
    for (_, server, locks) in each_server() {
        for round in 0..40u64 {
            let held = locks.lock("race").acquire().await.unwrap().unwrap();
            let waiter = locks.lock("race").wait(Duration::from_secs(5));
            let acquire = tokio::spawn(async move { waiter.acquire().await });
            tokio::time::sleep(Duration::from_millis(20)).await;
            // Release and cancel at about the same moment, shifted a little each round.
            let release = tokio::spawn(held.release());
            tokio::time::sleep(Duration::from_micros(round * 50)).await;
            acquire.abort();
            release.await.unwrap().unwrap();
            let _ = acquire.await;
            assert!(
                common::freed_within(&server, "race", Duration::from_secs(3)).await,
                "{} round {round}: a grant nobody took is still held",
                server.flavor
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_waits_its_turn() {
    for (_, server, locks) in each_server() {
        let counter = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..4 {
            let (locks, counter) = (locks.clone(), counter.clone());
            tasks.push(tokio::spawn(async move {
                locks
                    .with_lock("shared", |_| async move {
                        counter.lock().unwrap().push((i, "in"));
                        tokio::time::sleep(Duration::from_millis(30)).await;
                        counter.lock().unwrap().push((i, "out"));
                    })
                    .await
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let log = counter.lock().unwrap().clone();
        for pair in log.chunks(2) {
            assert_eq!(
                pair[0].0, pair[1].0,
                "{}: no overlap: {log:?}",
                server.flavor
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn c02_fair_waiters_are_served_in_arrival_order() {
    for (flavor, _, locks) in each_server() {
        let held = locks.lock("fair").fair().acquire().await.unwrap().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let lock = locks.lock("fair").fair().wait(Duration::from_secs(5));
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let g = lock.acquire().await.unwrap().expect("served");
                order.lock().unwrap().push(i);
                g.release().await.unwrap();
            }));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        held.release().await.unwrap();
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 1, 2], "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_fair_try_queues_the_caller() {
    for (flavor, _, locks) in each_server() {
        let _held = locks.lock("fq").fair().acquire().await.unwrap().unwrap();
        let late = locks.lock("fq").fair();
        assert!(late.acquire().await.unwrap().is_none());
        let info = locks.info("fq").await.unwrap();
        assert_eq!(info.queue, [late.owner().to_string()], "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c09_a_session_hold_ends_when_its_connection_closes() {
    for server in servers() {
        let owner_side = common::locks_with_lease(&server, Duration::from_secs(3));
        let g = owner_side
            .lock("sess")
            .session()
            .acquire()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(holders(&server, "sess").len(), 1);
        // Kill every other client: the owner's connection dies as a crashed process's would.
        raw(&server, &["CLIENT", "KILL", "TYPE", "normal"]).unwrap();
        assert!(
            common::freed_within(&server, "sess", Duration::from_millis(200)).await,
            "{}: released at once, long before the 3 s lease",
            server.flavor
        );
        tokio::time::timeout(Duration::from_secs(3), g.lost())
            .await
            .expect("the watchdog finds out at its next renewal");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waited_session_hold_keeps_its_connection_until_released() {
    for server in servers() {
        let locks = Locks::builder(server.client()).idle_connections(0).build();
        let g = locks
            .lock("pinned")
            .session()
            .wait(Duration::from_secs(1))
            .acquire()
            .await
            .unwrap()
            .unwrap();
        // With no idle connections kept, an unpinned connection would close (and end the
        // session) right after the acquire.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(holders(&server, "pinned").len(), 1, "{}", server.flavor);
        g.release().await.unwrap();
        assert!(holders(&server, "pinned").is_empty());
    }
}

fn blocked(server: &Server, key: &str) -> i64 {
    let mut con = server.conn();
    let v: rlock_module_tests::redis::Value = rlock_module_tests::redis::cmd("RLOCK.INFO")
        .arg(key)
        .query(&mut con)
        .unwrap();
    let info = rlock_module_tests::parse_lock_info(&v, false).unwrap();
    info.blocked as i64
}
