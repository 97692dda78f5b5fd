//! The fencing counter `redisson_lock_token:{K}`: an integer string with no TTL,
//! bumped each time the lock goes from free to held while fencing is in use on it.

use redis_module::{Context, NotifyEvent, RedisError, RedisString};

use super::{announce, helper_string, lock_id};
use crate::core::fences::ReentryToken;
use crate::core::integer::parse_i64;
use crate::core::keys::TOKEN_PREFIX;
use crate::core::waitlist::LockId;
use crate::errors;
use crate::ffi::{self, Key, KeyKind};
use crate::state;

pub struct Fence<'a> {
    ctx: &'a Context,
    name: RedisString,
    key: Key,
    value: Option<i64>,
    lock: LockId,
}

impl<'a> Fence<'a> {
    /// Whether lock `lock_name` has a fencing counter: a keyspace lookup (see
    /// `core::fences` for why it is not remembered).
    pub fn in_use(ctx: &Context, lock_name: &RedisString) -> bool {
        let name = helper_string(ctx, TOKEN_PREFIX, lock_name.as_slice());
        ffi::key_exists(ctx, &name)
    }

    /// The newest token of lock `lock_name`, read without opening it for writing:
    /// `None` where the lock has no counter.
    pub fn newest(ctx: &Context, lock_name: &RedisString) -> Result<Option<i64>, RedisError> {
        let name = helper_string(ctx, TOKEN_PREFIX, lock_name.as_slice());
        let key = Key::open_readonly(ctx, &name);
        match key.kind() {
            KeyKind::Empty => Ok(None),
            KeyKind::String => match parse_i64(&key.string_value()) {
                Some(n) if n >= 0 => Ok(Some(n)),
                _ => Err(RedisError::Str(errors::FENCE_NOT_INTEGER)),
            },
            _ => Err(errors::wrong_type()),
        }
    }

    /// Opens and checks the counter of lock `lock_name`.
    pub fn open(ctx: &'a Context, lock_name: &RedisString) -> Result<Self, RedisError> {
        let name = helper_string(ctx, TOKEN_PREFIX, lock_name.as_slice());
        let key = Key::open_writable(ctx, &name);
        let value = match key.kind() {
            KeyKind::Empty => None,
            KeyKind::String => match parse_i64(&key.string_value()) {
                Some(n) if n >= 0 => Some(n),
                _ => return Err(RedisError::Str(errors::FENCE_NOT_INTEGER)),
            },
            _ => return Err(errors::wrong_type()),
        };
        if value.is_none() {
            super::check_slot_may_grow(ctx, lock_name.as_slice(), &[name.as_slice()])?;
        }
        let lock = lock_id(ctx, lock_name);
        if value.is_none() {
            // Deleted since the module handed a token out from it.
            state::with(|s| s.fences.forget(&lock));
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

    /// The token of the current hold, if fencing is in use.
    pub fn current(&self) -> Option<i64> {
        self.value
    }

    /// The token the next free-to-held transition will get, checked for overflow.
    pub fn next(&self) -> Result<i64, RedisError> {
        self.value
            .unwrap_or(0)
            .checked_add(1)
            .ok_or(RedisError::Str(errors::FENCE_OVERFLOW))
    }

    /// What a `TOKEN` re-entry by `owner` replies: the hold's token while it went
    /// to `owner` alone, else a new one.
    pub fn reentry_token(&self, owner: &RedisString) -> ReentryToken {
        state::with(|s| {
            s.fences
                .reentry_token(&self.lock, owner.as_slice(), self.value)
        })
    }

    /// Stores `token` as the counter's value, handed to `owner`'s hold.
    pub fn store(&mut self, token: i64, owner: &RedisString) {
        self.key.string_set_int(self.ctx, token);
        ffi::replicate_key_int(self.ctx, c"SET", &self.name, token);
        announce(self.ctx, NotifyEvent::STRING, "set", &self.name);
        self.value = Some(token);
        let lock = self.lock.clone();
        state::with(|s| s.fences.granted(lock, owner.as_slice(), token));
    }
}
