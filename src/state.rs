//! All the module's state, in one place: who waits, which holds end with their
//! connection, which fair queues and fencing counters are known, which timers are
//! armed, what work is deferred. `reset` empties it, on unload and when the server
//! stops being a primary.
//!
//! Closures given to `with` must not call into Redis: a callback it triggers could
//! come back here while the state is borrowed.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

use crate::core::deferred::DeferredWork;
use crate::core::fair::{KnownQueues, QueueSearch};
use crate::core::fences::FenceGrants;
use crate::core::guard::KnownCommands;
use crate::core::requests::RequestId;
use crate::core::semaphore::{PermitId, PermitIds};
use crate::core::sessions::SessionTable;
use crate::core::sharing::Sharing;
use crate::core::timer_table::TimerTable;
use crate::core::wait_stats::WaitStats;
use crate::core::waitlist::{BlockedReply, LockId, WaitList, WaiterId, Wants};
use crate::ffi::{self, BlockedClient, TimerId};

use redis_module::Context;

/// A grant on its way to a blocked client, until its reply callback runs.
#[derive(Debug)]
pub struct Undelivered {
    pub lock: LockId,
    /// The other locks of a multi-key grant: the same field on each.
    pub more_locks: Vec<LockId>,
    /// What was granted: a hold, or permits (given back to the semaphore).
    pub wants: Wants,
    /// The hold's hash field (see `waiters::hold_field_of`).
    pub field: Vec<u8>,
    pub reply: i64,
    /// Leased permits granted (`RSEM.LEASE`): given back by id.
    pub leased: Vec<PermitId>,
    /// The connection it goes to.
    pub client: u64,
    /// Taken with SESSION: the connection's close gives it back already.
    pub session: bool,
    /// The call's `REQ` id: its record goes when permits go back.
    pub req: Option<RequestId>,
}

#[derive(Default)]
pub struct State {
    /// Blocked clients, in arrival order per lock.
    pub waiters: WaitList<BlockedClient<BlockedReply>>,
    /// Blocked-client handle -> waiter, for the timeout and disconnect callbacks.
    pub waiter_by_handle: HashMap<usize, WaiterId>,
    /// Handles granted a lock whose reply is not yet delivered.
    pub undelivered: HashMap<usize, Undelivered>,
    /// The timer that ends each finite BLOCK, by blocked-client handle.
    pub wait_timers: HashMap<usize, TimerId>,
    /// SESSION holds by connection.
    pub sessions: SessionTable,
    /// Permits leased with SESSION, by connection: the semaphore and the permit id's
    /// 16 bytes, in place of a lock and an owner.
    pub session_permits: SessionTable,
    /// Semaphores with leases the module watches: its timer takes each lease back when
    /// it ends.
    pub leased_semaphores: HashSet<LockId>,
    /// Where new permit ids come from; seeded on first use.
    pub permit_ids: Option<PermitIds>,
    /// Turns between the clients blocked here and Redisson clients on each lock.
    pub sharing: Sharing,
    /// Locks with a fair queue that their releases must serve, each looked at again by
    /// its earliest deadline.
    pub fair_queues: KnownQueues,
    /// The search for fair queues the module does not know yet, while one is under way.
    pub queue_search: Option<QueueSearch>,
    /// The token the module last handed out on each fenced lock, and to whom.
    pub fences: FenceGrants,
    /// What the server said of the commands `RLOCK.GUARD` was asked to run.
    pub known_commands: KnownCommands,
    /// One lease timer per watched lock.
    pub lease_timers: TimerTable,
    /// Self-started work waiting for its timer.
    pub deferred: DeferredWork,
    /// The 0 ms timer that runs the deferred work, while armed.
    pub deferred_timer: Option<TimerId>,
    /// In a cluster, while clients wait: the timer that checks their locks' slots.
    pub slot_sweep: Option<TimerId>,
    /// The connection the server is closing now. Both servers announce a closing
    /// connection (the client-change event) before they call the disconnect
    /// callbacks of its blocked commands, so those callbacks can tell a client
    /// that is gone from one that is merely unblocked.
    pub disconnecting: Option<u64>,
    /// How long blocked calls waited, how their waits ended, the most contended keys.
    /// Kept when the server becomes a replica; gone with the module.
    pub wait_stats: WaitStats,
    /// Locks with blocked waiters that became free before the turn that serves them
    /// (a lease deadline, a delete, a closed connection): when, on `stats::now_us`.
    pub freed_at: HashMap<LockId, u64>,
    /// While the hand-off serves a lock: when it became free. Its grants are hand-offs.
    pub serving_since: Option<u64>,
    /// Holds granted (owner, lock) whose cycles of waits are judged once the grants of
    /// the turn are all made (see `handoff::settle::settle_granted`), and whether that is running.
    pub granted_to_settle: Vec<(Vec<u8>, LockId)>,
    pub settling: bool,
    /// How many `handoff::serve` calls are under way (they nest).
    pub serve_depth: u32,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
    /// Set while the module announces its own writes, so its keyspace handler
    /// ignores them. A `Cell`, since it is read from inside those announcements.
    static OWN_WRITE: Cell<bool> = const { Cell::new(false) };
}

