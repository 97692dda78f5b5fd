//! The one path by which a lock, a semaphore's permits or a latch pass on.
//!
//! Every way a name becomes free ends in `serve`: a release, a force release, a
//! SESSION connection closing, a lease running out, a delete, a flush. `serve` looks
//! at what the head of the name's line wants and hands the turn to that family's
//! file, which grants, replies and replicates in the same turn:
//! - `locks`: plain, `FAIR` and read-write locks, and the turns shared with Redisson
//!   clients;
//! - `multi`: multi-key calls (`RLOCK.MACQUIRE`), and the locks kept free for them;
//! - `permits`: a semaphore's permits and permit leases;
//! - `latches`: a count-down latch's waiters;
//! - `settle`: the deadlock verdicts on holds and waits, acted on;
//! - `perform`: the work the module starts by itself (see `deferred`).
//!
//! No family file reads another: what they share (the serve turn, a grant's outcome,
//! the round with Redisson clients, the notes for settling) lives here, and a family
//! that needs another's work (a lock's line headed by a multi-key call, a verdict
//! that gives a kept lock) asks for it here.

mod latches;
mod locks;
mod multi;
mod perform;
mod permits;
mod settle;

use redis_module::{Context, RedisError, RedisString};

use crate::core::requests::RequestKind;
use crate::core::shrink_map;
use crate::core::waitlist::{BlockedReply, LockId, WaiterId, Wants};
use crate::store::{self, FairQueue, RequestRecord, Unlock};
use crate::{ffi, state, stats, timers, waiters};

pub use locks::{left_to_redisson, purge_expired, review_queue};
pub use multi::{kept_for_multi, kept_lock_goes_to};
pub use perform::perform;
pub use permits::{lease_ends_at, lease_permits, reclaim_ended, tie_leases_to, watch_permits};
pub use settle::{settle_new_hold, settle_new_wait};

// The families' own self-started work, routed here by `perform`.
use locks::{leave_queue, look_at_queue, release_hold, requeue_missing};
use permits::{return_leases, return_permits};

/// Which family's file serves a name: told by what its longest waiter wants, else by
/// what the caller knows it to be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Locks,
    Permits,
    Latch,
}

/// The family that serves `lock` now: its head's, or `known`'s when nobody waits.
/// Unknown (a source that only saw the name): a semaphore while it has leases running,
/// else a lock.
fn family_of(lock: &LockId, known: Option<Family>) -> Family {
    match waiters::head_wants(lock) {
        Some((_, Wants::Permits(_))) => Family::Permits,
        Some((_, Wants::LatchOpen)) => Family::Latch,
        Some((_, Wants::Hold)) => Family::Locks,
        None => {
            known.unwrap_or_else(
                || match state::with(|s| s.leased_semaphores.contains(lock)) {
                    true => Family::Permits,
                    false => Family::Locks,
                },
            )
        }
    }
}

/// Passes `lock`, if free, to whoever is next, by what its longest waiter wants (see
/// `family_of`), then re-arms its timer. `ctx` must have `lock.db` selected. Writes
/// made here replicate with the caller's.
pub fn serve(ctx: &Context, lock: &LockId) {
    serve_as(ctx, lock, None);
}

/// `serve`, for a name its caller knows the family of (`known`).
fn serve_as(ctx: &Context, lock: &LockId, known: Option<Family>) {
    {
        let _turn = ServeTurn::begin();
        serve_turn(ctx, lock, known);
    }
    settle::settle_granted(ctx);
}

/// `serve`, before the holds it granted are settled.
fn serve_turn(ctx: &Context, lock: &LockId, known: Option<Family>) {
    if !ffi::is_primary(ctx) {
        return;
    }
    let _serving = Serving::begin(lock);
    match family_of(lock, known) {
        Family::Locks => locks::serve(ctx, lock),
        // The name is a semaphore or a latch, not a lock. A round of hand-offs kept
        // for the lock once under this name (deleted, expired, renamed away before
        // this serve ran) is over: nothing here would end it later.
        Family::Permits => {
            end_round(lock);
            permits::serve(ctx, lock);
        }
        Family::Latch => {
            end_round(lock);
            latches::open(ctx, lock);
        }
    }
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

/// A serve under way while alive (see `settle::settle_granted`).
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

/// Serves `key` in the current database after a command freed it. Free when
/// nothing waits and no fair queue is known.
pub fn serve_key(ctx: &Context, key: &RedisString) {
    if state::all_idle() {
        return;
    }
    serve(ctx, &store::lock_id(ctx, key));
}

/// Serves semaphore `key` in the current database after a command gave permits to it.
pub fn serve_permits_key(ctx: &Context, key: &RedisString) {
    if state::all_idle() {
        return;
    }
    serve_as(ctx, &store::lock_id(ctx, key), Some(Family::Permits));
}

/// Serves latch `key` in the current database after a command counted it down to zero.
pub fn serve_latch_key(ctx: &Context, key: &RedisString) {
    if state::all_idle() {
        return;
    }
    serve_as(ctx, &store::lock_id(ctx, key), Some(Family::Latch));
}

/// The module just freed lock `key` (a release, a force release): the next client
/// blocked here takes it, or, if it stays free, Redisson-style waiters hear `unlock`'s
/// message. A lock passed straight on is not announced: they would wake to find it taken.
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
    serve_as(ctx, lock, Some(Family::Locks));
    if !ffi::key_exists(ctx, &ffi::string(ctx, &lock.key)) {
        store::publish_unlock(ctx, &lock.key, unlock);
    }
}

