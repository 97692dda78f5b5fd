//! The read-write lock: RLOCK.ACQUIRE, RLOCK.RELEASE and RLOCK.RENEW with `READ` or
//! `WRITE`, on Redisson's `RReadWriteLock` layout.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::holds::{block_or_null, commit, earlier_reply, forget_session_hold, replayed_acquire};
use crate::core::args::AcquireOptions;
use crate::core::keyevents::KeyEvent;
use crate::core::lease::Lease;
use crate::core::requests::RequestKind;
use crate::core::rwlock::{check_rw_owner, hold_field, RwMode, RwRelease, RwState};
use crate::store::{self, LockKey, RequestRecord, RwPlanned, Unlock};
use crate::{config, errors, handoff, keyevents, state, stats, waiters};

/// `RLOCK.ACQUIRE key owner READ|WRITE [LEASE ms] [BLOCK ms] [SESSION] [TOKEN] [REQ id]`
///
/// Blocked clients are served in arrival order, readers together: a reader who holds
/// nothing waits behind them even while others read, so a writer is not starved.
pub fn acquire(
    ctx: &Context,
    key: &RedisString,
    owner: &RedisString,
    mode: RwMode,
    options: &AcquireOptions,
    record: &Option<RequestRecord>,
) -> RedisResult {
    check_rw_owner(owner.as_slice()).map_err(|e| RedisError::String(e.to_string()))?;
    if let Some(reply) = replayed_acquire(ctx, key, owner, options, record)? {
        return Ok(RedisValue::Integer(reply));
    }
    let lock = store::lock_id(ctx, key);
    let waiting = !state::all_idle() && waiters::has_waiters(&lock);
    if waiting {
        handoff::serve(ctx, &lock);
    }
    let lock_key = LockKey::open(ctx, key)?;
    let reply = match lock_key.plan_rw_acquire(owner, mode, options)? {
        // Waiting would be waiting on its own read holds.
        RwPlanned::OwnReadsBlockWrite => return Ok(RedisValue::Null),
        // A newcomer queues behind those blocked here, unless the lock is kept for a
        // multi-key call that waits for it (see `handoff::kept_lock_goes_to`).
        RwPlanned::Plan(plan)
            if plan.is_newcomer()
                && waiting
                && waiters::has_waiters(&lock)
                && !handoff::kept_lock_goes_to(ctx, &lock, key, owner.as_slice()) =>
        {
            None
        }
        RwPlanned::Plan(plan) => Some(commit(ctx, &lock_key, key, owner, options, record, plan)),
        RwPlanned::Busy => None,
    };
    drop(lock_key);
    match reply {
        Some(reply) => {
            keyevents::key(ctx, KeyEvent::Acquire, key);
            if !state::all_idle() {
                handoff::watch(ctx, &lock);
                handoff::settle_new_hold(ctx, owner.as_slice(), &lock);
            }
            Ok(RedisValue::Integer(reply))
        }
        None => block_or_null(ctx, lock, owner, options),
    }
}

/// `RLOCK.RELEASE key owner READ|WRITE [REQ id]`: `1` when the owner's last hold on
/// that side went, `0` when a re-entry was undone; `NOTHELD` when it holds none.
pub fn release(
    ctx: &Context,
    key: &RedisString,
    owner: &RedisString,
    mode: RwMode,
    record: &Option<RequestRecord>,
) -> RedisResult {
    let field = hold_field(owner.as_slice(), mode);
    if let Some(reply) = earlier_reply(ctx, record, &field, RequestKind::Release)? {
        return Ok(RedisValue::Integer(reply));
    }
    let released = LockKey::open(ctx, key)?.release_rw(owner.as_slice(), mode, false)?;
    let reply = match released.release {
        RwRelease::NotHeld => return Err(errors::not_held()),
        RwRelease::Undo { .. } => 0,
        RwRelease::Last { .. } => {
            stats::RELEASES.incr();
            keyevents::key(ctx, KeyEvent::Release, key);
            forget_session_hold(ctx, key, &field);
            1
        }
    };
    if let Some(record) = record {
        let (kind, ttl) = (RequestKind::Release, config::default_lease().ms());
        record.write(ctx, kind, &field, reply, ttl);
    }
    match released.freed_by {
        Some(side) => handoff::freed_key(ctx, key, Unlock::ReadWrite(side)),
        // A writer that left its own read holds: readers blocked here may join them.
        None => handoff::serve_key(ctx, key),
    }
    Ok(RedisValue::Integer(reply))
}

/// `RLOCK.RENEW key owner READ|WRITE [LEASE ms] [REQ id]`: `1` renewed, `0` not held.
pub fn renew(
    ctx: &Context,
    key: &RedisString,
    owner: &RedisString,
    mode: RwMode,
    lease: Option<Lease>,
    record: &Option<RequestRecord>,
) -> RedisResult {
    let field = hold_field(owner.as_slice(), mode);
    if let Some(reply) = earlier_reply(ctx, record, &field, RequestKind::Renew)? {
        return Ok(RedisValue::Integer(reply));
    }
    let lease = lease.unwrap_or_else(config::default_lease);
    if !LockKey::open(ctx, key)?.renew_rw(owner, mode, lease)? {
        return Ok(RedisValue::Integer(0));
    }
    if let Some(record) = record {
        record.write(ctx, RequestKind::Renew, &field, 1, lease.ms());
    }
    if !state::all_idle() {
        handoff::watch(ctx, &store::lock_id(ctx, key));
    }
    Ok(RedisValue::Integer(1))
}

/// A RELEASE or RENEW without `READ` or `WRITE` met a read-write lock: the error says
/// which keyword this owner needs. Any other error passes through.
pub fn name_the_side(
    ctx: &Context,
    key: &RedisString,
    owner: &RedisString,
    error: RedisError,
) -> RedisError {
    if !matches!(error, RedisError::Str(message) if message == errors::READ_WRITE_LOCK) {
        return error;
    }
    let state = LockKey::open(ctx, key).and_then(|lock_key| lock_key.rw_state(owner.as_slice()));
    match state {
        Ok(RwState::Held {
            own_writes: Some(_),
            ..
        }) => RedisError::Str(errors::READ_WRITE_ADD_WRITE),
        Ok(RwState::Held {
            own_reads: Some(_), ..
        }) => RedisError::Str(errors::READ_WRITE_ADD_READ),
        _ => error,
    }
}
