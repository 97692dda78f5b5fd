//! Redisson's semaphore (`RSemaphore`) on its keys: the string `K` of available permits
//! and the channel `redisson_sc:{K}`, on which every change that adds permits publishes
//! the new total, as Redisson's scripts do.

use redis_module::{Context, RedisError, RedisString};

use super::{helper_string, replicated_write};
use crate::config;
use crate::core::keys::SEMAPHORE_CHANNEL_PREFIX;
use crate::core::semaphore::{added, parse_count};
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// A semaphore's key, read once: its permits (`None` while it does not exist).
pub struct Semaphore<'a> {
    ctx: &'a Context,
    name: &'a RedisString,
    available: Option<i64>,
}

impl<'a> Semaphore<'a> {
    /// Opens and reads the semaphore `name`: `WRONGTYPE` unless it is a string or
    /// missing, an error if the string is not an integer.
    pub fn open(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let key = Key::open_readonly(ctx, name);
        let available = match key.kind() {
            KeyKind::Empty => None,
            KeyKind::String => Some(
                parse_count(&key.string_value())
                    .ok_or(RedisError::Str(errors::SEMAPHORE_NOT_INTEGER))?,
            ),
            _ => return Err(errors::wrong_type()),
        };
        Ok(Semaphore {
            ctx,
            name,
            available,
        })
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
        let text = n.to_string();
        replicated_write(self.ctx, "SET", &[self.name.as_slice(), text.as_bytes()]);
        self.available = Some(n);
        self.publish(n);
        true
    }

    /// Adds `delta` permits (negative takes them away, below zero if need be) and
    /// publishes the new total: Redisson's `addPermits`. `None` past `i64`.
    pub fn add(&mut self, delta: i64) -> Option<i64> {
        let total = added(self.available(), delta)?;
        let text = delta.to_string();
        replicated_write(self.ctx, "INCRBY", &[self.name.as_slice(), text.as_bytes()]);
        self.available = Some(total);
        self.publish(total);
        Some(total)
    }

    /// Adds `n` permits taken back from ended leases, publishing the new total only when
    /// it is above zero, as Redisson's reclaim does.
    pub fn add_reclaimed(&mut self, n: i64) -> Option<i64> {
        let total = added(self.available(), n)?;
        let text = n.to_string();
        replicated_write(self.ctx, "INCRBY", &[self.name.as_slice(), text.as_bytes()]);
        self.available = Some(total);
        if total > 0 {
            self.publish(total);
        }
        Some(total)
    }

    /// The semaphore's TTL in ms (Redisson's `trySetPermits(permits, ttl)`), if it has one.
    pub fn pttl(&self) -> Option<i64> {
        let ttl = Key::open_readonly(self.ctx, self.name).pttl();
        (ttl > 0).then_some(ttl)
    }

    /// Takes `n` permits if that many are available; publishes nothing.
    pub fn take(&mut self, n: i64) -> bool {
        if self.available() < n {
            return false;
        }
        let text = n.to_string();
        replicated_write(self.ctx, "DECRBY", &[self.name.as_slice(), text.as_bytes()]);
        self.available = Some(self.available() - n);
        true
    }

    /// Gives `n` permits back (creating the semaphore if need be) and publishes the new
    /// total: Redisson's `release`. `None` past `i64`.
    pub fn give(&mut self, n: i64) -> Option<i64> {
        self.add(n)
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
