//! Helpers shared by the blocking, session, lifecycle and replication tests.
//! Each test file compiles its own copy, so not every file uses every helper.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

/// `INFO rlock` as counter name (without the `rlock_` prefix) → value.
pub fn rstats(server: &Server) -> HashMap<String, i64> {
    server
        .info("rlock")
        .into_iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("rlock_")?.to_string();
            Some((name, v.trim().parse().ok()?))
        })
        .collect()
}

/// One `INFO rlock` counter; panics if the field is missing.
pub fn rstat(server: &Server, name: &str) -> i64 {
    *rstats(server).get(name).unwrap_or_else(|| {
        panic!(
            "{}: INFO rlock has no rlock_{name}: {:?}",
            server.flavor,
            server.info("rlock")
        )
    })
}

/// Asserts that each `INFO rlock` counter named in `at_least` has reached its count.
#[track_caller]
pub fn assert_counted(server: &Server, at_least: &[(&str, i64)]) {
    let stats = rstats(server);
    for &(name, count) in at_least {
        let got = stats.get(name).copied().unwrap_or_default();
        assert!(
            got >= count,
            "{}: rlock_{name} is {got}, under {count}",
            server.flavor
        );
    }
}

/// Asserts that semaphore `key` stores `permits`: its raw string, as Redisson reads it.
#[track_caller]
pub fn assert_stored_permits(
    c: &mut Connection,
    key: &str,
    permits: i64,
    what: impl std::fmt::Display,
) {
    let stored: Option<String> = redis::cmd("GET").arg(key).query(c).expect("GET");
    assert_eq!(stored, Some(permits.to_string()), "{what}");
}

/// `RLOCK.INFO key` over RESP2.
pub fn lock_info(con: &mut Connection, key: &str) -> LockInfo {
    let v = call(con, &["RLOCK.INFO", key]).expect("RLOCK.INFO");
    parse_lock_info(&v, false).expect("parse RLOCK.INFO")
}

/// Waits (up to 10 s) until `RLOCK.INFO key` reports `n` blocked waiters.
pub fn wait_blocked(flavor: Flavor, con: &mut Connection, key: &str, n: i64) {
    let mut last = -1;
    let ok = wait_until(Duration::from_secs(10), || {
        last = lock_info(con, key).blocked;
        last == n
    });
    assert!(
        ok,
        "{flavor}: RLOCK.INFO {key} blocked stayed {last}, expected {n}"
    );
}

/// Waits (up to 10 s) until `INFO rlock` reports `n` blocked waiters in all.
pub fn wait_total_blocked(server: &Server, n: i64) {
    let mut last = -1;
    let ok = wait_until(Duration::from_secs(10), || {
        last = rstat(server, "blocked");
        last == n
    });
    assert!(
        ok,
        "{}: INFO rlock blocked stayed {last}, expected {n}",
        server.flavor
    );
}

/// `HGETALL key` as owner → count string, for readable assertions.
pub fn holders(con: &mut Connection, key: &str) -> BTreeMap<String, String> {
    hgetall(con, key.as_bytes())
        .into_iter()
        .map(|(k, v)| {
            (
                String::from_utf8_lossy(&k).to_string(),
                String::from_utf8_lossy(&v).to_string(),
            )
        })
        .collect()
}

/// The expected `holders` map: a single owner with `count`.
pub fn held_by(owner: &str, count: i64) -> BTreeMap<String, String> {
    BTreeMap::from([(owner.to_string(), count.to_string())])
}

pub fn unix_ms_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
        * 1000.0
}

fn reply_of(r: redis::RedisResult<Value>) -> Result<Value, String> {
    match r {
        Ok(Value::ServerError(e)) => Err(error_text(&e.into())),
        Ok(v) => Ok(v),
        Err(e) => Err(error_text(&e)),
    }
}

/// A connection that sends a (blocking) command now and reads its reply later.
pub struct Pending {
    pub con: Connection,
    /// `CLIENT ID` of this connection.
    pub id: i64,
    pub flavor: Flavor,
    sent: Option<String>,
}

impl Pending {
    pub fn new(server: &Server) -> Pending {
        let mut con = server.conn();
        con.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("read timeout");
        let id = match call(&mut con, &["CLIENT", "ID"]) {
            Ok(Value::Int(id)) => id,
            other => panic!("{}: CLIENT ID replied {other:?}", server.flavor),
        };
        Pending {
            con,
            id,
            flavor: server.flavor,
            sent: None,
        }
    }

    /// A connection that sends `args`, once `RLOCK.INFO key` (read on `c`) counts `n`
    /// blocked waiters: the call is waiting in the server.
    pub fn blocked_on(
        server: &Server,
        c: &mut Connection,
        args: &[&str],
        (key, n): (&str, i64),
    ) -> Pending {
        let mut p = Pending::new(server);
        p.send(args);
        wait_blocked(server.flavor, c, key, n);
        p
    }

    /// A connection that sends `args`, returned once `INFO rlock` counts `n` blocked
    /// callers in all (for calls whose key `RLOCK.INFO` does not read: permits, latches).
    pub fn blocked(server: &Server, args: &[&str], n: i64) -> Pending {
        let mut p = Pending::new(server);
        p.send(args);
        wait_total_blocked(server, n);
        p
    }

