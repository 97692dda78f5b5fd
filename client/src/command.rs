//! The wire format: how requests become `RLOCK.*` commands and how replies are read.
//! Pure functions, unit-tested without a server.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::error::{Error, Result};

/// How long to wait in the server for a busy lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Try once.
    No,
    /// `BLOCK ms`, ms ≥ 1.
    For(Duration),
    /// `BLOCK 0`.
    Forever,
}

impl Wait {
    /// A handle's `wait(d)`: up to `d`, or a single try for zero.
    pub(crate) fn at_most(d: Duration) -> Wait {
        if d.is_zero() {
            Wait::No
        } else {
            Wait::For(d)
        }
    }

    /// What is left of this wait `elapsed` after it began; `None` once a timed wait ran out.
    pub(crate) fn left(self, elapsed: Duration) -> Option<Wait> {
        match self {
            Wait::For(d) => match d.checked_sub(elapsed) {
                Some(left) if !left.is_zero() => Some(Wait::For(left)),
                _ => None,
            },
            other => Some(other),
        }
    }
}

/// A side of a read-write lock (Redisson's `RReadWriteLock`): the `READ` or `WRITE` keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Read holds: shared with other readers, never with a writer of another owner.
    Read,
    /// The write hold: alone, apart from the writer's own read holds.
    Write,
}

impl Side {
    fn keyword(self) -> &'static str {
        match self {
            Side::Read => "READ",
            Side::Write => "WRITE",
        }
    }
}

/// Which hold a command is about: the lock's key, its owner and, on a read-write lock,
/// the side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HoldName {
    pub key: Arc<str>,
    /// The owner; for a leased permit, its id.
    pub owner: Arc<str>,
    pub side: Option<Side>,
    /// A leased permit of a permit-expiring semaphore (`RSEM.LEASE`), not a lock hold.
    pub permit: bool,
}

impl HoldName {
    /// The field of the lock's hash that counts this hold: the owner, or `<owner>:write`
    /// for a write hold (Redisson's layout).
    pub fn field(&self) -> String {
        match self.side {
            Some(Side::Write) => format!("{}:write", self.owner),
            _ => self.owner.to_string(),
        }
    }

    fn args(&self, c: &mut redis::Cmd) {
        c.arg(&*self.key).arg(&*self.owner);
        if let Some(side) = self.side {
            c.arg(side.keyword());
        }
    }
}

/// Everything an acquire sends, apart from key and owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AcquireOptions {
    pub lease: Duration,
    pub wait: Wait,
    pub fair: bool,
    pub fenced: bool,
    pub session: bool,
}

/// Milliseconds for `LEASE`/`BLOCK`: sub-millisecond durations round up, so a non-zero
/// duration never turns into `0` (which means "forever" for `BLOCK`).
pub(crate) fn millis(d: Duration) -> u64 {
    let ms = d.as_millis();
    let ms = if Duration::from_millis(ms as u64) < d {
        ms + 1
    } else {
        ms
    };
    u64::try_from(ms).unwrap_or(u64::MAX).max(1)
}

/// A fresh `REQ` id: 16 random bytes as 32 hex characters. Each call gets its own, and
/// a resend of that call the same one, so the server applies it at most once.
pub(crate) fn request_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

pub(crate) fn acquire(hold: &HoldName, o: &AcquireOptions) -> redis::Cmd {
    acquire_as(hold, o, &request_id())
}

/// `acquire` with the `REQ` id `req`: sent again with the same id, the server replies the
/// first call's reply while that grant stands, instead of granting twice.
pub(crate) fn acquire_as(hold: &HoldName, o: &AcquireOptions, req: &str) -> redis::Cmd {
    let mut c = redis::cmd("RLOCK.ACQUIRE");
    hold.args(&mut c);
    c.arg("LEASE").arg(millis(o.lease));
    block_args(&mut c, o.wait);
    if o.fair {
        c.arg("FAIR");
    }
    if o.fenced {
        c.arg("TOKEN");
    }
    if o.session {
        c.arg("SESSION");
    }
    c.arg("REQ").arg(req);
    c
}

pub(crate) fn release(hold: &HoldName) -> redis::Cmd {
    let mut c = redis::cmd("RLOCK.RELEASE");
    hold.args(&mut c);
    c.arg("REQ").arg(request_id());
    c
}

pub(crate) fn renew(hold: &HoldName, lease: Duration) -> redis::Cmd {
    if hold.permit {
        let mut c = redis::cmd("RSEM.RENEW");
        c.arg(&*hold.key)
            .arg(&*hold.owner)
            .arg("LEASE")
            .arg(millis(lease));
        return c;
    }
    let mut c = redis::cmd("RLOCK.RENEW");
    hold.args(&mut c);
    c.arg("LEASE")
        .arg(millis(lease))
        .arg("REQ")
        .arg(request_id());
    c
}

/// `RLOCK.MACQUIRE owner numkeys key... LEASE ms [BLOCK ms] [SESSION] REQ id`: every lock of
/// one slot, or none. `FAIR` and `TOKEN` do not apply. Sent again with the same `req`, the
/// server replies `numkeys` while the owner holds every lock, and takes nothing more.
pub(crate) fn macquire(
    owner: &str,
    keys: &[Arc<str>],
    o: &AcquireOptions,
    req: &str,
) -> redis::Cmd {
    let mut c = redis::cmd("RLOCK.MACQUIRE");
    c.arg(owner).arg(keys.len());
    for key in keys {
        c.arg(&**key);
    }
    c.arg("LEASE").arg(millis(o.lease));
    block_args(&mut c, o.wait);
    if o.session {
        c.arg("SESSION");
    }
    c.arg("REQ").arg(req);
    c
}

/// `RLOCK.MRELEASE owner numkeys key... REQ id`.
pub(crate) fn mrelease(owner: &str, keys: &[Arc<str>]) -> redis::Cmd {
    let mut c = redis::cmd("RLOCK.MRELEASE");
    c.arg(owner).arg(keys.len());
    for key in keys {
        c.arg(&**key);
    }
    c.arg("REQ").arg(request_id());
    c
}

