//! The async API against a real server with the module, on every flavor.

mod common;

use std::time::Duration;

use common::{each_server, eventually, holders, pttl, raw, servers};
use rlock_client::{Error, Locks};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_excludes_others_and_release_frees() {
    for (_, server, locks) in each_server() {
        let a = locks.lock("orders");
        let b = locks.lock("orders");
        assert_ne!(a.owner(), b.owner(), "each lock() is a new owner");
        assert!(a.owner().starts_with(locks.client_id()));

        let g = a.acquire().await.unwrap().expect("free lock");
        assert_eq!(g.hold_count(), Some(1));
        assert_eq!(g.token(), None);
        assert_eq!(g.key(), "orders");
        assert_eq!(holders(&server, "orders"), [(a.owner().to_string(), 1)]);
        assert!(
            b.acquire().await.unwrap().is_none(),
            "{}: held by a",
            server.flavor
        );

        assert!(g.release().await.unwrap(), "fully released");
        assert!(holders(&server, "orders").is_empty());
        let g = b.acquire().await.unwrap().expect("free again");
        g.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c01_clones_of_a_handle_reenter_and_release() {
    for (_, server, locks) in each_server() {
        let lock = locks.lock("reports");
        let outer = lock.acquire().await.unwrap().expect("free");
        let inner = lock.clone().acquire().await.unwrap().expect("re-entry");
        assert_eq!(inner.hold_count(), Some(2));
        assert_eq!(holders(&server, "reports"), [(lock.owner().to_string(), 2)]);
        assert!(!inner.release().await.unwrap(), "still held by outer");
        assert_eq!(holders(&server, "reports"), [(lock.owner().to_string(), 1)]);
        assert!(locks.lock("reports").acquire().await.unwrap().is_none());
        assert!(outer.release().await.unwrap());
        assert!(holders(&server, "reports").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_is_sent_and_not_renewed() {
    for (_, server, locks) in each_server() {
        let lock = locks.lock("short").lease(Duration::from_millis(400));
        let g = common::granted(lock.acquire()).await;
        let ttl = pttl(&server, "short");
        assert!((1..=400).contains(&ttl), "{}: pttl {ttl}", server.flavor);
        // No watchdog for a fixed lease: the hold ends and the guard says so.
        let lost = tokio::time::timeout(Duration::from_secs(3), g.lost())
            .await
            .expect("lost fires when a fixed lease runs out");
        assert!(lost.is_lost());
        assert!(eventually(Duration::from_secs(2), || pttl(&server, "short") == -2).await);
        assert!(matches!(g.renew().await, Err(Error::Lost { .. })));
        assert!(matches!(g.release().await, Err(Error::Lost { .. })));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_resets_the_lease() {
    for (_, server, locks) in each_server() {
        let lock = locks.lock("renewed").lease(Duration::from_millis(1500));
        let g = common::granted(lock.acquire()).await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(pttl(&server, "renewed") <= 800);
        g.renew().await.unwrap();
        assert!(pttl(&server, "renewed") > 1000, "{}", server.flavor);
        g.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c10_fenced_tokens_increase_and_survive_release() {
    for (_, server, locks) in each_server() {
        let lock = locks.lock("fenced").fenced();
        let g1 = lock.acquire().await.unwrap().expect("free");
        let t1 = g1.token().expect("token");
        assert_eq!(g1.hold_count(), Some(1), "read beside the token");
        let again = lock.acquire().await.unwrap().expect("re-entry");
        assert_eq!(
            again.token(),
            Some(t1),
            "a re-entry returns the holder's token"
        );
        again.release().await.unwrap();
        g1.release().await.unwrap();
        let g2 = locks
            .lock("fenced")
            .fenced()
            .acquire()
            .await
            .unwrap()
            .unwrap();
        assert!(g2.token().unwrap() > t1, "{}", server.flavor);
        assert_eq!(locks.info("fenced").await.unwrap().token, g2.token());
        g2.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_releases_in_the_background_without_blocking() {
    for (_, server, locks) in each_server() {
        let g = locks.lock("dropped").acquire().await.unwrap().unwrap();
        // On a current-thread runtime a blocking Drop would deadlock; this one must not.
        let started = std::time::Instant::now();
        drop(g);
        assert!(started.elapsed() < Duration::from_millis(50));
        assert!(
            common::freed_within(&server, "dropped", Duration::from_secs(2)).await,
            "{}: dropped guard released",
            server.flavor
        );
    }
}

#[test]
fn drop_on_a_current_thread_runtime_does_not_deadlock() {
    let server = common::Server::start(common::flavors()[0]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let locks = Locks::new(server.client());
        let g = locks.lock("ct").acquire().await.unwrap().unwrap();
        drop(g);
        assert!(common::freed_within(&server, "ct", Duration::from_secs(2)).await);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_of_a_lock_taken_away_is_not_held() {
    for server in servers() {
        let locks = common::locks_with_lease(&server, Duration::from_secs(30));
        let g = locks.lock("taken").acquire().await.unwrap().unwrap();
        assert!(locks.force_release("taken").await.unwrap());
        assert!(!locks.force_release("taken").await.unwrap());
        match g.release().await {
            Err(Error::NotHeld { key, owner }) => {
                assert_eq!(key, "taken");
                assert!(owner.starts_with(locks.client_id()));
            }
            other => panic!("{}: expected NotHeld, got {other:?}", server.flavor),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_runs_and_releases() {
    for (_, server, locks) in each_server() {
        let lock = locks.lock("job").fenced();
        let token = lock
            .with_lock(|hold| async move {
                assert_eq!(hold.key(), "job");
                hold.token()
            })
            .await
            .unwrap();
        assert!(token.is_some());
        assert!(holders(&server, "job").is_empty(), "released after f");

        let held = locks.lock("job").acquire().await.unwrap().unwrap();
        let busy = lock
            .clone()
            .wait(Duration::ZERO)
            .with_lock(|_| async {})
            .await;
        assert!(
            matches!(busy, Err(Error::NotAcquired { waited: None, .. })),
            "{busy:?}"
        );
        // Without a wait set, the scoped call waits until it is granted (acquire() tries once).
        assert!(lock.acquire().await.unwrap().is_none());
        let scoped = tokio::spawn({
            let lock = lock.clone();
            async move { lock.with_lock(|hold| async move { hold.token() }).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!scoped.is_finished(), "the scoped call waits");
        held.release().await.unwrap();
        let token = tokio::time::timeout(Duration::from_secs(5), scoped).await;
        assert!(matches!(token, Ok(Ok(Ok(Some(_))))), "{token:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_stops_the_work_when_the_lock_is_lost() {
    for server in servers() {
        let locks = common::locks_with_lease(&server, Duration::from_millis(600));
        let key = "doomed";
        let result = locks
            .lock(key)
            .with_lock(|_| async {
                raw(&server, &["DEL", key]).unwrap();
                tokio::time::sleep(Duration::from_secs(10)).await;
                "finished"
            })
            .await;
        assert!(matches!(result, Err(Error::Lost { .. })), "{result:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_reports_holders_and_pttl() {
    for (_, _, locks) in each_server() {
        let free = locks.info("nothing").await.unwrap();
        assert!(free.holders.is_empty());
        assert_eq!(free.pttl, -2);
        let lock = locks.lock("seen").lease(Duration::from_secs(20));
        let _a = lock.acquire().await.unwrap().unwrap();
        let _b = lock.acquire().await.unwrap().unwrap();
        let info = locks.info("seen").await.unwrap();
        assert_eq!(info.holders, [(lock.owner().to_string(), 2)]);
        assert!(info.pttl > 15_000 && info.pttl <= 20_000, "{info:?}");
        assert_eq!(info.blocked, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_come_back_typed() {
    for server in servers() {
        raw(&server, &["SET", "plain", "x"]).unwrap();
        let locks = Locks::new(server.client());
        let e = locks.lock("plain").acquire().await.unwrap_err();
        match &e {
            Error::Redis(r) => assert_eq!(r.code(), Some("WRONGTYPE"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owners_and_keys_are_binary_safe_enough_for_redisson_names() {
    for (_, server, locks) in each_server() {
        let key = "{tenant:7}:lock ü";
        let g = locks.lock(key).acquire().await.unwrap().unwrap();
        assert_eq!(holders(&server, key).len(), 1);
        g.release().await.unwrap();
    }
}
