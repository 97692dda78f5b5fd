//! `RedLocks` over three independent primaries, one of them stopped.

mod common;

use std::time::Duration;

use common::{holders, Server};
use rlock_client::RedLocks;

fn three() -> Vec<Server> {
    let flavors = common::flavors();
    // Mixed flavors when both are there: the primaries are independent anyway.
    (0..3)
        .map(|i| Server::start(flavors[i % flavors.len()]))
        .collect()
}

fn multi(servers: &[Server]) -> RedLocks {
    RedLocks::builder(servers.iter().map(|s| s.client()))
        .node_timeout(Duration::from_millis(300))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_holds_the_lock_with_one_primary_down() {
    let mut servers = three();
    servers[2].stop();
    let multi = multi(&servers);
    assert_eq!(multi.quorum(), 2);
    let lease = Duration::from_secs(5);
    let lock = multi.lock("ledger").lease(lease).fenced();
    let g = lock.acquire().await.unwrap().expect("2 of 3 grant it");
    assert_eq!(g.held_on(), [true, true, false]);
    let tokens = g.tokens();
    assert!(tokens[0].is_some() && tokens[1].is_some() && tokens[2].is_none());
    let v = g.validity();
    // Lease less the acquire time (a dead primary costs up to node_timeout) and drift.
    assert!(
        v < lease - Duration::from_millis(50) && v > lease / 2,
        "{v:?}"
    );
    for s in &servers[..2] {
        assert_eq!(holders(s, "ledger"), [(g.owner().to_string(), 1)]);
    }

    // A second owner cannot get a majority, and leaves nothing behind.
    let rival = multi.lock("ledger").lease(lease);
    assert!(rival.acquire().await.unwrap().is_none());
    for s in &servers[..2] {
        assert_eq!(holders(s, "ledger").len(), 1);
    }

    let mut g = g;
    g.renew().await.unwrap();
    assert_eq!(g.release().await, 2, "the two live primaries answered");
    for s in &servers[..2] {
        assert!(holders(s, "ledger").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_grant_is_released() {
    let mut servers = three();
    let multi = multi(&servers);
    // Another owner holds the lock on primary 1 alone; primary 2 is down.
    let mut con = servers[1].conn();
    let _: i64 = rlock_module_tests::redis::cmd("RLOCK.ACQUIRE")
        .arg("split")
        .arg("someone-else")
        .arg("LEASE")
        .arg(10_000)
        .query(&mut con)
        .unwrap();
    servers[2].stop();
    let lock = multi.lock("split").lease(Duration::from_secs(5));
    let got = lock.acquire().await;
    assert!(matches!(got, Ok(None)), "1 of 3 is no majority: {got:?}");
    assert!(
        holders(&servers[0], "split").is_empty(),
        "the minority grant on primary 0 was released"
    );
    assert_eq!(
        holders(&servers[1], "split"),
        [("someone-else".to_string(), 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_primaries_up_is_an_error_not_a_none() {
    let mut servers = three();
    servers[1].stop();
    servers[2].stop();
    let multi = multi(&servers);
    let e = multi.lock("dark").acquire().await.unwrap_err();
    assert!(matches!(e, rlock_client::Error::Redis(_)), "{e}");
    assert!(
        holders(&servers[0], "dark").is_empty(),
        "released on the one that granted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_retries_until_the_holder_lets_go() {
    let servers = three();
    let multi = multi(&servers);
    let held = multi
        .lock("turn")
        .lease(Duration::from_secs(5))
        .acquire()
        .await
        .unwrap()
        .unwrap();
    let waiter = multi
        .lock("turn")
        .lease(Duration::from_secs(5))
        .wait(Duration::from_secs(3));
    let task = tokio::spawn(async move { waiter.acquire().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(held); // released in the background
    let g = task.await.unwrap().unwrap().expect("got it after the drop");
    // The background releases land one primary at a time: a try between two of them
    // wins on a majority, which is all a multi-lock promises.
    let held_on = g.held_on();
    assert!(
        held_on.iter().filter(|h| **h).count() >= 2,
        "held on a majority: {held_on:?}"
    );
}