/// `RLOCK.MRELEASE` reply: how many of the locks are free now; `NOTHELD` (nothing released)
/// names the first key sent.
pub(crate) fn parse_mrelease(v: Value, keys: &[Arc<str>], owner: &str) -> Result<u64> {
    let first = keys.first().map_or("", |k| &**k);
    match v {
        Value::ServerError(e) if e.code() == "NOTHELD" => Err(Error::NotHeld {
            key: first.to_owned(),
            owner: owner.to_owned(),
        }),
        v => parse_count(v, "RLOCK.MRELEASE replied"),
    }
}

/// `name key`: a command on one key.
fn on_key(name: &str, key: &str) -> redis::Cmd {
    let mut c = redis::cmd(name);
    c.arg(key);
    c
}

/// `name key arg`.
fn on_key_with(name: &str, key: &str, arg: impl redis::ToRedisArgs) -> redis::Cmd {
    let mut c = on_key(name, key);
    c.arg(arg);
    c
}

fn block_args(c: &mut redis::Cmd, wait: Wait) {
    match wait {
        Wait::No => {}
        Wait::For(d) => {
            c.arg("BLOCK").arg(millis(d));
        }
        Wait::Forever => {
            c.arg("BLOCK").arg(0);
        }
    }
}

pub(crate) fn try_set_permits(key: &str, permits: u32) -> redis::Cmd {
    on_key_with("RSEM.TRYSETPERMITS", key, permits)
}

pub(crate) fn add_permits(key: &str, permits: i32) -> redis::Cmd {
    on_key_with("RSEM.ADDPERMITS", key, permits)
}

pub(crate) fn available_permits(key: &str) -> redis::Cmd {
    on_key("RSEM.AVAILABLE", key)
}

pub(crate) fn acquire_permits(key: &str, permits: u32, wait: Wait) -> redis::Cmd {
    let mut c = redis::cmd("RSEM.ACQUIRE");
    c.arg(key).arg("PERMITS").arg(permits);
    block_args(&mut c, wait);
    c.arg("REQ").arg(request_id());
    c
}

pub(crate) fn release_permits(key: &str, permits: u32) -> redis::Cmd {
    let mut c = redis::cmd("RSEM.RELEASE");
    c.arg(key).arg("PERMITS").arg(permits);
    c.arg("REQ").arg(request_id());
    c
}

/// `RSEM.LEASE key LEASE ms PERMITS n [BLOCK ms] REQ id`.
pub(crate) fn lease_permits(key: &str, permits: u32, lease: Duration, wait: Wait) -> redis::Cmd {
    let mut c = redis::cmd("RSEM.LEASE");
    c.arg(key)
        .arg("LEASE")
        .arg(millis(lease))
        .arg("PERMITS")
        .arg(permits);
    block_args(&mut c, wait);
    c.arg("REQ").arg(request_id());
    c
}

/// `RSEM.RETURN key id REQ id`.
pub(crate) fn return_permit(key: &str, id: &str) -> redis::Cmd {
    let mut c = redis::cmd("RSEM.RETURN");
    c.arg(key).arg(id).arg("REQ").arg(request_id());
    c
}

/// `RSEM.LEASE` reply: null when not enough permits, else the leased permits' ids.
pub(crate) fn parse_leased(v: Value) -> Result<Option<Vec<String>>> {
    match check(v)? {
        Value::Nil => Ok(None),
        Value::Array(ids) => ids
            .into_iter()
            .map(|id| match id {
                Value::BulkString(b) => String::from_utf8(b)
                    .map_err(|_| Error::unexpected("RSEM.LEASE replied", &Value::Nil)),
                Value::SimpleString(s) => Ok(s),
                other => Err(Error::unexpected("RSEM.LEASE replied", &other)),
            })
            .collect::<Result<Vec<String>>>()
            .map(Some),
        other => Err(Error::unexpected("RSEM.LEASE replied", &other)),
    }
}

pub(crate) fn try_set_count(key: &str, count: u64) -> redis::Cmd {
    on_key_with("RLATCH.TRYSETCOUNT", key, count)
}

pub(crate) fn count_down(key: &str) -> redis::Cmd {
    on_key("RLATCH.COUNTDOWN", key)
}

pub(crate) fn latch_count(key: &str) -> redis::Cmd {
    on_key("RLATCH.COUNT", key)
}

pub(crate) fn await_latch(key: &str, wait: Wait) -> redis::Cmd {
    let mut c = on_key("RLATCH.AWAIT", key);
    block_args(&mut c, wait);
    c
}

/// An integer reply (permits, a count).
pub(crate) fn parse_integer(v: Value, what: &'static str) -> Result<i64> {
    match as_int(&check(v.clone())?) {
        Some(n) => Ok(n),
        None => Err(Error::unexpected(what, &v)),
    }
}

/// Whether a `CLIENT LIST` line shows a client blocked in a command (flag `b`).
pub(crate) fn client_is_blocked(line: &str) -> bool {
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("flags="))
        .is_some_and(|flags| flags.contains('b'))
}

/// Whether a `CLIENT LIST` line shows a client blocked in `command` itself (flag `b`, and
/// `cmd=` the command, case aside), rather than in a later command of its pipeline (a
/// `WAIT` after a grant) or held back before it: then the reply of `command` has been
/// sent already.
pub(crate) fn client_is_blocked_in(line: &str, commands: &[&str]) -> bool {
    client_is_blocked(line)
        && line
            .split_whitespace()
            .find_map(|field| field.strip_prefix("cmd="))
            .is_some_and(|cmd| commands.iter().any(|c| cmd.eq_ignore_ascii_case(c)))
}

/// The name of `cmd` (its first argument), as `CLIENT LIST` shows it: lower case.
pub(crate) fn name_of(cmd: &redis::Cmd) -> String {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(name)) => String::from_utf8_lossy(name).to_lowercase(),
        _ => String::new(),
    }
}

