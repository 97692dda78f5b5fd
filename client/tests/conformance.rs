//! The conformance cases of docs/CLIENTS.md that no other file of these tests covers by
//! itself: each test's name starts with its case id (`c07_...`), which scripts/conformance reads.

mod common;

use std::time::Duration;

use common::{each_server, holders, servers, Server};
use rlock_client::{blocking, Error, Locks};
use tokio::time::Instant;

/// C07: a wait longer than the connection's response timeout is granted, once, with no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c07_long_wait_outlives_the_response_timeout() {
    for server in servers() {
        let locks = common::locks_with_timeout(&server, Duration::from_secs(1));
        let held = locks.lock("long").acquire().await.unwrap().unwrap();
        let waiter = locks.lock("long").wait(Duration::from_secs(5));
        let owner = waiter.owner().to_string();
        let task = tokio::spawn(async move { waiter.acquire().await });
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(!task.is_finished(), "{}: still waiting", server.flavor);
        held.release().await.unwrap();
        let g = task
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{}: {e}", server.flavor))
            .expect("granted within the wait");
        assert_eq!(g.hold_count(), Some(1), "{}", server.flavor);
        assert_eq!(holders(&server, "long"), [(owner, 1)], "no duplicate");
        assert!(g.release().await.unwrap());
    }
}

/// C10: fencing tokens strictly increase across holders and across a restart from the AOF.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c10_tokens_increase_across_holders_and_an_aof_restart() {
    for flavor in common::flavors() {
        let mut server = Server::builder(flavor)
            .config("appendonly", "yes")
            .config("appendfsync", "always")
            .start();
        let mut last = 0;
        for round in 0..2 {
            let locks = Locks::new(server.client());
            for i in 0..3 {
                let g = locks.lock("fence").fenced().acquire().await.unwrap();
                let g = g.expect("free");
                let token = g.token().expect("a token");
                assert!(
                    token > last,
                    "{flavor} round {round}.{i}: {token} after {last}"
                );
                last = token;
                assert!(g.release().await.unwrap());
            }
            drop(locks);
            server.restart();
        }
        let locks = Locks::new(server.client());
        let g = locks.lock("fence").fenced().acquire().await.unwrap();
        let g = g.expect("free");
        let token = g.token().unwrap();
        assert!(
            token > last,
            "{flavor}: {token} after the restart, {last} before"
        );
        assert!(g.release().await.unwrap());
    }
}

/// C16: a thousand holds on one `Locks` are renewed by one watchdog over the one shared
/// connection, in batches, not by a task or a connection per hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c16_one_watchdog_renews_a_thousand_holds() {
    const LEASE: Duration = Duration::from_secs(3);
    for server in servers() {
        let locks = common::locks_with_lease(&server, LEASE);
        let mut guards = Vec::new();
        for i in 0..1000 {
            let g = locks.lock(format!("many:{i}")).acquire().await.unwrap();
            guards.push(g.expect("free"));
        }
        let before = renew_calls(&server);
        let started = Instant::now();
        tokio::time::sleep(LEASE * 2).await;
        let ticks = started.elapsed().as_millis() as u64 / (LEASE.as_millis() as u64 / 3) + 1;
        let lost: Vec<_> = guards
            .iter()
            .filter(|g| g.is_lost())
            .map(|g| g.key())
            .collect();
        assert!(lost.is_empty(), "{}: lost {lost:?}", server.flavor);
        let renewed = renew_calls(&server) - before;
        assert!(
            (1000..=1000 * ticks).contains(&renewed),
            "{}: {renewed} renewals in {ticks} ticks",
            server.flavor
        );
        // This test's own connection, and the shared one: nothing per hold.
        let clients: u64 = server.info("clients")["connected_clients"].parse().unwrap();
        assert!(clients <= 2, "{}: {clients} connections", server.flavor);
        for g in guards {
            g.release().await.unwrap();
        }
    }
}

