//! The fair lock's decisions, free of Redis. The queue is the Redisson pair of
//! keys: a list of owners in arrival order and a zset of their deadlines.

use super::args::Wait;
use super::hold::{decide_acquire, Acquire, HoldError, LockState};
use super::lease::MAX_BLOCK_MS;
use super::waitlist::WaiterId;

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

#[cfg(test)]
mod tests {
    use super::*;

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
