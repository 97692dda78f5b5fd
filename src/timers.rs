//! Lease timers: one per watched lock, at the moment it next needs attention, so
//! expiry hands the lock on within milliseconds whatever Redis's expiry cycle
//! does. A source only: a timer that fires hands its lock to `deferred`.

use std::os::raw::c_void;

use redis_module::Context;

use crate::core::deferred::Work;
use crate::core::waitlist::LockId;
use crate::ffi::{self, RawCtx};
use crate::{deferred, guard, state, stats};

/// Arms `lock`'s timer for `deadline` (unix ms), replacing one set for another time.
pub fn arm(ctx: &Context, lock: &LockId, deadline: i64) {
    if state::with(|s| s.lease_timers.deadline_of(lock)) == Some(deadline) {
        return;
    }
    cancel(ctx, lock);
    let tag = state::with(|s| s.lease_timers.next_tag());
    let delay = (deadline - ffi::now_ms()).max(0);
    let timer = ffi::create_timer(ctx, delay, on_lease_deadline, tag);
    state::with(|s| s.lease_timers.insert(lock.clone(), timer, deadline, tag));
}

/// Stops `lock`'s timer, if it has one. Touches no key, so it is safe in any callback.
pub fn cancel(ctx: &Context, lock: &LockId) {
    if let Some(timer) = state::with(|s| s.lease_timers.remove(lock)) {
        ffi::stop_timer(ctx, timer);
    }
}

extern "C" fn on_lease_deadline(ctx: RawCtx, data: *mut c_void) {
    guard::callback("lease timer", || {
        let ctx = Context::new(ctx);
        let tag = ffi::timer_tag(data);
        if let Some((lock, deadline)) = state::with(|s| s.lease_timers.fired(tag)) {
            // A lease that ran out freed its lock at its deadline, not when the timer ran.
            let late_ms = (ffi::now_ms() - deadline).max(0) as u64;
            state::mark_freed(&lock, stats::now_us().saturating_sub(late_ms * 1000));
            deferred::perform(&ctx, Work::LeaseDeadline { lock });
        }
    });
}