fn renew_calls(server: &Server) -> u64 {
    server
        .info("commandstats")
        .get("cmdstat_rlock.renew")
        .and_then(|s| {
            s.split(',')
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// C17: bad arguments are refused before anything is sent (the `Locks` here points at a
/// port nobody listens on, so anything sent would fail as a connection error instead). A
/// negative wait or a value of the wrong type does not compile: `Duration` is unsigned and
/// names are strings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c17_bad_input_is_refused_before_anything_is_sent() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let locks = Locks::from_url(&format!("redis://127.0.0.1:{port}/")).unwrap();
    let refused = |r: rlock_client::Result<Option<rlock_client::Guard>>, what: &str| match r {
        Err(Error::InvalidArgument { reason, .. }) => reason,
        other => panic!("{what}: {other:?}"),
    };
    let reason = refused(locks.lock("").acquire().await, "empty name");
    assert!(reason.contains("empty"), "{reason}");
    let reason = refused(
        locks.lock("k").lease(Duration::ZERO).acquire().await,
        "zero lease",
    );
    assert!(reason.contains("lease"), "{reason}");
    let reason = refused(locks.lock_as("k", "").acquire().await, "empty owner");
    assert!(reason.contains("owner"), "{reason}");
    let waited = locks.lock("").wait(Duration::from_secs(1)).acquire().await;
    refused(waited, "empty name with a wait");
    // The blocking face refuses the same way.
    let sync = blocking::Locks::from_url(&format!("redis://127.0.0.1:{port}/")).unwrap();
    let r = tokio::task::spawn_blocking(move || sync.lock("").acquire().map(|g| g.is_some()))
        .await
        .unwrap();
    assert!(matches!(r, Err(Error::InvalidArgument { .. })), "{r:?}");
}

/// C18, in Rust's terms (tasks move between threads, so the owner is the handle, not the
/// thread): clones of a handle re-enter; two owners crossing two locks get `Deadlock`; a hold
/// released from another task than the one that took it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c18_owners_reenter_cross_into_deadlock_and_release_from_another_task() {
    for (_, server, locks) in each_server() {
        let a = locks.lock("o1");
        let outer = a.acquire().await.unwrap().unwrap();
        let inner = a.clone().acquire().await.unwrap().unwrap();
        assert_eq!(inner.hold_count(), Some(2), "{}", server.flavor);
        let b = locks.lock("o2");
        let b_holds = b.acquire().await.unwrap().unwrap();
        // a (holding o1) waits for o2; b (holding o2) then asks for o1: a cycle.
        let a_waits = locks.lock_as("o2", a.owner()).wait(Duration::from_secs(10));
        let waiting = tokio::spawn(async move { a_waits.acquire().await });
        let blocked = common::eventually(Duration::from_secs(5), || {
            common::raw(&server, &["RLOCK.INFO", "o2"])
                .map(|v| {
                    rlock_module_tests::parse_lock_info(&v, false)
                        .map(|i| i.blocked == 1)
                        .unwrap_or(false)
                })
                .unwrap_or(false)
        })
        .await;
        assert!(blocked, "{}: a blocked on o2", server.flavor);
        let crossed = locks
            .lock_as("o1", b.owner())
            .wait(Duration::from_secs(10))
            .acquire()
            .await;
        let Err(Error::Deadlock { cycle }) = crossed else {
            panic!("{}: {crossed:?}", server.flavor)
        };
        let owners: Vec<&str> = cycle.iter().map(|w| w.owner.as_str()).collect();
        assert!(
            owners.contains(&a.owner()) && owners.contains(&b.owner()),
            "{cycle:?}"
        );
        // b gives o2 up from another task: a's wait is granted.
        tokio::spawn(async move { b_holds.release().await })
            .await
            .unwrap()
            .unwrap();
        let a_o2 = waiting.await.unwrap().unwrap().expect("granted");
        assert!(a_o2.release().await.unwrap());
        // a's holds on o1, released from other tasks: free.
        tokio::spawn(async move { inner.release().await })
            .await
            .unwrap()
            .unwrap();
        assert!(tokio::spawn(async move { outer.release().await })
            .await
            .unwrap()
            .unwrap());
        assert!(holders(&server, "o1").is_empty(), "{}", server.flavor);
    }
}
