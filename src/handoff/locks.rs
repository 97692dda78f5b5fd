//! Locks: plain, `FAIR` and read-write, and the turns a plain lock shares with
//! Redisson clients (see `core::sharing`). Serves a free lock to its next waiter (see
//! `core::fair::next_turn` for the order between plain and fair waiters), keeps its
//! timer, and does a lock's self-started work: a hold given back, a fair queue's
//! entries that left, went missing or ran out.

use redis_module::{Context, RedisString};

use super::{grant_kept, settle_later, Grant};
use crate::config;
use crate::core::deferred::Work;
use crate::core::fair::{next_turn, on_expired, Expired, FairHead, Turn};
use crate::core::keyevents::KeyEvent;
use crate::core::requests::{RequestId, RequestKind};
use crate::core::sharing::Next;
use crate::core::waitlist::{BlockedReply, LockId, WaiterId};
use crate::store::{self, FairQueue, LockKey, RequestRecord};
use crate::waiters::WaiterView;
use crate::{deferred, ffi, keyevents, slots, state, stats, timers, waiters};

/// Passes lock `lock`, if free, to whoever is next, then re-arms its timer.
pub(super) fn serve(ctx: &Context, lock: &LockId) {
    let key = ffi::string(ctx, &lock.key);
    let queue = if state::with(|s| s.fair_queues.contains(lock)) || waiters::has_fair(lock) {
        FairQueue::open(ctx, &lock.key).ok()
    } else {
        None
    };
    if queue
        .as_ref()
        .is_some_and(|queue| !queue_whole_here(ctx, lock, queue))
    {
        return;
    }
    loop {
        let head = match &queue {
            Some(queue) => match fair_head(ctx, lock, &key, queue) {
                Some(head) => head,
                None => break, // Held.
            },
            None => FairHead::Nobody,
        };
        let head = match (head, waiters::first_fair(lock)) {
            // FAIR waiters blocked here, and no queue entry left (FLUSHDB, SWAPDB, a script
            // deleted the queue): back in line, oldest first, so the oldest takes its turn.
            (FairHead::Nobody, Some(oldest)) => {
                if let Some(queue) = &queue {
                    restore_fair_entries(lock, queue);
                }
                FairHead::Blocked(oldest)
            }
            (head, _) => head,
        };
        let granted = match next_turn(head, waiters::first_plain(lock)) {
            Turn::Fair(id) => super::grant(ctx, lock, &key, id, queue.as_ref(), None),
            // Read-write waiters: served in arrival order, readers together. Multi-key
            // waiters: when every lock they wait for can be taken.
            Turn::Plain(id) if waiters::is_read_write(id) => {
                super::grant(ctx, lock, &key, id, None, None)
            }
            // Kept free for it meanwhile, unless that closes a cycle of waits.
            Turn::Plain(id) if waiters::is_multi(id) => grant_kept(ctx, lock, &key, id),
            Turn::Plain(id) => match share_turn(ctx, lock, &key) {
                Next::Grant => {
                    let granted = super::grant(ctx, lock, &key, id, None, None);
                    if granted == Grant::Granted {
                        state::with(|s| s.sharing.handed_off(lock));
                    }
                    granted
                }
                // Left free for Redisson clients a moment: `watch` serves at its end.
                Next::Wait { .. } | Next::CountSubscribers => break,
            },
            Turn::WakeHead(owner) => {
                if let Some(queue) = &queue {
                    queue.wake(&owner);
                }
                break;
            }
            Turn::Nobody => break,
        };
        if granted == Grant::Busy {
            break;
        }
    }
    if let Some(queue) = &queue {
        review_queue(lock, queue);
    }
    watch(ctx, lock);
}

/// Whether `lock` is being left free for Redisson clients now (see `core::sharing`).
pub fn left_to_redisson(lock: &LockId) -> bool {
    let now = ffi::now_ms();
    state::with(|s| s.sharing.window_until(lock, now)).is_some()
}

