//! What blocked calls cost their callers, free of Redis: how long they waited, how their
//! waits ended, how fast a freed lock reached its next holder, and which keys are the
//! most contended. `INFO rlock`, `RLOCK.TOP` and `RLOCK.RESETSTAT` read and clear it.
//!
//! Only blocked calls are recorded: a call granted at once never reaches this file.
//!
//! The window (`rlock.stats-window-ms`, W) is a ring of `SLOTS` slots of W / `SLOTS` ms
//! each, by the clock: a sample goes to the slot of its moment, a slot reused for a
//! later moment is emptied first, and a read merges the slots of the last `SLOTS`
//! periods. So "the window" is the last W ms, less up to one slot (W / 6): at the
//! default 60 s, between 50 and 60 s. Changing W starts every window afresh.
//!
//! Memory is bounded whatever the load. A family's window holds at most `SLOTS`
//! histograms of 3,840 `u32` counts (1 us to 2^36 us, two significant digits: 15 KiB
//! each), allocated when a slot first gets a sample and reused after: 8 families and
//! the hand-offs, at most 830 KiB. The contention history keeps at most `MAX_KEYS` keys
//! (space-saving: when full, the tenth with the least blocked time in the window, plus
//! what they inherited, goes at once, and newcomers inherit the most any of them had), each with `SLOTS` slots of four counters and
//! a histogram of 544 `u16` counts (one significant digit: 1.1 KiB) made when the slot
//! first gets a sample: at most about 7 MiB with 1,000 keys contended in every slot.

use std::collections::HashMap;

use hdrhistogram::{Counter, Histogram};

use super::args::{AcquireOptions, MAX_TOP_COUNT};
use super::rwlock::RwMode;
use super::waitlist::{LockId, Waiter, Wants};

/// Slots in a window's ring.
pub const SLOTS: usize = 6;
/// Keys the contention history remembers at most.
pub const MAX_KEYS: usize = MAX_TOP_COUNT as usize;
/// Keys forgotten at once when the history is full (a tenth of it).
const FORGET_BATCH: usize = MAX_KEYS / 10;
/// Waits longer than this (about 19 hours) count as this long.
const HIGHEST_USEC: u64 = 1 << 36;
/// Significant digits of the family and hand-off histograms (1% steps).
const FAMILY_DIGITS: u8 = 2;
/// Significant digits of a key's histograms (10% steps).
const KEY_DIGITS: u8 = 1;

/// What a blocked call waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// `RLOCK.ACQUIRE ... BLOCK`.
    Lock,
    /// `RLOCK.ACQUIRE ... FAIR BLOCK`.
    Fair,
    /// `RLOCK.ACQUIRE ... READ BLOCK`.
    Read,
    /// `RLOCK.ACQUIRE ... WRITE BLOCK`.
    Write,
    /// `RLOCK.MACQUIRE ... BLOCK`.
    Multi,
    /// `RSEM.ACQUIRE ... BLOCK`.
    Permits,
    /// `RSEM.LEASE ... BLOCK`.
    Lease,
    /// `RLATCH.AWAIT`.
    Latch,
}

