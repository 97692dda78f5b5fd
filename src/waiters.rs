//! Clients blocked on a lock: queued first come first served, answered exactly
//! once, forgotten the moment they leave. Which waiter gets the lock, and when,
//! is the hand-off's business; this file keeps the line and the handles.

use std::os::raw::c_int;

use redis_module::{raw, Context, RedisResult, RedisString, RedisValue};

use crate::core::args::{AcquireOptions, Wait};
use crate::core::deferred::Work;
use crate::core::shrink_map;
use crate::core::waitlist::{BlockedReply, LockId, Waiter, WaiterId};
use crate::ffi::{self, BlockedClient, RawBlocked, RawCtx};
use crate::state::{self, Undelivered};
use crate::{deferred, guard, store, timers};

/// What the hand-off needs to know of a waiter.
pub struct WaiterView {
    pub owner: Vec<u8>,
    pub options: AcquireOptions,
    /// The connection that waits.
    pub client: u64,
    /// When its BLOCK runs out (unix ms).
    pub deadline: i64,
}

/// Blocks the calling client at the tail of `lock`'s line. The reply comes later.
pub fn block(
    ctx: &Context,
    lock: LockId,
    owner: &RedisString,
    options: AcquireOptions,
    wait: Wait,
    deadline: i64,
) -> RedisResult {
    let timeout_ms = match wait {
        Wait::Forever => 0,
        Wait::For(ms) => ms,
    };
    let handle = BlockedClient::block(ctx, on_reply, on_timeout, on_disconnect, timeout_ms);
    let handle_id = handle.id();
    let waiter = Waiter {
        lock,
        owner: owner.as_slice().to_vec(),
        options,
        client: ffi::client_id(ctx),
        deadline,
        handle,
    };
    state::with(|s| {
        let id = s.waiters.push(waiter);
        s.waiter_by_handle.insert(handle_id, id);
    });
    Ok(RedisValue::NoReply)
}

pub fn has_waiters(lock: &LockId) -> bool {
    state::with(|s| s.waiters.has_waiters(lock))
}

/// How many clients wait on `key` in the current database.
pub fn blocked_on(ctx: &Context, key: &RedisString) -> usize {
    let lock = store::lock_id(ctx, key);
    state::with(|s| s.waiters.waiting_on(&lock))
}

pub fn blocked_total() -> usize {
    state::with(|s| s.waiters.len())
}

/// The longest waiter on `lock`.
pub fn head(lock: &LockId) -> Option<WaiterId> {
    state::with(|s| s.waiters.head(lock).map(|(id, _)| id))
}

/// The longest waiter of `owner` on `lock`, if it is blocked here.
pub fn find_owner(lock: &LockId, owner: &[u8]) -> Option<WaiterId> {
    state::with(|s| s.waiters.find_owner(lock, owner).map(|(id, _)| id))
}

/// The deadline of `owner`'s wait on `lock`, if it is blocked here.
pub fn blocked_deadline(lock: &LockId, owner: &[u8]) -> Option<i64> {
    state::with(|s| s.waiters.find_owner(lock, owner).map(|(_, w)| w.deadline))
}

/// Fair waiters blocked on `lock`, oldest first, with their BLOCK deadlines.
pub fn fair_waiters(lock: &LockId) -> Vec<(Vec<u8>, i64)> {
    state::with(|s| s.waiters.fair_on(lock))
}

pub fn view(id: WaiterId) -> Option<WaiterView> {
    state::with(|s| {
        s.waiters.get(id).map(|w| WaiterView {
            owner: w.owner.clone(),
            options: w.options,
            client: w.client,
            deadline: w.deadline,
        })
    })
}

/// Takes waiter `id` out of line and answers it. A grant is remembered until its
/// reply is delivered, so a client that leaves first gives the hold back.
pub fn answer(id: WaiterId, reply: BlockedReply) {
    let waiter = state::with(|s| {
        let waiter = s.waiters.remove(id)?;
        s.waiter_by_handle.remove(&waiter.handle.id());
        shrink_map(&mut s.waiter_by_handle);
        if let BlockedReply::Granted(granted) = reply {
            let undelivered = Undelivered {
                lock: waiter.lock.clone(),
                owner: waiter.owner.clone(),
                reply: granted,
                client: waiter.client,
                session: waiter.options.session,
                deadline: waiter.deadline,
            };
            s.undelivered.insert(waiter.handle.id(), undelivered);
        }
        Some(waiter)
    });
    if let Some(waiter) = waiter {
        waiter.handle.unblock(reply);
    }
}