/// Whether the next plain waiter on `lock`, if free, is served now, or Redisson clients
/// subscribed to its unlock channel have their turn first (see `core::sharing`).
fn share_turn(ctx: &Context, lock: &LockId, key: &RedisString) -> Next {
    if ffi::key_exists(ctx, key) {
        return Next::Grant; // Held: nothing to share (`grant` finds it busy).
    }
    let now = ffi::now_ms();
    let blocked = state::with(|s| s.waiters.waiting_on(lock));
    match state::with(|s| s.sharing.next(lock, blocked, now)) {
        Next::CountSubscribers => {
            let listeners = store::unlock_listeners(ctx, &lock.key);
            state::with(|s| s.sharing.after_count(lock, listeners, now))
        }
        next => next,
    }
}

/// Gives `lock` to waiter `id` (seen as `waiter`), taking it off the fair `queue`'s head
/// when it came from there. All checks come before any write, so a waiter that gets an
/// error holds nothing, and one that gets the lock is told so in this same turn.
pub(super) fn grant(
    ctx: &Context,
    lock: &LockId,
    key: &RedisString,
    id: WaiterId,
    waiter: WaiterView,
    queue: Option<&FairQueue>,
) -> Grant {
    // The same request, retried on another connection while this one still waits:
    // it was granted once, and is answered the same without a second hold.
    let owner = ffi::string(ctx, &waiter.owner);
    let mode = waiter.options.mode;
    let field = waiters::hold_field_of(&waiter.owner, mode);
    let record = waiter
        .options
        .req
        .map(|id| RequestRecord::new(ctx, key, &id));
    if let Some(record) = &record {
        // Replayed only while the hold it reported still stands.
        let still_held = || LockKey::open(ctx, key)?.holds(&owner, mode);
        if let Some(answer) = super::replayed(ctx, record, RequestKind::Acquire, &field, still_held)
        {
            if let Some(queue) = queue {
                queue.dequeue(&waiter.owner, true);
            }
            waiters::answer(ctx, id, answer);
            return Grant::Failed;
        }
    }
    let planned = LockKey::open(ctx, key).and_then(|lock_key| {
        let plan = lock_key.plan_acquire(&owner, &waiter.options)?;
        Ok(plan.map(|plan| (lock_key, plan)))
    });
    let (lock_key, plan) = match planned {
        Ok(Some(planned)) => planned,
        Ok(None) => return Grant::Busy,
        Err(error) => {
            if let Some(queue) = queue {
                queue.dequeue(&waiter.owner, true);
            }
            waiters::answer(ctx, id, BlockedReply::Failed(error.to_string()));
            return Grant::Failed;
        }
    };
    let lease = waiter.options.lease.unwrap_or_else(config::default_lease);
    let reply = lock_key.commit_acquire(&owner, plan, lease);
    drop(lock_key);
    if let Some(record) = &record {
        record.write(ctx, RequestKind::Acquire, &field, reply, lease.ms());
    }
    if let Some(queue) = queue {
        queue.dequeue(&waiter.owner, true);
    }
    stats::HANDOFFS.incr();
    keyevents::key(ctx, KeyEvent::Acquire, key);
    if waiter.options.session {
        state::with(|s| s.sessions.record(waiter.client, lock.clone(), field));
    }
    waiters::answer(ctx, id, BlockedReply::Granted(reply));
    settle_later(&waiter.owner, lock);
    Grant::Granted
}

/// The head of `lock`'s fair queue once expired entries are gone; `None` while the
/// lock is held. An emptied queue stops being tracked.
fn fair_head(
    ctx: &Context,
    lock: &LockId,
    key: &RedisString,
    queue: &FairQueue,
) -> Option<FairHead> {
    purge_expired(queue, lock, ffi::now_ms());
    match LockKey::open(ctx, key) {
        Ok(lock_key) if !lock_key.is_held() => {}
        _ => return None,
    }
    let Some(head) = queue.head() else {
        state::with(|s| s.fair_queues.remove(lock));
        return Some(FairHead::Nobody);
    };
    Some(match waiters::find_owner(lock, &head) {
        Some(id) => FairHead::Blocked(id),
        None => FairHead::Elsewhere(head),
    })
}

/// Drops queue entries whose deadline has passed, except those of waiters still
/// blocked here, whose real deadline is put back. True if any was dropped.
pub fn purge_expired(queue: &FairQueue, lock: &LockId, now_ms: i64) -> bool {
    let expired = queue.expired(now_ms);
    if expired.is_empty() {
        return false;
    }
    let mut purged = Vec::new();
    for owner in expired {
        let blocked = waiters::blocked_deadline(lock, &owner);
        match on_expired(blocked, now_ms, config::fair_wait_ms()) {
            Expired::Restore(deadline) => queue.set_deadline(&owner, deadline),
            Expired::Purge => purged.push(owner),
        }
    }
    queue.dequeue_all(&purged)
}

