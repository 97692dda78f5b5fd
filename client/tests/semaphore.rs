//! Semaphores and count-down latches through the client, on every flavor.

mod common;

use std::time::Duration;

use common::each_server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c12_semaphore_permits_are_taken_waited_for_and_given_back() {
    for (flavor, server, locks) in each_server() {
        let pool = locks.semaphore("pool");
        assert!(pool.try_set_permits(3).await.unwrap());
        assert!(!pool.try_set_permits(9).await.unwrap());
        let two = pool.acquire(2).await.unwrap().expect("3 available");
        assert_eq!(two.count(), 2);
        assert!(pool.acquire(2).await.unwrap().is_none(), "{flavor}: 1 left");
        // A waiter is served when permits come back.
        let waiting = pool.clone().wait(Duration::from_secs(5));
        let task = tokio::spawn(async move { waiting.acquire(2).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(two.release().await.unwrap(), 3);
        let got = task.await.unwrap().unwrap().expect("served");
        assert_eq!(pool.available().await.unwrap(), 1, "{flavor}");
        // Dropping gives back in the background; forget keeps them taken.
        drop(got);
        let back = common::reads_within(&server, "pool", "3", Duration::from_secs(2)).await;
        assert!(back, "{flavor}");
        pool.acquire(1).await.unwrap().expect("free").forget();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(pool.available().await.unwrap(), 2, "{flavor}");
        assert_eq!(pool.release(1).await.unwrap(), 3);
        assert_eq!(pool.add_permits(-4).await.unwrap(), -1);
        // A wait that runs out: None, nothing taken.
        let late = pool.clone().wait(Duration::from_millis(100));
        assert!(late.acquire(1).await.unwrap().is_none(), "{flavor}");
        assert_eq!(pool.available().await.unwrap(), -1, "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_takes_nothing() {
    for (flavor, _, locks) in each_server() {
        let pool = locks.semaphore("empty").wait_forever();
        assert!(pool.try_set_permits(0).await.unwrap());
        let (wait, give_back) = (pool.acquire(1), pool.release(1));
        common::a_cancelled_wait_takes_nothing(flavor, wait, give_back, pool.available()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c12_latch_lets_its_waiters_through_at_zero() {
    for (flavor, _, locks) in each_server() {
        let batch = locks.latch("batch");
        assert!(
            batch.await_zero().await.unwrap(),
            "{flavor}: no latch is open"
        );
        assert!(batch.try_set_count(2).await.unwrap());
        assert!(!batch.await_zero().await.unwrap(), "{flavor}");
        let waiting = batch.clone().wait(Duration::from_secs(5));
        let task = tokio::spawn(async move { waiting.await_zero().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(batch.count_down().await.unwrap(), 1);
        assert_eq!(batch.count().await.unwrap(), 1);
        assert_eq!(batch.count_down().await.unwrap(), 0);
        assert!(task.await.unwrap().unwrap(), "{flavor}");
        let short = batch.clone().wait(Duration::from_millis(50));
        assert!(short.await_zero().await.unwrap(), "{flavor}");
        assert!(batch.try_set_count(1).await.unwrap());
        let short = batch.wait(Duration::from_millis(50));
        assert!(!short.await_zero().await.unwrap(), "{flavor}: ran out");
    }
}

#[test]
fn the_blocking_twins() {
    for (_, _, locks) in common::each_server_blocking() {
        let pool = locks.semaphore("bpool");
        assert!(pool.try_set_permits(1).unwrap());
        let one = pool.acquire(1).unwrap().expect("free");
        assert!(pool.acquire(1).unwrap().is_none());
        one.release().unwrap();
        assert_eq!(pool.available().unwrap(), 1);
        let latch = locks.latch("blatch");
        assert!(latch.try_set_count(1).unwrap());
        assert_eq!(latch.count_down().unwrap(), 0);
        assert!(latch.wait(Duration::from_millis(10)).await_zero().unwrap());
    }
}
