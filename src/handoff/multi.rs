//! Multi-key calls (`RLOCK.MACQUIRE`): every lock or none, and the locks kept free for
//! the call at the head of their line while it waits for its others.

use redis_module::{Context, RedisString};

use super::{settle_later, Grant};
use crate::config;
use crate::core::keyevents::KeyEvent;
use crate::core::requests::RequestKind;
use crate::core::waitlist::{BlockedReply, LockId, WaiterId};
use crate::store::{self, RequestRecord, TakeAll};
use crate::waiters::WaiterView;
use crate::{deadlock, ffi, keyevents, state, stats, waiters};

/// Whether free `lock` is kept for its longest waiter, a multi-key call that waits for
/// other locks too, rather than taken by `owner`: not when `owner` waiting for that call
/// would close a cycle of waits (it holds, or waits for who holds, one of the call's
/// other locks), which keeping the lock would make a deadlock.
pub fn kept_for_multi(ctx: &Context, lock: &LockId, key: &RedisString, owner: &[u8]) -> bool {
    kept_lock(ctx, lock, key) && !deadlock::wait_closes_a_cycle(ctx, owner, lock)
}

/// Whether `lock`, free and kept for the multi-key call at the head of its line, goes to
/// `owner` all the same: it waiting for that call would close a cycle of waits (see
/// `kept_for_multi`).
pub fn kept_lock_goes_to(ctx: &Context, lock: &LockId, key: &RedisString, owner: &[u8]) -> bool {
    kept_lock(ctx, lock, key) && deadlock::wait_closes_a_cycle(ctx, owner, lock)
}

/// Whether `lock` is free with a multi-key call first in its line: kept for that call.
fn kept_lock(ctx: &Context, lock: &LockId, key: &RedisString) -> bool {
    waiters::head_is_multi(lock) && !ffi::key_exists(ctx, key)
}

/// Gives multi-key waiter `id` every lock it waits for, or none (see `store::take_all`).
/// A lock it does not hold yet is taken only if it is that lock's longest waiter, so
/// waiters are served in arrival order on every lock, and the oldest waiter of all,
/// first in every line it stands in, is never held back: no deadlock.
/// `past`: a lock kept for the multi-key call ahead of `id`, given to `id` all the same
/// (see `settle::give_kept_lock`).
pub(super) fn grant_all(
    ctx: &Context,
    id: WaiterId,
    waiter: WaiterView,
    past: Option<&LockId>,
) -> Grant {
    let locks = waiters::locks_of(id);
    let keys: Vec<RedisString> = locks.iter().map(|l| ffi::string(ctx, &l.key)).collect();
    let owner = ffi::string(ctx, &waiter.owner);
    // A `REQ` call records its grant on the first key it named, as a direct one does.
    let record = match (waiter.options.req, keys.first()) {
        (Some(req), Some(first)) => Some(RequestRecord::new(ctx, first, &req)),
        _ => None,
    };
    // The same request, granted before and still holding every lock (sent again while
    // its hold stood): answered the same, with no second hold.
    if let Some(record) = &record {
        let kind = RequestKind::MultiAcquire;
        let still_held = || store::holds_all(ctx, &keys, &owner);
        if let Some(answer) = super::replayed(ctx, record, kind, &waiter.owner, still_held) {
            waiters::answer(ctx, id, answer);
            return Grant::Failed;
        }
    }
    // A lock it does not hold yet: when first in its line, or when kept for a multi-key
    // call ahead that waits for this one (it would wait for that call forever).
    let may_take_new = |i: usize| {
        waiters::is_head(&locks[i], id)
            || Some(&locks[i]) == past
            || kept_lock_goes_to(ctx, &locks[i], &keys[i], &waiter.owner)
    };
    match store::take_all(ctx, &keys, &owner, &waiter.options, may_take_new) {
        Ok(TakeAll::Busy) => return Grant::Busy,
        Ok(TakeAll::Taken) => {}
        Err(error) => {
            waiters::answer(ctx, id, BlockedReply::Failed(error.to_string()));
            return Grant::Failed;
        }
    }
    let reply = locks.len() as i64;
    if let Some(record) = &record {
        let lease = waiter.options.lease.unwrap_or_else(config::default_lease);
        let kind = RequestKind::MultiAcquire;
        record.write(ctx, kind, &waiter.owner, reply, lease.ms());
    }
    stats::HANDOFFS.incr();
    for key in &keys {
        keyevents::key(ctx, KeyEvent::Acquire, key);
    }
    if waiter.options.session {
        state::with(|s| {
            for lock in &locks {
                s.sessions
                    .record(waiter.client, lock.clone(), waiter.owner.clone());
            }
        });
    }
    waiters::answer(ctx, id, BlockedReply::Granted(reply));
    // The other locks' timers now follow their new lease.
    for lock in &locks[1..] {
        super::watch(ctx, lock);
    }
    super::watch(ctx, &locks[0]);
    for lock in &locks {
        settle_later(&waiter.owner, lock);
    }
    Grant::Granted
}
