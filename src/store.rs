//! The one place that reads and writes the Redisson-compatible keys.
//!
//! Every write here is replicated as a plain command with absolute times
//! (`HSET`, `HDEL`, `DEL`, `PEXPIREAT`, `SET`), so a replica or an AOF replays it
//! without the module, and is announced with the keyspace event the plain
//! command would have raised.

use std::cell::RefCell;

use redis_module::{Context, NotifyEvent, RedisError, RedisString};

use crate::core::fences::{FenceKnown, KnownFences};
use crate::core::hold::{parse_count, HoldError, LockState, Release};
use crate::core::keys::{write_helper_key, CHANNEL_PREFIX, TOKEN_PREFIX};
use crate::core::waitlist::LockId;
use crate::ffi::{self, Key, KeyKind};
use crate::{config, events};

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A lock hash, open for the length of one command or callback.
pub struct LockKey<'a> {
    ctx: &'a Context,
    name: &'a RedisString,
    key: Key,
}

impl<'a> LockKey<'a> {
    /// Opens the lock `name`; `WRONGTYPE` unless it is a hash or missing.
    pub fn open(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let key = Key::open_writable(ctx, name);
        match key.kind() {
            KeyKind::Empty | KeyKind::Hash => Ok(LockKey { ctx, name, key }),
            _ => Err(RedisError::Str(WRONGTYPE)),
        }
    }

    pub fn is_held(&self) -> bool {
        self.key.kind() == KeyKind::Hash
    }

    /// The lock as `owner` sees it.
    pub fn state(&self, owner: &RedisString) -> Result<LockState, HoldError> {
        if !self.is_held() {
            return Ok(LockState::Free);
        }
        let own_count = match self.key.hash_get(owner) {
            Some(stored) => Some(parse_count(stored.as_slice())?),
            None => None,
        };
        Ok(LockState::Held {
            own_count,
            holders: self.key.value_length(),
        })
    }

    pub fn pttl(&self) -> i64 {
        self.key.pttl()
    }

    /// Writes `owner`'s hold count.
    pub fn set_count(&self, owner: &RedisString, count: i64) {
        self.key.hash_set_int(self.ctx, owner, count);
        ffi::replicate_key_field_int(self.ctx, c"HSET", self.name, owner, count);
        announce(self.ctx, NotifyEvent::HASH, "hset", self.name);
    }

    /// Sets the lease to end at `deadline_ms` (unix ms).
    pub fn set_deadline(&self, deadline_ms: i64) {
        self.key.set_abs_expire(deadline_ms);
        ffi::replicate_key_int(self.ctx, c"PEXPIREAT", self.name, deadline_ms);
        announce(self.ctx, NotifyEvent::GENERIC, "expire", self.name);
    }

    /// Writes a release decided by `core::hold`. Nothing to write for `NotHeld`.
    pub fn apply_release(&self, owner: &RedisString, release: Release) {
        match release {
            Release::NotHeld => {}
            Release::Undo { remaining } => self.set_count(owner, remaining),
            Release::Last { lock_freed: true } => self.delete(),
            Release::Last { lock_freed: false } => self.remove_owner(owner),
        }
    }

    /// Drops one owner's field from a hash that other owners share.
    pub fn remove_owner(&self, owner: &RedisString) {
        self.key.hash_del(owner);
        ffi::replicate_key_field(self.ctx, c"HDEL", self.name, owner);
        announce(self.ctx, NotifyEvent::HASH, "hdel", self.name);
    }

    /// Deletes the lock and tells Redisson-style waiters it is free.
    pub fn delete(&self) {
        self.key.delete();
        ffi::replicate_key(self.ctx, c"DEL", self.name);
        announce(self.ctx, NotifyEvent::GENERIC, "del", self.name);
        publish_unlock(self.ctx, self.name);
    }
}

/// Raises the keyspace event the plain command would, for clients that enabled
/// that class in `notify-keyspace-events`. Skipped otherwise: every event also
/// runs each module's subscriber, which costs more than the write itself.
fn announce(ctx: &Context, class: NotifyEvent, event: &str, key: &RedisString) {
    if redis_module::raw::get_keyspace_events().intersects(class) {
        events::own_write(|| {
            ctx.notify_keyspace_event(class, event, key);
        });
    }
}

/// A helper key's name as a RedisString, built in a reused buffer.
fn helper_string(ctx: &Context, prefix: &[u8], lock_name: &RedisString) -> RedisString {
    thread_local! {
        static NAME: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    NAME.with(|name| {
        let mut name = name.borrow_mut();
        write_helper_key(&mut name, prefix, lock_name.as_slice());
        ffi::string(ctx, &name)
    })
}

/// `PUBLISH redisson_lock__channel:{K} 0`, unless `rlock.publish` is off.
pub fn publish_unlock(ctx: &Context, lock_name: &RedisString) {
    if !config::publish() {
        return;
    }
    let channel = helper_string(ctx, CHANNEL_PREFIX, lock_name);
    ffi::publish_zero(ctx, &channel);
}

/// The fencing counter `redisson_lock_token:{K}`: an integer string with no TTL.
pub struct Fence<'a> {
    ctx: &'a Context,
    name: RedisString,
    key: Key,
    value: Option<i64>,
    lock: LockId,
}

