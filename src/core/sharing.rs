//! Sharing a lock between the clients blocked here and Redisson clients waiting on its
//! unlock channel, free of Redis.
//!
//! A Redisson client waits on `redisson_lock__channel:{K}`: it tries its script when an
//! unlock message arrives, or when the holder's lease runs out. If every release went
//! straight to a client blocked here, a Redisson client would find the lock taken
//! every time it woke (measured: 1 acquisition in 1,531). So while Redisson clients
//! are subscribed, the lock is left free for them for a short window once per round
//! of the blocked waiters: a round is a direct hand-off to each client blocked and to
//! the one releasing, so a Redisson connection gets about the share of one of them.
//! Without subscribers the module never waits.

use std::collections::HashMap;

use super::waitlist::LockId;

/// How long a freed lock is left to Redisson clients before the next blocked client
/// gets it: a Redisson client hears the message and runs its script in well under a
/// millisecond on one host; the margin covers a loaded machine.
pub const WINDOW_MS: i64 = 5;

/// Per lock: direct hand-offs since Redisson clients last had a window, and the end
/// of the window open now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Turns {
    pub handoffs: u64,
    pub window_until: Option<i64>,
}

/// What `serve` does with a free lock whose next waiter is a plain blocked client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Grant the blocked client.
    Grant,
    /// A window is open until this time (unix ms): nobody blocked is served before.
    Wait { until: i64 },
    /// Ask how many Redisson clients are subscribed, then call `after_count`.
    CountSubscribers,
}

/// The lock-sharing bookkeeping of every lock with waiters.
#[derive(Debug, Default)]
pub struct Sharing {
    turns: HashMap<LockId, Turns>,
}

impl Sharing {
    /// The next step for a free `lock` with `blocked` plain clients blocked on it. A
    /// round is those clients and the one that just released (it usually comes back):
    /// `blocked + 1` direct hand-offs.
    pub fn next(&mut self, lock: &LockId, blocked: usize, now_ms: i64) -> Next {
        // Nothing handed off yet: nothing to remember.
        let Some(turns) = self.turns.get_mut(lock) else {
            return Next::Grant;
        };
        if let Some(until) = turns.window_until {
            if now_ms < until {
                return Next::Wait { until };
            }
            turns.window_until = None;
        }
        if turns.handoffs > blocked as u64 {
            Next::CountSubscribers
        } else {
            Next::Grant
        }
    }

    /// With `subscribers` connections on the unlock channel: opens a window (and
    /// returns its end) or, with none, starts a new round and grants.
    pub fn after_count(&mut self, lock: &LockId, subscribers: i64, now_ms: i64) -> Next {
        let turns = self.turns.entry(lock.clone()).or_default();
        turns.handoffs = 0;
        if subscribers > 0 {
            let until = now_ms + WINDOW_MS;
            turns.window_until = Some(until);
            Next::Wait { until }
        } else {
            Next::Grant
        }
    }

    /// A blocked client was granted `lock`.
    pub fn handed_off(&mut self, lock: &LockId) {
        self.turns.entry(lock.clone()).or_default().handoffs += 1;
    }

    /// Someone else wrote `lock` (a Redisson client took it): a window open on it has
    /// served its turn.
    pub fn end_window(&mut self, lock: &LockId) {
        if let Some(turns) = self.turns.get_mut(lock) {
            turns.window_until = None;
        }
    }

    /// The end of the window open on `lock`, if one is.
    pub fn window_until(&self, lock: &LockId, now_ms: i64) -> Option<i64> {
        self.turns
            .get(lock)
            .and_then(|t| t.window_until)
            .filter(|until| now_ms < *until)
    }

    /// `lock` is free and nobody is blocked on it: nothing to remember.
    pub fn forget(&mut self, lock: &LockId) {
        if self.turns.remove(lock).is_some() {
            super::shrink_map(&mut self.turns);
        }
    }

    pub fn contains(&self, lock: &LockId) -> bool {
        self.turns.contains_key(lock)
    }

    pub fn locks(&self) -> impl Iterator<Item = &LockId> {
        self.turns.keys()
    }

    pub fn len(&self) -> usize {
        self.turns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock() -> LockId {
        crate::core::waitlist::lock_in_db0("k")
    }

    /// After one hand-off of `l`, with nobody blocked: the next release counts subscribers.
    fn counting(l: &LockId) -> Sharing {
        let mut s = Sharing::default();
        s.handed_off(l);
        assert_eq!(s.next(l, 0, 0), Next::CountSubscribers);
        s
    }

    #[test]
    fn a_round_of_hand_offs_then_a_window_when_someone_listens() {
        let mut s = Sharing::default();
        let l = lock();
        // Three clients pass the lock around, two blocked at each release: a round is
        // three direct hand-offs.
        for _ in 0..3 {
            assert_eq!(s.next(&l, 2, 0), Next::Grant);
            s.handed_off(&l);
        }
        assert_eq!(s.next(&l, 2, 0), Next::CountSubscribers);
        assert_eq!(s.after_count(&l, 1, 100), Next::Wait { until: 105 });
        assert_eq!(s.next(&l, 2, 104), Next::Wait { until: 105 });
        assert_eq!(s.window_until(&l, 104), Some(105));
        // The window ran out unused: the blocked get their round again.
        assert_eq!(s.window_until(&l, 105), None);
        assert_eq!(s.next(&l, 2, 105), Next::Grant);
    }

    #[test]
    fn a_lock_never_handed_off_is_not_remembered() {
        let mut s = Sharing::default();
        assert_eq!(s.next(&lock(), 5, 0), Next::Grant);
        assert!(s.is_empty());
    }

    #[test]
    fn a_window_serves_one_turn() {
        let l = lock();
        let mut s = counting(&l);
        assert_eq!(s.after_count(&l, 1, 0), Next::Wait { until: 5 });
        // A Redisson client took the lock, and gave it back within the window.
        s.end_window(&l);
        assert_eq!(s.next(&l, 0, 1), Next::Grant);
    }

    #[test]
    fn without_subscribers_nobody_waits() {
        let l = lock();
        let mut s = counting(&l);
        assert_eq!(s.after_count(&l, 0, 0), Next::Grant);
        // A new round: no count until it is over.
        assert_eq!(s.next(&l, 0, 0), Next::Grant);
        assert_eq!(s.window_until(&l, 0), None);
    }

    #[test]
    fn a_client_alone_alternates_with_the_listeners() {
        let mut s = Sharing::default();
        let l = lock();
        assert_eq!(s.next(&l, 0, 0), Next::Grant);
        s.handed_off(&l);
        assert_eq!(s.next(&l, 0, 1), Next::CountSubscribers);
        assert_eq!(s.after_count(&l, 2, 1), Next::Wait { until: 6 });
        s.forget(&l);
        assert!(s.is_empty());
        assert_eq!(s.next(&l, 0, 2), Next::Grant);
    }
}
