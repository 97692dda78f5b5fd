//! Read-write locks through the client: sides, waits, the watchdog and the blocking twin,
//! on Redisson's `RReadWriteLock` layout, on every flavor.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{each_server, pttl, raw, Server};
use rlock_client::{Error, Guard, LockKind, ReadWriteLock, Side};
use rlock_module_tests::redis;

/// `HGETALL key`: Redisson's read-write hash (`mode`, readers, `<owner>:write`).
fn fields(server: &Server, key: &str) -> BTreeMap<String, String> {
    let mut con = server.conn();
    redis::cmd("HGETALL")
        .arg(key)
        .query(&mut con)
        .expect("HGETALL")
}

/// The read hold's timeout key, `{K}:<owner>:rwlock_timeout:<n>`.
fn read_timeout_key(key: &str, owner: &str, n: u64) -> String {
    format!("{{{key}}}:{owner}:rwlock_timeout:{n}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c12_read_write_readers_share_and_a_writer_waits_for_them() {
    for (flavor, server, locks) in each_server() {
        let (a, b, w) = (
            locks.read_write("cfg"),
            locks.read_write("cfg"),
            locks.read_write("cfg"),
        );
        let ra = a.read().acquire().await.unwrap().expect("free");
        let rb = b.read().acquire().await.unwrap().expect("readers share");
        assert_eq!((ra.side(), rb.side()), (Some(Side::Read), Some(Side::Read)));
        let f = fields(&server, "cfg");
        assert_eq!(f.get("mode").map(String::as_str), Some("read"), "{flavor}");
        assert_eq!(f.get(a.owner()).map(String::as_str), Some("1"), "{flavor}");
        assert_eq!(f.get(b.owner()).map(String::as_str), Some("1"), "{flavor}");
        assert!(w.write().acquire().await.unwrap().is_none(), "{flavor}");
        assert_eq!(a.read().hold_count().await.unwrap(), 1);
        assert!(a.read().is_held_by(a.owner()).await.unwrap());
        assert!(!a.write().is_held_by(a.owner()).await.unwrap());

        // A writer waiting in the server is served once the last reader leaves.
        let writer = w.write().wait(Duration::from_secs(5));
        let waiting = tokio::spawn(async move { writer.acquire().await });
        for _ in 0..200 {
            if a.info().await.unwrap().blocked == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            a.info().await.unwrap().blocked,
            1,
            "{flavor}: the writer waits"
        );
        assert!(ra.release().await.unwrap());
        assert!(rb.release().await.unwrap());
        let g = waiting.await.unwrap().unwrap().expect("served");
        assert_eq!(g.side(), Some(Side::Write));
        let f = fields(&server, "cfg");
        assert_eq!(f.get("mode").map(String::as_str), Some("write"), "{flavor}");
        let write_field = format!("{}:write", w.owner());
        assert_eq!(f.get(&write_field).map(String::as_str), Some("1"));
        assert_eq!(w.write().hold_count().await.unwrap(), 1);
        let info = w.info().await.unwrap();
        assert_eq!(
            info.kind,
            LockKind::ReadWrite {
                mode: "write".into()
            }
        );
        assert!(g.release().await.unwrap());
        assert!(!w.is_locked().await.unwrap(), "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_takes_reads_and_a_reader_never_waits_on_itself() {
    for (flavor, server, locks) in each_server() {
        let rw = locks.read_write("doc");
        let write = rw.write().acquire().await.unwrap().expect("free");
        let again = rw.write().acquire().await.unwrap().expect("re-entry");
        assert_eq!(again.hold_count(), Some(2));
        assert!(!again.release().await.unwrap(), "still held by `write`");
        // Redisson's downgrade: the writer reads too; each side is its own hold.
        let read = writer_reads(&rw).await;
        assert!(write.release().await.unwrap(), "{flavor}");
        let f = fields(&server, "doc");
        assert_eq!(f.get("mode").map(String::as_str), Some("read"), "{flavor}");
        assert_eq!(f.get(rw.owner()).map(String::as_str), Some("1"), "{flavor}");
        // A reader asking to write gets None at once, even with a wait: it would wait on itself.
        let started = std::time::Instant::now();
        let upgrade = rw.write().wait(Duration::from_secs(5)).acquire().await;
        assert!(upgrade.unwrap().is_none(), "{flavor}");
        assert!(started.elapsed() < Duration::from_secs(2), "{flavor}");
        assert!(read.release().await.unwrap());
        // FAIR is the server's to refuse, and nothing changes.
        let fair = rw.write().fair().acquire().await;
        assert!(
            matches!(&fair, Err(Error::Redis(e)) if e.to_string().contains("FAIR")),
            "{flavor}: {fair:?}"
        );
        assert!(!rw.is_locked().await.unwrap(), "{flavor}");
        // Releasing a side not held is NotHeld.
        assert!(matches!(
            rw.read().unlock().await,
            Err(Error::NotHeld { .. })
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_both_sides() {
    const LEASE: Duration = Duration::from_millis(600);
    for (flavor, server, locks) in common::each_server_with(|s| common::locks_with_lease(s, LEASE))
    {
        let rw = locks.read_write("wd");
        let write = rw.write().acquire().await.unwrap().expect("free");
        let read = writer_reads(&rw).await;
        let reader = locks.read_write("wd2");
        let other_read = reader.read().acquire().await.unwrap().expect("free");
        tokio::time::sleep(LEASE * 3).await;
        for (g, key) in [(&write, "wd"), (&read, "wd"), (&other_read, "wd2")] {
            assert!(!g.is_lost(), "{flavor}: {key} {:?} lost", g.side());
        }
        assert!(pttl(&server, "wd") > 0, "{flavor}");
        assert!(pttl(&server, "wd2") > 0, "{flavor}");
        let timeout_key = read_timeout_key("wd2", reader.owner(), 1);
        assert!(pttl(&server, &timeout_key) > 0, "{flavor}: {timeout_key}");
        // Deleting the lock is noticed on both sides.
        raw(&server, &["DEL", "wd"]).unwrap();
        for g in [&write, &read] {
            let lost = tokio::time::timeout(LEASE * 2, g.lost()).await;
            assert!(lost.is_ok(), "{flavor}: {:?} loss not noticed", g.side());
        }
        assert!(other_read.release().await.unwrap());
    }
}

#[test]
fn the_blocking_twin() {
    for (flavor, _, locks) in common::each_server_blocking() {
        let a = locks.read_write("b");
        let b = locks.read_write_as("b", "java-uuid:57");
        assert_eq!(b.owner(), "java-uuid:57");
        let ra = a.read().acquire().unwrap().expect("free");
        let rb = b.read().acquire().unwrap().expect("shared");
        assert!(a.write().acquire().unwrap().is_none(), "{flavor}");
        let writer = locks.read_write("b");
        let waiting = std::thread::spawn(move || {
            writer
                .write()
                .wait(Duration::from_secs(5))
                .acquire()
                .map(|g| g.map(|g| g.release()))
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(ra.release().unwrap());
        assert!(rb.release().unwrap());
        let served = waiting.join().unwrap().unwrap().expect("served");
        assert!(served.unwrap(), "{flavor}");
        assert!(!a.is_locked().unwrap(), "{flavor}");
        assert_eq!(a.read().side(), Some(Side::Read));
    }
}

/// The read side of `rw`, taken by its writer (Redisson's downgrade): never waits.
async fn writer_reads(rw: &ReadWriteLock) -> Guard {
    rw.read()
        .acquire()
        .await
        .unwrap()
        .expect("the writer reads")
}
