//! All-or-nothing over several reentrant locks in one database (`RLOCK.MACQUIRE`,
//! `RLOCK.MRELEASE`): every check on every key comes before the first write.

use redis_module::{Context, RedisError, RedisString};

use super::lock::LockKey;
use crate::config;
use crate::core::args::AcquireOptions;
use crate::core::hold::Release;
use crate::errors;

/// What an all-or-nothing acquire found.
#[derive(Debug, PartialEq, Eq)]
pub enum TakeAll {
    /// Every lock was taken (or re-entered); nothing else was.
    Taken,
    /// Some lock is held by someone else, or a newcomer would pass waiters: nothing taken.
    Busy,
}

/// Takes every lock in `keys` for `owner`, or none. A key `owner` does not hold yet is
/// taken only if `may_take_new(i)` says its waiters allow it (arrival order). The first
/// error (a key that is not a lock, a read-write lock) is returned with nothing written.
pub fn take_all(
    ctx: &Context,
    keys: &[RedisString],
    owner: &RedisString,
    options: &AcquireOptions,
    may_take_new: impl Fn(usize) -> bool,
) -> Result<TakeAll, RedisError> {
    let mut planned = Vec::with_capacity(keys.len());
    for (i, key) in keys.iter().enumerate() {
        let lock_key = LockKey::open(ctx, key)?;
        match lock_key.plan_acquire(owner, options)? {
            Some(plan) if !plan.is_newcomer() || may_take_new(i) => planned.push((lock_key, plan)),
            _ => return Ok(TakeAll::Busy),
        }
    }
    let lease = options.lease.unwrap_or_else(config::default_lease);
    for (lock_key, plan) in planned {
        lock_key.commit_acquire(owner, plan, lease);
    }
    Ok(TakeAll::Taken)
}

/// Whether `owner` holds every lock in `keys` (a `REQ` replay of `RLOCK.MACQUIRE` stands
/// only then). A key that is not a reentrant lock is its error.
pub fn holds_all(
    ctx: &Context,
    keys: &[RedisString],
    owner: &RedisString,
) -> Result<bool, RedisError> {
    for key in keys {
        if !LockKey::open(ctx, key)?.is_held_by(owner)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Releases one hold of `owner` on every lock in `keys`, or none: `NOTHELD` when it
/// does not hold one of them. Returns, per key, whether the lock is free now.
pub fn release_all(
    ctx: &Context,
    keys: &[RedisString],
    owner: &RedisString,
) -> Result<Vec<bool>, RedisError> {
    for key in keys {
        if !LockKey::open(ctx, key)?.is_held_by(owner)? {
            return Err(errors::not_held());
        }
    }
    let mut freed = Vec::with_capacity(keys.len());
    for key in keys {
        let released = LockKey::open(ctx, key)?.release(owner, false)?;
        freed.push(matches!(released, Release::Last { lock_freed: true }));
    }
    Ok(freed)
}