/// Takes a waiter out of line by its handle, if it is still waiting.
fn leave(handle_id: usize) -> Option<Waiter<BlockedClient<BlockedReply>>> {
    state::with(|s| {
        let id = s.waiter_by_handle.remove(&handle_id)?;
        shrink_map(&mut s.waiter_by_handle);
        s.waiters.remove(id)
    })
}

/// A waiter that left without an answer. A fair one also leaves the queue, on the
/// next turn. The lock's timer goes with its last waiter.
fn forget(ctx: &Context, waiter: Waiter<BlockedClient<BlockedReply>>) {
    let lock = waiter.lock.clone();
    if waiter.options.fair {
        deferred::push(
            ctx,
            Work::Leave {
                lock: lock.clone(),
                owners: vec![waiter.owner.clone()],
            },
        );
    }
    // Dropping the handle unblocks it with no reply: Redis has answered the client.
    drop(waiter);
    let idle = state::with(|s| !s.waiters.has_waiters(&lock) && !s.fair_queues.contains(&lock));
    if idle {
        timers::cancel(ctx, &lock);
    }
}

fn reply(ctx: &Context, reply: &BlockedReply) {
    match reply {
        BlockedReply::Granted(value) => ctx.reply(Ok(RedisValue::Integer(*value))),
        BlockedReply::Failed(error) => ctx.reply_error_string(error),
    };
}

extern "C" fn on_reply(
    ctx: RawCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    guard::callback("blocked reply", || {
        let ctx = Context::new(ctx);
        let handle_id = ffi::handle_id_of(&ctx);
        state::with(|s| {
            s.undelivered.remove(&handle_id);
            shrink_map(&mut s.undelivered);
        });
        match ffi::blocked_outcome::<BlockedReply>(&ctx) {
            Some(answer) => reply(&ctx, answer),
            None => {
                ctx.reply(Ok(RedisValue::Null));
            }
        }
    });
    raw::REDISMODULE_OK as c_int
}

extern "C" fn on_timeout(
    ctx: RawCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    guard::callback("blocked timeout", || {
        let ctx = Context::new(ctx);
        let handle_id = ffi::handle_id_of(&ctx);
        // Answered in the same turn the wait ran out: the answer stands.
        if let Some(answer) = ffi::blocked_outcome::<BlockedReply>(&ctx) {
            state::with(|s| s.undelivered.remove(&handle_id));
            reply(&ctx, answer);
            return;
        }
        if let Some(waiter) = leave(handle_id) {
            forget(&ctx, waiter);
        }
        ctx.reply(Ok(RedisValue::Null));
    });
    raw::REDISMODULE_OK as c_int
}

extern "C" fn on_disconnect(ctx: RawCtx, handle: RawBlocked) {
    guard::callback("blocked disconnect", || {
        let handle_id = handle as usize;
        let ctx = Context::new(ctx);
        if let Some(waiter) = leave(handle_id) {
            forget(&ctx, waiter);
            return;
        }
        let Some(grant) = state::with(|s| s.undelivered.remove(&handle_id)) else {
            return;
        };
        let gone = state::with(|s| s.disconnecting == Some(grant.client));
        if !gone && ffi::now_ms() >= grant.deadline - 1 {
            // The client is alive, and its BLOCK ran out in the same turn it was
            // granted: Redis 7.0 then skips the timeout callback, calls this one,
            // and never calls the reply callback. Its grant stands: tell it here,
            // or nobody ever will. (Valkey serves the reply callback instead.)
            ctx.reply(Ok(RedisValue::Integer(grant.reply)));
        } else if !(gone && grant.session) {
            // Granted, but the client left before hearing it, or the server already
            // answered it (CLIENT UNBLOCK ... ERROR): give the hold back. A SESSION
            // hold of a client that is gone goes with its session's other holds.
            deferred::push(
                &ctx,
                Work::Release {
                    lock: grant.lock,
                    owner: grant.owner,
                    all: false,
                },
            );
        }
    });
}