impl Family {
    pub const ALL: [Family; 8] = [
        Family::Lock,
        Family::Fair,
        Family::Read,
        Family::Write,
        Family::Multi,
        Family::Permits,
        Family::Lease,
        Family::Latch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::Lock => "lock",
            Family::Fair => "fair",
            Family::Read => "read",
            Family::Write => "write",
            Family::Multi => "multi",
            Family::Permits => "permits",
            Family::Lease => "lease",
            Family::Latch => "latch",
        }
    }

    /// The kind of key it waits on.
    pub fn kind(self) -> Kind {
        match self {
            Family::Lock | Family::Fair | Family::Multi => Kind::Lock,
            Family::Read | Family::Write => Kind::RwLock,
            Family::Permits | Family::Lease => Kind::Semaphore,
            Family::Latch => Kind::Latch,
        }
    }

    /// The family of a call that waits for `wants` with `options`, on several locks
    /// at once if `multi`.
    pub fn of(wants: Wants, options: &AcquireOptions, multi: bool) -> Family {
        match wants {
            Wants::LatchOpen => Family::Latch,
            Wants::Permits(_) if options.lease.is_some() => Family::Lease,
            Wants::Permits(_) => Family::Permits,
            Wants::Hold if multi => Family::Multi,
            Wants::Hold => match options.mode {
                Some(RwMode::Read) => Family::Read,
                Some(RwMode::Write) => Family::Write,
                None if options.fair => Family::Fair,
                None => Family::Lock,
            },
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl<H> Waiter<H> {
    pub fn family(&self) -> Family {
        Family::of(self.wants, &self.options, self.is_multi())
    }
}

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

/// How a blocked call's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Granted,
    /// Its `BLOCK` ran out.
    TimedOut,
    /// Its client left, or was unblocked (`CLIENT UNBLOCK`).
    Cancelled,
}

/// Samples in one slot: a histogram made at the first sample.
struct Samples<T: Counter> {
    digits: u8,
    histogram: Option<Histogram<T>>,
}

impl<T: Counter> Samples<T> {
    fn new(digits: u8) -> Samples<T> {
        Samples {
            digits,
            histogram: None,
        }
    }

    fn record(&mut self, usec: u64) {
        let digits = self.digits;
        let histogram = self.histogram.get_or_insert_with(|| {
            Histogram::new_with_bounds(1, HIGHEST_USEC, digits)
                .expect("the bounds are valid for hdrhistogram")
        });
        histogram.saturating_record(usec.max(1));
    }

    /// Emptied for reuse; `free` gives its memory back too.
    fn clear(&mut self, free: bool) {
        if free {
            self.histogram = None;
        } else if let Some(histogram) = &mut self.histogram {
            histogram.reset();
        }
    }

    fn get(&self) -> Option<&Histogram<T>> {
        self.histogram.as_ref().filter(|h| !h.is_empty())
    }
}

/// p50, p99 and p99.9 of the samples of `slots`; `None` without any.
fn percentiles<'a, T: Counter + 'a>(
    slots: impl Iterator<Item = &'a Samples<T>>,
) -> Option<[u64; 3]> {
    let merged = merge(slots)?;
    Some([
        merged.value_at_quantile(0.5),
        merged.value_at_quantile(0.99),
        merged.value_at_quantile(0.999),
    ])
}

fn merge<'a, T: Counter + 'a>(slots: impl Iterator<Item = &'a Samples<T>>) -> Option<Histogram<T>> {
    let mut merged: Option<Histogram<T>> = None;
    for histogram in slots.filter_map(Samples::get) {
        match &mut merged {
            None => merged = Some(histogram.clone()),
            Some(merged) => merged.add(histogram).ok()?,
        }
    }
    merged
}

/// A ring of `SLOTS` slots over the window, by the clock (see the file's doc).
struct Ring<T> {
    slot_ms: u64,
    /// Each slot with the period it holds (`now_ms / slot_ms`).
    slots: Vec<(u64, T)>,
}

impl<T> Ring<T> {
    fn new(window_ms: u64, make: impl Fn() -> T) -> Ring<T> {
        Ring {
            slot_ms: slot_ms(window_ms),
            slots: (0..SLOTS).map(|_| (u64::MAX, make())).collect(),
        }
    }

    /// The slot of `now_ms`, emptied by `clear` first if it held an earlier period.
    /// A changed window empties every slot.
    fn current(&mut self, now_ms: u64, window_ms: u64, clear: impl Fn(&mut T)) -> &mut T {
        if self.slot_ms != slot_ms(window_ms) {
            self.slot_ms = slot_ms(window_ms);
            for (period, slot) in &mut self.slots {
                *period = u64::MAX;
                clear(slot);
            }
        }
        let period = now_ms / self.slot_ms;
        let (held, slot) = &mut self.slots[(period % SLOTS as u64) as usize];
        if *held != period {
            *held = period;
            clear(slot);
        }
        slot
    }

    /// The slots of the window that ends at `now_ms`.
    fn live(&self, now_ms: u64, window_ms: u64) -> impl Iterator<Item = &T> {
        let same_window = self.slot_ms == slot_ms(window_ms);
        let period = now_ms / self.slot_ms;
        self.slots
            .iter()
            .filter(move |(held, _)| {
                same_window && *held <= period && period - *held < SLOTS as u64
            })
            .map(|(_, slot)| slot)
    }
}

fn slot_ms(window_ms: u64) -> u64 {
    (window_ms / SLOTS as u64).max(1)
}

/// Blocked calls of one family by outcome, since load or the last reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub granted: u64,
    pub timeouts: u64,
    pub cancels: u64,
    /// Microseconds the granted ones waited, in all.
    pub usec: u64,
}