/// Whether a request may have been lost on the way (to or from the server), so that
/// sending it again, with its `REQ` id, is the way to learn its outcome.
pub(crate) fn worth_resending(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_timeout()
}

pub(crate) fn force_release(key: &str) -> redis::Cmd {
    on_key("RLOCK.FORCERELEASE", key)
}

pub(crate) fn info(key: &str) -> redis::Cmd {
    on_key("RLOCK.INFO", key)
}

pub(crate) fn waiters(key: &str) -> redis::Cmd {
    on_key("RLOCK.WAITERS", key)
}

/// One page of `RLOCK.SCAN`, 500 keys a call.
pub(crate) fn scan_page(cursor: &str, pattern: Option<&str>, kind: Option<&str>) -> redis::Cmd {
    let mut cmd = redis::cmd("RLOCK.SCAN");
    cmd.arg(cursor).arg("COUNT").arg(500);
    if let Some(p) = pattern {
        cmd.arg("MATCH").arg(p);
    }
    if let Some(k) = kind {
        cmd.arg("TYPE").arg(k);
    }
    cmd
}

pub(crate) fn stats() -> redis::Cmd {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("rlock");
    cmd
}

/// The largest `COUNT` of `RLOCK.TOP`.
pub(crate) const TOP_MAX: u32 = 1000;

/// `RLOCK.TOP COUNT n`, n from 1 to [`TOP_MAX`].
pub(crate) fn top(count: u32) -> Result<redis::Cmd> {
    if !(1..=TOP_MAX).contains(&count) {
        return Err(Error::InvalidArgument {
            key: String::new(),
            reason: format!("RLOCK.TOP takes a count from 1 to {TOP_MAX}, not {count}"),
        });
    }
    let mut cmd = redis::cmd("RLOCK.TOP");
    cmd.arg("COUNT").arg(count);
    Ok(cmd)
}

pub(crate) fn wait_replicas(n: usize, timeout: Duration) -> redis::Cmd {
    let mut c = redis::cmd("WAIT");
    c.arg(n).arg(timeout.as_millis() as u64);
    c
}

