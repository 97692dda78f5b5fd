//! What every acquire and release does around the hold itself, whichever the lock:
//! record a SESSION hold and a `REQ` id, block a caller that did not get it.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::core::args::AcquireOptions;
use crate::core::fair::queue_deadline;
use crate::core::requests::{RequestId, RequestKind};
use crate::core::waitlist::LockId;
use crate::store::{self, AcquirePlan, LockKey, RequestRecord};
use crate::waiters::WaitFor;
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
    if record.is_none() && !options.session {
        return reply;
    }
    // Records and sessions name the hold by its field: a read-write lock's side counts.
    let field = waiters::hold_field_of(owner.as_slice(), options.mode);
    if let Some(record) = record {
        record.write(ctx, RequestKind::Acquire, &field, reply, lease.ms());
    }
    if options.session {
        let lock = store::lock_id(ctx, key);
        let client = ffi::client_id(ctx);
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
            handoff::settle_new_wait(ctx, owner.as_slice(), std::slice::from_ref(&lock))?;
            let deadline = queue_deadline(ffi::now_ms(), Some(wait), 0);
            let what = WaitFor::hold(lock.clone(), owner.as_slice(), *options);
            let reply = waiters::block(ctx, what, wait, deadline);
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

/// The record of a call made with `REQ id`.
pub fn request_record(
    ctx: &Context,
    key: &RedisString,
    id: Option<RequestId>,
) -> Option<RequestRecord> {
    id.map(|id| RequestRecord::new(ctx, key, &id))
}

/// The reply of the same call made before with this `REQ id` by the hold named `field`
/// (see `waiters::hold_field_of`), which is then not applied again; `None` when there
/// was none (or no id).
pub fn earlier_reply(
    ctx: &Context,
    record: &Option<RequestRecord>,
    field: &[u8],
    kind: RequestKind,
) -> Result<Option<i64>, RedisError> {
    match record {
        Some(record) => record.earlier_reply(ctx, kind, field),
        None => Ok(None),
    }
}

/// The reply of the same acquire made before with this `REQ id`, while `owner` still
/// holds the lock. A hold given back since (its SESSION connection closed, its grant
/// never reached the client, its lease ran out) makes the call new again. A SESSION
/// hold moves to the connection that sent the call again.
pub fn replayed_acquire(
    ctx: &Context,
    key: &RedisString,
    owner: &RedisString,
    options: &AcquireOptions,
    record: &Option<RequestRecord>,
) -> Result<Option<i64>, RedisError> {
    if record.is_none() {
        return Ok(None);
    }
    let field = waiters::hold_field_of(owner.as_slice(), options.mode);
    let Some(reply) = earlier_reply(ctx, record, &field, RequestKind::Acquire)? else {
        return Ok(None);
    };
    if !LockKey::open(ctx, key)?.holds(owner, options.mode)? {
        return Ok(None);
    }
    if options.session {
        let lock = store::lock_id(ctx, key);
        let client = ffi::client_id(ctx);
        state::with(|s| s.sessions.record(client, lock, field));
    }
    Ok(Some(reply))
}