impl Totals {
    pub fn is_empty(&self) -> bool {
        self.granted == 0 && self.timeouts == 0 && self.cancels == 0
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

/// Every wait statistic of the module (see the file's doc).
pub struct WaitStats {
    totals: [Totals; 8],
    granted: Vec<Ring<Samples<u32>>>,
    handoffs: Ring<Samples<u32>>,
    keys: HashMap<LockId, KeyHistory>,
    /// The most blocked time a key forgotten last had: what newcomers inherit.
    forgotten_usec: u64,
}

impl Default for WaitStats {
    fn default() -> Self {
        let window_ms = 60_000;
        WaitStats {
            totals: [Totals::default(); 8],
            granted: Family::ALL
                .iter()
                .map(|_| Ring::new(window_ms, || Samples::new(FAMILY_DIGITS)))
                .collect(),
            handoffs: Ring::new(window_ms, || Samples::new(FAMILY_DIGITS)),
            keys: HashMap::new(),
            forgotten_usec: 0,
        }
    }
}

impl WaitStats {
    /// A blocked call of `family` on `locks` ended as `outcome` after `usec`, at
    /// `now_ms` on the window's clock.
    pub fn record_wait<'a>(
        &mut self,
        now_ms: u64,
        window_ms: u64,
        family: Family,
        locks: impl Iterator<Item = &'a LockId>,
        outcome: Outcome,
        usec: u64,
    ) {
        let totals = &mut self.totals[family.index()];
        match outcome {
            Outcome::Granted => {
                totals.granted += 1;
                totals.usec = totals.usec.saturating_add(usec);
                self.granted[family.index()]
                    .current(now_ms, window_ms, |s| s.clear(false))
                    .record(usec);
            }
            Outcome::TimedOut => totals.timeouts += 1,
            Outcome::Cancelled => totals.cancels += 1,
        }
        for lock in locks {
            let slot = self
                .remember(lock, family.kind(), now_ms, window_ms)
                .ring
                .current(now_ms, window_ms, KeySlot::clear);
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
    }

    /// A freed lock, permit or latch reached a blocked call `usec` after it was freed.
    pub fn record_handoff(&mut self, now_ms: u64, window_ms: u64, usec: u64) {
        self.handoffs
            .current(now_ms, window_ms, |s| s.clear(false))
            .record(usec);
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

    /// Since load or the last reset.
    pub fn totals(&self, family: Family) -> Totals {
        self.totals[family.index()]
    }

    /// p50, p99, p99.9 of the waits of `family`'s calls granted in the window.
    pub fn wait_percentiles(
        &self,
        family: Family,
        now_ms: u64,
        window_ms: u64,
    ) -> Option<[u64; 3]> {
        percentiles(self.granted[family.index()].live(now_ms, window_ms))
    }

    /// p50, p99, p99.9 of the hand-offs in the window.
    pub fn handoff_percentiles(&self, now_ms: u64, window_ms: u64) -> Option<[u64; 3]> {
        percentiles(self.handoffs.live(now_ms, window_ms))
    }

    /// How many keys the history remembers.
    pub fn remembered(&self) -> usize {
        self.keys.len()
    }

    /// The `count` most contended keys: those of `live` (blocked calls now) and those with
    /// blocked calls in the window, by calls blocked now, then by time blocked in the
    /// window (the ended waits', and the blocked calls' so far). Keys gone from the
    /// window are forgotten.
    pub fn top(
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

    /// Zeroes everything: totals, windows and the contention history.
    pub fn reset(&mut self) {
        *self = WaitStats::default();
    }
}

/// A percentile as the server's `latencystats` print it: three decimals.
pub fn usec_text(usec: u64) -> String {
    format!("{usec}.000")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(key: &str) -> LockId {
        LockId {
            db: 0,
            key: key.as_bytes().to_vec(),
        }
    }

    const W: u64 = 60_000;

    #[test]
    fn families_follow_what_a_call_waits_for() {
        let mut options = AcquireOptions::default();
        assert_eq!(Family::of(Wants::Hold, &options, false), Family::Lock);
        assert_eq!(Family::of(Wants::Hold, &options, true), Family::Multi);
        options.fair = true;
        assert_eq!(Family::of(Wants::Hold, &options, false), Family::Fair);
        options.fair = false;
        options.mode = Some(RwMode::Read);
        assert_eq!(Family::of(Wants::Hold, &options, false), Family::Read);
        options.mode = Some(RwMode::Write);
        assert_eq!(Family::of(Wants::Hold, &options, false), Family::Write);
        let plain = AcquireOptions::default();
        assert_eq!(
            Family::of(Wants::Permits(2), &plain, false),
            Family::Permits
        );
        let leased = AcquireOptions {
            lease: crate::core::lease::Lease::from_ms(1000),
            ..AcquireOptions::default()
        };
        assert_eq!(Family::of(Wants::Permits(1), &leased, false), Family::Lease);
        assert_eq!(Family::of(Wants::LatchOpen, &plain, false), Family::Latch);
        assert_eq!(Family::Read.kind().name(), "rwlock");
        assert_eq!(Family::Lease.kind().name(), "semaphore");
    }

    #[test]
    fn granted_waits_give_percentiles_in_the_window_only() {
        let mut stats = WaitStats::default();
        assert_eq!(stats.wait_percentiles(Family::Lock, 0, W), None);
        for i in 0..100u64 {
            let usec = if i < 98 { 200_000 } else { 900_000 };
            stats.record_wait(
                1_000,
                W,
                Family::Lock,
                [lock("k")].iter(),
                Outcome::Granted,
                usec,
            );
        }
        let [p50, p99, p999] = stats.wait_percentiles(Family::Lock, 2_000, W).unwrap();
        assert!((199_000..=201_000).contains(&p50), "{p50}");
        assert!((890_000..=910_000).contains(&p99), "{p99}");
        assert!(p999 >= p99);
        assert_eq!(stats.wait_percentiles(Family::Fair, 2_000, W), None);
        // Six slots of 10 s: the samples at 1 s are in the window until 60 s.
        assert!(stats.wait_percentiles(Family::Lock, 59_999, W).is_some());
        assert_eq!(stats.wait_percentiles(Family::Lock, 60_000, W), None);
        // The totals stay.
        let totals = stats.totals(Family::Lock);
        assert_eq!(totals.granted, 100);
        assert_eq!(totals.usec, 98 * 200_000 + 2 * 900_000);
    }

    #[test]
    fn a_reused_slot_is_emptied_first() {
        let mut stats = WaitStats::default();
        stats.record_wait(0, W, Family::Latch, [].iter(), Outcome::Granted, 5);
        stats.record_wait(60_000, W, Family::Latch, [].iter(), Outcome::Granted, 7_000);
        let [p50, ..] = stats.wait_percentiles(Family::Latch, 60_000, W).unwrap();
        assert!((6_900..=7_100).contains(&p50), "{p50}");
        // A new window size starts afresh.
        assert_eq!(stats.wait_percentiles(Family::Latch, 60_000, 30_000), None);
        stats.record_wait(
            60_000,
            30_000,
            Family::Latch,
            [].iter(),
            Outcome::Granted,
            9,
        );
        assert_eq!(
            stats.wait_percentiles(Family::Latch, 60_000, 30_000),
            Some([9, 9, 9])
        );
    }

    #[test]
    fn outcomes_are_counted_and_handoffs_kept_apart() {
        let mut stats = WaitStats::default();
        let k = [lock("k")];
        stats.record_wait(0, W, Family::Permits, k.iter(), Outcome::TimedOut, 100);
        stats.record_wait(0, W, Family::Permits, k.iter(), Outcome::Cancelled, 100);
        assert_eq!(
            stats.totals(Family::Permits),
            Totals {
                granted: 0,
                timeouts: 1,
                cancels: 1,
                usec: 0
            }
        );
        assert_eq!(stats.wait_percentiles(Family::Permits, 0, W), None);
        assert_eq!(stats.handoff_percentiles(0, W), None);
        stats.record_handoff(0, W, 40);
        assert_eq!(stats.handoff_percentiles(0, W), Some([40, 40, 40]));
        stats.reset();
        assert!(stats.totals(Family::Permits).is_empty());
        assert_eq!(stats.handoff_percentiles(0, W), None);
        assert_eq!(stats.remembered(), 0);
    }

    fn live(key: &str, waiters: u64, longest_usec: u64) -> LiveKey {
        LiveKey {
            lock: lock(key),
            kind: Kind::Lock,
            waiters,
            longest_usec,
            blocked_usec: longest_usec * waiters,
        }
    }

    #[test]
    fn top_orders_by_waiters_now_then_blocked_time() {
        let mut stats = WaitStats::default();
        stats.record_wait(
            0,
            W,
            Family::Lock,
            [lock("a")].iter(),
            Outcome::Granted,
            1_000,
        );
        stats.record_wait(
            0,
            W,
            Family::Read,
            [lock("b")].iter(),
            Outcome::Granted,
            9_000,
        );
        stats.record_wait(
            0,
            W,
            Family::Read,
            [lock("b")].iter(),
            Outcome::TimedOut,
            9_000,
        );
        let top = stats.top(vec![live("c", 2, 5_000), live("a", 1, 2_500)], 10, 1, W);
        let keys: Vec<_> = top.iter().map(|e| e.lock.key.clone()).collect();
        assert_eq!(keys, vec![b"c".to_vec(), b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(top[0].waiters, 2);
        assert_eq!(top[0].longest_wait_ms, 5);
        assert_eq!(top[0].wait_p99_usec, None);
        assert_eq!((top[1].waits, top[1].waiters), (1, 1));
        let b = &top[2];
        assert_eq!((b.kind, b.waits, b.timeouts), (Kind::RwLock, 1, 1));
        let p99 = b.wait_p99_usec.unwrap();
        assert!((8_000..=10_000).contains(&p99), "{p99}");
        assert_eq!(stats.top(Vec::new(), 1, 1, W).len(), 1);
        // Past the window, only keys with blocked calls now are left.
        let later = stats.top(vec![live("c", 1, 10)], 10, 70_000, W);
        assert_eq!(later.len(), 1);
        assert_eq!(stats.remembered(), 0);
    }

    #[test]
    fn the_history_is_bounded_and_forgets_the_least_contended() {
        let mut stats = WaitStats::default();
        for i in 0..MAX_KEYS as u64 {
            let key = lock(&format!("k{i}"));
            stats.record_wait(0, W, Family::Lock, [key].iter(), Outcome::Granted, 100 + i);
        }
        assert_eq!(stats.remembered(), MAX_KEYS);
        stats.record_wait(
            0,
            W,
            Family::Lock,
            [lock("new")].iter(),
            Outcome::Granted,
            1_000,
        );
        // The tenth with the least blocked time went at once, to make room.
        assert_eq!(stats.remembered(), MAX_KEYS - FORGET_BATCH + 1);
        let top = stats.top(Vec::new(), MAX_KEYS, 0, W);
        let has = |key: &str| top.iter().any(|e| e.lock.key == key.as_bytes());
        assert!(
            (0..FORGET_BATCH).all(|i| !has(&format!("k{i}"))),
            "the least went"
        );
        assert!(has(&format!("k{FORGET_BATCH}")) && has("new"));
        // Newcomers inherit what the most contended of the forgotten had (199 here), so
        // filling the history again forgets the old keys with less before them.
        for i in 1..FORGET_BATCH {
            let key = lock(&format!("new{i}"));
            stats.record_wait(0, W, Family::Lock, [key].iter(), Outcome::Granted, 1_000);
        }
        assert_eq!(stats.remembered(), MAX_KEYS);
        stats.record_wait(
            0,
            W,
            Family::Lock,
            [lock("last")].iter(),
            Outcome::Granted,
            1,
        );
        let top = stats.top(Vec::new(), MAX_KEYS, 0, W);
        let has = |key: &str| top.iter().any(|e| e.lock.key == key.as_bytes());
        assert!(has("new") && has("new1") && has("last"));
        assert!(
            !has(&format!("k{FORGET_BATCH}")),
            "an old key with less went"
        );
    }

    #[test]
    fn a_full_history_costs_one_pass_per_batch_of_new_keys() {
        let mut stats = WaitStats::default();
        for i in 0..(MAX_KEYS * 5) as u64 {
            let key = lock(&format!("k{i}"));
            stats.record_wait(
                0,
                W,
                Family::Lock,
                [key].iter(),
                Outcome::Granted,
                100 + i % 7,
            );
            assert!(stats.remembered() <= MAX_KEYS);
        }
    }

    #[test]
    fn percentiles_print_as_latencystats_do() {
        assert_eq!(usec_text(200_191), "200191.000");
    }
}
