//! Clients blocked on a lock: queued first come first served, handed the lock
//! the moment it frees, forgotten the moment they leave.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::commands::acquire::try_acquire;
use crate::core::args::{AcquireOptions, Wait};
use crate::core::waitlist::{LockId, WaitList, Waiter, WaiterId};
use crate::fair;
use crate::ffi::{self, BlockedClient, RawBlocked, RawCtx};
use crate::{guard, sessions, stats, timers};

/// What a blocked client is told when it is unblocked.
#[derive(Debug)]
pub enum Outcome {
    /// The acquire reply: hold count or fencing token.
    Granted(i64),
    Failed(String),
}

/// A grant on its way to a blocked client.
struct Undelivered {
    lock: LockId,
    owner: Vec<u8>,
    reply: i64,
    /// When the client's BLOCK runs out (unix ms).
    deadline: i64,
}

#[derive(Default)]
struct Registry {
    list: WaitList<BlockedClient>,
    /// Blocked-client handle -> waiter, for the timeout and disconnect callbacks.
    by_handle: HashMap<usize, WaiterId>,
    /// Handles granted a lock whose reply is not yet delivered.
    undelivered: HashMap<usize, Undelivered>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

fn with_registry<T>(f: impl FnOnce(&mut Registry) -> T) -> T {
    REGISTRY.with(|registry| f(&mut registry.borrow_mut()))
}

pub use crate::store::lock_id;

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
    deadline: i64,
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
        deadline,
        handle,
    };
    with_registry(|r| {
        let id = r.list.push(waiter);
        r.by_handle.insert(handle_id, id);
    });
    timers::watch(ctx, &lock);
    Ok(RedisValue::NoReply)
}

/// Fair waiters blocked on `lock`, oldest first, with their BLOCK deadlines.
pub fn fair_waiters(lock: &LockId) -> Vec<(Vec<u8>, i64)> {
    with_registry(|r| r.list.fair_on(lock))
}

/// The deadline of `owner`'s wait on `lock`, if it is blocked here.
pub fn blocked_deadline(lock: &LockId, owner: &[u8]) -> Option<i64> {
    with_registry(|r| r.list.find_owner(lock, owner).map(|(_, w)| w.deadline))
}

/// True when no client waits and no lock is watched anywhere.
pub fn all_idle() -> bool {
    with_registry(|r| r.list.is_empty()) && fair::tracked_none() && timers::none_armed()
}

/// Serves `key` in the current database after it was freed. Free when nothing
/// waits: fair queues, Redisson's included, are known from keyspace events.
pub fn serve_key(ctx: &Context, key: &RedisString) {
    if all_idle() {
        return;
    }
    serve(ctx, &lock_id(ctx, key));
}

/// Passes `lock`, if free, to its waiters, in the context of the caller so the
/// writes replicate with it: the fair queue's head first, then plain waiters in
/// arrival order. `ctx` must have `lock.db` selected.
pub fn serve(ctx: &Context, lock: &LockId) {
    if !is_primary(ctx) {
        return;
    }
    let fair_done = fair::is_tracked(lock) && fair::serve(ctx, lock);
    if !fair_done {
        while let Some((id, _)) = with_registry(|r| r.list.head(lock).map(|(id, _)| (id, ()))) {
            if !grant(ctx, lock, id, |_| Ok(())) {
                break;
            }
        }
    }
    timers::watch(ctx, lock);
}

/// Grants `lock` to the longest waiter of `owner`, if one is blocked here.
/// `taken` runs once the lock is granted (the fair queue drops its entry).
pub fn grant_to_owner(
    ctx: &Context,
    lock: &LockId,
    owner: &[u8],
    taken: impl FnOnce(&Context) -> Result<(), RedisError>,
) -> bool {
    match with_registry(|r| r.list.find_owner(lock, owner).map(|(id, _)| id)) {
        Some(id) => {
            // Busy or answered, the head was dealt with either way.
            grant(ctx, lock, id, taken);
            true
        }
        None => false,
    }
}

