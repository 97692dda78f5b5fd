//! Permit-expiring semaphores through the client, on every flavor: leased permits kept
//! alive by the watchdog, fixed leases that end by themselves, waits served as leases end,
//! guards that give back when dropped.

mod common;

use std::time::Duration;

use common::{each_server, raw, servers};
use rlock_client::{Locks, PermitSemaphore};
use rlock_module_tests::redis::Value;

fn leased(server: &common::Server, key: &str) -> i64 {
    match raw(server, &["ZCARD", &format!("{{{key}}}:timeout")]).unwrap() {
        Value::Int(n) => n,
        other => panic!("ZCARD replied {other:?}"),
    }
}

/// A permit semaphore of one permit, set now.
async fn one_permit(locks: &Locks, name: &str) -> PermitSemaphore {
    let slots = locks.permit_semaphore(name);
    assert!(slots.try_set_permits(1).await.unwrap(), "{name} is new");
    slots
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_leased_permit_and_a_release_gives_it_back() {
    for server in servers() {
        let flavor = server.flavor;
        let locks = common::locks_with_lease(&server, Duration::from_millis(300));
        let slots = locks.permit_semaphore("slots");
        assert!(slots.try_set_permits(3).await.unwrap());
        let two = slots.acquire_many(2).await.unwrap().expect("3 available");
        assert_eq!(two.len(), 2);
        for permit in &two {
            assert_eq!(permit.id().len(), 32, "{flavor}");
            assert_eq!(permit.key(), "slots");
        }
        assert_ne!(two[0].id(), two[1].id());
        assert!(
            slots.acquire_many(2).await.unwrap().is_none(),
            "{flavor}: 1 left"
        );
        // Three leases' worth of time: the watchdog renewed them.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(leased(&server, "slots"), 2, "{flavor}: still leased");
        assert!(two.iter().all(|p| !p.is_lost()), "{flavor}");
        let mut two = two.into_iter();
        assert!(two.next().unwrap().release().await.unwrap(), "{flavor}");
        assert_eq!(slots.available().await.unwrap(), 2, "{flavor}");
        // Dropped: given back in the background.
        drop(two);
        let back = common::reads_within(&server, "slots", "3", Duration::from_secs(2)).await;
        assert!(back, "{flavor}");
        // Forgotten: leased until someone gives it back by id, or its lease ends.
        let id = slots.acquire().await.unwrap().expect("free").forget();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(leased(&server, "slots"), 1, "{flavor}");
        assert!(slots.release(&id).await.unwrap(), "{flavor}");
        assert!(
            !slots.release(&id).await.unwrap(),
            "{flavor}: not leased now"
        );
        assert_eq!(slots.available().await.unwrap(), 3, "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c12_permit_lease_ends_by_itself_and_serves_a_waiter() {
    for (flavor, _, locks) in each_server() {
        let slots = one_permit(&locks, "fixed").await;
        let short =
            common::granted(slots.clone().lease(Duration::from_millis(200)).acquire()).await;
        // A waiter is served when the lease ends, with nobody giving it back.
        let waiting = slots.clone().wait(Duration::from_secs(5));
        let task = tokio::spawn(async move { waiting.acquire().await });
        let lost = tokio::time::timeout(Duration::from_secs(2), short.lost()).await;
        assert!(lost.expect("lost at the lease end").is_lost(), "{flavor}");
        let next = task.await.unwrap().unwrap().expect("served");
        assert_ne!(next.id(), short.id());
        // The ended permit is not given back twice.
        assert!(!short.release().await.unwrap(), "{flavor}");
        assert_eq!(slots.available().await.unwrap(), 0, "{flavor}");
        assert!(next.release().await.unwrap());
        assert_eq!(slots.available().await.unwrap(), 1, "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_refused_is_never_silent() {
    for (flavor, _, locks) in each_server() {
        let slots = one_permit(&locks, "taken-away").await;
        let permit = slots.acquire().await.unwrap().expect("free");
        permit.renew().await.unwrap();
        // Given back by someone else: the guard learns it at its next renewal.
        assert!(slots.release(permit.id()).await.unwrap());
        let err = permit.renew().await.unwrap_err();
        assert!(err.is_lost(), "{flavor}: {err}");
        assert!(permit.is_lost());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_lease_wait_takes_nothing() {
    for (flavor, server, locks) in each_server() {
        let slots = locks.permit_semaphore("none").wait_forever();
        assert!(slots.try_set_permits(0).await.unwrap());
        let (wait, give_back) = (slots.acquire(), slots.add_permits(1));
        common::a_cancelled_wait_takes_nothing(flavor, wait, give_back, slots.available()).await;
        assert_eq!(leased(&server, "none"), 0, "{flavor}");
    }
}

#[test]
fn the_blocking_twin() {
    for (_, _, locks) in common::each_server_blocking() {
        let slots = locks.permit_semaphore("bslots");
        assert!(slots.try_set_permits(1).unwrap());
        let one = slots.acquire().unwrap().expect("free");
        assert_eq!(one.id().len(), 32);
        assert!(slots.acquire().unwrap().is_none());
        one.renew().unwrap();
        assert!(one.release().unwrap());
        let many = slots.acquire_many(1).unwrap().expect("free again");
        let id = many.into_iter().next().unwrap().forget();
        assert!(slots.release(&id).unwrap());
        assert_eq!(slots.available().unwrap(), 1);
    }
}