    /// `RLOCK.ACQUIRE key owner BLOCK ms`, sent by [`Pending::blocked_on`]: returned once
    /// it is the `n`th caller blocked on `key`.
    pub fn blocked_acquire(
        server: &Server,
        c: &mut Connection,
        (key, owner): (&str, &str),
        block_ms: &str,
        n: i64,
    ) -> Pending {
        let args = ["RLOCK.ACQUIRE", key, owner, "BLOCK", block_ms];
        Pending::blocked_on(server, c, &args, (key, n))
    }

    /// Sends `args` without waiting for the reply.
    pub fn send(&mut self, args: &[&str]) {
        let mut cmd = redis::Cmd::new();
        for a in args {
            cmd.arg(*a);
        }
        self.con
            .send_packed_command(&cmd.get_packed_command())
            .unwrap_or_else(|e| panic!("{}: send {args:?}: {e}", self.flavor));
        self.sent = Some(args.join(" "));
    }

    /// The reply to the command sent last (waits up to the read timeout).
    pub fn recv(&mut self) -> Result<Value, String> {
        reply_of(self.con.recv_response())
    }

    /// Like `recv`, but panics on an I/O error (a timeout: no reply came).
    pub fn reply(&mut self) -> Result<Value, String> {
        match self.con.recv_response() {
            Err(e) if e.is_io_error() || e.is_timeout() => panic!(
                "{}: no reply to `{}`: {e}",
                self.flavor,
                self.sent.as_deref().unwrap_or("?")
            ),
            r => reply_of(r),
        }
    }

    /// Sends `args`, then reads the reply on another thread, noting when it arrived.
    pub fn spawn(mut self, args: &[&str]) -> Waiting {
        let id = self.id;
        self.send(args);
        let handle = std::thread::spawn(move || {
            let r = self.recv();
            let at = Instant::now();
            let unix_ms = unix_ms_f64();
            Replied {
                reply: r,
                at,
                unix_ms,
                con: self,
            }
        });
        Waiting { id, handle }
    }
}

/// What a waiting thread saw.
pub struct Replied {
    pub reply: Result<Value, String>,
    pub at: Instant,
    /// Wall clock when the reply arrived, in fractional unix ms.
    pub unix_ms: f64,
    pub con: Pending,
}

/// A command whose reply a thread is waiting for.
pub struct Waiting {
    pub id: i64,
    handle: JoinHandle<Replied>,
}

impl Waiting {
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    pub fn join(self) -> Replied {
        self.handle.join().expect("waiter thread")
    }
}

/// `h` takes `key` with `FAIR` (lease 60 s), and `p`, a `FAIR` caller that polls instead
/// of blocking, heads its queue for fair-wait-ms (300 s).
pub fn hold_with_a_polling_fair_head(c: &mut Connection, key: &str) {
    call(c, &["RLOCK.ACQUIRE", key, "h", "FAIR", "LEASE", "60000"]).expect("acquire");
    assert_nil(c, &["RLOCK.ACQUIRE", key, "p", "FAIR"]);
}

/// `p`-quantile (0..=1) of `samples` (sorted in place).
pub fn quantile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i.min(samples.len() - 1)]
}

pub use rlock_module_tests::redisson::{TRY_LOCK as REDISSON_LOCK, UNLOCK as REDISSON_UNLOCK};

/// Redisson's tryLock for `owner` with a 30 s lease.
pub fn lua_lock(c: &mut redis::Connection, key: &str, owner: &str) -> Value {
    call(c, &["EVAL", REDISSON_LOCK, "1", key, "30000", owner]).expect("lua lock")
}

/// Redisson's unlock script, as `RedissonLock.unlockInnerAsync` sends it.
pub fn lua_unlock(con: &mut Connection, key: &str, owner: &str) -> Result<Value, String> {
    let chan = String::from_utf8(unlock_channel(key.as_bytes())).expect("utf8");
    call(
        con,
        &[
            "EVAL",
            REDISSON_UNLOCK,
            "2",
            key,
            &chan,
            "0",
            "30000",
            owner,
        ],
    )
}

/// Waits until `replica` has applied everything `primary` sent so far.
pub fn sync_replica(primary: &Server, replica: &Server) {
    let mut p = primary.conn();
    let acked = call(&mut p, &["WAIT", "1", "10000"]);
    assert_eq!(
        acked,
        Ok(Value::Int(1)),
        "{}: WAIT for the replica",
        primary.flavor
    );
    let offset = |s: &Server, name: &str| -> i64 {
        s.info("replication")
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1)
    };
    let target = offset(primary, "master_repl_offset");
    let ok = wait_until(Duration::from_secs(10), || {
        offset(replica, "master_repl_offset") >= target
    });
    assert!(
        ok,
        "{}: replica never reached offset {target}",
        primary.flavor
    );
}

/// Whether the server lets `CLIENT UNBLOCK` end an rlock wait: from Redis 7.4 and
/// Valkey 8. Older servers could not tell the module whether a client it had just
/// granted was unblocked by TIMEOUT or ERROR, so rlock's waits opt out there (the
/// server then replies 0, as for any module command without a timeout callback).
#[allow(dead_code)]
pub fn unblock_supported(flavor: Flavor) -> bool {
    flavor == Flavor::Valkey || flavor.version() >= (7, 4, 0)
}
