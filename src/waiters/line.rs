//! What the line of blocked calls looks like: the questions the hand-off and the
//! commands ask of it, read-only. Joining and leaving the line is `waiters`' business.

use redis_module::{Context, RedisString};

use crate::core::args::AcquireOptions;
use crate::core::rwlock::{hold_field, RwMode};
use crate::core::wait_stats::LiveKey;
use crate::core::waitlist::{LockId, Waiter, WaiterId, Wants};
use crate::{state, stats, store};

/// What the hand-off needs to know of a waiter.
pub struct WaiterView {
    /// The other locks of a multi-key acquire.
    pub more_locks: Vec<LockId>,
    pub owner: Vec<u8>,
    pub options: AcquireOptions,
    /// The connection that waits.
    pub client: u64,
    /// When its BLOCK runs out (unix ms).
    pub deadline: i64,
}

pub fn has_waiters(lock: &LockId) -> bool {
    state::with(|s| s.waiters.has_waiters(lock))
}

/// How many clients wait on `key` in the current database.
pub fn blocked_on(ctx: &Context, key: &RedisString) -> usize {
    let lock = store::lock_id(ctx, key);
    state::with(|s| s.waiters.waiting_on(&lock))
}

pub fn blocked_total() -> usize {
    state::with(|s| s.waiters.len())
}

/// How long the longest-waiting blocked call has waited so far, in ms (0 when none).
pub fn longest_wait_ms() -> i64 {
    let now = stats::now_us();
    state::with(|s| {
        s.waiters
            .oldest()
            .map_or(0, |w| now.saturating_sub(w.since_us) / 1000)
    }) as i64
}

/// Every lock with calls blocked on it now: how many, and how long they have waited.
pub fn live_keys() -> Vec<LiveKey> {
    let now = stats::now_us();
    state::with(|s| {
        s.waiters
            .lock_ids()
            .filter_map(|lock| {
                let mut line = s.waiters.line(lock).peekable();
                let kind = line.peek()?.family().kind();
                let (mut waiters, mut longest_usec, mut blocked_usec) = (0, 0, 0u64);
                for waiter in line {
                    let waited = now.saturating_sub(waiter.since_us);
                    waiters += 1;
                    longest_usec = longest_usec.max(waited);
                    blocked_usec = blocked_usec.saturating_add(waited);
                }
                Some(LiveKey {
                    lock: lock.clone(),
                    kind,
                    waiters,
                    longest_usec,
                    blocked_usec,
                })
            })
            .collect()
    })
}

/// The longest waiter on `lock` that did not ask for FAIR.
pub fn first_plain(lock: &LockId) -> Option<WaiterId> {
    state::with(|s| s.waiters.first_plain(lock))
}

/// The owner of the longest waiter on `lock`, when that waiter is a multi-key call.
pub fn multi_head_owner(lock: &LockId) -> Option<Vec<u8>> {
    state::with(|s| {
        s.waiters
            .head(lock)
            .filter(|(_, w)| w.is_multi())
            .map(|(_, w)| w.owner.clone())
    })
}

/// Whether waiter `id` may be given a lock kept for a multi-key call ahead of it: it
/// waits for a hold (plain, `FAIR`, a side of a read-write lock, or multi-key).
pub fn may_take_kept_lock(id: WaiterId) -> bool {
    state::with(|s| s.waiters.get(id).is_some_and(|w| w.wants == Wants::Hold))
}

/// The longest waiter on `lock` that asked for FAIR.
pub fn first_fair(lock: &LockId) -> Option<WaiterId> {
    state::with(|s| s.waiters.first_fair(lock))
}

pub fn has_fair(lock: &LockId) -> bool {
    state::with(|s| s.waiters.first_fair(lock).is_some())
}

/// The longest waiter of `owner` on `lock`, if it is blocked here.
pub fn find_owner(lock: &LockId, owner: &[u8]) -> Option<WaiterId> {
    state::with(|s| s.waiters.find_owner(lock, owner).map(|(id, _)| id))
}

/// The deadline of `owner`'s wait on `lock`, if it is blocked here.
pub fn blocked_deadline(lock: &LockId, owner: &[u8]) -> Option<i64> {
    state::with(|s| s.waiters.find_owner(lock, owner).map(|(_, w)| w.deadline))
}

/// Fair waiters blocked on `lock`, oldest first, with their BLOCK deadlines.
pub fn fair_waiters(lock: &LockId) -> Vec<(Vec<u8>, i64)> {
    state::with(|s| s.waiters.fair_on(lock))
}

/// The hash field that holds `owner`'s count: the owner itself, or on a read-write
/// lock the side's field. Sessions and undelivered grants are recorded by it.
pub fn hold_field_of(owner: &[u8], mode: Option<RwMode>) -> Vec<u8> {
    match mode {
        Some(mode) => hold_field(owner, mode),
        None => owner.to_vec(),
    }
}

/// What the longest waiter on `lock` waits for, and its id.
pub fn head_wants(lock: &LockId) -> Option<(WaiterId, Wants)> {
    state::with(|s| s.waiters.head(lock).map(|(id, w)| (id, w.wants)))
}

/// Whether waiter `id` waits for several locks at once (`RLOCK.MACQUIRE`).
pub fn is_multi(id: WaiterId) -> bool {
    state::with(|s| s.waiters.get(id).is_some_and(Waiter::is_multi))
}

/// Every lock waiter `id` waits for, in the order its call named them.
pub fn locks_of(id: WaiterId) -> Vec<LockId> {
    state::with(|s| {
        s.waiters
            .get(id)
            .map(|w| w.locks().cloned().collect())
            .unwrap_or_default()
    })
}

/// Whether waiter `id` is the longest waiter on `lock`.
pub fn is_head(lock: &LockId, id: WaiterId) -> bool {
    state::with(|s| s.waiters.head(lock).is_some_and(|(head, _)| head == id))
}

/// Whether the longest waiter on `lock` waits for several locks at once: it is served
/// when the last of them frees, not when this one does.
pub fn head_is_multi(lock: &LockId) -> bool {
    state::with(|s| s.waiters.head(lock).is_some_and(|(_, w)| w.is_multi()))
}

/// Whether waiter `id` asked for a side of a read-write lock.
pub fn is_read_write(id: WaiterId) -> bool {
    state::with(|s| s.waiters.get(id).is_some_and(|w| w.options.mode.is_some()))
}

pub fn view(id: WaiterId) -> Option<WaiterView> {
    state::with(|s| {
        s.waiters.get(id).map(|w| WaiterView {
            more_locks: w.more_locks.clone(),
            owner: w.owner.clone(),
            options: w.options,
            client: w.client,
            deadline: w.deadline,
        })
    })
}
