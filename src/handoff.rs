//! The one path by which a lock passes from one holder to the next.
//!
//! Every way a lock becomes free ends in `serve`: a release, a force release, a
//! SESSION connection closing, a lease running out, a delete, a flush. `serve`
//! picks the next waiter (the fair queue's head first, then blocked waiters in
//! arrival order), grants, replies and replicates in one turn; or, when the head
//! waits elsewhere (a polling caller, a Redisson client), wakes it on its channel.
//! Nobody waiting: the release already published the unlock message.
//!
//! `perform` runs the work the module starts by itself (see `deferred`), so every
//! self-started write comes through this file too.

use redis_module::{Context, RedisError, RedisString};

use crate::config;
use crate::core::args::AcquireOptions;
use crate::core::deferred::Work;
use crate::core::fair::{next_turn, on_expired, Expired, FairHead, Turn};
use crate::core::keyevents::KeyEvent;
use crate::core::requests::{RequestId, RequestKind};
use crate::core::semaphore::{lease_deadline, next_look, PermitId};
use crate::core::sharing::Next;
use crate::core::shrink_map;
use crate::core::waitlist::{BlockedReply, LockId, WaiterId, Wants};
use crate::deadlock::{Refusal, Verdict};
use crate::ffi;
use crate::state;
use crate::stats;
use crate::store::{
    self, FairQueue, Latch, LockKey, PermitLeases, RequestRecord, Semaphore, TakeAll, Unlock,
};
use crate::waiters::WaiterView;
use crate::{deadlock, deferred, keyevents, slots, timers, waiters};

/// Passes `lock`, if free, to whoever is next (see `core::fair::next_turn` for the
/// order between plain and fair waiters), then re-arms its timer. `ctx` must have
/// `lock.db` selected. Writes made here replicate with the caller's.
pub fn serve(ctx: &Context, lock: &LockId) {
    {
        let _turn = ServeTurn::begin();
        serve_turn(ctx, lock);
    }
    settle_granted(ctx);
}

