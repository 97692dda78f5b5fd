//! The fair lock's decisions, free of Redis. The queue is the Redisson pair of
//! keys: a list of owners in arrival order and a zset of their deadlines.

use std::collections::{BTreeSet, HashMap};

use super::args::Wait;
use super::hold::{decide_acquire, Acquire, HoldError, LockState};
use super::lease::MAX_BLOCK_MS;
use super::shrink_map;
use super::waitlist::{LockId, WaiterId};

/// What a fair acquire does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairAcquire {
    /// Take the free lock; `from_head` when the caller was the queue's head.
    Take {
        from_head: bool,
    },
    Reenter {
        count: i64,
    },
    /// Join the queue, or keep its place in it.
    Queue,
}

/// A fair caller may take a free lock only when nobody queues before it.
pub fn decide_fair_acquire(
    state: LockState,
    head: Option<&[u8]>,
    owner: &[u8],
) -> Result<FairAcquire, HoldError> {
    match decide_acquire(state)? {
        Acquire::Reenter { count } => Ok(FairAcquire::Reenter { count }),
        Acquire::Busy => Ok(FairAcquire::Queue),
        Acquire::Take => match head {
            None => Ok(FairAcquire::Take { from_head: false }),
            Some(head) if head == owner => Ok(FairAcquire::Take { from_head: true }),
            Some(_) => Ok(FairAcquire::Queue),
        },
    }
}

/// The deadline (unix ms) of a queue entry: a blocked waiter's lasts as long as
/// its BLOCK; a polling caller's for `fair_wait_ms`, renewed on each call.
pub fn queue_deadline(now_ms: i64, block: Option<Wait>, fair_wait_ms: i64) -> i64 {
    let wait = match block {
        None => fair_wait_ms,
        Some(Wait::Forever) => MAX_BLOCK_MS,
        Some(Wait::For(ms)) => ms,
    };
    now_ms.saturating_add(wait)
}

/// The zset score of a blocked waiter's entry: its BLOCK deadline, but never
/// more than `fair_wait_ms` ahead. Redisson clients queue behind it with
/// cumulative deadlines, and a dead one must not inherit `BLOCK 0`'s 35 years.
/// While the waiter stays blocked, the module restores the score when it passes.
pub fn blocked_score(now_ms: i64, block_deadline: i64, fair_wait_ms: i64) -> i64 {
    block_deadline.min(now_ms.saturating_add(fair_wait_ms))
}

/// What to do with a queue entry whose deadline has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// A dead or silent waiter: drop it.
    Purge,
    /// A waiter still blocked here whose entry someone re-scored (a Redisson
    /// client does on every acquire): put its real deadline back.
    Restore(i64),
}

pub fn on_expired(blocked_deadline: Option<i64>, now_ms: i64, fair_wait_ms: i64) -> Expired {
    match blocked_deadline {
        Some(deadline) if deadline > now_ms => {
            Expired::Restore(blocked_score(now_ms, deadline, fair_wait_ms))
        }
        _ => Expired::Purge,
    }
}

/// The fair queue's head, as the hand-off sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FairHead {
    /// No queue, or an empty one.
    Nobody,
    /// The head is a client blocked here.
    Blocked(WaiterId),
    /// The head waits elsewhere: an rlock caller that polls, or a Redisson client.
    Elsewhere(Vec<u8>),
}

/// Whom a free lock goes to next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Turn {
    /// The fair queue's head, blocked here.
    Fair(WaiterId),
    /// The longest waiter without FAIR.
    Plain(WaiterId),
    /// Nobody blocked here may take it: wake the queue's head on its channel.
    WakeHead(Vec<u8>),
    Nobody,
}

/// The order between plain and fair waiters. FAIR callers take turns in the fair
/// queue; callers without FAIR never wait for that queue, as Redisson's plain lock
/// ignores it. So a free lock goes to the longest-blocked waiter that may take it:
/// the queue's head if it is blocked here, or the longest plain waiter, whichever
/// came first. A head that polls keeps its turn against FAIR callers only, and is
/// woken when nobody blocked here may take the lock.
pub fn next_turn(head: FairHead, first_plain: Option<WaiterId>) -> Turn {
    match (head, first_plain) {
        (FairHead::Blocked(fair), Some(plain)) if plain < fair => Turn::Plain(plain),
        (FairHead::Blocked(fair), _) => Turn::Fair(fair),
        (_, Some(plain)) => Turn::Plain(plain),
        (FairHead::Elsewhere(owner), None) => Turn::WakeHead(owner),
        (FairHead::Nobody, None) => Turn::Nobody,
    }
}

