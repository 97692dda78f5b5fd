//! Read-only views for operators: who waits on a key (`RLOCK.WAITERS`), which locks exist
//! (`RLOCK.SCAN`), the module's counters and wait percentiles (`INFO rlock`) and the most
//! contended keys (`RLOCK.TOP`). In a cluster, the server-wide ones ask every primary.

use std::collections::BTreeMap;

use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo, SingleNodeRoutingInfo};
use redis::{Cmd, Value};

use crate::command::{self, text};
use crate::conn::Conn;
use crate::error::{Error, Result};
use crate::locks::Locks;

/// A call blocked in the server on one key, as `RLOCK.WAITERS` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Waiter {
    /// The blocked client's id, as `CLIENT LIST` shows it.
    pub client_id: i64,
    /// Its `CLIENT SETNAME`, empty when none.
    pub client_name: String,
    /// `lock`, `fair`, `read`, `write`, `multi`, `permits`, `lease` or `latch`.
    pub kind: String,
    /// The owner it asks for; `None` for permits and latches.
    pub owner: Option<String>,
    /// The permits it asks for (`permits`, `lease`).
    pub permits: Option<u64>,
    /// Whether it asked for a `SESSION` hold.
    pub session: bool,
    /// What is left of its `BLOCK`, in ms; -1 for a wait without end.
    pub timeout_ms: i64,
    /// How long it has waited so far, in ms.
    pub waited_ms: u64,
}

/// A lock found by `RLOCK.SCAN`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ScannedLock {
    /// The lock's key.
    pub key: String,
    /// `lock` (reentrant) or `rwlock` (read-write).
    pub kind: String,
    /// A read-write lock's mode, `read` or `write`.
    pub mode: Option<String>,
    /// Owners and their hold counts (a writer shows as `owner:write`).
    pub holders: Vec<(String, u64)>,
    /// Milliseconds left on its lease; -1 without one.
    pub pttl: i64,
    /// Calls blocked on it in the server that has it.
    pub waiters: u64,
}

/// `INFO rlock` of one server (one primary of a cluster).
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ServerStats {
    /// `host:port` of the node in a cluster; empty for a single server.
    pub node: String,
    /// Every `rlock_*` field, without the `rlock_` prefix, as the server printed it.
    pub fields: BTreeMap<String, String>,
}

impl ServerStats {
    /// A numeric field (`acquires`, `blocked`, `waiting_longest_ms`...); `None` when absent.
    pub fn number(&self, name: &str) -> Option<u64> {
        self.fields.get(name)?.trim().parse().ok()
    }

    /// The percentiles of a latency line (`wait_usec_lock`, `handoff_usec`), in microseconds:
    /// `[("p50", 12.0), ("p99", 30.0), ...]`. `None` when the line is absent (no sample).
    pub fn percentiles(&self, name: &str) -> Option<Vec<(String, f64)>> {
        let line = self.fields.get(name)?;
        Some(
            line.split(',')
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.trim().to_owned(), v.trim().parse().ok()?))
                })
                .collect(),
        )
    }

    /// The families that have a `wait_usec_<family>` line now.
    pub fn wait_families(&self) -> Vec<String> {
        self.fields
            .keys()
            .filter_map(|k| k.strip_prefix("wait_usec_").map(str::to_owned))
            .collect()
    }
}

/// A contended key, as `RLOCK.TOP` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ContendedKey {
    /// `host:port` of the node in a cluster; empty for a single server.
    pub node: String,
    /// The key.
    pub key: String,
    /// Its database.
    pub db: i64,
    /// `lock`, `rwlock`, `semaphore` or `latch`.
    pub kind: String,
    /// Calls blocked on it now.
    pub waiters: u64,
    /// How long the oldest of them has waited, in ms.
    pub longest_wait_ms: u64,
    /// Blocked calls granted in the window.
    pub waits: u64,
    /// Blocked calls that timed out in the window.
    pub timeouts: u64,
    /// p99 of the granted waits of the window, in µs; `None` without any.
    pub wait_p99_usec: Option<u64>,
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        other => text(other)?.parse().ok(),
    }
}

/// Pairs from a RESP3 map or a RESP2 flat array.
fn pairs(v: &Value) -> Option<Vec<(String, Value)>> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| Some((text(k)?, v.clone()))).collect(),
        Value::Array(a) if a.len() % 2 == 0 => a
            .chunks(2)
            .map(|kv| Some((text(&kv[0])?, kv[1].clone())))
            .collect(),
        _ => None,
    }
}

fn items(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(a) | Value::Set(a) => Some(a),
        _ => None,
    }
}

fn check(v: Value) -> Result<Value> {
    match v {
        Value::ServerError(e) => Err(Error::Redis(e.into())),
        v => Ok(v),
    }
}

