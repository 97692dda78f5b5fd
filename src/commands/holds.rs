//! What every acquire and release does around the hold itself, whichever the lock:
//! record a SESSION hold and a `REQ` id, block a caller that did not get it.

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::core::args::AcquireOptions;
use crate::core::fair::queue_deadline;
use crate::core::requests::RequestKind;
use crate::core::waitlist::LockId;
use crate::store::{self, AcquirePlan, LockKey, RequestRecord};
use crate::{config, ffi, guard, handoff, state, waiters};

/// Writes a checked acquire and records a SESSION hold and a `REQ` id. Returns the reply.
pub fn commit(
    ctx: &Context,
    lock_key: &LockKey,
    key: &RedisString,
    owner: &RedisString,
    options: &AcquireOptions,
    record: &Option<RequestRecord>,
    plan: AcquirePlan,
) -> i64 {
    let lease = options.lease.unwrap_or_else(config::default_lease);
    let reply = lock_key.commit_acquire(owner, plan, lease);
    if let Some(record) = record {
        record.write(
            ctx,
            RequestKind::Acquire,
            owner.as_slice(),
            reply,
            lease.ms(),
        );
    }
    if options.session {
        let lock = store::lock_id(ctx, key);
        let client = ffi::client_id(ctx);
        let field = waiters::hold_field_of(owner.as_slice(), options.mode);
        state::with(|s| s.sessions.record(client, lock, field));
    }
    reply
}

/// The caller did not get the lock: it blocks at the tail of the line with `BLOCK`
/// (where blocking is possible), or gets null.
pub fn block_or_null(
    ctx: &Context,
    lock: LockId,
    owner: &RedisString,
    options: &AcquireOptions,
) -> RedisResult {
    match options.block {
        Some(wait) if ffi::may_block(ctx) => {
            let deadline = queue_deadline(ffi::now_ms(), Some(wait), 0);
            let reply = waiters::block(ctx, lock.clone(), owner, *options, wait, deadline);
            // The lease timer hands the lock over the moment the lease ends. The client
            // is blocked now: a panic past here must not add an error reply to it.
            guard::callback("RLOCK.ACQUIRE after blocking", || {
                handoff::watch(ctx, &lock)
            });
            reply
        }
        _ => Ok(RedisValue::Null),
    }
}

/// The hold recorded as `field` (see `waiters::hold_field_of`) on `key` in the current
/// database was released.
pub fn forget_session_hold(ctx: &Context, key: &RedisString, field: &[u8]) {
    if state::with(|s| s.sessions.is_empty()) {
        return;
    }
    let lock = store::lock_id(ctx, key);
    state::with(|s| s.sessions.forget_hold(&lock, field));
}
