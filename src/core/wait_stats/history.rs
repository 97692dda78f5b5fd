//! `RLOCK.TOP`'s contention history: the keys blocked calls waited on, each with its own
//! ring over the window (waits, timeouts, blocked time, a coarse histogram of the granted
//! waits), bounded by space-saving (see the doc of `wait_stats`).

use std::collections::HashMap;

use super::ring::{merge, Ring, Samples};
use super::Outcome;
use crate::core::args::MAX_TOP_COUNT;
use crate::core::waitlist::LockId;

/// Keys the contention history remembers at most.
pub const MAX_KEYS: usize = MAX_TOP_COUNT as usize;
/// Keys forgotten at once when the history is full (a tenth of it).
pub(super) const FORGET_BATCH: usize = MAX_KEYS / 10;
/// Significant digits of a key's histograms (10% steps).
const KEY_DIGITS: u8 = 1;

/// The kind of key, as `RLOCK.TOP` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Lock,
    RwLock,
    Semaphore,
    Latch,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::RwLock => "rwlock",
            Kind::Semaphore => "semaphore",
            Kind::Latch => "latch",
        }
    }
}

/// One slot of a key's history.
struct KeySlot {
    waits: u64,
    timeouts: u64,
    /// Microseconds blocked by the calls that ended in this slot, whatever their end.
    usec: u64,
    granted: Samples<u16>,
}

impl KeySlot {
    fn new() -> KeySlot {
        KeySlot {
            waits: 0,
            timeouts: 0,
            usec: 0,
            granted: Samples::new(KEY_DIGITS),
        }
    }

    fn clear(&mut self) {
        self.waits = 0;
        self.timeouts = 0;
        self.usec = 0;
        self.granted.clear(true);
    }
}

/// A remembered key: its kind, its window, and the blocked time it inherited from the
/// key it replaced (space-saving's overestimate, used only to choose whom to forget).
struct KeyHistory {
    kind: Kind,
    inherited_usec: u64,
    ring: Ring<KeySlot>,
}

impl KeyHistory {
    fn blocked_usec(&self, now_ms: u64, window_ms: u64) -> u64 {
        self.ring
            .live(now_ms, window_ms)
            .map(|slot| slot.usec)
            .sum()
    }

    fn is_stale(&self, now_ms: u64, window_ms: u64) -> bool {
        self.ring
            .live(now_ms, window_ms)
            .all(|slot| slot.usec == 0 && slot.waits == 0 && slot.timeouts == 0)
    }
}

/// A key with calls blocked on it now, as the wait list sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveKey {
    pub lock: LockId,
    pub kind: Kind,
    pub waiters: u64,
    /// How long its longest-blocked call has waited so far.
    pub longest_usec: u64,
    /// How long all its blocked calls have waited so far, together.
    pub blocked_usec: u64,
}

/// One line of `RLOCK.TOP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopEntry {
    pub lock: LockId,
    pub kind: Kind,
    pub waiters: u64,
    pub longest_wait_ms: u64,
    /// Calls granted after blocking, in the window.
    pub waits: u64,
    pub timeouts: u64,
    pub wait_p99_usec: Option<u64>,
}

/// The contention history: every key remembered, and what newcomers inherit.
#[derive(Default)]
pub(super) struct History {
    keys: HashMap<LockId, KeyHistory>,
    /// The most blocked time a key forgotten last had: what newcomers inherit.
    forgotten_usec: u64,
}

impl History {
    /// A blocked call on `lock`, a key of `kind`, ended as `outcome` after `usec`.
    pub(super) fn record(
        &mut self,
        lock: &LockId,
        kind: Kind,
        now_ms: u64,
        window_ms: u64,
        outcome: Outcome,
        usec: u64,
    ) {
        let slot = self.remember(lock, kind, now_ms, window_ms).ring.current(
            now_ms,
            window_ms,
            KeySlot::clear,
        );
        slot.usec = slot.usec.saturating_add(usec);
        match outcome {
            Outcome::Granted => {
                slot.waits += 1;
                slot.granted.record(usec);
            }
            Outcome::TimedOut => slot.timeouts += 1,
            Outcome::Cancelled => {}
        }
    }

