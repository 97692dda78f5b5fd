//! Clients blocked on a lock: queued first come first served, handed the lock
//! the moment it frees, forgotten the moment they leave.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisResult, RedisString, RedisValue};

use crate::commands::acquire::try_acquire;
use crate::core::args::{AcquireOptions, Wait};
use crate::core::waitlist::{LockId, WaitList, Waiter, WaiterId};
use crate::ffi::{self, BlockedClient, RawBlocked, RawCtx};
use crate::{guard, sessions, stats, timers};

/// What a blocked client is told when it is unblocked.
#[derive(Debug)]
pub enum Outcome {
    /// The acquire reply: hold count or fencing token.
    Granted(i64),
    Failed(String),
}

#[derive(Default)]
struct Registry {
    list: WaitList<BlockedClient>,
    /// Blocked-client handle -> waiter, for the timeout and disconnect callbacks.
    by_handle: HashMap<usize, WaiterId>,
    /// Handles granted a lock whose reply is not yet delivered, with the hold.
    undelivered: HashMap<usize, (LockId, Vec<u8>)>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    REGISTRY.with(|registry| f(&mut registry.borrow_mut()))
}

pub fn lock_id(ctx: &Context, key: &RedisString) -> LockId {
    LockId {
        db: ffi::selected_db(ctx),
        key: key.as_slice().to_vec(),
    }
}

pub fn has_waiters(lock: &LockId) -> bool {
    with_registry(|r| r.list.has_waiters(lock))
}

/// How many clients wait on `key` in the current database.
pub fn blocked_on(ctx: &Context, key: &RedisString) -> usize {
    let lock = lock_id(ctx, key);
    with_registry(|r| r.list.waiting_on(&lock))
}

pub fn blocked_total() -> usize {
    with_registry(|r| r.list.len())
}

/// Locks with waiters, in `db` or everywhere.
pub fn locks_with_waiters(db: Option<i32>) -> Vec<LockId> {
    with_registry(|r| r.list.locks_in(db))
}

/// Whether `BLOCK` may block here: not inside MULTI, a script or a function.
pub fn may_block(ctx: &Context) -> bool {
    let refused = raw::REDISMODULE_CTX_FLAGS_MULTI
        | raw::REDISMODULE_CTX_FLAGS_LUA
        | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING;
    ffi::context_flags(ctx) & refused == 0
}

pub fn is_primary(ctx: &Context) -> bool {
    ffi::context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_MASTER != 0
}

/// Blocks the calling client at the tail of `lock`'s line. The reply comes later.
pub fn block(
    ctx: &Context,
    lock: LockId,
    owner: &RedisString,
    options: AcquireOptions,
    wait: Wait,
) -> RedisResult {
    let timeout_ms = match wait {
        Wait::Forever => 0,
        Wait::For(ms) => ms,
    };
    let handle =
        BlockedClient::block::<Outcome>(ctx, on_reply, on_timeout, on_disconnect, timeout_ms);
    let handle_id = handle.id();
    let waiter = Waiter {
        lock: lock.clone(),
        owner: owner.as_slice().to_vec(),
        options,
        client: ffi::client_id(ctx),
        handle,
    };
    with_registry(|r| {
        let id = r.list.push(waiter);
        r.by_handle.insert(handle_id, id);
    });
    timers::watch_lease(ctx, &lock);
    Ok(RedisValue::NoReply)
}

/// Passes `lock`, if free, to its waiters in arrival order, in the context of
/// the caller so the writes replicate with it. `ctx` must have `lock.db` selected.
pub fn serve(ctx: &Context, lock: &LockId) {
    if !is_primary(ctx) {
        return;
    }
    let key = ffi::string(ctx, &lock.key);
    loop {
        let head = with_registry(|r| {
            r.list
                .head(lock)
                .map(|(id, w)| (id, w.owner.clone(), w.options, w.client))
        });
        let Some((id, owner, options, client)) = head else {
            break;
        };
        let owner_string = ffi::string(ctx, &owner);
        let outcome = match try_acquire(ctx, &key, &owner_string, &options) {
            Ok(RedisValue::Null) => break,
            Ok(RedisValue::Integer(reply)) => {
                stats::HANDOFFS.incr();
                if options.session {
                    sessions::record(client, lock.clone(), owner.clone());
                }
                Outcome::Granted(reply)
            }
            Ok(other) => Outcome::Failed(format!("ERR unexpected acquire reply {other:?}")),
            Err(error) => Outcome::Failed(error.to_string()),
        };
        let granted = matches!(outcome, Outcome::Granted(_));
        let waiter = with_registry(|r| {
            let waiter = r.list.remove(id)?;
            r.by_handle.remove(&waiter.handle.id());
            if granted {
                r.undelivered
                    .insert(waiter.handle.id(), (lock.clone(), owner.clone()));
            }
            Some(waiter)
        });
        if let Some(waiter) = waiter {
            waiter.handle.unblock(Some(outcome));
        }
    }
    timers::watch_lease(ctx, lock);
}

/// Unblocks every waiter with `error`: the server stopped being a primary.
pub fn fail_all(error: &str) {
    let waiters = with_registry(|r| {
        r.by_handle.clear();
        r.list.drain()
    });
    for waiter in waiters {
        waiter
            .handle
            .unblock(Some(Outcome::Failed(error.to_string())));
    }
}

/// Takes a waiter out of line by its handle, if it is still waiting.
fn leave(handle_id: usize) -> Option<Waiter<BlockedClient>> {
    with_registry(|r| {
        let id = r.by_handle.remove(&handle_id)?;
        r.list.remove(id)
    })
}

fn reply_outcome(ctx: &Context, outcome: &Outcome) {
    match outcome {
        Outcome::Granted(reply) => ctx.reply(Ok(RedisValue::Integer(*reply))),
        Outcome::Failed(error) => ctx.reply_error_string(error),
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
        with_registry(|r| r.undelivered.remove(&handle_id));
        match ffi::blocked_outcome::<Outcome>(&ctx) {
            Some(outcome) => reply_outcome(&ctx, outcome),
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
        // Granted in the same turn the wait ran out: the grant stands.
        if let Some(outcome) = ffi::blocked_outcome::<Outcome>(&ctx) {
            with_registry(|r| r.undelivered.remove(&handle_id));
            reply_outcome(&ctx, outcome);
            return;
        }
        if let Some(waiter) = leave(handle_id) {
            waiter.handle.unblock::<Outcome>(None);
        }
        ctx.reply(Ok(RedisValue::Null));
    });
    raw::REDISMODULE_OK as c_int
}

extern "C" fn on_disconnect(ctx: RawCtx, handle: RawBlocked) {
    guard::callback("blocked disconnect", || {
        let handle_id = handle as usize;
        if let Some(waiter) = leave(handle_id) {
            waiter.handle.unblock::<Outcome>(None);
            return;
        }
        // Granted, but the client left before hearing it: give the hold back.
        if let Some((lock, owner)) = with_registry(|r| r.undelivered.remove(&handle_id)) {
            timers::defer_release(&Context::new(ctx), lock, owner, false);
        }
    });
}

/// Locks the module keeps state for: waiters, session holds.
pub fn tracked_locks() -> usize {
    let mut locks: HashSet<LockId> = locks_with_waiters(None).into_iter().collect();
    locks.extend(sessions::locks());
    locks.len()
}
