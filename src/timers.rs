//! Module timers: one per lock with waiters, at its lease deadline, so expiry
//! hands the lock on within milliseconds whatever Redis's expiry cycle does; and
//! one 0 ms timer that runs the writes events may not do inside their callbacks.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::os::raw::c_void;

use redis_module::Context;

use crate::core::waitlist::LockId;
use crate::fair::{self, FairQueue};
use crate::ffi::{self, Key, RawCtx, TimerId};
use crate::{guard, sessions, waiters};

#[derive(Default)]
struct Timers {
    /// Lease timer per lock: (timer, deadline in unix ms, tag).
    leases: HashMap<LockId, (TimerId, i64, u64)>,
    /// Timer tag -> lock, to find the lock when a timer fires.
    by_tag: HashMap<u64, LockId>,
    next_tag: u64,
    deferred_timer: Option<TimerId>,
    deferred_serve: BTreeSet<LockId>,
    /// Holds to give back: (lock, owner, every re-entry?).
    deferred_release: Vec<(LockId, Vec<u8>, bool)>,
    /// Fair waiters that left, whose queue entries go.
    deferred_leave: Vec<(LockId, Vec<u8>)>,
    /// Fair queues someone else removed entries from.
    deferred_requeue: BTreeSet<LockId>,
}

thread_local! {
    static TIMERS: RefCell<Timers> = RefCell::new(Timers::default());
}

fn with_timers<T>(f: impl FnOnce(&mut Timers) -> T) -> T {
    TIMERS.with(|timers| f(&mut timers.borrow_mut()))
}

/// Keeps one timer per watched lock at the moment it next needs attention: its
/// lease deadline while held, or, while free, the deadline of a fair queue head
/// that was woken elsewhere. A lock found free with waiters is served next turn.
pub fn watch(ctx: &Context, lock: &LockId) {
    let has_waiters = waiters::has_waiters(lock);
    let fair = fair::is_tracked(lock);
    if !(has_waiters || fair) || !waiters::is_primary(ctx) {
        cancel(ctx, lock);
        return;
    }
    let now = ffi::now_ms();
    let key = ffi::string(ctx, &lock.key);
    let pttl = Key::open_readonly(ctx, &key).pttl();
    // Redis expires a key once the clock is past its deadline, hence the +1.
    let deadline = match pttl {
        -1 => None,
        -2 if fair => match FairQueue::open(ctx, &lock.key).ok().and_then(|queue| {
            let head = queue.head()?;
            queue.deadline_of(&head)
        }) {
            Some(head_deadline) => Some(head_deadline.max(now) + 1),
            None => {
                fair::untrack(lock);
                None
            }
        },
        -2 => {
            cancel(ctx, lock);
            defer_serve(ctx, lock.clone());
            return;
        }
        pttl => Some(now + pttl + 1),
    };
    let Some(deadline) = deadline else {
        cancel(ctx, lock);
        if has_waiters && pttl == -2 {
            defer_serve(ctx, lock.clone());
        }
        return;
    };
    let current = with_timers(|t| t.leases.get(lock).map(|(_, at, _)| *at));
    if current == Some(deadline) {
        return;
    }
    cancel(ctx, lock);
    let tag = with_timers(|t| {
        t.next_tag += 1;
        t.next_tag
    });
    let timer = ffi::create_timer(ctx, deadline - now, on_lease_deadline, tag);
    with_timers(|t| {
        t.leases.insert(lock.clone(), (timer, deadline, tag));
        t.by_tag.insert(tag, lock.clone());
    });
}

/// True when no lease timer is pending.
pub fn none_armed() -> bool {
    with_timers(|t| t.leases.is_empty())
}

/// Stops `lock`'s timer, if it has one. Touches no key, so it is safe in any callback.
pub fn cancel(ctx: &Context, lock: &LockId) {
    if let Some((timer, _, tag)) = with_timers(|t| t.leases.remove(lock)) {
        with_timers(|t| t.by_tag.remove(&tag));
        ffi::stop_timer(ctx, timer);
    }
}