    /// `lock`'s history, made if new. When `MAX_KEYS` are remembered, room is made for
    /// `FORGET_BATCH` newcomers at once (`forget_least`), so a wait on a new key costs a
    /// pass over the history only once in `FORGET_BATCH` new keys, not every time.
    fn remember(
        &mut self,
        lock: &LockId,
        kind: Kind,
        now_ms: u64,
        window_ms: u64,
    ) -> &mut KeyHistory {
        if !self.keys.contains_key(lock) {
            if self.keys.len() >= MAX_KEYS {
                self.forget_least(now_ms, window_ms);
            }
            self.keys.insert(
                lock.clone(),
                KeyHistory {
                    kind,
                    inherited_usec: self.forgotten_usec,
                    ring: Ring::new(window_ms, KeySlot::new),
                },
            );
        }
        let key = self.keys.get_mut(lock).expect("inserted above");
        key.kind = kind;
        key
    }

    /// Makes room for `FORGET_BATCH` keys: keys gone from the window go first, then the
    /// least contended (blocked time in the window, plus what they inherited). Newcomers
    /// inherit the most any key of this batch had (space-saving's overestimate, used only to
    /// choose whom to forget), so one-off keys cannot push out a hot one.
    fn forget_least(&mut self, now_ms: u64, window_ms: u64) {
        self.keys.retain(|_, key| !key.is_stale(now_ms, window_ms));
        let excess = (self.keys.len() + FORGET_BATCH).saturating_sub(MAX_KEYS);
        if excess == 0 {
            return;
        }
        let mut scored: Vec<(u64, &LockId)> = self
            .keys
            .iter()
            .map(|(lock, key)| {
                (
                    key.blocked_usec(now_ms, window_ms) + key.inherited_usec,
                    lock,
                )
            })
            .collect();
        scored.select_nth_unstable_by_key(excess - 1, |(score, _)| *score);
        let forgotten = scored[..excess].iter().map(|(score, _)| *score).max();
        let doomed: Vec<LockId> = scored[..excess]
            .iter()
            .map(|(_, lock)| (*lock).clone())
            .collect();
        for lock in &doomed {
            self.keys.remove(lock);
        }
        self.forgotten_usec = forgotten.unwrap_or(0);
    }

    /// How many keys the history remembers.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The `count` most contended keys: those of `live` (blocked calls now) and those with
    /// blocked calls in the window, by calls blocked now, then by time blocked in the
    /// window (the ended waits', and the blocked calls' so far). Keys gone from the
    /// window are forgotten.
    pub(super) fn top(
        &mut self,
        live: Vec<LiveKey>,
        count: usize,
        now_ms: u64,
        window_ms: u64,
    ) -> Vec<TopEntry> {
        self.keys.retain(|_, key| !key.is_stale(now_ms, window_ms));
        let mut rows: HashMap<LockId, (TopEntry, u64)> = HashMap::new();
        for (lock, key) in &self.keys {
            let slots = || key.ring.live(now_ms, window_ms);
            let entry = TopEntry {
                lock: lock.clone(),
                kind: key.kind,
                waiters: 0,
                longest_wait_ms: 0,
                waits: slots().map(|s| s.waits).sum(),
                timeouts: slots().map(|s| s.timeouts).sum(),
                wait_p99_usec: merge(slots().map(|s| &s.granted))
                    .map(|h| h.value_at_quantile(0.99)),
            };
            rows.insert(lock.clone(), (entry, key.blocked_usec(now_ms, window_ms)));
        }
        for key in live {
            let (entry, blocked) = rows.entry(key.lock.clone()).or_insert_with(|| {
                let entry = TopEntry {
                    lock: key.lock.clone(),
                    kind: key.kind,
                    waiters: 0,
                    longest_wait_ms: 0,
                    waits: 0,
                    timeouts: 0,
                    wait_p99_usec: None,
                };
                (entry, 0)
            });
            entry.kind = key.kind;
            entry.waiters = key.waiters;
            entry.longest_wait_ms = key.longest_usec / 1000;
            *blocked = blocked.saturating_add(key.blocked_usec);
        }
        let mut rows: Vec<(TopEntry, u64)> = rows.into_values().collect();
        rows.sort_by(|(a, a_blocked), (b, b_blocked)| {
            (b.waiters, b_blocked)
                .cmp(&(a.waiters, a_blocked))
                .then_with(|| a.lock.cmp(&b.lock))
        });
        rows.truncate(count);
        rows.into_iter().map(|(entry, _)| entry).collect()
    }
}
