//! Count-down latches (Redisson's `RCountDownLatch`): every waiter passes at once when
//! the count is gone.

use redis_module::Context;

use crate::core::deferred::Work;
use crate::core::waitlist::{BlockedReply, LockId, Wants};
use crate::store::{self, Latch};
use crate::{deferred, ffi, slots, timers, waiters};

/// A latch's waiters pass together once its count is gone.
pub(super) fn open(ctx: &Context, lock: &LockId) {
    let key = ffi::string(ctx, &lock.key);
    let reply = match Latch::open(ctx, &key) {
        Ok(latch) if latch.is_open() => BlockedReply::Granted(1),
        Ok(_) => return watch(ctx, lock),
        Err(error) => BlockedReply::Failed(error.to_string()),
    };
    while let Some((id, Wants::LatchOpen)) = waiters::head_wants(lock) {
        waiters::answer(ctx, id, reply.clone());
    }
    watch(ctx, lock);
}

/// Keeps latch `lock`'s timer while clients wait here: at the latch's expiry if it has
/// one (an expired latch is open). A latch found gone with waiters is served on the
/// next turn. Nobody waiting, no timer.
pub(super) fn watch(ctx: &Context, lock: &LockId) {
    if !waiters::has_waiters(lock) || !ffi::is_primary(ctx) {
        return super::stop_timer(ctx, lock);
    }
    slots::watch(ctx);
    // Redis expires a key once the clock is past its deadline, hence the +1.
    match store::pttl(ctx, lock) {
        -1 => super::stop_timer(ctx, lock),
        -2 => {
            deferred::push(ctx, Work::Serve { lock: lock.clone() });
            super::stop_timer(ctx, lock);
        }
        pttl => timers::arm(ctx, lock, ffi::now_ms() + pttl + 1),
    }
}
