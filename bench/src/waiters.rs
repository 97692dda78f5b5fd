//! Many blocked clients at once (scenarios 6 and 7): one plain (synchronous) redis-rs
//! connection per waiter. The blocking command is written and its reply never read, so a
//! waiter costs this process one socket and nothing else; dropping the connection closes it.

use std::collections::HashMap;
use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::{Connection, Value};
use rlock_module_tests::{parse_info, Server};

use crate::OWNER_PREFIX;

/// How long the waiters may take to show up as blocked, or to be forgotten.
pub const WAIT_LIMIT: Duration = Duration::from_secs(30);

/// A plain connection, no read timeout (a probe's PING may wait out a stall).
pub fn plain(server: &Server) -> Result<Connection, String> {
    server
        .client()
        .get_connection_with_timeout(Duration::from_secs(10))
        .map_err(|e| format!("connect to {server:?}: {e}"))
}

/// `n` plain connections, opened one after the other.
pub fn open(server: &Server, n: usize) -> Result<Vec<Connection>, String> {
    (0..n)
        .map(|i| plain(server).map_err(|e| format!("waiter connection {i} of {n}: {e}")))
        .collect()
}

/// What a waiter sends: a blocking command that never returns while the test lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// `RLOCK.ACQUIRE <lock> <owner-i> BLOCK 0`
    Rlock,
    /// `RLOCK.ACQUIRE <lock> <owner-i> FAIR BLOCK 0`
    RlockFair,
    /// `BLPOP <list> 0`
    Blpop,
}

impl Block {
    pub fn command(self, key: &str, i: usize) -> Vec<u8> {
        let mut cmd = match self {
            Block::Rlock | Block::RlockFair => {
                let mut c = redis::cmd("RLOCK.ACQUIRE");
                c.arg(key).arg(format!("{OWNER_PREFIX}:w{i}"));
                if self == Block::RlockFair {
                    c.arg("FAIR");
                }
                c.arg("BLOCK");
                c
            }
            Block::Blpop => {
                let mut c = redis::cmd("BLPOP");
                c.arg(key);
                c
            }
        };
        cmd.arg(0);
        cmd.get_packed_command()
    }

    pub fn is_rlock(self) -> bool {
        self != Block::Blpop
    }
}

/// Writes each waiter's blocking command (`key_of(i)`), without reading any reply.
pub fn send_all(
    conns: &mut [Connection],
    block: Block,
    key_of: impl Fn(usize) -> String,
) -> Result<(), String> {
    for (i, con) in conns.iter_mut().enumerate() {
        con.send_packed_command(&block.command(&key_of(i), i))
            .map_err(|e| format!("waiter {i}: send: {e}"))?;
    }
    Ok(())
}

/// `INFO section` as name → value.
pub fn info(con: &mut Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query(con)
        .unwrap_or_else(|e| panic!("INFO {section}: {e}"));
    parse_info(&text)
}

/// An integer field of `INFO section` (None when absent).
pub fn info_int(con: &mut Connection, section: &str, field: &str) -> Option<i64> {
    info(con, section).get(field).and_then(|v| v.parse().ok())
}

/// Blocked clients as the server counts them: `blocked_clients`, and for rlock waiters
/// also `rlock_blocked` (None when the module does not report it).
pub fn blocked(con: &mut Connection) -> (i64, Option<i64>) {
    (
        info_int(con, "clients", "blocked_clients").unwrap_or(-1),
        info_int(con, "rlock", "rlock_blocked"),
    )
}

/// Polls until all `n` waiters are blocked; returns the last counts seen when they never are.
pub fn wait_blocked(con: &mut Connection, n: usize, block: Block) -> Result<(), String> {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let (clients, rlock) = blocked(con);
        let rlock_ok = !block.is_rlock() || rlock.map_or(true, |r| r == n as i64);
        if clients == n as i64 && rlock_ok {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "only {clients} blocked clients (rlock_blocked {rlock:?}) of {n} after {WAIT_LIMIT:?}"
            ));
        }
        sleep(Duration::from_millis(20));
    }
}

/// Polls until no client is blocked and the connected clients are back to `connected`.
pub fn wait_gone(con: &mut Connection, connected: i64) -> Result<(), String> {
    let deadline = Instant::now() + WAIT_LIMIT;
    loop {
        let (clients, rlock) = blocked(con);
        let now = info_int(con, "clients", "connected_clients").unwrap_or(-1);
        if clients == 0 && rlock.unwrap_or(0) == 0 && now <= connected {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "after {WAIT_LIMIT:?}: {clients} blocked clients, rlock_blocked {rlock:?}, {now} connected (expected {connected})"
            ));
        }
        sleep(Duration::from_millis(20));
    }
}

/// Runs a command, returning the reply or the error as text.
pub fn run(con: &mut Connection, cmd: &redis::Cmd) -> Result<Value, String> {
    match cmd.query::<Value>(con) {
        Ok(Value::ServerError(e)) => Err(format!("{e:?}")),
        Ok(v) => Ok(v),
        Err(e) => Err(e.to_string()),
    }
}

/// `RLOCK.ACQUIRE key holder LEASE lease_ms`: Ok once taken, else the reply as text.
pub fn take(con: &mut Connection, key: &str, holder: &str, lease_ms: u64) -> Result<(), String> {
    let mut acquire = redis::cmd("RLOCK.ACQUIRE");
    acquire.arg(key).arg(holder).arg("LEASE").arg(lease_ms);
    match run(con, &acquire) {
        Ok(Value::Int(1)) => Ok(()),
        other => Err(format!("{other:?}")),
    }
}
