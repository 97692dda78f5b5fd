//! C20, guarded writes: `hold.guard(..)` sends `RLOCK.GUARD`, on every flavor. A write through
//! a hold lands while the hold stands, and is refused, changing nothing, once the lease ran
//! out (no renewal, or while the server slept), the lock was force-released, or a newer token
//! exists. Needs a module with `RLOCK.GUARD` (`RLOCK_MODULE`).

mod common;

use std::time::Duration;

use common::{each_server, get, raw, servers, stall, Server};
use rlock_client::redis::{self, Value};
use rlock_client::{Error, Locks};

/// The data a lock guards, in the lock's slot (what a cluster requires).
fn data_of(key: &str) -> String {
    format!("{{{key}}}:data")
}

fn set(key: &str, value: &str) -> redis::Cmd {
    let mut c = redis::cmd("SET");
    c.arg(key).arg(value);
    c
}

/// The lock's hash and its data, to show that a refusal changed nothing.
fn state(server: &Server, key: &str) -> (Value, Option<String>) {
    let lock = raw(server, &["HGETALL", key]).unwrap();
    (lock, get(server, &data_of(key)))
}

/// `RLOCK.GUARD` calls the server counted (`INFO commandstats`).
fn guard_calls(server: &Server) -> u64 {
    let stats = server.info("commandstats");
    stats.get("cmdstat_rlock.guard").map_or(0, |line| {
        let calls = line.split(',').find_map(|f| f.strip_prefix("calls="));
        calls.expect("calls=").parse().unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_a_write_through_a_hold_is_applied_while_it_stands() {
    for (flavor, server, locks) in each_server() {
        let (k, data) = ("c20", data_of("c20"));

        let hold = locks.lock(k).acquire().await.unwrap().expect("free");
        let reply: Value = hold.guard(&set(&data, "v1")).await.unwrap();
        assert_eq!(reply, Value::Okay, "{flavor}: the inner reply as it is");
        assert_eq!(get(&server, &data).as_deref(), Some("v1"));
        let mut append = redis::cmd("APPEND");
        append.arg(&data).arg("+2");
        let len: i64 = hold.guard(&append).await.unwrap();
        assert_eq!(len, 4, "{flavor}: a FromRedisValue type");
        let mut read = redis::cmd("GET");
        read.arg(&data);
        assert_eq!(hold.guard::<String>(&read).await.unwrap(), "v1+2");
        // The inner command's own error is the caller's, not a refusal of the hold.
        let mut incr = redis::cmd("INCR");
        incr.arg(&data);
        match hold.guard::<Value>(&incr).await {
            Err(Error::Redis(e)) => assert_eq!(e.code(), Some("ERR"), "{flavor}: {e}"),
            other => panic!("{flavor}: {other:?}"),
        }
        assert!(hold.release().await.unwrap());

        let fenced = locks.lock(k).fenced().acquire().await.unwrap().unwrap();
        let token = fenced.token().expect("fenced");
        let _: () = fenced
            .guard(&set(&data, &format!("t{token}")))
            .await
            .unwrap();
        assert_eq!(get(&server, &data), Some(format!("t{token}")));
        // A re-entry has the same token: its guard passes too.
        let reentry = locks.lock_as(k, fenced.owner()).fenced();
        let reentry = reentry.acquire().await.unwrap().expect("re-entry");
        assert_eq!(reentry.token(), fenced.token());
        let _: () = reentry.guard(&set(&data, "re-entered")).await.unwrap();
        reentry.release().await.unwrap();
        fenced.release().await.unwrap();

        // A read-write lock: the write hold sends WRITE (and its token), a read hold READ.
        let (rw, rw_data) = ("c20rw", data_of("c20rw"));
        let doc = locks.read_write(rw);
        let write = doc.write().fenced().acquire().await.unwrap().unwrap();
        let _: () = write.guard(&set(&rw_data, "w")).await.unwrap();
        write.release().await.unwrap();
        let reader = doc.read().acquire().await.unwrap().unwrap();
        let mut read = redis::cmd("GET");
        read.arg(&rw_data);
        assert_eq!(reader.guard::<String>(&read).await.unwrap(), "w");
        // The reader holds it: a writer of another owner is refused.
        let other = locks.read_write(rw).write().acquire().await.unwrap();
        assert!(other.is_none(), "{flavor}: a reader holds it");
        reader.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_refused_changing_nothing_once_the_lease_ran_out() {
    for (flavor, server, locks) in each_server() {
        let (k, data) = ("c20lease", data_of("c20lease"));
        // A fixed lease: no watchdog renews it.
        let lock = locks.lock(k).lease(Duration::from_millis(300));
        let hold = lock.acquire().await.unwrap().expect("free");
        let _: () = hold.guard(&set(&data, "before")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(450)).await;
        let before = state(&server, k);
        match hold.guard::<Value>(&set(&data, "after")).await {
            Err(Error::NotHeld { key, owner }) => {
                assert_eq!((key.as_str(), owner.as_str()), (k, lock.owner()))
            }
            other => panic!("{flavor}: a write after the lease ran out: {other:?}"),
        }
        assert_eq!(state(&server, k), before);
        assert_eq!(before.1.as_deref(), Some("before"), "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_refused_once_the_lease_ran_out_while_the_server_slept() {
    for server in servers() {
        let flavor = server.flavor;
        let locks = Locks::builder(server.client())
            .response_timeout(Duration::from_secs(3))
            .build();
        let (k, data) = ("c20sleep", data_of("c20sleep"));
        let lock = locks.lock(k).lease(Duration::from_millis(250)).fenced();
        let hold = lock.acquire().await.unwrap().expect("free");
        let _: () = hold.guard(&set(&data, "before")).await.unwrap();
        // The server sleeps past the lease; the guard, sent meanwhile, runs when it wakes,
        // before any timer of the module could have ended the hold.
        let sleeper = stall(&server, "0.5").await;
        let refused = hold.guard::<Value>(&set(&data, "after")).await;
        sleeper.join().unwrap();
        assert!(
            matches!(refused, Err(Error::NotHeld { .. })),
            "{flavor}: {refused:?}"
        );
        assert_eq!(get(&server, &data).as_deref(), Some("before"), "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_refused_changing_nothing_once_the_lock_was_force_released() {
    for (flavor, server, locks) in each_server() {
        let (k, data) = ("c20force", data_of("c20force"));
        let hold = locks.lock(k).fenced().acquire().await.unwrap().unwrap();
        let _: () = hold.guard(&set(&data, "before")).await.unwrap();
        assert!(locks.force_release(k).await.unwrap());
        let refused = hold.guard::<Value>(&set(&data, "after")).await;
        assert!(
            matches!(refused, Err(Error::NotHeld { .. })),
            "{flavor}: {refused:?}"
        );
        assert_eq!(
            state(&server, k),
            (Value::Array(vec![]), Some("before".into()))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_refused_changing_nothing_once_a_newer_token_exists() {
    for (flavor, server, locks) in each_server() {
        let (k, data) = ("c20token", data_of("c20token"));
        let lock = locks.lock(k).fenced();
        let first = lock.acquire().await.unwrap().unwrap();
        let _: () = first.guard(&set(&data, "first")).await.unwrap();

        // Another owner takes the lock after a force release, and writes.
        locks.force_release(k).await.unwrap();
        let second = locks.lock(k).fenced().acquire().await.unwrap().unwrap();
        assert!(second.token() > first.token());
        let _: () = second.guard(&set(&data, "second")).await.unwrap();
        let before = state(&server, k);
        let refused = first.guard::<Value>(&set(&data, "stale")).await;
        assert!(
            matches!(refused, Err(Error::NotHeld { .. })),
            "{flavor}: another owner holds it: {refused:?}"
        );
        assert_eq!(state(&server, k), before);
        let second_token = second.token();
        second.release().await.unwrap();

        // The same owner (a stable owner id, in another process or after a restart) takes it
        // again: it holds the lock, but not as the hold with the old token.
        let again = locks
            .lock_as(k, lock.owner())
            .fenced()
            .acquire()
            .await
            .unwrap()
            .unwrap();
        assert!(again.token() > second_token);
        let before = state(&server, k);
        let refused = first
            .guard::<Value>(&set(&data, "stale"))
            .await
            .unwrap_err();
        assert!(refused.is_not_held());
        let Error::StaleToken {
            key,
            owner,
            token,
            current,
        } = refused
        else {
            panic!("{flavor}: a write with a stale token: {refused:?}")
        };
        assert_eq!(
            (key.as_str(), owner.as_str(), Some(token), current),
            (k, lock.owner(), first.token(), again.token())
        );
        assert_eq!(state(&server, k), before);
        assert_eq!(before.1.as_deref(), Some("second"), "{flavor}");
        let _: () = again.guard(&set(&data, "again")).await.unwrap();
        assert_eq!(get(&server, &data).as_deref(), Some("again"));
        again.release().await.unwrap();
        drop(first);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_a_command_without_a_name_is_refused_before_anything_is_sent() {
    for (flavor, server, locks) in each_server() {
        let k = "c20bad";
        let hold = locks.lock(k).acquire().await.unwrap().unwrap();
        let sent = guard_calls(&server);
        for bad in [redis::Cmd::new(), redis::cmd("")] {
            match hold.guard::<Value>(&bad).await {
                Err(Error::InvalidArgument { key, .. }) => assert_eq!(key, k),
                other => panic!("{flavor}: {other:?}"),
            }
        }
        assert_eq!(guard_calls(&server), sent, "{flavor}: nothing reached it");
        // A command the server refuses inside a guard is its error, and runs nothing.
        let mut blpop = redis::cmd("BLPOP");
        blpop.arg(data_of(k)).arg(0);
        match hold.guard::<Value>(&blpop).await {
            Err(Error::Redis(e)) => assert!(e.to_string().contains("blocking"), "{e}"),
            other => panic!("{flavor}: {other:?}"),
        }
        hold.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c20_a_leader_writes_only_while_it_leads_in_its_term() {
    for (flavor, server, locks) in each_server() {
        let (k, data) = ("c20lead", data_of("c20lead"));
        let leader = locks.election(k).campaign("node-a").await.unwrap();
        let _: () = leader.guard(&set(&data, "a")).await.unwrap();
        locks.force_release(k).await.unwrap();
        let next = locks.election(k).campaign("node-b").await.unwrap();
        assert!(next.term() > leader.term());
        let refused = leader.guard::<Value>(&set(&data, "a again")).await;
        assert!(
            matches!(refused, Err(Error::NotHeld { .. })),
            "{flavor}: {refused:?}"
        );
        assert_eq!(get(&server, &data).as_deref(), Some("a"));
        // A leader of the same value elected again is a later term: the old post is stale.
        next.resign().await.unwrap();
        let back = locks.election(k).campaign("node-a").await.unwrap();
        let refused = leader.guard::<Value>(&set(&data, "a, old term")).await;
        assert!(
            matches!(refused, Err(Error::StaleToken { .. })),
            "{flavor}: {refused:?}"
        );
        let _: () = back.guard(&set(&data, "a, new term")).await.unwrap();
        assert_eq!(get(&server, &data).as_deref(), Some("a, new term"));
        back.resign().await.unwrap();
        drop(leader);
    }
}

#[test]
fn c20_blocking_guards_write_while_held_and_are_refused_after() {
    for (flavor, server, locks) in common::each_server_blocking() {
        let (k, data) = ("c20sync", data_of("c20sync"));
        let hold = locks.lock(k).fenced().acquire().unwrap().unwrap();
        let _: () = hold.guard(&set(&data, "held")).unwrap();
        assert_eq!(get(&server, &data).as_deref(), Some("held"));
        assert!(locks.lock(k).force_release().unwrap());
        let refused = hold.guard::<Value>(&set(&data, "after"));
        assert!(
            matches!(refused, Err(Error::NotHeld { .. })),
            "{flavor}: {refused:?}"
        );
        assert_eq!(get(&server, &data).as_deref(), Some("held"));
        // The scoped call's hold guards on this thread too.
        let scoped = locks.lock(k).fenced();
        let wrote = scoped.with_lock(|hold| hold.guard::<()>(&set(&data, "scoped")));
        assert!(matches!(wrote, Ok(Ok(()))), "{flavor}: {wrote:?}");
        assert_eq!(get(&server, &data).as_deref(), Some("scoped"));

        let leadership = locks.election("c20sync-lead").campaign("n").unwrap();
        let lead_data = data_of("c20sync-lead");
        let _: () = leadership.guard(&set(&lead_data, "led")).unwrap();
        assert_eq!(get(&server, &lead_data).as_deref(), Some("led"));
        assert!(locks.lock("c20sync-lead").force_release().unwrap());
        let refused = leadership.guard::<Value>(&set(&lead_data, "deposed"));
        assert!(
            matches!(refused, Err(Error::NotHeld { .. })),
            "{flavor}: {refused:?}"
        );
        assert_eq!(get(&server, &lead_data).as_deref(), Some("led"));
    }
}