/// `serve`, before the holds it granted are settled.
fn serve_turn(ctx: &Context, lock: &LockId) {
    if !ffi::is_primary(ctx) {
        return;
    }
    let _serving = Serving::begin(lock);
    // A semaphore's or a latch's waiters: the key is one of those, not a lock. A round
    // of hand-offs kept for the lock once under this name (deleted, expired, renamed
    // away before this serve ran) is over: nothing here would end it later.
    match waiters::head_wants(lock) {
        Some((_, Wants::Permits(_))) => {
            end_round(lock);
            return serve_permits(ctx, lock);
        }
        Some((_, Wants::LatchOpen)) => {
            end_round(lock);
            return open_latch(ctx, lock);
        }
        None if state::with(|s| s.leased_semaphores.contains(lock)) => {
            end_round(lock);
            return serve_permits(ctx, lock);
        }
        _ => {}
    }
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
            Turn::Fair(id) => grant(ctx, lock, &key, id, queue.as_ref()),
            // Read-write waiters: served in arrival order, readers together. Multi-key
            // waiters: when every lock they wait for can be taken.
            Turn::Plain(id) if waiters::is_read_write(id) => grant(ctx, lock, &key, id, None),
            // Kept free for it meanwhile, unless that closes a cycle of waits.
            Turn::Plain(id) if waiters::is_multi(id) => match grant(ctx, lock, &key, id, None) {
                Grant::Busy if !ffi::key_exists(ctx, &key) => {
                    let owner = waiters::view(id).map(|w| w.owner).unwrap_or_default();
                    match settle_owner(ctx, &owner) {
                        true => Grant::Granted,
                        false => Grant::Busy,
                    }
                }
                granted => granted,
            },
            Turn::Plain(id) => match share_turn(ctx, lock, &key) {
                Next::Grant => {
                    let granted = grant(ctx, lock, &key, id, None);
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

/// While alive, the grants made are hand-offs of a lock that became free when its
/// source noted (`state::mark_freed`), or now: `INFO rlock`'s `handoff_usec`. Inside
/// another's, the outer moment stands. Costs nothing on a lock nobody waits for.
struct Serving {
    before: Option<Option<u64>>,
}

impl Serving {
    fn begin(lock: &LockId) -> Serving {
        if !waiters::has_waiters(lock) {
            return Serving { before: None };
        }
        let now = stats::now_us();
        let before = state::with(|s| {
            let freed = s.freed_at.remove(lock);
            shrink_map(&mut s.freed_at);
            let before = s.serving_since;
            s.serving_since = Some(before.unwrap_or(freed.unwrap_or(now)));
            before
        });
        Serving {
            before: Some(before),
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(before) = self.before {
            state::with(|s| s.serving_since = before);
        }
    }
}

/// Passes a semaphore's permits to its blocked acquires and leases, oldest first, as
/// long as the oldest one's count is there: a large request at the head is not
/// overtaken. Leases that ended are taken back first.
fn serve_permits(ctx: &Context, lock: &LockId) {
    let _serving = Serving::begin(lock);
    let key = ffi::string(ctx, &lock.key);
    let mut leases = match PermitLeases::open(ctx, &key) {
        Ok(leases) => leases,
        Err(error) => {
            while let Some((id, Wants::Permits(_))) = waiters::head_wants(lock) {
                waiters::answer(ctx, id, BlockedReply::Failed(error.to_string()));
            }
            return watch_permits(ctx, lock, None);
        }
    };
    reclaim_ended(ctx, &key, lock, &mut leases);
    while let Some((id, Wants::Permits(n))) = waiters::head_wants(lock) {
        let Some(waiter) = waiters::view(id) else {
            break;
        };
        let reply = match waiter.options.lease {
            // Not granted: too few permits, or the slot is migrating (it waits on).
            Some(_) => {
                match lease_permits(ctx, &key, &mut leases, n, &waiter.options, waiter.client) {
                    Ok(Some(ids)) => BlockedReply::Leased {
                        ids,
                        repeated: false,
                    },
                    Ok(None) | Err(_) => break,
                }
            }
            None if leases.semaphore().take(n) => {
                // A `REQ` acquire records its grant with it, as a direct one does.
                if let Some(req) = waiter.options.req {
                    let ttl = config::default_lease().ms();
                    RequestRecord::new(ctx, &key, &req).write(
                        ctx,
                        RequestKind::Acquire,
                        b"",
                        1,
                        ttl,
                    );
                }
                keyevents::key(ctx, KeyEvent::PermitAcquire, &key);
                BlockedReply::Granted(1)
            }
            None => break,
        };
        stats::PERMIT_HANDOFFS.incr();
        waiters::answer(ctx, id, reply);
    }
    watch_permits(ctx, lock, Some(&leases));
}

/// Leases `n` permits of semaphore `key` to connection `client`, as `options` ask (its
/// lease, SESSION, REQ), if that many are available: the new permits' ids. The one
/// way permits are leased, by a call or to a blocked waiter.
pub fn lease_permits(
    ctx: &Context,
    key: &RedisString,
    leases: &mut PermitLeases,
    n: i64,
    options: &AcquireOptions,
    client: u64,
) -> Result<Option<Vec<PermitId>>, RedisError> {
    let Some(lease) = options.lease else {
        return Ok(None);
    };
    if leases.semaphore().available() < n {
        return Ok(None);
    }
    // In a cluster, not while the zset may be on its way to another node.
    leases.check_may_grow()?;
    let ids: Vec<PermitId> = (0..n).map(|_| state::next_permit_id()).collect();
    let deadline = lease_deadline(ffi::now_ms(), lease.ms());
    if !leases.lease(&ids, deadline) {
        return Ok(None);
    }
    stats::PERMIT_LEASES.add(n);
    keyevents::key(ctx, KeyEvent::PermitLease, key);
    let lock = store::lock_id(ctx, key);
    if options.session {
        tie_leases_to(&lock, &ids, client);
    }
    if let Some(req) = options.req {
        let shown: Vec<u8> = ids.iter().flat_map(PermitId::hex).collect();
        RequestRecord::new(ctx, key, &req).write(ctx, RequestKind::Lease, &shown, n, lease.ms());
    }
    lease_ends_at(ctx, &lock, deadline);
    Ok(Some(ids))
}

/// Leased permits `ids` of semaphore `lock` come back when connection `client` closes
/// (`SESSION`), and no longer with the connection that had them before.
pub fn tie_leases_to(lock: &LockId, ids: &[PermitId], client: u64) {
    state::with(|s| {
        for id in ids {
            s.session_permits
                .record(client, lock.clone(), id.0.to_vec());
        }
    });
}

/// A lease of semaphore `lock` ends at `deadline`: its timer is set for then, unless it
/// is set for sooner already (it then finds the next end itself, see `watch_permits`).
pub fn lease_ends_at(ctx: &Context, lock: &LockId, deadline: i64) {
    let armed = state::with(|s| {
        s.leased_semaphores.insert(lock.clone());
        s.lease_timers.deadline_of(lock)
    });
    if armed.is_none_or(|armed| armed > deadline) {
        timers::arm(ctx, lock, deadline);
    }
}

/// Takes back the leases of semaphore `lock` (named `key`, in the database selected) that
/// ended, by the server's clock; how many.
pub fn reclaim_ended(
    ctx: &Context,
    key: &RedisString,
    lock: &LockId,
    leases: &mut PermitLeases,
) -> usize {
    let ended = leases.reclaim_ended(ffi::now_ms());
    if ended.is_empty() {
        return 0;
    }
    stats::PERMIT_RECLAIMS.add(ended.len() as i64);
    keyevents::key(ctx, KeyEvent::PermitReclaim, key);
    state::with(|s| {
        for id in &ended {
            s.session_permits.forget_hold(lock, id);
        }
    });
    ended.len()
}

/// Keeps semaphore `lock`'s timer at the end of its earliest lease, and every few ms
/// while acquires wait here (see `core::semaphore::next_look`). `leases`: the semaphore
/// as just served, if it could be read.
pub fn watch_permits(ctx: &Context, lock: &LockId, leases: Option<&PermitLeases>) {
    let earliest = leases.and_then(PermitLeases::earliest_end);
    let has_waiters = waiters::has_waiters(lock);
    state::with(|s| match earliest {
        Some(_) => s.leased_semaphores.insert(lock.clone()),
        None => s.leased_semaphores.remove(lock),
    });
    if has_waiters {
        slots::watch(ctx);
    }
    match next_look(ffi::now_ms(), earliest, has_waiters) {
        Some(at) => timers::arm(ctx, lock, at),
        None => timers::cancel(ctx, lock),
    }
}

/// A latch's waiters pass together once its count is gone.
fn open_latch(ctx: &Context, lock: &LockId) {
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

/// `n` permits granted to a client that left before hearing it go back to the semaphore.
fn return_permits(ctx: &Context, lock: &LockId, n: i64, req: Option<RequestId>) {
    let key = ffi::string(ctx, &lock.key);
    if let Ok(mut semaphore) = Semaphore::open(ctx, &key) {
        if semaphore.give(n).is_some() {
            keyevents::key(ctx, KeyEvent::PermitRelease, &key);
        }
    }
    // The grant is undone: a retry with its id must not be told it holds the permits.
    if let Some(id) = req {
        RequestRecord::new(ctx, &key, &id).forget(ctx);
    }
    serve(ctx, lock);
}

/// Leased permits whose SESSION connection closed, or whose grant never reached its
/// client, go back to semaphore `lock` if they are still leased.
fn return_leases(ctx: &Context, lock: &LockId, ids: &[PermitId]) {
    let key = ffi::string(ctx, &lock.key);
    let Ok(mut leases) = PermitLeases::open(ctx, &key) else {
        return;
    };
    let now = ffi::now_ms();
    let mut returned = false;
    for id in ids {
        if leases.give_back(id, now).is_some() {
            stats::PERMIT_RETURNS.incr();
            returned = true;
        }
        state::with(|s| s.session_permits.forget_hold(lock, &id.0));
    }
    if returned {
        keyevents::key(ctx, KeyEvent::PermitReturn, &key);
    }
    serve_permits(ctx, lock);
}

/// Serves `key` in the current database after a command freed it. Free when
/// nothing waits and no fair queue is known.
pub fn serve_key(ctx: &Context, key: &RedisString) {
    if state::all_idle() {
        return;
    }
    serve(ctx, &store::lock_id(ctx, key));
}

/// The module just freed `key` (a release, a force release): the next client blocked
/// here takes it, or, if it stays free, Redisson-style waiters hear `unlock`'s message.
/// A lock passed straight on is not announced: they would wake to find it taken.
pub fn freed_key(ctx: &Context, key: &RedisString, unlock: Unlock) {
    if state::all_idle() {
        store::publish_unlock(ctx, key.as_slice(), unlock);
        return;
    }
    freed(ctx, &store::lock_id(ctx, key), unlock);
}

/// `freed_key` for a lock the module freed by itself (a `SESSION` connection closed,
/// a grant its client never heard).
fn freed(ctx: &Context, lock: &LockId, unlock: Unlock) {
    serve(ctx, lock);
    if !ffi::key_exists(ctx, &ffi::string(ctx, &lock.key)) {
        store::publish_unlock(ctx, &lock.key, unlock);
    }
}

/// `lock`'s round of hand-offs with Redisson clients, if one is kept, is over.
fn end_round(lock: &LockId) {
    state::with(|s| s.sharing.forget(lock));
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

#[derive(Debug, PartialEq, Eq)]
enum Grant {
    /// The lock went to the waiter.
    Granted,
    /// The lock is held: nothing changed.
    Busy,
    /// The waiter was answered without a new hold (an error, or the reply of the
    /// same request granted before) and left; nothing was written for it.
    Failed,
}

/// Gives `lock` to waiter `id`, taking it off the fair `queue`'s head when it came
/// from there. All checks come before any write, so a waiter that gets an error
/// holds nothing, and one that gets the lock is told so in this same turn.
fn grant(
    ctx: &Context,
    lock: &LockId,
    key: &RedisString,
    id: WaiterId,
    queue: Option<&FairQueue>,
) -> Grant {
    let Some(waiter) = waiters::view(id) else {
        return Grant::Busy;
    };
    if !waiter.more_locks.is_empty() {
        return grant_all(ctx, id, waiter, None);
    }
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
        let earlier = record
            .earlier_reply(ctx, RequestKind::Acquire, &field)
            .and_then(|reply| match reply {
                // Replayed only while the hold it reported still stands.
                Some(reply) if LockKey::open(ctx, key)?.holds(&owner, mode)? => Ok(Some(reply)),
                _ => Ok(None),
            });
        let answer = match earlier {
            Ok(None) => None,
            Ok(Some(reply)) => Some(BlockedReply::Repeated(reply)),
            Err(error) => Some(BlockedReply::Failed(error.to_string())),
        };
        if let Some(answer) = answer {
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

/// Notes a hold granted to `owner` on `lock`, for `settle_granted`. Only when the hold
/// could close a cycle: its owner waits here, and others wait for `lock`.
fn settle_later(owner: &[u8], lock: &LockId) {
    if waiters::owner_waits(owner) && waiters::has_waiters(lock) {
        state::with(|s| s.granted_to_settle.push((owner.to_vec(), lock.clone())));
    }
}

/// Settles the holds noted by `settle_later`, once no serve is under way: readers granted
/// together in one turn are all holders before any of them is judged (judged one by one,
/// the first would seem to wait for the others still in line). Runs one at a time, and
/// holds its own settling grants make are noted and settled by the same loop, not by
/// nested calls.
fn settle_granted(ctx: &Context) {
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

/// A serve under way while alive (see `settle_granted`).
struct ServeTurn;

impl ServeTurn {
    fn begin() -> ServeTurn {
        state::with(|s| s.serve_depth += 1);
        ServeTurn
    }
}

impl Drop for ServeTurn {
    fn drop(&mut self) {
        state::with(|s| s.serve_depth = s.serve_depth.saturating_sub(1));
    }
}

/// Breaks the cycles of waits through `owner`: one through a lock kept for a multi-key
/// call by giving it to the call behind, one of holds by refusing its youngest blocked
/// call. Returns whether a kept lock was given.
fn settle_owner(ctx: &Context, owner: &[u8]) -> bool {
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
    let granted = match waiters::view(call) {
        Some(waiter) if !waiter.more_locks.is_empty() => grant_all(ctx, call, waiter, Some(lock)),
        Some(waiter) if waiter.options.fair => {
            let queue = FairQueue::open(ctx, &lock.key).ok();
            grant(ctx, lock, &key, call, queue.as_ref())
        }
        Some(_) => grant(ctx, lock, &key, call, None),
        None => Grant::Busy,
    };
    // Its timer was off while the lock was kept: it follows the new lease now.
    if granted == Grant::Granted {
        watch(ctx, lock);
    }
    granted
}

/// Gives multi-key waiter `id` every lock it waits for, or none (see `store::take_all`).
/// A lock it does not hold yet is taken only if it is that lock's longest waiter, so
/// waiters are served in arrival order on every lock, and the oldest waiter of all,
/// first in every line it stands in, is never held back: no deadlock.
/// `past`: a lock kept for the multi-key call ahead of `id`, given to `id` all the same
/// (see `give_kept_lock`).
fn grant_all(ctx: &Context, id: WaiterId, waiter: WaiterView, past: Option<&LockId>) -> Grant {
    let locks = waiters::locks_of(id);
    let keys: Vec<RedisString> = locks.iter().map(|l| ffi::string(ctx, &l.key)).collect();
    let owner = ffi::string(ctx, &waiter.owner);
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
    waiters::answer(ctx, id, BlockedReply::Granted(locks.len() as i64));
    // The other locks' timers now follow their new lease.
    for lock in &locks[1..] {
        watch(ctx, lock);
    }
    watch(ctx, &locks[0]);
    for lock in &locks {
        settle_later(&waiter.owner, lock);
    }
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
fn look_at_queue(ctx: &Context, lock: &LockId) {
    let queue = match FairQueue::open(ctx, &lock.key) {
        Ok(queue) => queue,
        // No longer a list and a zset: nothing here to purge or serve.
        Err(_) => return state::with(|s| s.fair_queues.remove(lock)),
    };
    if !queue_whole_here(ctx, lock, &queue) {
        return; // Looked at again a moment later (`KnownQueues::due`).
    }
    if purge_expired(&queue, lock, ffi::now_ms()) {
        serve(ctx, lock);
    }
    review_queue(lock, &queue);
}

/// Keeps `lock`'s timer at the moment it next needs attention: its lease deadline
/// while held, or, while free, the deadline of a fair queue head that was woken
/// elsewhere. A lock found free with waiters is served on the next turn. Only
/// clients blocked here need a timer: callers that poll find out by polling, and
/// a timer kept for them would hold up `MODULE UNLOAD`.
pub fn watch(ctx: &Context, lock: &LockId) {
    let (has_waiters, fair) =
        state::with(|s| (s.waiters.has_waiters(lock), s.fair_queues.contains(lock)));
    // A semaphore's timer also takes its leases back: kept at their end, not stopped.
    if !has_waiters && ffi::is_primary(ctx) && state::with(|s| s.leased_semaphores.contains(lock)) {
        let key = ffi::string(ctx, &lock.key);
        let leases = PermitLeases::open(ctx, &key).ok();
        return watch_permits(ctx, lock, leases.as_ref());
    }
    if !has_waiters || !ffi::is_primary(ctx) {
        timers::cancel(ctx, lock);
        // Held, the round goes on with the clients that come back; free, it is over. A
        // hold without a lease (not one rlock or Redisson made) ends only by a delete the
        // module hears, or never: the round is over too, rather than kept for good.
        if !ffi::is_primary(ctx)
            || state::with(|s| s.sharing.contains(lock)) && store::pttl(ctx, lock) < 0
        {
            end_round(lock);
        }
        return;
    }
    slots::watch(ctx);
    let now = ffi::now_ms();
    // Permits a Redisson client gives back (`INCRBY`, `SET`) raise no event the module
    // hears: while acquires wait here, the semaphore is looked at every few ms.
    if let Some((_, Wants::Permits(_))) = waiters::head_wants(lock) {
        let key = ffi::string(ctx, &lock.key);
        let leases = PermitLeases::open(ctx, &key).ok();
        return watch_permits(ctx, lock, leases.as_ref());
    }
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
        None => timers::cancel(ctx, lock),
    }
}

/// Runs one piece of the module's self-started work; installed as the runner of
/// `deferred`. Only a primary writes.
pub fn perform(ctx: &Context, work: Work) {
    if !ffi::is_primary(ctx) {
        return;
    }
    let lock = match &work {
        Work::Leave { lock, .. }
        | Work::Requeue { lock }
        | Work::Release { lock, .. }
        | Work::ReturnPermits { lock, .. }
        | Work::ReturnLeases { lock, .. }
        | Work::LeaseDeadline { lock }
        | Work::Serve { lock }
        | Work::LookAtQueue { lock } => lock.clone(),
    };
    if !ffi::select_db(ctx, lock.db) {
        return;
    }
    if slots::left_this_node(ctx, &lock) {
        state::with(|s| {
            s.leased_semaphores.remove(&lock);
            s.fair_queues.remove(&lock);
        });
        return;
    }
    match work {
        Work::Leave { owners, .. } => leave_queue(ctx, &lock, owners),
        Work::Requeue { .. } => requeue_missing(ctx, &lock),
        Work::Release { field, all, .. } => release_hold(ctx, &lock, &field, all),
        Work::ReturnPermits { n, req, .. } => return_permits(ctx, &lock, n, req),
        Work::ReturnLeases { ids, .. } => return_leases(ctx, &lock, &ids),
        Work::LeaseDeadline { .. } => {
            store::expire_if_due(ctx, &lock);
            serve(ctx, &lock);
        }
        Work::Serve { .. } => serve(ctx, &lock),
        Work::LookAtQueue { .. } => look_at_queue(ctx, &lock),
    }
}

/// Gives back the hold recorded as `field` on `lock` (an owner, or a read-write lock's
/// `owner:write`): every re-entry when `all` (its SESSION connection closed), else one
/// (a grant its client never heard).
fn release_hold(ctx: &Context, lock: &LockId, field: &[u8], all: bool) {
    let key = ffi::string(ctx, &lock.key);
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
            self::freed(ctx, lock, unlock);
        }
        // A writer that left its own read holds: readers blocked here may join them.
        None => serve(ctx, lock),
    }
}

/// Blocked fair waiters left (timeout, disconnect, unblock): their entries go.
fn leave_queue(ctx: &Context, lock: &LockId, mut owners: Vec<Vec<u8>>) {
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
        serve(ctx, lock);
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
fn requeue_missing(ctx: &Context, lock: &LockId) {
    let Ok(queue) = FairQueue::open(ctx, &lock.key) else {
        return;
    };
    restore_fair_entries(lock, &queue);
    serve(ctx, lock);
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
