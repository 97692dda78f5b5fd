//! Redisson's semaphore (`RSemaphore`) on its keys: the string `K` of available permits
//! and the channel `redisson_sc:{K}`, on which every change that adds permits publishes
//! the new total, as Redisson's scripts do.

use redis_module::{Context, NotifyEvent, RedisError, RedisString};

use super::{announce, helper_string};
use crate::config;
use crate::core::integer::{format_i64, I64_DIGITS};
use crate::core::keys::SEMAPHORE_CHANNEL_PREFIX;
use crate::core::semaphore::{added, parse_count};
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// A semaphore's key, read once: its permits (`None` while it does not exist).
pub struct Semaphore<'a> {
    ctx: &'a Context,
    name: &'a RedisString,
    /// Open for writing, for the commands that may change the permits; `None` for a read.
    key: Option<Key>,
    available: Option<i64>,
}

impl<'a> Semaphore<'a> {
    /// Opens the semaphore `name` to read and change it: `WRONGTYPE` unless it is a string
    /// or missing, an error if the string is not an integer.
    pub fn open(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let key = Key::open_writable(ctx, name);
        let available = read_permits(&key)?;
        Ok(Semaphore {
            ctx,
            name,
            key: Some(key),
            available,
        })
    }

    /// Opens the semaphore `name` only to read it (a read-only command).
    pub fn read(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let available = read_permits(&Key::open_readonly(ctx, name))?;
        Ok(Semaphore {
            ctx,
            name,
            key: None,
            available,
        })
    }

    /// The semaphore's key name.
    pub fn name(&self) -> &[u8] {
        self.name.as_slice()
    }

    pub fn exists(&self) -> bool {
        self.available.is_some()
    }

    /// Permits available now; 0 for a semaphore that does not exist.
    pub fn available(&self) -> i64 {
        self.available.unwrap_or(0)
    }

    /// `TRYSETPERMITS`: sets `n` permits if the semaphore does not exist; publishes `n`.
    pub fn try_set(&mut self, n: i64) -> bool {
        if self.exists() {
            return false;
        }
        self.write(n);
        let value = ffi::string(self.ctx, n.to_string().as_bytes());
        ffi::replicate_key_args(self.ctx, c"SET", self.name, &[value]);
        announce(self.ctx, NotifyEvent::STRING, "set", self.name);
        self.publish(n);
        true
    }

    /// Adds `delta` permits (negative takes them away, below zero if need be) and
    /// publishes the new total: Redisson's `addPermits`. `None` past `i64`.
    pub fn add(&mut self, delta: i64) -> Option<i64> {
        let total = self.change(delta)?;
        self.publish(total);
        Some(total)
    }

    /// Adds `n` permits taken back from ended leases, publishing the new total only when
    /// it is above zero, as Redisson's reclaim does.
    pub fn add_reclaimed(&mut self, n: i64) -> Option<i64> {
        let total = self.change(n)?;
        if total > 0 {
            self.publish(total);
        }
        Some(total)
    }

    /// The semaphore's TTL in ms (Redisson's `trySetPermits(permits, ttl)`), if it has one.
    pub fn pttl(&self) -> Option<i64> {
        let ttl = match &self.key {
            Some(key) => key.pttl(),
            None => Key::open_readonly(self.ctx, self.name).pttl(),
        };
        (ttl > 0).then_some(ttl)
    }

    /// Takes `n` permits if that many are available; publishes nothing.
    pub fn take(&mut self, n: i64) -> bool {
        if self.available() < n {
            return false;
        }
        self.change(-n).is_some()
    }

    /// Gives `n` permits back (creating the semaphore if need be) and publishes the new
    /// total: Redisson's `release`. `None` past `i64`.
    pub fn give(&mut self, n: i64) -> Option<i64> {
        self.add(n)
    }

    /// Adds `delta` (negative takes away) as `INCRBY`/`DECRBY` would, and replicates and
    /// announces it as that command. The new total; `None` past `i64`.
    fn change(&mut self, delta: i64) -> Option<i64> {
        let total = added(self.available(), delta)?;
        self.write(total);
        let (command, event, by) = match delta {
            d if d < 0 && d != i64::MIN => (c"DECRBY", "decrby", -d),
            d => (c"INCRBY", "incrby", d),
        };
        ffi::replicate_key_int(self.ctx, command, self.name, by);
        announce(self.ctx, NotifyEvent::STRING, event, self.name);
        Some(total)
    }

    /// Writes `total` as the key's value, in place (the TTL stays).
    fn write(&mut self, total: i64) {
        let mut digits = [0; I64_DIGITS];
        let text = format_i64(total, &mut digits);
        let key = self
            .key
            .get_or_insert_with(|| Key::open_writable(self.ctx, self.name));
        let written = key.string_write(text);
        if !written {
            ffi::log_warning(self.ctx.get_raw(), "rlock: a semaphore write was refused");
        }
        self.available = Some(total);
    }

    /// The new total on `redisson_sc:{K}`, unless `rlock.publish` is off.
    fn publish(&self, total: i64) {
        if !config::publish() {
            return;
        }
        let channel = helper_string(self.ctx, SEMAPHORE_CHANNEL_PREFIX, self.name.as_slice());
        ffi::publish(
            self.ctx,
            &channel,
            &ffi::string(self.ctx, total.to_string().as_bytes()),
        );
    }
}

/// The permits a semaphore's key holds: `None` when missing.
fn read_permits(key: &Key) -> Result<Option<i64>, RedisError> {
    match key.kind() {
        KeyKind::Empty => Ok(None),
        KeyKind::String => key
            .with_string(parse_count)
            .map(Some)
            .ok_or(RedisError::Str(errors::SEMAPHORE_NOT_INTEGER)),
        _ => Err(errors::wrong_type()),
    }
}
