//! `Error::Deadlock`: a wait the server refuses because it would close a cycle of waits
//! comes back with the cycle, from the async and the blocking API.

mod common;

use std::time::Duration;

use common::{eventually, raw, servers, Server};
use rlock_client::{blocking, Error, Locks, Wait};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c11_a_wait_that_would_close_a_cycle_is_refused_with_the_cycle() {
    for server in servers() {
        let locks = Locks::from_url(&server.url()).unwrap();
        let a_k1 = locks.lock_as("k1", "a").acquire().await.unwrap().unwrap();
        let b_k2 = locks.lock_as("k2", "b").acquire().await.unwrap().unwrap();
        let a_waits = locks.lock_as("k2", "a").wait(Duration::from_secs(10));
        let task = tokio::spawn(async move { a_waits.acquire().await });
        assert!(
            eventually(Duration::from_secs(5), || blocked(&server) == 1).await,
            "{}: a never blocked on k2",
            server.flavor
        );
        let refused = locks
            .lock_as("k1", "b")
            .wait(Duration::from_secs(10))
            .acquire()
            .await;
        let Err(Error::Deadlock { cycle }) = refused else {
            panic!("{}: {refused:?}", server.flavor);
        };
        let wait = |owner: &str, key: &str, holder: &str| Wait {
            owner: owner.into(),
            key: key.into(),
            holder: holder.into(),
            kept: false,
        };
        assert_eq!(
            cycle,
            vec![wait("b", "k1", "a"), wait("a", "k2", "b")],
            "{}",
            server.flavor
        );
        // Giving way ends it: a gets k2.
        b_k2.release().await.unwrap();
        let a_k2 = task.await.unwrap().unwrap().expect("a served");
        a_k2.release().await.unwrap();
        a_k1.release().await.unwrap();

        // The blocking API says the same.
        let sync = blocking::Locks::from_url(&server.url()).unwrap();
        let _x = sync.lock_as("s1", "x").acquire().unwrap().unwrap();
        let _y = sync.lock_as("s2", "y").acquire().unwrap().unwrap();
        let x_waits = sync.lock_as("s2", "x").wait(Duration::from_secs(10));
        let waiter = std::thread::spawn(move || x_waits.acquire().map(|g| g.is_some()));
        let mut x_blocked = false;
        for _ in 0..500 {
            if blocked(&server) == 1 {
                x_blocked = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(x_blocked, "{}: x never blocked", server.flavor);
        let refused = sync
            .lock_as("s1", "y")
            .wait(Duration::from_secs(10))
            .acquire();
        assert!(
            matches!(&refused, Err(e) if e.is_deadlock()),
            "{}: {refused:?}",
            server.flavor
        );
        drop(_y);
        assert!(waiter.join().unwrap().unwrap(), "{}", server.flavor);
    }
}

/// `INFO rlock`'s `rlock_blocked`: calls blocked on the server now.
fn blocked(server: &Server) -> i64 {
    let info = raw(server, &["INFO", "rlock"]).expect("INFO rlock");
    let text = match info {
        rlock_client::redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        rlock_client::redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO replied {other:?}"),
    };
    text.lines()
        .find_map(|l| l.strip_prefix("rlock_blocked:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("rlock_blocked")
}
