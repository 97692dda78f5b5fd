//! The histogram rings of the wait statistics: a window of `SLOTS` slots by the clock,
//! each with its samples in an hdrhistogram made at the first sample (see the doc of
//! `wait_stats`).

use hdrhistogram::{Counter, Histogram};

/// Slots in a window's ring.
pub const SLOTS: usize = 6;
/// Waits longer than this (about 19 hours) count as this long.
const HIGHEST_USEC: u64 = 1 << 36;

/// Samples in one slot: a histogram made at the first sample.
pub(super) struct Samples<T: Counter> {
    digits: u8,
    histogram: Option<Histogram<T>>,
}

impl<T: Counter> Samples<T> {
    pub(super) fn new(digits: u8) -> Samples<T> {
        Samples {
            digits,
            histogram: None,
        }
    }

    pub(super) fn record(&mut self, usec: u64) {
        let digits = self.digits;
        let histogram = self.histogram.get_or_insert_with(|| {
            Histogram::new_with_bounds(1, HIGHEST_USEC, digits)
                .expect("the bounds are valid for hdrhistogram")
        });
        histogram.saturating_record(usec.max(1));
    }

    /// Emptied for reuse; `free` gives its memory back too.
    pub(super) fn clear(&mut self, free: bool) {
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
pub(super) fn percentiles<'a, T: Counter + 'a>(
    slots: impl Iterator<Item = &'a Samples<T>>,
) -> Option<[u64; 3]> {
    let merged = merge(slots)?;
    Some([
        merged.value_at_quantile(0.5),
        merged.value_at_quantile(0.99),
        merged.value_at_quantile(0.999),
    ])
}

pub(super) fn merge<'a, T: Counter + 'a>(
    slots: impl Iterator<Item = &'a Samples<T>>,
) -> Option<Histogram<T>> {
    let mut merged: Option<Histogram<T>> = None;
    for histogram in slots.filter_map(Samples::get) {
        match &mut merged {
            None => merged = Some(histogram.clone()),
            Some(merged) => merged.add(histogram).ok()?,
        }
    }
    merged
}

/// A ring of `SLOTS` slots over the window, by the clock (see the doc of `wait_stats`).
pub(super) struct Ring<T> {
    slot_ms: u64,
    /// Each slot with the period it holds (`now_ms / slot_ms`).
    slots: Vec<(u64, T)>,
}

impl<T> Ring<T> {
    pub(super) fn new(window_ms: u64, make: impl Fn() -> T) -> Ring<T> {
        Ring {
            slot_ms: slot_ms(window_ms),
            slots: (0..SLOTS).map(|_| (u64::MAX, make())).collect(),
        }
    }

    /// The slot of `now_ms`, emptied by `clear` first if it held an earlier period.
    /// A changed window empties every slot.
    pub(super) fn current(
        &mut self,
        now_ms: u64,
        window_ms: u64,
        clear: impl Fn(&mut T),
    ) -> &mut T {
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
    pub(super) fn live(&self, now_ms: u64, window_ms: u64) -> impl Iterator<Item = &T> {
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