fn unexpected(what: &'static str, v: &Value) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        what,
        format!("{v:?}"),
    )))
}

fn parse_waiter(v: &Value) -> Option<Waiter> {
    let mut w = Waiter::default();
    for (name, value) in pairs(v)? {
        match name.as_str() {
            "client-id" => w.client_id = int(&value)?,
            "client-name" => w.client_name = text(&value).unwrap_or_default(),
            "kind" => w.kind = text(&value)?,
            "owner" => w.owner = text(&value),
            "permits" => w.permits = int(&value).map(|n| n.max(0) as u64),
            "session" => w.session = int(&value) == Some(1),
            "timeout-ms" => w.timeout_ms = int(&value)?,
            "waited-ms" => w.waited_ms = int(&value)?.max(0) as u64,
            _ => {}
        }
    }
    Some(w)
}

fn parse_scanned(v: &Value) -> Option<ScannedLock> {
    let mut l = ScannedLock::default();
    for (name, value) in pairs(v)? {
        match name.as_str() {
            "key" => l.key = text(&value)?,
            "type" => l.kind = text(&value)?,
            "mode" => l.mode = text(&value),
            "holders" => {
                for (owner, count) in pairs(&value)? {
                    l.holders.push((owner, int(&count)?.max(0) as u64));
                }
            }
            "pttl" => l.pttl = int(&value)?,
            "waiters" => l.waiters = int(&value)?.max(0) as u64,
            _ => {}
        }
    }
    Some(l)
}

fn parse_contended(node: &str, v: &Value) -> Option<ContendedKey> {
    let mut k = ContendedKey {
        node: node.to_owned(),
        ..ContendedKey::default()
    };
    let n = |v: &Value| int(v).map(|n| n.max(0) as u64);
    for (name, value) in pairs(v)? {
        match name.as_str() {
            "key" => k.key = text(&value)?,
            "db" => k.db = int(&value)?,
            "kind" => k.kind = text(&value)?,
            "waiters" => k.waiters = n(&value)?,
            "longest-wait-ms" => k.longest_wait_ms = n(&value)?,
            "waits" => k.waits = n(&value)?,
            "timeouts" => k.timeouts = n(&value)?,
            "wait-p99-usec" => k.wait_p99_usec = n(&value),
            _ => {}
        }
    }
    Some(k)
}

/// The `rlock_*` fields of an `INFO rlock` reply.
fn parse_info_text(node: &str, text: &str) -> ServerStats {
    let fields = text
        .lines()
        .filter_map(|line| {
            let (name, value) = line.trim().split_once(':')?;
            let name = name.strip_prefix("rlock_")?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect();
    ServerStats {
        node: node.to_owned(),
        fields,
    }
}

/// Sends `cmd` to every primary (the server itself when not a cluster): `(node, reply)`.
async fn on_every_primary(conn: &Conn, cmd: Cmd) -> Result<Vec<(String, Value)>> {
    match conn {
        Conn::Cluster(c) => {
            let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
            let reply = c.clone().route_command(cmd, all).await?;
            let Value::Map(nodes) = reply else {
                return Err(unexpected("a reply per primary", &reply));
            };
            let mut out = Vec::new();
            for (node, v) in nodes {
                out.push((text(&node).unwrap_or_default(), check(v)?));
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(out)
        }
        other => Ok(vec![(String::new(), check(other.query(&cmd).await?)?)]),
    }
}

/// Sends `cmd` to the node `node` (`host:port`), or to the server when `node` is empty.
async fn on_node(conn: &Conn, node: &str, cmd: Cmd) -> Result<Value> {
    match conn {
        Conn::Cluster(c) => {
            let (host, port) = node
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h.to_owned(), p.parse().ok()?)))
                .ok_or_else(|| unexpected("a node address", &Value::Nil))?;
            let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
            check(c.clone().route_command(cmd, to).await?)
        }
        other => check(other.query(&cmd).await?),
    }
}

impl Locks {
    /// The calls blocked on `name` in the server, in the order they will be served
    /// (`RLOCK.WAITERS`; routed to the key's node in a cluster).
    pub async fn waiters(&self, name: &str) -> Result<Vec<Waiter>> {
        let v = check(self.inner.query(&command::waiters(name)).await?)?;
        let list = items(&v).ok_or_else(|| unexpected("RLOCK.WAITERS replied", &v))?;
        list.iter()
            .map(|w| parse_waiter(w).ok_or_else(|| unexpected("RLOCK.WAITERS replied", w)))
            .collect()
    }