thread_local! {
    static FENCES: RefCell<KnownFences> = RefCell::new(KnownFences::new(false));
}

pub fn with_fences<T>(f: impl FnOnce(&mut KnownFences) -> T) -> T {
    FENCES.with(|fences| f(&mut fences.borrow_mut()))
}

/// At load: fencing counters can be remembered, rather than looked up, only if
/// the module sees every one appear, that is on a primary with no data yet
/// (loaded at startup, before the RDB, whose keys it then hears load).
pub fn track_fences_from_load(ctx: &Context) {
    let primary = ffi::context_flags(ctx) & redis_module::raw::REDISMODULE_CTX_FLAGS_MASTER != 0;
    let empty = match ctx.call("INFO", &["keyspace"]) {
        Ok(redis_module::RedisValue::SimpleString(info)) => !info.contains("keys="),
        Ok(redis_module::RedisValue::StringBuffer(info)) => {
            !String::from_utf8_lossy(&info).contains("keys=")
        }
        _ => false,
    };
    with_fences(|f| *f = KnownFences::new(primary && empty));
}

/// The lock named `lock_name` in the current database.
pub fn lock_id(ctx: &Context, lock_name: &RedisString) -> LockId {
    LockId {
        db: ffi::selected_db(ctx),
        key: lock_name.as_slice().to_vec(),
    }
}

/// Fencing tokens come from one counter per lock, incremented each time the lock
/// goes from free to held while fencing is in use on it.
impl<'a> Fence<'a> {
    /// Whether lock `lock_name` has a fencing counter: from memory when the
    /// module has seen every counter, else a key lookup.
    pub fn in_use(ctx: &Context, lock_name: &RedisString) -> bool {
        let known = with_fences(|f| f.lookup(|| lock_id(ctx, lock_name)));
        match known {
            FenceKnown::Yes => true,
            FenceKnown::No => false,
            FenceKnown::Unknown => {
                let name = helper_string(ctx, TOKEN_PREFIX, lock_name);
                ffi::key_exists(ctx, &name)
            }
        }
    }

    /// Opens and checks the counter of lock `lock_name`.
    pub fn open(ctx: &'a Context, lock_name: &RedisString) -> Result<Self, RedisError> {
        let name = helper_string(ctx, TOKEN_PREFIX, lock_name);
        let key = Key::open_writable(ctx, &name);
        let value = match key.kind() {
            KeyKind::Empty => None,
            KeyKind::String => {
                let stored = key.string_value();
                match crate::core::args::parse_i64(&stored) {
                    Some(n) if n >= 0 => Some(n),
                    _ => {
                        return Err(RedisError::Str(
                            "ERR the fencing counter key holds a value that is not a non-negative integer",
                        ))
                    }
                }
            }
            _ => return Err(RedisError::Str(WRONGTYPE)),
        };
        let lock = lock_id(ctx, lock_name);
        if value.is_none() {
            // Deleted since the module saw it.
            with_fences(|f| f.gone(&lock));
        }
        Ok(Fence {
            ctx,
            name,
            key,
            value,
            lock,
        })
    }

    /// Whether fencing is in use on this lock.
    pub fn exists(&self) -> bool {
        self.value.is_some()
    }

    pub fn current(&self) -> Option<i64> {
        self.value
    }

    /// The token the next free-to-held transition will get, checked for overflow.
    pub fn next(&self) -> Result<i64, RedisError> {
        self.value
            .unwrap_or(0)
            .checked_add(1)
            .ok_or(RedisError::Str("ERR the fencing counter would overflow"))
    }

    /// Stores `token` as the counter's value.
    pub fn store(&mut self, token: i64) {
        self.key.string_set_int(self.ctx, token);
        ffi::replicate_key_int(self.ctx, c"SET", &self.name, token);
        announce(self.ctx, NotifyEvent::STRING, "set", &self.name);
        self.value = Some(token);
        with_fences(|f| f.seen(self.lock.clone()));
    }
}

/// A string reply of `RedisModule_Call` as bytes, whichever way the crate decoded it.
pub fn reply_bytes(value: redis_module::RedisValue) -> Option<Vec<u8>> {
    use redis_module::RedisValue;
    match value {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.into_bytes()),
        RedisValue::StringBuffer(b) => Some(b),
        RedisValue::BulkRedisString(s) => Some(s.as_slice().to_vec()),
        RedisValue::Integer(n) => Some(n.to_string().into_bytes()),
        _ => None,
    }
}