pub fn with<T>(f: impl FnOnce(&mut State) -> T) -> T {
    STATE.with(|state| f(&mut state.borrow_mut()))
}

/// Empties all state, on unload and when the server stops being a primary:
/// stops every timer, and answers every blocked client with `reason` (`None`
/// when none can be blocked). Fencing counters are looked up from then on.
pub fn reset(ctx: &Context, reason: Option<&str>) {
    let mut old = with(std::mem::take);
    if reason.is_some() {
        // A demotion: what the waits cost so far stays for INFO; unloading drops it.
        with(|s| s.wait_stats = std::mem::take(&mut old.wait_stats));
    }
    for timer in old
        .lease_timers
        .drain()
        .into_iter()
        .chain(old.wait_timers.into_values())
        .chain(old.deferred_timer)
        .chain(old.slot_sweep)
    {
        ffi::stop_timer(ctx, timer);
    }
    for waiter in old.waiters.drain() {
        match reason {
            Some(reason) => waiter
                .handle
                .unblock(BlockedReply::Failed(reason.to_string())),
            None => drop(waiter.handle),
        }
    }
}

/// True when no client waits, no fair queue is tracked, no lease timer is armed and no
/// lock shares turns with Redisson clients: the common, uncontended case, where releases
/// need not look for waiters.
pub fn all_idle() -> bool {
    with(|s| {
        s.waiters.is_empty()
            && s.fair_queues.is_empty()
            && s.lease_timers.is_empty()
            && s.sharing.is_empty()
            && s.leased_semaphores.is_empty()
    })
}

/// A new permit id, never handed out before by this server.
pub fn next_permit_id() -> PermitId {
    with(|s| {
        s.permit_ids
            .get_or_insert_with(|| PermitIds::new(permit_id_seed()))
            .next_id()
    })
}

/// The clock's nanoseconds and the process id: two servers started at once differ.
fn permit_id_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 40)
}

/// Marks the module's own writes while alive; unmarks on drop, panics included.
pub struct OwnWrite {
    before: bool,
}

pub fn own_write() -> OwnWrite {
    OwnWrite {
        before: OWN_WRITE.with(|flag| flag.replace(true)),
    }
}

impl Drop for OwnWrite {
    fn drop(&mut self) {
        OWN_WRITE.with(|flag| flag.set(self.before));
    }
}

pub fn is_own_write() -> bool {
    OWN_WRITE.with(Cell::get)
}

/// Searches the keyspace again for fair queues the module does not know (see
/// `core::fair::QueueSearch`), from the first database, on the next cron ticks.
pub fn search_queues() {
    with(|s| s.queue_search = Some(QueueSearch::default()));
}

/// Locks the module keeps state for: waiters, session holds, fair queues.
pub fn tracked_locks() -> usize {
    with(|s| {
        let mut locks: HashSet<&LockId> = s.waiters.lock_ids().collect();
        locks.extend(s.sessions.locks());
        locks.extend(s.fair_queues.iter());
        locks.extend(s.sharing.locks());
        locks.extend(s.session_permits.locks());
        locks.extend(s.leased_semaphores.iter());
        locks.len()
    })
}

/// `lock` became free at `at_us` (`stats::now_us`), and will be served on a later turn:
/// noted if clients wait on it, so the hand-off can say how long the lock stayed free.
pub fn mark_freed(lock: &LockId, at_us: u64) {
    with(|s| {
        if s.waiters.has_waiters(lock) {
            let at = s.freed_at.entry(lock.clone()).or_insert(at_us);
            *at = (*at).min(at_us);
        }
    })
}
