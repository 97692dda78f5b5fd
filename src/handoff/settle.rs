//! Deadlock verdicts (see `crate::deadlock`), acted on: a wait that would close a cycle
//! of holds is refused, a hold that closes one refuses the youngest blocked call of it,
//! and a cycle through a lock kept free for a multi-key call is broken by giving that
//! lock to the call waiting behind it.

use redis_module::{Context, RedisError};

use super::{settle_later, Grant};
use crate::core::waitlist::{LockId, WaiterId};
use crate::deadlock::{self, Refusal, Verdict};
use crate::store::FairQueue;
use crate::{ffi, state, waiters};

/// How many cycles one settling breaks at most before it stops looking.
const MAX_SETTLED: usize = 16;

/// `owner` is about to block on `locks`: `DEADLOCK` if that would close a cycle of
/// holds, before anything is written or queued. A cycle through a lock kept free for a
/// multi-key call is broken by giving that lock to the call waiting behind it.
pub fn settle_new_wait(ctx: &Context, owner: &[u8], locks: &[LockId]) -> Result<(), RedisError> {
    for _ in 0..MAX_SETTLED {
        match deadlock::judge_new_wait(ctx, owner, locks) {
            Verdict::Clear => return Ok(()),
            Verdict::Yield { to, otherwise } => {
                if !give_kept_lock_to_one(ctx, &to) {
                    let Some(otherwise) = otherwise else {
                        return Ok(());
                    };
                    deadlock::count_refusal(ctx, &otherwise.lock);
                    return Err(RedisError::String(otherwise.error));
                }
            }
            Verdict::Refuse(refusal) => {
                deadlock::count_refusal(ctx, &refusal.lock);
                return Err(RedisError::String(refusal.error));
            }
        }
        // The lock just given away may close cycles of its own.
        settle_granted(ctx);
    }
    Ok(())
}

/// `owner` was given a hold on `lock`: when it also waits here and others wait for
/// `lock`, the hold may close a cycle (see `settle_owner`).
pub fn settle_new_hold(ctx: &Context, owner: &[u8], lock: &LockId) {
    settle_later(owner, lock);
    settle_granted(ctx);
}

/// Settles the holds noted by `super::settle_later`, once no serve is under way: readers granted
/// together in one turn are all holders before any of them is judged (judged one by one,
/// the first would seem to wait for the others still in line). Runs one at a time, and
/// holds its own settling grants make are noted and settled by the same loop, not by
/// nested calls.
pub(super) fn settle_granted(ctx: &Context) {
    let start = state::with(|s| {
        let start = !s.settling && s.serve_depth == 0 && !s.granted_to_settle.is_empty();
        s.settling |= start;
        start
    });
    if !start {
        return;
    }
    let _settling = Settling;
    while let Some((owner, lock)) = state::with(|s| s.granted_to_settle.pop()) {
        if waiters::owner_waits(&owner) && waiters::has_waiters(&lock) {
            settle_owner(ctx, &owner);
        }
    }
}

/// `settle_granted` is running while alive; done on drop, a panic included.
struct Settling;

impl Drop for Settling {
    fn drop(&mut self) {
        state::with(|s| {
            s.settling = false;
            s.granted_to_settle.clear();
        });
    }
}

/// Breaks the cycles of waits through `owner`: one through a lock kept for a multi-key
/// call by giving it to the call behind, one of holds by refusing its youngest blocked
/// call. Returns whether a kept lock was given.
pub(super) fn settle_owner(ctx: &Context, owner: &[u8]) -> bool {
    let mut gave = false;
    for _ in 0..MAX_SETTLED {
        match deadlock::judge_owner(ctx, owner) {
            Verdict::Clear => break,
            Verdict::Yield { to, otherwise } => {
                if give_kept_lock_to_one(ctx, &to) {
                    gave = true;
                } else if !otherwise.is_some_and(|refusal| refuse(ctx, refusal)) {
                    break;
                }
            }
            Verdict::Refuse(refusal) => {
                if !refuse(ctx, refusal) {
                    break;
                }
            }
        }
    }
    gave
}

/// Refuses a blocked call of a cycle; false for the call being made (`call` none), which
/// its caller refuses.
fn refuse(ctx: &Context, refusal: Refusal) -> bool {
    let Some(call) = refusal.call else {
        return false;
    };
    deadlock::count_refusal(ctx, &refusal.lock);
    waiters::refuse(ctx, call, refusal.error);
    true
}

/// Gives a kept lock to the first of `to` (lock, call) that can take it now (see
/// `give_kept_lock`). Whether one did.
fn give_kept_lock_to_one(ctx: &Context, to: &[(LockId, WaiterId)]) -> bool {
    to.iter()
        .any(|(lock, call)| give_kept_lock(ctx, lock, *call) == Grant::Granted)
}

/// Gives `lock`, free and kept for the multi-key call at the head of its line, to the call
/// `call` waiting behind it (see `deadlock::Verdict::Yield`): a plain or `FAIR` one takes
/// it (off the fair queue), a multi-key one takes it with its other locks, or nothing.
fn give_kept_lock(ctx: &Context, lock: &LockId, call: WaiterId) -> Grant {
    let Some(_selected) = ffi::DbSelected::new(ctx, lock.db) else {
        return Grant::Busy;
    };
    let key = ffi::string(ctx, &lock.key);
    // A `FAIR` call is taken off the fair queue's head with it.
    let queue = match waiters::view(call) {
        Some(waiter) if waiter.more_locks.is_empty() && waiter.options.fair => {
            FairQueue::open(ctx, &lock.key).ok()
        }
        _ => None,
    };
    let granted = super::grant(ctx, lock, &key, call, queue.as_ref(), Some(lock));
    // Its timer was off while the lock was kept: it follows the new lease now.
    if granted == Grant::Granted {
        super::watch(ctx, lock);
    }
    granted
}