extern "C" fn on_lease_deadline(ctx: RawCtx, data: *mut c_void) {
    guard::callback("lease timer", || {
        let ctx = Context::new(ctx);
        let tag = ffi::timer_tag(data);
        let Some(lock) = with_timers(|t| {
            let lock = t.by_tag.remove(&tag)?;
            t.leases.remove(&lock);
            Some(lock)
        }) else {
            return;
        };
        if !ffi::select_db(&ctx, lock.db) {
            return;
        }
        // Opening the key expires it if its deadline has passed.
        let key = ffi::string(&ctx, &lock.key);
        drop(Key::open_writable(&ctx, &key));
        waiters::serve(&ctx, &lock);
    });
}

/// Serves `lock`'s waiters on the next turn of the event loop.
pub fn defer_serve(ctx: &Context, lock: LockId) {
    with_timers(|t| t.deferred_serve.insert(lock));
    arm_deferred(ctx);
}

/// Gives back a hold on the next turn (a session's, or a grant nobody heard).
pub fn defer_release(ctx: &Context, lock: LockId, owner: Vec<u8>, all: bool) {
    with_timers(|t| t.deferred_release.push((lock, owner, all)));
    arm_deferred(ctx);
}

/// Checks on the next turn that `lock`'s blocked fair waiters are still queued.
pub fn defer_requeue(ctx: &Context, lock: LockId) {
    with_timers(|t| t.deferred_requeue.insert(lock));
    arm_deferred(ctx);
}

/// Drops a departed fair waiter's queue entry on the next turn.
pub fn defer_leave(ctx: &Context, lock: LockId, owner: Vec<u8>) {
    with_timers(|t| t.deferred_leave.push((lock, owner)));
    arm_deferred(ctx);
}

fn arm_deferred(ctx: &Context) {
    if with_timers(|t| t.deferred_timer.is_some()) {
        return;
    }
    let timer = ffi::create_timer(ctx, 0, on_deferred, 0);
    with_timers(|t| t.deferred_timer = Some(timer));
}

extern "C" fn on_deferred(ctx: RawCtx, _data: *mut c_void) {
    guard::callback("deferred work", || {
        let ctx = Context::new(ctx);
        let (releases, leaves, requeues, serves) = with_timers(|t| {
            t.deferred_timer = None;
            (
                std::mem::take(&mut t.deferred_release),
                std::mem::take(&mut t.deferred_leave),
                std::mem::take(&mut t.deferred_requeue),
                std::mem::take(&mut t.deferred_serve),
            )
        });
        if !waiters::is_primary(&ctx) {
            return;
        }
        for (lock, owner) in leaves {
            if ffi::select_db(&ctx, lock.db) {
                fair::leave(&ctx, &lock, &owner);
            }
        }
        for lock in requeues {
            if ffi::select_db(&ctx, lock.db) {
                fair::requeue_missing(&ctx, &lock);
            }
        }
        for (lock, owner, all) in releases {
            if ffi::select_db(&ctx, lock.db) {
                sessions::release_hold(&ctx, &lock, &owner, all);
            }
        }
        for lock in serves {
            if ffi::select_db(&ctx, lock.db) {
                waiters::serve(&ctx, &lock);
            }
        }
    });
}

/// Stops every timer: on unload, and when the server becomes a replica.
pub fn stop_all(ctx: &Context) {
    let (leases, deferred) = with_timers(|t| {
        t.by_tag.clear();
        t.deferred_serve.clear();
        t.deferred_release.clear();
        t.deferred_leave.clear();
        t.deferred_requeue.clear();
        (
            t.leases
                .drain()
                .map(|(_, (timer, _, _))| timer)
                .collect::<Vec<_>>(),
            t.deferred_timer.take(),
        )
    });
    for timer in leases.into_iter().chain(deferred) {
        ffi::stop_timer(ctx, timer);
    }
}