/// After the module read or wrote `lock`'s fair queue: it is tracked until its earliest
/// deadline, when `look_at_queue` looks at it again; empty, it is tracked no more, and
/// what is left of its list goes (see `FairQueue::drop_if_no_deadlines`).
pub fn review_queue(lock: &LockId, queue: &FairQueue) {
    match queue.earliest_deadline() {
        Some(at) => state::with(|s| s.fair_queues.look_at(lock, at)),
        None => {
            queue.drop_if_no_deadlines();
            state::with(|s| s.fair_queues.remove(lock));
        }
    }
}

/// The earliest deadline in `lock`'s tracked fair queue came (see `events::on_cron`):
/// entries past their deadline go, a caller that polled and stopped as a blocked
/// waiter that left; a new head is served (woken, or granted); the queue's keys go
/// once it is empty, and the lock is tracked no more. Whether the lock is held or free.
pub(super) fn look_at_queue(ctx: &Context, lock: &LockId) {
    let queue = match FairQueue::open(ctx, &lock.key) {
        Ok(queue) => queue,
        // No longer a list and a zset: nothing here to purge or serve.
        Err(_) => return state::with(|s| s.fair_queues.remove(lock)),
    };
    if !queue_whole_here(ctx, lock, &queue) {
        return; // Looked at again a moment later (`KnownQueues::due`).
    }
    if purge_expired(&queue, lock, ffi::now_ms()) {
        super::serve(ctx, lock);
    }
    review_queue(lock, &queue);
}

/// Keeps lock `lock`'s timer at the moment it next needs attention: its lease deadline
/// while held, or, while free, the deadline of a fair queue head that was woken
/// elsewhere. A lock found free with waiters is served on the next turn. Only
/// clients blocked here need a timer: callers that poll find out by polling, and
/// a timer kept for them would hold up `MODULE UNLOAD`.
pub(super) fn watch(ctx: &Context, lock: &LockId) {
    let (has_waiters, fair) =
        state::with(|s| (s.waiters.has_waiters(lock), s.fair_queues.contains(lock)));
    if !has_waiters || !ffi::is_primary(ctx) {
        super::stop_timer(ctx, lock);
        // Held, the round goes on with the clients that come back; free, it is over. A
        // hold without a lease (not one rlock or Redisson made) ends only by a delete the
        // module hears, or never: the round is over too, rather than kept for good.
        if !ffi::is_primary(ctx)
            || state::with(|s| s.sharing.contains(lock)) && store::pttl(ctx, lock) < 0
        {
            super::end_round(lock);
        }
        return;
    }
    slots::watch(ctx);
    let now = ffi::now_ms();
    let window = state::with(|s| s.sharing.window_until(lock, now));
    // Redis expires a key once the clock is past its deadline, hence the +1.
    let deadline = match store::pttl(ctx, lock) {
        // Free, and left to Redisson clients until then.
        -2 if window.is_some() => window,
        -1 => None,
        -2 if fair => {
            let head_deadline = FairQueue::open(ctx, &lock.key)
                .ok()
                .and_then(|queue| queue.deadline_of(&queue.head()?));
            match head_deadline {
                Some(head_deadline) => Some(head_deadline.max(now) + 1),
                None => {
                    state::with(|s| s.fair_queues.remove(lock));
                    if has_waiters {
                        deferred::push(ctx, Work::Serve { lock: lock.clone() });
                    }
                    None
                }
            }
        }
        // Its longest waiter also waits for a lock held elsewhere: served when that frees.
        -2 if waiters::head_is_multi(lock) => None,
        -2 => {
            deferred::push(ctx, Work::Serve { lock: lock.clone() });
            None
        }
        pttl => Some(now + pttl + 1),
    };
    match deadline {
        Some(deadline) => timers::arm(ctx, lock, deadline),
        None => super::stop_timer(ctx, lock),
    }
}

