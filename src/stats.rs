//! Counters shown by `INFO rlock`, and the clock its wait statistics go by.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

pub struct Counter(AtomicI64);

impl Counter {
    const fn new() -> Counter {
        Counter(AtomicI64::new(0))
    }

    pub fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn incr(&self) {
        self.add(1);
    }

    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    fn zero(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// Locks taken from free.
pub static ACQUIRES: Counter = Counter::new();
/// Re-entries by the holder.
pub static REENTRIES: Counter = Counter::new();
/// Holds fully released by their owner (re-entries undone are not counted).
pub static RELEASES: Counter = Counter::new();
/// Locks passed straight to a blocked waiter.
pub static HANDOFFS: Counter = Counter::new();
/// Atomic slot migrations (Valkey 9, Redis 8.4) that handed slots of this node over.
pub static SLOT_EXPORTS: Counter = Counter::new();
/// Lease expiries of locks the module was watching.
pub static EXPIRIES: Counter = Counter::new();
/// Holds released because their SESSION connection closed.
pub static SESSION_RELEASES: Counter = Counter::new();
/// Locks force-released.
pub static FORCE_RELEASES: Counter = Counter::new();
/// Read holds taken on read-write locks (re-entries included).
pub static READ_ACQUIRES: Counter = Counter::new();
/// Write holds taken on read-write locks (re-entries included).
pub static WRITE_ACQUIRES: Counter = Counter::new();
/// `RLOCK.MACQUIRE` calls that took their locks at once (not counting blocked ones).
pub static MULTI_ACQUIRES: Counter = Counter::new();
/// `RLOCK.MRELEASE` calls that released their locks.
pub static MULTI_RELEASES: Counter = Counter::new();
/// Semaphore permits taken by a call (`RSEM.ACQUIRE` that did not wait).
pub static PERMIT_ACQUIRES: Counter = Counter::new();
/// Semaphore permits passed to a blocked `RSEM.ACQUIRE`.
pub static PERMIT_HANDOFFS: Counter = Counter::new();
/// Permits given back (`RSEM.RELEASE`, `RSEM.ADDPERMITS` adding).
pub static PERMIT_RELEASES: Counter = Counter::new();
/// Permits leased (`RSEM.LEASE`, blocked or not).
pub static PERMIT_LEASES: Counter = Counter::new();
/// Leased permits given back (`RSEM.RETURN`, a SESSION connection closing).
pub static PERMIT_RETURNS: Counter = Counter::new();
/// Leased permits taken back at the end of their lease (by the module's timer, or on
/// its next look at the semaphore).
pub static PERMIT_RECLAIMS: Counter = Counter::new();
/// Count-downs of latches (`RLATCH.COUNTDOWN`).
pub static LATCH_COUNTDOWNS: Counter = Counter::new();
/// Blocked calls whose `BLOCK` ran out, every family.
pub static WAIT_TIMEOUTS: Counter = Counter::new();
/// Blocked calls that ended because their client left or was unblocked.
pub static WAIT_CANCELS: Counter = Counter::new();
/// Calls refused with `DEADLOCK`: at once, or blocked and refused when a grant closed a
/// cycle.
pub static DEADLOCKS: Counter = Counter::new();
/// `RLOCK.GUARD` calls that ran their inner command.
pub static GUARD_CALLS: Counter = Counter::new();
/// `RLOCK.GUARD` calls refused because the owner did not hold the lock (`NOTHELD`) or
/// its token was stale (`STALETOKEN`).
pub static GUARD_REFUSALS: Counter = Counter::new();
/// Of those, the stale tokens.
pub static GUARD_STALE_TOKENS: Counter = Counter::new();

/// Every counter above: `RLOCK.RESETSTAT` zeroes them.
const ALL: &[&Counter] = &[
    &ACQUIRES,
    &REENTRIES,
    &RELEASES,
    &HANDOFFS,
    &SLOT_EXPORTS,
    &EXPIRIES,
    &SESSION_RELEASES,
    &FORCE_RELEASES,
    &READ_ACQUIRES,
    &WRITE_ACQUIRES,
    &MULTI_ACQUIRES,
    &MULTI_RELEASES,
    &PERMIT_ACQUIRES,
    &PERMIT_HANDOFFS,
    &PERMIT_RELEASES,
    &PERMIT_LEASES,
    &PERMIT_RETURNS,
    &PERMIT_RECLAIMS,
    &LATCH_COUNTDOWNS,
    &WAIT_TIMEOUTS,
    &WAIT_CANCELS,
    &DEADLOCKS,
    &GUARD_CALLS,
    &GUARD_REFUSALS,
    &GUARD_STALE_TOKENS,
];

/// Zeroes every counter (`RLOCK.RESETSTAT`).
pub fn zero_counters() {
    for counter in ALL.iter() {
        counter.zero();
    }
}

/// Microseconds of a monotonic clock (from the first call): when a wait began, how
/// long it lasted. Read only where a call blocks or a blocked call ends.
pub fn now_us() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}
