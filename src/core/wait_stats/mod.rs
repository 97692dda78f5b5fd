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

mod history;
mod ring;

use super::args::AcquireOptions;
use super::rwlock::RwMode;
use super::waitlist::{LockId, Waiter, Wants};
use history::History;
#[cfg(test)]
use history::FORGET_BATCH;
use ring::{percentiles, Ring, Samples};

pub use history::{Kind, LiveKey, TopEntry, MAX_KEYS};
pub use ring::SLOTS;

/// Significant digits of the family and hand-off histograms (1% steps).
const FAMILY_DIGITS: u8 = 2;

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

/// How a blocked call's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Granted,
    /// Its `BLOCK` ran out.
    TimedOut,
    /// Its client left, or was unblocked (`CLIENT UNBLOCK`).
    Cancelled,
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

/// Every wait statistic of the module (see the file's doc).
pub struct WaitStats {
    totals: [Totals; 8],
    granted: Vec<Ring<Samples<u32>>>,
    handoffs: Ring<Samples<u32>>,
    history: History,
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
            history: History::default(),
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
            self.history
                .record(lock, family.kind(), now_ms, window_ms, outcome, usec);
        }
    }

    /// A freed lock, permit or latch reached a blocked call `usec` after it was freed.
    pub fn record_handoff(&mut self, now_ms: u64, window_ms: u64, usec: u64) {
        self.handoffs
            .current(now_ms, window_ms, |s| s.clear(false))
            .record(usec);
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

    /// How many keys the contention history remembers.
    pub fn remembered(&self) -> usize {
        self.history.len()
    }

    /// `RLOCK.TOP`: the `count` most contended keys (see `History::top`).
    pub fn top(
        &mut self,
        live: Vec<LiveKey>,
        count: usize,
        now_ms: u64,
        window_ms: u64,
    ) -> Vec<TopEntry> {
        self.history.top(live, count, now_ms, window_ms)
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

    use crate::core::waitlist::lock_in_db0 as lock;

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