/// Gives back the hold recorded as `field` on `lock` (an owner, or a read-write lock's
/// `owner:write`): every re-entry when `all` (its SESSION connection closed), else one
/// (a grant its client never heard). The record of the grant's `REQ` id, `req`, goes:
/// the request sent again must not be told it holds what was given back.
pub(super) fn release_hold(
    ctx: &Context,
    lock: &LockId,
    field: &[u8],
    all: bool,
    req: Option<RequestId>,
) {
    let key = ffi::string(ctx, &lock.key);
    if let Some(req) = req {
        RequestRecord::new(ctx, &key, &req).forget(ctx);
    }
    let field = ffi::string(ctx, field);
    let released = match LockKey::open(ctx, &key).and_then(|l| l.release_field(&field, all)) {
        Ok(released) => released,
        Err(_) => return,
    };
    if !released.held {
        return;
    }
    if all {
        stats::SESSION_RELEASES.incr();
        keyevents::key(ctx, KeyEvent::SessionEnd, &key);
    } else if released.last {
        // A grant its client never heard, given back: released as `RLOCK.RELEASE` would,
        // so an observer that saw its `rlock.acquire` sees the hold end.
        stats::RELEASES.incr();
        keyevents::key(ctx, KeyEvent::Release, &key);
    }
    match released.freed_by {
        Some(unlock) => {
            state::with(|s| s.sessions.forget_lock(lock));
            super::freed(ctx, lock, unlock);
        }
        // A writer that left its own read holds: readers blocked here may join them.
        None => super::serve(ctx, lock),
    }
}

/// Blocked fair waiters left (timeout, disconnect, unblock): their entries go.
pub(super) fn leave_queue(ctx: &Context, lock: &LockId, mut owners: Vec<Vec<u8>>) {
    // An owner that still waits on another connection keeps its place.
    owners.retain(|owner| waiters::blocked_deadline(lock, owner).is_none());
    let Ok(queue) = FairQueue::open(ctx, &lock.key) else {
        return;
    };
    if !queue_whole_here(ctx, lock, &queue) {
        return;
    }
    let head = queue.head();
    if queue.dequeue_all(&owners) && head.is_some_and(|head| owners.contains(&head)) {
        super::serve(ctx, lock);
    }
}

/// Whether `lock`'s fair queue may be read and written here. In a cluster, while the
/// lock's slot is being migrated away, `MIGRATE` (one key at a time) may have moved one
/// of the queue's two keys ahead: then nothing here touches the queue (a list entry
/// without its deadline makes Redisson's scripts fail) and nobody is served. While the
/// lock is held here its waiters wait on: it leaves with the slot and they are
/// redirected then. Once it is gone, they are sent after it (`-ASK`), or told to try
/// again (`-TRYAGAIN`).
fn queue_whole_here(ctx: &Context, lock: &LockId, queue: &FairQueue) -> bool {
    let Err(error) = queue.check_may_grow() else {
        return true;
    };
    let held_here = ffi::key_exists(ctx, &ffi::string(ctx, &lock.key));
    if !held_here && !slots::left_this_node(ctx, lock) {
        waiters::redirect_all(ctx, lock, &error.to_string());
    }
    false
}

/// Someone else removed entries from `lock`'s deadline zset (a Redisson client
/// purges what its own re-scoring made look stale). Waiters still blocked here
/// that lost their entry go back in line, at the tail, in their arrival order.
pub(super) fn requeue_missing(ctx: &Context, lock: &LockId) {
    let Ok(queue) = FairQueue::open(ctx, &lock.key) else {
        return;
    };
    restore_fair_entries(lock, &queue);
    super::serve(ctx, lock);
}

/// Queues again, at the tail and in arrival order, the FAIR waiters blocked on `lock`
/// whose entries are gone.
fn restore_fair_entries(lock: &LockId, queue: &FairQueue) {
    if queue.check_may_grow().is_err() {
        return; // The queue may have moved with a migrating slot.
    }
    let now = ffi::now_ms();
    for (owner, deadline) in waiters::fair_waiters(lock) {
        if queue.deadline_of(&owner).is_none() {
            let score = crate::core::fair::blocked_score(now, deadline, config::fair_wait_ms());
            queue.enqueue(&owner, score);
            state::with(|s| s.fair_queues.look_by(lock, score));
        }
    }
}