/// Where the search for fair queues the module does not know stands. After a promotion,
/// `MODULE LOAD` or a load from an AOF, the queues in the keyspace are unknown (an RDB
/// load raises an event for each, which the module hears; an AOF, a replica's stream and
/// a module loaded on data do not): every database is searched for Redisson's deadline
/// zsets, a few `SCAN` steps per cron tick, and each queue found is tracked at once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSearch {
    pub db: i32,
    /// `SCAN`'s cursor in `db`; 0 also at its start.
    pub cursor: u64,
}

impl QueueSearch {
    /// Where the search goes after a step in `db` that returned `next`: on in `db`,
    /// or, at the end of its scan, to the next database.
    pub fn after(self, next: u64) -> QueueSearch {
        match next {
            0 => QueueSearch {
                db: self.db + 1,
                cursor: 0,
            },
            cursor => QueueSearch { cursor, ..self },
        }
    }
}

/// The fair queues the module tracks, each with the moment it is to be looked at
/// again: its earliest entry's deadline, when that entry goes if its caller stopped
/// calling (see `handoff::locks::look_at_queue`). Every tracked queue has such a moment, so
/// none is tracked, nor left in the keyspace, past its last deadline.
#[derive(Debug, Default)]
pub struct KnownQueues {
    look_at: HashMap<LockId, i64>,
    by_time: BTreeSet<(i64, LockId)>,
}

/// How long after a look was due it is due again if nothing answered it (the work
/// could not run: writes paused, the queue half migrated).
pub const LOOK_AGAIN_MS: i64 = 1000;

impl KnownQueues {
    pub fn contains(&self, lock: &LockId) -> bool {
        self.look_at.contains_key(lock)
    }

    pub fn is_empty(&self) -> bool {
        self.look_at.is_empty()
    }