    /// Every lock of the database whose key matches `pattern` (a `SCAN` glob; all when
    /// `None`), of `kind` `lock` or `rwlock` (both when `None`), by `RLOCK.SCAN` followed to
    /// the end; in a cluster, on every primary. Semaphores and latches are not locks.
    pub async fn scan(
        &self,
        pattern: Option<&str>,
        kind: Option<&str>,
    ) -> Result<Vec<ScannedLock>> {
        let conn = self.inner.conn().await?;
        let nodes: Vec<String> = if conn.is_cluster() {
            on_every_primary(&conn, redis::cmd("PING"))
                .await?
                .into_iter()
                .map(|(node, _)| node)
                .collect()
        } else {
            vec![String::new()]
        };
        let mut out = Vec::new();
        for node in nodes {
            let mut cursor = "0".to_owned();
            loop {
                let cmd = command::scan_page(&cursor, pattern, kind);
                let v = on_node(&conn, &node, cmd).await?;
                let bad = || unexpected("RLOCK.SCAN replied", &v);
                let [next, entries] = items(&v).ok_or_else(bad)? else {
                    return Err(bad());
                };
                for e in items(entries).ok_or_else(bad)? {
                    out.push(parse_scanned(e).ok_or_else(bad)?);
                }
                cursor = text(next).ok_or_else(bad)?;
                if cursor == "0" {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// `INFO rlock` of the server, or of every primary of a cluster.
    pub async fn server_stats(&self) -> Result<Vec<ServerStats>> {
        let conn = self.inner.conn().await?;
        let cmd = command::stats();
        let mut out = Vec::new();
        for (node, v) in on_every_primary(&conn, cmd).await? {
            let body = text(&v).ok_or_else(|| unexpected("INFO replied", &v))?;
            out.push(parse_info_text(&node, &body));
        }
        Ok(out)
    }

    /// `RLOCK.TOP COUNT count` of the server, or of every primary of a cluster (each node's
    /// list, one after the other, in the nodes' order). `count` is 1 to 1000:
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) otherwise, before anything is
    /// sent.
    pub async fn contended_keys(&self, count: u32) -> Result<Vec<ContendedKey>> {
        let cmd = command::top(count)?;
        let conn = self.inner.conn().await?;
        let mut out = Vec::new();
        for (node, v) in on_every_primary(&conn, cmd).await? {
            let list = items(&v).ok_or_else(|| unexpected("RLOCK.TOP replied", &v))?;
            for e in list {
                out.push(
                    parse_contended(&node, e).ok_or_else(|| unexpected("RLOCK.TOP replied", e))?,
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn info_fields_lose_their_prefix_and_percentiles_parse() {
        let s = parse_info_text(
            "",
            "# rlock\r\nrlock_acquires:4\r\nrlock_blocked:3\r\n\r\n# rlock_latency\r\n\
             rlock_wait_usec_lock:p50=1204223.000,p99=25690111.000,p99.9=25690111.000\r\n",
        );
        assert_eq!(s.number("acquires"), Some(4));
        assert_eq!(s.number("blocked"), Some(3));
        assert_eq!(s.wait_families(), vec!["lock".to_owned()]);
        let p = s.percentiles("wait_usec_lock").unwrap();
        assert_eq!(p[1], ("p99".to_owned(), 25690111.0));
        assert!(s.percentiles("wait_usec_fair").is_none());
    }

    #[test]
    fn waiters_and_scanned_locks_parse_from_resp2_and_resp3() {
        let flat = Value::Array(vec![
            bulk("client-id"),
            Value::Int(20),
            bulk("client-name"),
            bulk(""),
            bulk("kind"),
            bulk("lock"),
            bulk("owner"),
            bulk("w2"),
            bulk("permits"),
            Value::Nil,
            bulk("session"),
            Value::Int(0),
            bulk("timeout-ms"),
            Value::Int(-1),
            bulk("waited-ms"),
            Value::Int(6327),
        ]);
        let w = parse_waiter(&flat).unwrap();
        assert_eq!((w.client_id, w.owner.as_deref()), (20, Some("w2")));
        assert_eq!((w.timeout_ms, w.waited_ms, w.permits), (-1, 6327, None));
        let map = Value::Map(vec![
            (bulk("key"), bulk("catalog")),
            (bulk("type"), bulk("rwlock")),
            (bulk("mode"), bulk("write")),
            (
                bulk("holders"),
                Value::Map(vec![(bulk("carol:write"), Value::Int(1))]),
            ),
            (bulk("pttl"), Value::Int(291255)),
            (bulk("waiters"), Value::Int(1)),
        ]);
        let l = parse_scanned(&map).unwrap();
        assert_eq!(l.holders, vec![("carol:write".to_owned(), 1)]);
        assert_eq!(
            (l.mode.as_deref(), l.pttl, l.waiters),
            (Some("write"), 291255, 1)
        );
    }
}