/// Turns a server error that came back as a value (pipelines with `ignore_errors`) into `Err`.
pub(crate) fn check(v: Value) -> Result<Value> {
    match v {
        Value::ServerError(e) => Err(Error::from(redis::RedisError::from(e))),
        v => Ok(v),
    }
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

/// `RLOCK.ACQUIRE` reply: null when not acquired, else the token or hold count (≥ 1).
pub(crate) fn parse_acquire(v: Value) -> Result<Option<u64>> {
    match check(v)? {
        Value::Nil => Ok(None),
        v => match as_int(&v) {
            Some(n) if n >= 1 => Ok(Some(n as u64)),
            _ => Err(Error::unexpected("RLOCK.ACQUIRE replied", &v)),
        },
    }
}

/// `RLOCK.RELEASE` reply: true when fully released, false when a re-entry was undone.
pub(crate) fn parse_release(v: Value, key: &str, owner: &str) -> Result<bool> {
    match v {
        Value::ServerError(e) if e.code() == "NOTHELD" => Err(Error::NotHeld {
            key: key.to_owned(),
            owner: owner.to_owned(),
        }),
        v => match as_int(&check(v.clone())?) {
            Some(1) => Ok(true),
            Some(0) => Ok(false),
            _ => Err(Error::unexpected("RLOCK.RELEASE replied", &v)),
        },
    }
}

/// Maps a NOTHELD error from a plain (non-pipelined) call the same way as [`parse_release`].
pub(crate) fn release_error(e: redis::RedisError, key: &str, owner: &str) -> Error {
    if e.code() == Some("NOTHELD") {
        Error::NotHeld {
            key: key.to_owned(),
            owner: owner.to_owned(),
        }
    } else {
        Error::Redis(e)
    }
}

/// `RLOCK.GUARD key owner [READ|WRITE] [TOKEN n] CALL command [arg ...]`: `inner` runs in the
/// server only while `hold` stands (and, with `token`, is still the hold that got it), checked
/// in the same server turn. An inner command with no name, an empty name or a cursor argument
/// (`redis::Arg::Cursor`, which only redis-rs's `iter` fills in) is refused before anything is sent.
pub(crate) fn guard(hold: &HoldName, token: Option<u64>, inner: &redis::Cmd) -> Result<redis::Cmd> {
    let mut words = Vec::new();
    for arg in inner.args_iter() {
        match arg {
            redis::Arg::Simple(word) => words.push(word),
            _ => {
                return Err(Error::invalid(
                    &hold.key,
                    "a guarded command takes plain arguments, not a cursor",
                ))
            }
        }
    }
    match words.first() {
        None => {
            return Err(Error::invalid(
                &hold.key,
                "guard needs a command to run, e.g. redis::cmd(\"SET\").arg(key).arg(value)",
            ))
        }
        Some([]) => {
            return Err(Error::invalid(
                &hold.key,
                "a guarded command's name must not be empty",
            ))
        }
        Some(_) => {}
    }
    let mut c = redis::cmd("RLOCK.GUARD");
    hold.args(&mut c);
    if let Some(token) = token {
        c.arg("TOKEN").arg(token);
    }
    c.arg("CALL");
    for word in words {
        c.arg(word);
    }
    Ok(c)
}

/// A guarded command's reply: the inner command's, or the refusal of the hold, `NOTHELD` as
/// [`Error::NotHeld`] and `STALETOKEN` as [`Error::StaleToken`] (with the token the server says
/// the lock has now); any other error (the inner command's own, a bad call) as it is.
pub(crate) fn parse_guard(
    reply: redis::RedisResult<Value>,
    hold: &HoldName,
    token: Option<u64>,
) -> Result<Value> {
    let e = match reply {
        Ok(Value::ServerError(e)) => redis::RedisError::from(e),
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let (key, owner) = (hold.key.to_string(), hold.owner.to_string());
    match (e.code(), token) {
        (Some("NOTHELD"), _) => Err(Error::NotHeld { key, owner }),
        (Some("STALETOKEN"), Some(token)) => Err(Error::StaleToken {
            key,
            owner,
            token,
            current: e.detail().and_then(token_now),
        }),
        _ => Err(e.into()),
    }
}

/// The token in `STALETOKEN`'s text: "the lock's fencing token is now 8, not 7" -> 8.
fn token_now(text: &str) -> Option<u64> {
    let (_, after) = text.split_once("is now ")?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// What a renewal's reply (`RLOCK.RENEW`, `RSEM.RENEW`) says of the hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// `1`: renewed for another lease.
    Renewed,
    /// `0`, or `WRONGTYPE` (the key is no longer this kind of lock: it was deleted and
    /// written over): the server no longer has the hold.
    Lost,
    /// Another error: the hold may stand; try again (until its lease ends).
    Retry(String),
}

pub(crate) fn renewal(reply: redis::RedisResult<Value>) -> Renewal {
    match reply {
        Err(e) if e.code() == Some("WRONGTYPE") => Renewal::Lost,
        Err(e) => Renewal::Retry(e.to_string()),
        Ok(Value::ServerError(e)) if e.code() == "WRONGTYPE" => Renewal::Lost,
        Ok(v) => match parse_flag(v, "the renewal replied") {
            Ok(true) => Renewal::Renewed,
            Ok(false) => Renewal::Lost,
            Err(e) => Renewal::Retry(e.to_string()),
        },
    }
}

impl Renewal {
    /// As the watchdog keeps it: renewed, lost, or the error to retry after.
    pub(crate) fn into_result(self) -> std::result::Result<bool, String> {
        match self {
            Renewal::Renewed => Ok(true),
            Renewal::Lost => Ok(false),
            Renewal::Retry(e) => Err(e),
        }
    }
}

/// `RLOCK.RENEW` / `RLOCK.FORCERELEASE` reply: 1 or 0.
pub(crate) fn parse_flag(v: Value, what: &'static str) -> Result<bool> {
    match as_int(&check(v.clone())?) {
        Some(1) => Ok(true),
        Some(0) => Ok(false),
        _ => Err(Error::unexpected(what, &v)),
    }
}

/// `WAIT` reply: the number of replicas that acknowledged.
pub(crate) fn parse_count(v: Value, what: &'static str) -> Result<u64> {
    match as_int(&check(v.clone())?) {
        Some(n) if n >= 0 => Ok(n as u64),
        _ => Err(Error::unexpected(what, &v)),
    }
}

/// What kind of value a lock's key holds, as [`LockInfo::kind`] reports it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LockKind {
    /// No key: nobody holds the lock.
    #[default]
    Free,
    /// A reentrant lock: a hash of owner → hold count (Redisson's `RLock`, `RLOCK.ACQUIRE`).
    Reentrant,
    /// A Redisson read-write lock (`RReadWriteLock`): the hash has a `mode` field, `read` or
    /// `write`. [`LockInfo::holders`] lists its readers (owner → count) and its writer
    /// (`<owner>:write` → count). Taken with [`Locks::read_write`](crate::Locks::read_write) or
    /// by Redisson.
    ReadWrite {
        /// The `mode` field: `read` or `write`.
        mode: String,
    },
    /// A hash with fields whose values are not hold counts, and no `mode` field: not a lock
    /// this crate knows. [`LockInfo::other_fields`] has the raw fields.
    OtherHash,
    /// The key holds another type of value (`string`, `list`, ...): not a lock.
    NotALock {
        /// What `TYPE key` said.
        key_type: String,
    },
}

/// What `RLOCK.INFO` tells about one lock.
///
/// [`Locks::info`](crate::Locks::info) never fails because of what the key holds: a key that
/// is not a plain reentrant lock (a Redisson read-write lock, another hash, a string) is
/// reported through [`kind`](Self::kind) and [`other_fields`](Self::other_fields).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LockInfo {
    /// What the key holds.
    pub kind: LockKind,
    /// Owners and their hold counts. Empty when the lock is free.
    pub holders: Vec<(String, u64)>,
    /// Milliseconds left on the lease; -2 when there is no lock, -1 when it has no expiry.
    pub pttl: i64,
    /// Owners waiting in the fair queue, oldest first.
    pub queue: Vec<String>,
    /// Clients blocked in the server waiting for this lock. 0 when the server refused
    /// `RLOCK.INFO` on this key (then nobody can be blocked on it through rlock either).
    pub blocked: u64,
    /// The current fencing counter, if a fenced acquire ever ran on this key.
    pub token: Option<u64>,
    /// Fields of the lock's hash whose values are not hold counts, with those values, such as
    /// `("mode", "read")` on a Redisson read-write lock. Empty for a reentrant lock.
    pub other_fields: Vec<(String, String)>,
}

/// A string-like reply as text.
pub(crate) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Int(n) => Some(n.to_string()),
        Value::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

/// Pairs from a RESP3 map or a RESP2 flat array.
fn pairs(v: Value) -> Option<Vec<(Value, Value)>> {
    match v {
        Value::Map(m) => Some(m),
        Value::Array(a) if a.len() % 2 == 0 => {
            let mut it = a.into_iter();
            let mut out = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            Some(out)
        }
        _ => None,
    }
}

/// A parsed `RLOCK.INFO` reply. `complete` is false when the holders had values that are not
/// hold counts (the module sends them as null): the hash must then be read as it is.
pub(crate) struct InfoReply {
    pub info: LockInfo,
    pub complete: bool,
}