    pub fn len(&self) -> usize {
        self.look_at.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &LockId> {
        self.look_at.keys()
    }

    /// When `lock`'s queue is next looked at, if it is tracked.
    pub fn next_look(&self, lock: &LockId) -> Option<i64> {
        self.look_at.get(lock).copied()
    }

    /// Tracks `lock`'s queue, looked at again by `at` (unix ms) at the latest: an
    /// earlier look already set stays.
    pub fn look_by(&mut self, lock: &LockId, at: i64) {
        match self.look_at.get(lock) {
            Some(&set) if set <= at => {}
            _ => self.look_at(lock, at),
        }
    }

    /// Tracks `lock`'s queue, looked at again at `at` (after a look: its earliest deadline).
    pub fn look_at(&mut self, lock: &LockId, at: i64) {
        if let Some(before) = self.look_at.insert(lock.clone(), at) {
            self.by_time.remove(&(before, lock.clone()));
        }
        self.by_time.insert((at, lock.clone()));
    }

    /// Stops tracking `lock`'s queue.
    pub fn remove(&mut self, lock: &LockId) {
        if let Some(at) = self.look_at.remove(lock) {
            self.by_time.remove(&(at, lock.clone()));
            shrink_map(&mut self.look_at);
        }
    }

    /// Stops tracking every queue `gone` says is gone.
    pub fn remove_where(&mut self, gone: impl Fn(&LockId) -> bool) {
        let locks: Vec<LockId> = self.look_at.keys().filter(|l| gone(l)).cloned().collect();
        for lock in &locks {
            self.remove(lock);
        }
    }

    /// The queues due to be looked at by `now_ms`. They stay tracked, due again
    /// `LOOK_AGAIN_MS` later unless the look sets their next moment or ends them.
    pub fn due(&mut self, now_ms: i64) -> Vec<LockId> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.by_time.first() {
            if *at > now_ms {
                break;
            }
            let (_, lock) = self.by_time.pop_first().expect("first");
            due.push(lock);
        }
        for lock in &due {
            let again = now_ms.saturating_add(LOOK_AGAIN_MS);
            self.look_at.insert(lock.clone(), again);
            self.by_time.insert((again, lock.clone()));
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::core::waitlist::lock_in_db0 as lock;

    #[test]
    fn known_queues_are_due_at_their_next_look() {
        let mut queues = KnownQueues::default();
        queues.look_by(&lock("a"), 500);
        queues.look_by(&lock("b"), 300);
        queues.look_by(&lock("a"), 900); // Later: the earlier look stays.
        assert_eq!(queues.next_look(&lock("a")), Some(500));
        assert!(queues.due(299).is_empty());
        assert_eq!(queues.due(300), vec![lock("b")]);
        // Still tracked, due again unless the look answered.
        assert!(queues.contains(&lock("b")));
        assert_eq!(queues.next_look(&lock("b")), Some(300 + LOOK_AGAIN_MS));
        queues.look_at(&lock("b"), 2000); // The look set its next deadline.
        assert_eq!(queues.due(600), vec![lock("a")]);
        queues.remove(&lock("a"));
        assert_eq!(queues.len(), 1);
        assert!(queues.due(1999).is_empty());
        assert_eq!(queues.due(2000), vec![lock("b")]);
        queues.remove_where(|l| l.key == b"b");
        assert!(queues.is_empty());
        assert!(queues.due(i64::MAX).is_empty());
    }

    #[test]
    fn the_queue_search_goes_through_every_database() {
        let start = QueueSearch::default();
        assert_eq!(start.after(17), QueueSearch { db: 0, cursor: 17 });
        assert_eq!(start.after(17).after(0), QueueSearch { db: 1, cursor: 0 });
    }

    #[test]
    fn plain_and_fair_waiters_are_served_in_arrival_order() {
        assert_eq!(next_turn(FairHead::Blocked(3), Some(5)), Turn::Fair(3));
        assert_eq!(next_turn(FairHead::Blocked(7), Some(5)), Turn::Plain(5));
        assert_eq!(next_turn(FairHead::Blocked(7), None), Turn::Fair(7));
        assert_eq!(next_turn(FairHead::Nobody, Some(5)), Turn::Plain(5));
        assert_eq!(next_turn(FairHead::Nobody, None), Turn::Nobody);
    }

    #[test]
    fn a_polling_head_never_holds_back_a_plain_waiter() {
        let poller = FairHead::Elsewhere(b"p".to_vec());
        assert_eq!(next_turn(poller.clone(), Some(9)), Turn::Plain(9));
        assert_eq!(next_turn(poller, None), Turn::WakeHead(b"p".to_vec()));
    }

    const FREE: LockState = LockState::Free;

    #[test]
    fn a_free_lock_goes_to_the_head_only() {
        assert_eq!(
            decide_fair_acquire(FREE, None, b"a"),
            Ok(FairAcquire::Take { from_head: false })
        );
        assert_eq!(
            decide_fair_acquire(FREE, Some(b"a"), b"a"),
            Ok(FairAcquire::Take { from_head: true })
        );
        assert_eq!(
            decide_fair_acquire(FREE, Some(b"b"), b"a"),
            Ok(FairAcquire::Queue)
        );
    }

    #[test]
    fn holders_reenter_without_queueing() {
        let held = LockState::Held {
            own_count: Some(1),
            holders: 1,
        };
        assert_eq!(
            decide_fair_acquire(held, Some(b"b"), b"a"),
            Ok(FairAcquire::Reenter { count: 2 })
        );
        let other = LockState::Held {
            own_count: None,
            holders: 1,
        };
        assert_eq!(
            decide_fair_acquire(other, None, b"a"),
            Ok(FairAcquire::Queue)
        );
    }

    #[test]
    fn deadlines_follow_block_or_fair_wait() {
        assert_eq!(queue_deadline(1000, None, 300_000), 301_000);
        assert_eq!(queue_deadline(1000, Some(Wait::For(50)), 300_000), 1050);
        assert_eq!(
            queue_deadline(1000, Some(Wait::Forever), 300_000),
            1000 + MAX_BLOCK_MS
        );
    }

    #[test]
    fn expired_entries_of_live_waiters_are_restored() {
        assert_eq!(on_expired(None, 10, 100), Expired::Purge);
        assert_eq!(on_expired(Some(5), 10, 100), Expired::Purge);
        assert_eq!(on_expired(Some(50), 10, 100), Expired::Restore(50));
        assert_eq!(on_expired(Some(5000), 10, 100), Expired::Restore(110));
    }

    #[test]
    fn blocked_scores_stay_within_fair_wait() {
        assert_eq!(blocked_score(1000, 1500, 300_000), 1500);
        assert_eq!(blocked_score(1000, 1000 + MAX_BLOCK_MS, 300_000), 301_000);
    }
}
