//! How `Locks` connects: from a URL, over the application's own connection, through the
//! re-exported `redis` crate; and that no lock command is ever sent twice on its own.

mod common;

use std::time::Duration;

use common::{holders, raw, servers, Server};
use rlock_client::{redis, Error, Locks};

/// The number of client connections the server has, the caller's checking one included.
fn connections(server: &Server) -> usize {
    let list = raw(server, &["CLIENT", "LIST"]).unwrap();
    let redis::Value::BulkString(text) = list else {
        panic!("CLIENT LIST: {list:?}")
    };
    String::from_utf8_lossy(&text).lines().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_url_async_and_blocking() {
    for server in servers() {
        let locks = Locks::from_url(&server.url()).unwrap();
        let g = locks.lock("u").acquire().await.unwrap().expect("free");
        assert_eq!(holders(&server, "u").len(), 1, "{}", server.flavor);
        g.release().await.unwrap();
        let blocking = tokio::task::spawn_blocking({
            let url = server.url();
            move || {
                let locks = rlock_client::blocking::Locks::from_url(&url).unwrap();
                locks.lock("u").acquire().unwrap().is_some()
            }
        });
        assert!(blocking.await.unwrap());
    }
    assert!(Locks::from_url("not a url").is_err());
    assert!(rlock_client::blocking::Locks::from_url("nope://x").is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_applications_connection_carries_the_short_commands() {
    for server in servers() {
        // Built with the re-exported redis crate: the app needs no redis of the same version.
        let client: rlock_client::redis::Client = redis::Client::open(server.url()).unwrap();
        let manager = client.get_connection_manager().await.unwrap();
        let multiplexed = client.get_multiplexed_async_connection().await.unwrap();
        let by_manager = Locks::with_connection_manager(manager, client.clone());
        let by_plain = Locks::with_multiplexed_connection(multiplexed, client.clone());
        let all = [by_manager, by_plain]; // kept alive: their pooled connections stay open
        for (i, locks) in all.iter().enumerate() {
            let base = connections(&server); // the app's two, earlier pools', this check's
            let key = format!("app:{i}");
            let lock = locks.lock(key.clone()).fenced();
            let g = lock.acquire().await.unwrap().expect("free");
            assert_eq!(lock.hold_count().await.unwrap(), 1);
            g.renew().await.unwrap();
            assert_eq!(locks.info(&key).await.unwrap().holders.len(), 1);
            assert!(g.release().await.unwrap());
            assert_eq!(
                connections(&server),
                base,
                "{}: no connection of its own for short commands",
                server.flavor
            );
            // A wait needs a dedicated connection, opened from the client.
            let held = locks.lock(key.clone()).acquire().await.unwrap().unwrap();
            let waiter = locks.lock(key.clone()).wait(Duration::from_secs(5));
            let task = tokio::spawn(async move { waiter.acquire().await });
            tokio::time::sleep(Duration::from_millis(100)).await;
            assert_eq!(connections(&server), base + 1);
            held.release().await.unwrap();
            task.await.unwrap().unwrap().expect("handed over");
        }
    }
}

/// The server is made to stall past the client's response timeout while an acquire is in
/// flight. The acquire fails (the client cannot know whether it was applied), and the server
/// sees it exactly once: nothing re-sent it behind the caller's back.
async fn stalled_acquire_is_sent_once(server: &Server, locks: &Locks, key: &str) {
    let lock = locks.lock(key).lease(Duration::from_secs(20));
    assert_eq!(lock.hold_count().await.unwrap(), 0); // connected and warm
    let sleeper = common::stall(server, "1").await;
    let result = lock.acquire().await;
    assert!(
        matches!(&result, Err(Error::Redis(e)) if e.is_timeout()),
        "{}: {result:?}",
        server.flavor
    );
    sleeper.join().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        holders(server, key),
        [(lock.owner().to_string(), 1)],
        "{}: applied once, not re-entered by a re-send",
        server.flavor
    );
    assert!(lock.unlock().await.unwrap(), "a single release frees it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c08_a_timed_out_acquire_is_never_sent_twice() {
    for server in servers() {
        // The crate's own ConnectionManager.
        let locks = common::locks_with_timeout(&server, Duration::from_millis(200));
        stalled_acquire_is_sent_once(&server, &locks, "once:manager").await;
        // The application's MultiplexedConnection.
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(Duration::from_millis(200)));
        let conn = server
            .client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        let locks = Locks::with_multiplexed_connection(conn, server.client());
        stalled_acquire_is_sent_once(&server, &locks, "once:app").await;
    }
}

/// C08, release side: a release whose reply is late (the server stalls 500 ms, past the 200 ms
/// response timeout) is sent again 100 ms later with the same `REQ` id; the server applies
/// it once and the resend gets its reply: of two re-entries, one is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c08_a_release_sent_again_is_applied_once() {
    for server in servers() {
        let locks = common::locks_with_timeout(&server, Duration::from_millis(200));
        let lock = locks.lock("once:release");
        let outer = lock.acquire().await.unwrap().unwrap();
        let inner = lock.acquire().await.unwrap().unwrap();
        let sleeper = common::stall(&server, "0.5").await;
        let released = inner.release().await;
        sleeper.join().unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            holders(&server, "once:release"),
            [(lock.owner().to_string(), 1)],
            "{}: one re-entry undone, not two ({released:?})",
            server.flavor
        );
        assert!(
            matches!(released, Ok(false)),
            "{}: the resend's reply (the first timed out): {released:?}",
            server.flavor
        );
        assert!(outer.release().await.unwrap());
    }
}