pub(crate) fn parse_info(v: Value) -> Result<InfoReply> {
    let v = check(v)?;
    let bad = |v: &Value| Error::unexpected("RLOCK.INFO replied", v);
    let fields = pairs(v.clone()).ok_or_else(|| bad(&v))?;
    let mut info = LockInfo {
        pttl: -2,
        ..LockInfo::default()
    };
    let mut complete = true;
    let mut mode = None;
    for (name, value) in fields {
        match text(&name).as_deref() {
            Some("holders") => {
                for (owner, count) in pairs(value).ok_or_else(|| bad(&v))? {
                    let owner = text(&owner).ok_or_else(|| bad(&v))?;
                    match as_int(&count) {
                        Some(n) if owner != "mode" => info.holders.push((owner, n.max(0) as u64)),
                        _ => match text(&count) {
                            Some(raw) => info.other_fields.push((owner, raw)),
                            None => complete = false,
                        },
                    }
                }
            }
            Some("pttl") => info.pttl = as_int(&value).ok_or_else(|| bad(&v))?,
            Some("queue") => match value {
                Value::Array(a) | Value::Set(a) => {
                    info.queue = a.iter().filter_map(text).collect();
                }
                Value::Nil => {}
                _ => return Err(bad(&v)),
            },
            Some("blocked") => info.blocked = as_int(&value).ok_or_else(|| bad(&v))?.max(0) as u64,
            Some("token") => info.token = as_int(&value).map(|n| n.max(0) as u64),
            Some("mode") => mode = text(&value),
            _ => {} // fields added later are ignored
        }
    }
    if let Some(mode) = mode.or_else(|| field(&info.other_fields, "mode")) {
        // A server that reports the mode on its own still has it in the hash.
        if field(&info.other_fields, "mode").is_none() {
            info.other_fields.push(("mode".to_owned(), mode.clone()));
        }
        info.kind = LockKind::ReadWrite { mode };
    } else if !info.other_fields.is_empty() {
        info.kind = LockKind::OtherHash;
    } else if !info.holders.is_empty() || info.pttl != -2 {
        info.kind = LockKind::Reentrant;
    }
    Ok(InfoReply { info, complete })
}

fn field(fields: &[(String, String)], name: &str) -> Option<String> {
    fields
        .iter()
        .find(|(f, _)| f == name)
        .map(|(_, v)| v.clone())
}

/// Redisson's helper-key rule: `prefix:{K}`, or `prefix:K` when K already has a `{`.
pub(crate) fn helper_key(prefix: &str, key: &str) -> String {
    if key.contains('{') {
        format!("{prefix}:{key}")
    } else {
        format!("{prefix}:{{{key}}}")
    }
}

/// Reads a lock's keys as they are, for when `RLOCK.INFO` refuses the key or cannot show its
/// fields: `TYPE`, `HGETALL`, `PTTL`, the fair queue and the fencing counter. Single-slot.
pub(crate) fn raw_lock(key: &str) -> redis::Pipeline {
    let mut p = redis::pipe();
    p.cmd("TYPE").arg(key);
    p.cmd("HGETALL").arg(key);
    p.cmd("PTTL").arg(key);
    p.cmd("LRANGE")
        .arg(helper_key("redisson_lock_queue", key))
        .arg(0)
        .arg(-1);
    p.cmd("GET").arg(helper_key("redisson_lock_token", key));
    p
}

/// Builds a [`LockInfo`] from [`raw_lock`]'s replies. `blocked` comes from `RLOCK.INFO` when it
/// answered; errors on single items (a wrong type) only mean "not there".
pub(crate) fn parse_raw(values: Vec<Value>, blocked: u64) -> Result<LockInfo> {
    let bad = |v: &Value| Error::unexpected("reading the lock's keys", v);
    let mut it = values.into_iter();
    let mut next = || it.next().unwrap_or_default();
    let type_reply = check(next())?;
    let key_type = text(&type_reply).ok_or_else(|| bad(&type_reply))?;
    let mut info = LockInfo {
        blocked,
        ..LockInfo::default()
    };
    if let Some(fields) = pairs(next()) {
        for (f, v) in fields {
            let (Some(f), Some(v)) = (text(&f), text(&v)) else {
                continue;
            };
            match v.parse::<i64>() {
                Ok(n) if f != "mode" => info.holders.push((f, n.max(0) as u64)),
                _ => info.other_fields.push((f, v)),
            }
        }
    }
    let pttl = check(next())?;
    info.pttl = as_int(&pttl).ok_or_else(|| bad(&pttl))?;
    if let Value::Array(a) = next() {
        info.queue = a.iter().filter_map(text).collect();
    }
    info.token = as_int(&next()).map(|n| n.max(0) as u64);
    info.kind = match key_type.as_str() {
        "none" => LockKind::Free,
        "hash" => match field(&info.other_fields, "mode") {
            Some(mode) => LockKind::ReadWrite { mode },
            None if info.other_fields.is_empty() => LockKind::Reentrant,
            None => LockKind::OtherHash,
        },
        _ => LockKind::NotALock { key_type },
    };
    Ok(info)
}

/// `HGET key owner`: the owner's hold count, 0 when it holds nothing.
pub(crate) fn hold_count(key: &str, owner: &str) -> redis::Cmd {
    on_key_with("HGET", key, owner)
}

/// The reply of [`hold_count`].
pub(crate) fn parse_hold_count(v: Value) -> Result<u64> {
    match check(v)? {
        Value::Nil => Ok(0),
        v => match as_int(&v) {
            Some(n) if n >= 0 => Ok(n as u64),
            _ => Err(Error::unexpected("HGET of a hold count replied", &v)),
        },
    }
}

pub(crate) fn exists(key: &str) -> redis::Cmd {
    on_key("EXISTS", key)
}

pub(crate) fn hexists(key: &str, owner: &str) -> redis::Cmd {
    on_key_with("HEXISTS", key, owner)
}

pub(crate) fn pttl(key: &str) -> redis::Cmd {
    on_key("PTTL", key)
}

/// `PTTL` reply as the lease left: `None` when there is no key (-2) or it never expires (-1).
pub(crate) fn parse_pttl(v: Value) -> Result<Option<Duration>> {
    let v = check(v)?;
    match as_int(&v) {
        Some(ms) if ms >= 0 => Ok(Some(Duration::from_millis(ms as u64))),
        Some(-1 | -2) => Ok(None),
        _ => Err(Error::unexpected("PTTL replied", &v)),
    }
}