/// Tries to give `lock` to waiter `id`. False when the lock is still busy; true
/// when the waiter was answered (granted, or failed with an error).
fn grant(
    ctx: &Context,
    lock: &LockId,
    id: WaiterId,
    taken: impl FnOnce(&Context) -> Result<(), RedisError>,
) -> bool {
    let Some((owner, options, client, deadline)) = with_registry(|r| {
        r.list
            .get(id)
            .map(|w| (w.owner.clone(), w.options, w.client, w.deadline))
    }) else {
        return false;
    };
    let key = ffi::string(ctx, &lock.key);
    let owner_string = ffi::string(ctx, &owner);
    let outcome = match try_acquire(ctx, &key, &owner_string, &options) {
        Ok(RedisValue::Null) => return false,
        Ok(RedisValue::Integer(reply)) => {
            stats::HANDOFFS.incr();
            if options.session {
                sessions::record(client, lock.clone(), owner.clone());
            }
            match taken(ctx) {
                Ok(()) => Outcome::Granted(reply),
                Err(error) => Outcome::Failed(error.to_string()),
            }
        }
        Ok(other) => Outcome::Failed(format!("ERR unexpected acquire reply {other:?}")),
        Err(error) => Outcome::Failed(error.to_string()),
    };
    let waiter = with_registry(|r| {
        let waiter = r.list.remove(id)?;
        r.by_handle.remove(&waiter.handle.id());
        if let Outcome::Granted(reply) = outcome {
            let undelivered = Undelivered {
                lock: lock.clone(),
                owner: owner.clone(),
                reply,
                deadline,
            };
            r.undelivered.insert(waiter.handle.id(), undelivered);
        }
        Some(waiter)
    });
    if let Some(waiter) = waiter {
        waiter.handle.unblock(Some(outcome));
    }
    true
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

/// Ends a waiter that left; a fair one also leaves the queue, on the next turn.
/// The lock's timer goes with its last waiter, so nothing keeps the module loaded.
fn forget(ctx: &Context, waiter: Waiter<BlockedClient>) {
    if waiter.options.fair {
        timers::defer_leave(ctx, waiter.lock.clone(), waiter.owner.clone());
    }
    let lock = waiter.lock.clone();
    waiter.handle.unblock::<Outcome>(None);
    if !has_waiters(&lock) && !fair::is_tracked(&lock) {
        timers::cancel(ctx, &lock);
    }
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
            forget(&ctx, waiter);
        }
        ctx.reply(Ok(RedisValue::Null));
    });
    raw::REDISMODULE_OK as c_int
}

extern "C" fn on_disconnect(ctx: RawCtx, handle: RawBlocked) {
    guard::callback("blocked disconnect", || {
        let handle_id = handle as usize;
        if let Some(waiter) = leave(handle_id) {
            forget(&Context::new(ctx), waiter);
            return;
        }
        let Some(grant) = with_registry(|r| r.undelivered.remove(&handle_id)) else {
            return;
        };
        let ctx = Context::new(ctx);
        if ffi::now_ms() >= grant.deadline - 1 {
            // Redis 7.0 skips the timeout callback of a client granted in the same
            // turn its BLOCK ran out, clears it, and calls this instead. The client
            // is alive and its grant stands: tell it here, or nobody ever will.
            ctx.reply(Ok(RedisValue::Integer(grant.reply)));
        } else {
            // Granted, but the client left before hearing it: give the hold back.
            timers::defer_release(&ctx, grant.lock, grant.owner, false);
        }
    });
}

/// Locks the module keeps state for: waiters, session holds.
pub fn tracked_locks() -> usize {
    let mut locks: HashSet<LockId> = locks_with_waiters(None).into_iter().collect();
    locks.extend(sessions::locks());
    locks.extend(fair::tracked());
    locks.len()
}