/// Keeps `lock`'s timer at the moment it next needs attention, as its family does:
/// a lock's lease (see `locks::watch`), a semaphore's next lease end or look (see
/// `permits::watch`), a latch's expiry.
pub fn watch(ctx: &Context, lock: &LockId) {
    match family_of(lock, None) {
        Family::Permits if ffi::is_primary(ctx) => permits::watch(ctx, lock),
        Family::Latch if ffi::is_primary(ctx) => latches::watch(ctx, lock),
        _ => locks::watch(ctx, lock),
    }
}

/// Stops `lock`'s timer for a lock or latch that needs it no more, unless permit leases
/// run under the same name (a semaphore swapped, moved or renamed in under a lock's
/// waiter): the timer then watches their ends (see `permits::watch`), or they would
/// never be taken back until a call touched the semaphore.
fn stop_timer(ctx: &Context, lock: &LockId) {
    // The set first: it is empty but for semaphores with leases, and asking the server
    // for its role costs a lock's release more (about 2 % of a FAIR pair on Valkey).
    if state::with(|s| s.leased_semaphores.contains(lock)) && ffi::is_primary(ctx) {
        permits::watch(ctx, lock);
    } else {
        timers::cancel(ctx, lock);
    }
}

/// `lock`'s round of hand-offs with Redisson clients, if one is kept, is over.
fn end_round(lock: &LockId) {
    state::with(|s| s.sharing.forget(lock));
}

/// What came of offering a free lock to a waiter.
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

/// Gives free `lock` (named `key`) to waiter `id`, as it asked: its hold (`locks`,
/// taken off the fair `queue`'s head when it came from there), or, for a multi-key
/// call, every lock it waits for (`multi`; `past`: a lock kept for a multi-key call
/// ahead of it, given to it all the same).
fn grant(
    ctx: &Context,
    lock: &LockId,
    key: &RedisString,
    id: WaiterId,
    queue: Option<&FairQueue>,
    past: Option<&LockId>,
) -> Grant {
    let Some(waiter) = waiters::view(id) else {
        return Grant::Busy;
    };
    if waiter.more_locks.is_empty() {
        return locks::grant(ctx, lock, key, id, waiter, queue);
    }
    multi::grant_all(ctx, id, waiter, past)
}

/// Multi-key waiter `id` heads the line of free `lock` (named `key`): it takes every
/// lock it waits for, or, while one is held elsewhere, `lock` is kept free for it,
/// unless that closes a cycle of waits (see `settle::settle_owner`).
fn grant_kept(ctx: &Context, lock: &LockId, key: &RedisString, id: WaiterId) -> Grant {
    match grant(ctx, lock, key, id, None, None) {
        Grant::Busy if !ffi::key_exists(ctx, key) => {
            let owner = waiters::view(id).map(|w| w.owner).unwrap_or_default();
            match settle::settle_owner(ctx, &owner) {
                true => Grant::Granted,
                false => Grant::Busy,
            }
        }
        granted => granted,
    }
}

/// How a blocked `REQ` call granted before is answered now: the earlier reply of `kind`
/// recorded for `field` in `record`, while its holds still stand (`still_held`), with no
/// second grant; an error reading either, as its error. `None`: the call is new.
fn replayed(
    ctx: &Context,
    record: &RequestRecord,
    kind: RequestKind,
    field: &[u8],
    still_held: impl FnOnce() -> Result<bool, RedisError>,
) -> Option<BlockedReply> {
    let earlier = record
        .earlier_reply(ctx, kind, field)
        .and_then(|reply| match reply {
            Some(reply) if still_held()? => Ok(Some(reply)),
            _ => Ok(None),
        });
    match earlier {
        Ok(None) => None,
        Ok(Some(reply)) => Some(BlockedReply::Repeated(reply)),
        Err(error) => Some(BlockedReply::Failed(error.to_string())),
    }
}

/// Notes a hold granted to `owner` on `lock`, for `settle::settle_granted` once the serve
/// turn ends. Only when the hold could close a cycle: its owner waits here, and others
/// wait for `lock`.
fn settle_later(owner: &[u8], lock: &LockId) {
    if waiters::owner_waits(owner) && waiters::has_waiters(lock) {
        state::with(|s| s.granted_to_settle.push((owner.to_vec(), lock.clone())));
    }
}
