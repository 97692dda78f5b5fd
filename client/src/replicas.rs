//! How many replicas a lock's primary has, so that a default acquire waits for one to
//! acknowledge its grant (`WAIT`) when there is one, and sends no `WAIT` when there is none.
//!
//! The count is read from the server (`INFO replication` on a plain server: replicas whose
//! `state` is `online`; `CLUSTER NODES` in a cluster: connected replicas of each primary, by
//! slot) and kept for [`FRESH_FOR`]. The first acquire of a [`Locks`](crate::Locks) reads it
//! (one round trip, once); later acquires use the kept count and, once it is older than
//! `FRESH_FOR`, start one read in the background, so no acquire waits for it. A `WAIT` that
//! got fewer acknowledgements than asked marks the count stale at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::conn::Conn;
use crate::error::Result;

/// How long a count read from the server is used before it is read again.
pub(crate) const FRESH_FOR: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Count {
    /// A plain server's online replicas.
    Server(u64),
    /// A cluster's primaries: (first slot, last slot, connected replicas).
    Cluster(Vec<(u16, u16, u64)>),
}

impl Count {
    /// The replicas of the primary that serves `key` (0 for a slot no primary claims).
    pub(crate) fn of(&self, key: &str) -> u64 {
        match self {
            Count::Server(n) => *n,
            Count::Cluster(ranges) => {
                let slot = hash_slot(key.as_bytes());
                ranges
                    .iter()
                    .find(|(a, b, _)| (*a..=*b).contains(&slot))
                    .map_or(0, |r| r.2)
            }
        }
    }
}

#[derive(Default)]
pub(crate) struct Replicas {
    known: Mutex<Option<(Instant, Count)>>,
    reading: AtomicBool,
}

impl Replicas {
    /// The replicas of `key`'s primary, as last read; read now if never read.
    pub(crate) async fn of(self: &Arc<Self>, conn: &Conn, key: &str) -> Result<u64> {
        let known = {
            let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
            known
                .as_ref()
                .map(|(at, count)| (at.elapsed() >= FRESH_FOR, count.of(key)))
        };
        match known {
            Some((stale, n)) => {
                if stale && !self.reading.swap(true, Ordering::AcqRel) {
                    let (me, conn) = (self.clone(), conn.clone());
                    tokio::spawn(async move {
                        let _ = me.read(&conn).await;
                        me.reading.store(false, Ordering::Release);
                    });
                }
                Ok(n)
            }
            None => Ok(self.read(conn).await?.of(key)),
        }
    }

    /// Forgets the count's age, so the next acquire reads it again.
    pub(crate) fn stale(&self) {
        if let Some((at, _)) = self
            .known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            *at = Instant::now() - FRESH_FOR;
        }
    }

    async fn read(&self, conn: &Conn) -> Result<Count> {
        let count = if conn.is_cluster() {
            let v = conn.query(redis::cmd("CLUSTER").arg("NODES")).await?;
            Count::Cluster(cluster_replicas(&text(v)))
        } else {
            let v = conn.query(redis::cmd("INFO").arg("replication")).await?;
            Count::Server(online_replicas(&text(v)))
        };
        *self.known.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), count.clone()));
        Ok(count)
    }
}

/// The cluster slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the first
/// `{` and the next `}`, when not empty) or of the whole key, mod 16384.
pub(crate) fn hash_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(key) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

fn text(v: redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        redis::Value::SimpleString(s) => s,
        _ => String::new(),
    }
}

/// `INFO replication`'s replicas that are `state=online` (one still loading its first copy
/// cannot acknowledge yet).
pub(crate) fn online_replicas(info: &str) -> u64 {
    info.lines()
        .filter(|l| {
            l.strip_prefix("slave")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .filter(|l| l.split(',').any(|f| f == "state=online"))
        .count() as u64
}

/// `CLUSTER NODES`: each primary's slot ranges with its connected, healthy replicas.
pub(crate) fn cluster_replicas(nodes: &str) -> Vec<(u16, u16, u64)> {
    let lines: Vec<Vec<&str>> = nodes
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|f: &Vec<&str>| f.len() >= 8)
        .collect();
    let healthy = |f: &Vec<&str>| {
        f[7] == "connected" && !f[2].split(',').any(|flag| flag.starts_with("fail"))
    };
    let mut out = Vec::new();
    for primary in lines
        .iter()
        .filter(|f| f[2].split(',').any(|x| x == "master"))
    {
        let replicas = lines
            .iter()
            .filter(|f| f[3] == primary[0] && f[2].split(',').any(|x| x == "slave") && healthy(f))
            .count() as u64;
        for range in &primary[8..] {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            if let (Ok(a), Ok(b)) = (a.parse(), b.parse()) {
                out.push((a, b, replicas));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn online_replicas_are_counted() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
                    slave0:ip=127.0.0.1,port=7001,state=online,offset=10,lag=0\r\n\
                    slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n\
                    master_replid:abc\r\nslave_read_repl_offset:3\r\n";
        assert_eq!(online_replicas(info), 1);
        assert_eq!(online_replicas("role:master\r\nconnected_slaves:0\r\n"), 0);
    }

    #[test]
    fn cluster_nodes_give_replicas_by_slot() {
        let nodes = "\
a 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922 [10923->-c]
c 127.0.0.1:7002@17002 master - 0 0 3 connected 10923-16383
d 127.0.0.1:7003@17003 slave a 0 0 1 connected
e 127.0.0.1:7004@17004 slave,fail b 0 0 2 connected
f 127.0.0.1:7005@17005 slave c 0 0 3 disconnected
g 127.0.0.1:7006@17006 slave a 0 0 1 connected
";
        let ranges = cluster_replicas(nodes);
        assert_eq!(ranges, [(0, 5460, 2), (5461, 10922, 0), (10923, 16383, 0)]);
        let count = Count::Cluster(ranges);
        // "foo" hashes to slot 12182, "a" to 15495, "b" to 3300.
        assert_eq!(count.of("b"), 2);
        assert_eq!(count.of("foo"), 0);
        assert_eq!(Count::Server(3).of("anything"), 3);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        assert_eq!(hash_slot(b"{}x"), hash_slot(b"{}x"));
        // CRC16/XMODEM check value of "123456789" (below 16384, so it is its own slot).
        assert_eq!(hash_slot(b"123456789"), 0x31C3);
    }
}