/// The margin Redlock subtracts for clock drift between client and server:
/// 1% of the lease plus 2 ms.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// How long a hold can be trusted after a request that set `lease` was sent `elapsed` ago.
pub(crate) fn validity(lease: Duration, elapsed: Duration) -> Option<Duration> {
    lease
        .checked_sub(elapsed)?
        .checked_sub(drift(lease))
        .filter(|d| !d.is_zero())
}

/// The majority of `n` primaries.
pub(crate) fn quorum(n: usize) -> usize {
    n / 2 + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(c: &redis::Cmd) -> Vec<String> {
        c.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                redis::Arg::Cursor => "<cursor>".into(),
                _ => "<other>".into(),
            })
            .collect()
    }

    fn name(key: &str, owner: &str, side: Option<Side>) -> HoldName {
        HoldName {
            key: Arc::from(key),
            owner: Arc::from(owner),
            side,
            permit: false,
        }
    }

    fn opts() -> AcquireOptions {
        AcquireOptions {
            lease: Duration::from_secs(30),
            wait: Wait::No,
            fair: false,
            fenced: false,
            session: false,
        }
    }

    /// The arguments without the trailing `REQ <id>`, after checking it is there and fresh.
    fn without_req(c: &redis::Cmd, again: &redis::Cmd) -> Vec<String> {
        let mut all = args(c);
        let id = all.pop().expect("an id");
        assert_eq!(all.pop().as_deref(), Some("REQ"));
        assert_eq!(id.len(), 32, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        assert_ne!(args(again).last(), Some(&id), "each call gets its own id");
        all
    }

    #[test]
    fn acquire_sends_only_the_options_asked_for() {
        let c = acquire(&name("k", "u:1", None), &opts());
        let again = acquire(&name("k", "u:1", None), &opts());
        assert_eq!(
            without_req(&c, &again),
            ["RLOCK.ACQUIRE", "k", "u:1", "LEASE", "30000"]
        );
        let all = AcquireOptions {
            lease: Duration::from_micros(1500),
            wait: Wait::For(Duration::from_micros(10)),
            fair: true,
            fenced: true,
            session: true,
        };
        assert_eq!(
            without_req(&acquire(&name("k", "u:1", None), &all), &again),
            [
                "RLOCK.ACQUIRE",
                "k",
                "u:1",
                "LEASE",
                "2",
                "BLOCK",
                "1",
                "FAIR",
                "TOKEN",
                "SESSION"
            ]
        );
        let forever = AcquireOptions {
            wait: Wait::Forever,
            ..opts()
        };
        assert_eq!(
            &args(&acquire(&name("k", "o", None), &forever))[5..7],
            ["BLOCK", "0"]
        );
    }

    #[test]
    fn semaphore_and_latch_commands() {
        let wait = Wait::For(Duration::from_millis(250));
        let c = acquire_permits("s", 2, wait);
        assert_eq!(
            without_req(&c, &acquire_permits("s", 2, wait)),
            ["RSEM.ACQUIRE", "s", "PERMITS", "2", "BLOCK", "250"]
        );
        assert_eq!(
            without_req(&release_permits("s", 3), &release_permits("s", 3)),
            ["RSEM.RELEASE", "s", "PERMITS", "3"]
        );
        assert_eq!(
            args(&try_set_permits("s", 4)),
            ["RSEM.TRYSETPERMITS", "s", "4"]
        );
        assert_eq!(args(&add_permits("s", -1)), ["RSEM.ADDPERMITS", "s", "-1"]);
        assert_eq!(args(&available_permits("s")), ["RSEM.AVAILABLE", "s"]);
        assert_eq!(
            args(&try_set_count("l", 2)),
            ["RLATCH.TRYSETCOUNT", "l", "2"]
        );
        assert_eq!(args(&count_down("l")), ["RLATCH.COUNTDOWN", "l"]);
        assert_eq!(args(&latch_count("l")), ["RLATCH.COUNT", "l"]);
        assert_eq!(
            args(&await_latch("l", Wait::Forever)),
            ["RLATCH.AWAIT", "l", "BLOCK", "0"]
        );
        assert_eq!(parse_integer(Value::Int(-3), "x").unwrap(), -3);
        assert!(parse_integer(Value::Nil, "x").is_err());
    }

    #[test]
    fn a_side_follows_the_owner_and_names_the_field() {
        let read = name("k", "o", Some(Side::Read));
        let write = name("k", "o", Some(Side::Write));
        assert_eq!(
            without_req(&acquire(&read, &opts()), &acquire(&read, &opts())),
            ["RLOCK.ACQUIRE", "k", "o", "READ", "LEASE", "30000"]
        );
        assert_eq!(
            without_req(&release(&write), &release(&write)),
            ["RLOCK.RELEASE", "k", "o", "WRITE"]
        );
        let second = Duration::from_secs(1);
        assert_eq!(
            without_req(&renew(&read, second), &renew(&read, second)),
            ["RLOCK.RENEW", "k", "o", "READ", "LEASE", "1000"]
        );
        assert_eq!(read.field(), "o");
        assert_eq!(write.field(), "o:write");
        assert_eq!(name("k", "o", None).field(), "o");
    }

    #[test]
    fn blocked_clients_are_told_from_client_list() {
        let line = "id=7 addr=127.0.0.1:5 laddr=127.0.0.1:6 fd=9 name= age=1 idle=1 flags=b db=0";
        assert!(client_is_blocked(line));
        assert!(!client_is_blocked(&line.replace("flags=b", "flags=N")));
        assert!(!client_is_blocked(""));
        let waiting = format!("{line} cmd=rlock.acquire user=default");
        assert!(client_is_blocked_in(&waiting, &["rlock.acquire"]));
        assert!(client_is_blocked_in(&waiting, &["RLOCK.ACQUIRE"]));
        // Blocked in the WAIT pipelined after a grant: the grant's reply went out.
        let in_wait = waiting.replace("cmd=rlock.acquire", "cmd=wait");
        assert!(!client_is_blocked_in(&in_wait, &["rlock.acquire"]));
        assert!(client_is_blocked_in(&in_wait, &["rlock.acquire", "wait"]));
        assert!(!client_is_blocked_in(
            &waiting.replace("flags=b", "flags=N"),
            &["rlock.acquire"]
        ));
        assert_eq!(
            name_of(&redis::cmd("RSEM.ACQUIRE").arg("k").clone()),
            "rsem.acquire"
        );
    }

    #[test]
    fn millis_never_rounds_a_wait_down_to_forever() {
        assert_eq!(millis(Duration::from_nanos(1)), 1);
        assert_eq!(millis(Duration::from_millis(7)), 7);
        assert_eq!(millis(Duration::from_micros(7001)), 8);
        assert_eq!(millis(Duration::ZERO), 1);
    }

    #[test]
    fn other_commands() {
        assert_eq!(
            without_req(
                &release(&name("k", "o", None)),
                &release(&name("k", "o", None))
            ),
            ["RLOCK.RELEASE", "k", "o"]
        );
        let second = Duration::from_secs(1);
        assert_eq!(
            without_req(
                &renew(&name("k", "o", None), second),
                &renew(&name("k", "o", None), second)
            ),
            ["RLOCK.RENEW", "k", "o", "LEASE", "1000"]
        );
        assert_eq!(args(&force_release("k")), ["RLOCK.FORCERELEASE", "k"]);
        assert_eq!(args(&info("k")), ["RLOCK.INFO", "k"]);
        assert_eq!(
            args(&wait_replicas(1, Duration::from_millis(250))),
            ["WAIT", "1", "250"]
        );
    }

    #[test]
    fn a_guard_names_the_hold_its_side_and_token_then_the_command() {
        let mut set = redis::cmd("SET");
        set.arg("{k}:data").arg(b"v\x00".as_slice());
        assert_eq!(
            args(&guard(&name("k", "o", None), None, &set).unwrap()),
            ["RLOCK.GUARD", "k", "o", "CALL", "SET", "{k}:data", "v\u{0}"]
        );
        assert_eq!(
            args(&guard(&name("k", "o", Some(Side::Write)), Some(7), &set).unwrap()),
            [
                "RLOCK.GUARD",
                "k",
                "o",
                "WRITE",
                "TOKEN",
                "7",
                "CALL",
                "SET",
                "{k}:data",
                "v\u{0}"
            ]
        );
        // Words after CALL are the inner command's, even when they read like options.
        let mut get = redis::cmd("GET");
        get.arg("TOKEN");
        assert_eq!(
            args(&guard(&name("k", "o", Some(Side::Read)), None, &get).unwrap()),
            ["RLOCK.GUARD", "k", "o", "READ", "CALL", "GET", "TOKEN"]
        );
    }

    #[test]
    fn a_guard_without_a_command_is_refused_before_sending() {
        let hold = name("k", "o", None);
        for bad in [redis::Cmd::new(), redis::cmd("")] {
            match guard(&hold, None, &bad) {
                Err(Error::InvalidArgument { key, reason }) => {
                    assert_eq!(key, "k");
                    assert!(reason.contains("command"), "{reason}");
                }
                other => panic!("{other:?}"),
            }
        }
        let mut scan = redis::cmd("SCAN");
        scan.cursor_arg(0);
        assert!(matches!(
            guard(&hold, None, &scan),
            Err(Error::InvalidArgument { .. })
        ));
    }

    #[test]
    fn guard_replies_and_refusals() {
        let hold = name("k", "o", Some(Side::Write));
        assert_eq!(
            parse_guard(Ok(Value::Okay), &hold, None).unwrap(),
            Value::Okay
        );
        assert_eq!(
            parse_guard(Ok(Value::Int(4)), &hold, Some(3)).unwrap(),
            Value::Int(4)
        );
        let err = |text: &str| {
            let (code, detail) = text.split_once(' ').unwrap();
            redis::make_extension_error(code.into(), Some(detail.into()))
        };
        let not_held = "NOTHELD the lock is not held by this owner";
        match parse_guard(Err(err(not_held)), &hold, Some(7)) {
            Err(Error::NotHeld { key, owner }) => assert_eq!((&*key, &*owner), ("k", "o")),
            other => panic!("{other:?}"),
        }
        // A refusal read as a value (RESP3, pipelines) is the same refusal.
        let as_value = Value::ServerError(redis::ServerError::try_from(err(not_held)).unwrap());
        assert!(matches!(
            parse_guard(Ok(as_value), &hold, None),
            Err(Error::NotHeld { .. })
        ));
        let stale = "STALETOKEN the lock's fencing token is now 8, not 7";
        let refused = parse_guard(Err(err(stale)), &hold, Some(7)).unwrap_err();
        assert!(refused.is_not_held(), "a stale token is a kind of not held");
        let want = Error::StaleToken {
            key: "k".into(),
            owner: "o".into(),
            token: 7,
            current: Some(8),
        };
        assert_eq!(format!("{refused:?}"), format!("{want:?}"));
        // The inner command's own error is the caller's, untouched.
        let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
        match parse_guard(Err(err(wrongtype)), &hold, None) {
            Err(Error::Redis(e)) => assert_eq!(e.code(), Some("WRONGTYPE")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            token_now("the lock's fencing token is now 12, not 7"),
            Some(12)
        );
        assert_eq!(token_now("something else"), None);
    }

    #[test]
    fn acquire_replies() {
        assert_eq!(parse_acquire(Value::Nil).unwrap(), None);
        assert_eq!(parse_acquire(Value::Int(3)).unwrap(), Some(3));
        assert!(parse_acquire(Value::Int(0)).is_err());
        assert!(parse_acquire(Value::Okay).is_err());
    }

    #[test]
    fn release_replies() {
        assert!(parse_release(Value::Int(1), "k", "o").unwrap());
        assert!(!parse_release(Value::Int(0), "k", "o").unwrap());
        let e = release_error(
            redis::make_extension_error("NOTHELD".into(), Some("no".into())),
            "k",
            "o",
        );
        assert!(matches!(e, Error::NotHeld { .. }));
    }

    #[test]
    fn info_resp2_and_resp3() {
        let queue = [b("queue"), Value::Array(vec![b("u:2")])];
        let blocked_and_token = [b("blocked"), Value::Int(1), b("token"), Value::Nil];
        let resp2 = resp2_info(("u:1", 2), 900, queue.into_iter().chain(blocked_and_token));
        let want = LockInfo {
            kind: LockKind::Reentrant,
            holders: vec![("u:1".into(), 2)],
            pttl: 900,
            queue: vec!["u:2".into()],
            blocked: 1,
            token: None,
            other_fields: vec![],
        };
        let got = parse_info(resp2).unwrap();
        assert!(got.complete);
        assert_eq!(got.info, want);
        let resp3 = Value::Map(vec![
            (b("holders"), Value::Map(vec![(b("u:1"), Value::Int(2))])),
            (b("pttl"), Value::Int(900)),
            (b("queue"), Value::Array(vec![b("u:2")])),
            (b("blocked"), Value::Int(1)),
            (b("token"), Value::Int(7)),
        ]);
        assert_eq!(
            parse_info(resp3).unwrap().info,
            LockInfo {
                token: Some(7),
                ..want
            }
        );
    }

    fn b(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    /// An `RLOCK.INFO` reply in RESP2 with one holder and a pttl, then `more` fields.
    fn resp2_info(holder: (&str, i64), pttl: i64, more: impl IntoIterator<Item = Value>) -> Value {
        let (owner, count) = holder;
        let holders = Value::Array(vec![b(owner), Value::Int(count)]);
        let head = [b("holders"), holders, b("pttl"), Value::Int(pttl)];
        Value::Array(head.into_iter().chain(more).collect())
    }

    #[test]
    fn info_of_a_read_write_lock_does_not_fail() {
        // What the v1 module sends for `HSET k mode read u:1 1`: null for the non-count field.
        let reply = Value::Map(vec![
            (b("blocked"), Value::Int(0)),
            (
                b("holders"),
                Value::Map(vec![(b("mode"), Value::Nil), (b("u:1"), Value::Int(1))]),
            ),
            (b("pttl"), Value::Int(-1)),
            (b("queue"), Value::Array(vec![])),
            (b("token"), Value::Nil),
        ]);
        let got = parse_info(reply).unwrap();
        assert!(
            !got.complete,
            "the raw hash must be read for the mode's value"
        );
        assert_eq!(got.info.holders, [("u:1".to_string(), 1)]);
        // A server that reports `mode` beside the holders (v2) needs no second read.
        let v2 = resp2_info(("u:1:write", 1), 500, [b("mode"), b("write")]);
        let got = parse_info(v2).unwrap();
        assert!(got.complete);
        assert_eq!(
            got.info.kind,
            LockKind::ReadWrite {
                mode: "write".into()
            }
        );
        assert_eq!(got.info.other_fields, [("mode".into(), "write".into())]);
    }

    #[test]
    fn raw_reads_report_what_the_key_is() {
        let hash = |fields: &[&str]| Value::Array(fields.iter().map(|f| b(f)).collect());
        let err = || {
            let e = redis::make_extension_error("WRONGTYPE".into(), None);
            Value::ServerError(redis::ServerError::try_from(e).unwrap())
        };
        let rw = parse_raw(
            vec![
                Value::SimpleString("hash".into()),
                hash(&["mode", "read", "u:1", "2"]),
                Value::Int(1200),
                Value::Array(vec![]),
                Value::Nil,
            ],
            0,
        )
        .unwrap();
        assert_eq!(
            rw.kind,
            LockKind::ReadWrite {
                mode: "read".into()
            }
        );
        assert_eq!(rw.holders, [("u:1".to_string(), 2)]);
        assert_eq!(rw.other_fields, [("mode".to_string(), "read".to_string())]);
        assert_eq!(rw.pttl, 1200);
        let other = parse_raw(
            vec![
                Value::SimpleString("hash".into()),
                hash(&["foo", "bar"]),
                Value::Int(-1),
                Value::Array(vec![]),
                b("4"),
            ],
            3,
        )
        .unwrap();
        assert_eq!(other.kind, LockKind::OtherHash);
        assert_eq!((other.token, other.blocked), (Some(4), 3));
        let string = parse_raw(
            vec![
                Value::SimpleString("string".into()),
                err(),
                Value::Int(-1),
                err(),
                Value::Nil,
            ],
            0,
        )
        .unwrap();
        assert_eq!(
            string.kind,
            LockKind::NotALock {
                key_type: "string".into()
            }
        );
        assert!(string.holders.is_empty());
    }

    #[test]
    fn helper_keys_follow_redissons_prefix_rule() {
        assert_eq!(
            helper_key("redisson_lock_queue", "k"),
            "redisson_lock_queue:{k}"
        );
        assert_eq!(
            helper_key("redisson_lock_token", "{t}:k"),
            "redisson_lock_token:{t}:k"
        );
    }

    #[test]
    fn query_replies() {
        assert_eq!(parse_hold_count(Value::Nil).unwrap(), 0);
        assert_eq!(parse_hold_count(b("3")).unwrap(), 3);
        assert!(parse_hold_count(b("read")).is_err());
        assert_eq!(parse_pttl(Value::Int(-2)).unwrap(), None);
        assert_eq!(parse_pttl(Value::Int(-1)).unwrap(), None);
        assert_eq!(
            parse_pttl(Value::Int(1500)).unwrap(),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn validity_subtracts_elapsed_and_drift() {
        let lease = Duration::from_millis(1000);
        assert_eq!(
            validity(lease, Duration::from_millis(100)),
            Some(Duration::from_millis(888))
        );
        assert_eq!(validity(lease, Duration::from_millis(988)), None);
        assert_eq!(validity(lease, Duration::from_secs(2)), None);
        assert_eq!(quorum(3), 2);
        assert_eq!(quorum(4), 3);
        assert_eq!(quorum(5), 3);
    }
}
