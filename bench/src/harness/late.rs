//! How late after a deadline a waiter was served (scenarios 3 and 11): samples per round.

use super::cells::Path;
use crate::measure::{median, percentile};

/// One path's samples, ms after the deadline (negative: early), by round.
#[derive(Debug, Clone)]
pub struct Lateness<P> {
    pub path: P,
    pub rounds: Vec<Vec<f64>>,
    /// Samples that got an unexpected reply.
    pub errors: u64,
}

impl<P: Path> Lateness<P> {
    pub fn new(path: P) -> Lateness<P> {
        Lateness {
            path,
            rounds: Vec::new(),
            errors: 0,
        }
    }

    /// Keeps a sample of the current round (None: an error), printing it when verbose;
    /// `what` names the scenario and `at` the sample (`round 1 sample 3`).
    pub fn record(&mut self, late: Option<f64>, verbose: bool, what: &str, at: &str) {
        let Some(late) = late else {
            self.errors += 1;
            return;
        };
        if verbose {
            eprintln!(
                "  {what} {} {at}: {late:.2} ms after the deadline",
                self.path.letter()
            );
        }
        if self.rounds.is_empty() {
            self.rounds.push(Vec::new());
        }
        self.rounds.last_mut().expect("a round").push(late);
    }

    /// The median over rounds of each round's `p`th percentile.
    pub fn per_round(&self, p: f64) -> f64 {
        median(self.rounds.iter().map(|r| {
            let mut v = r.clone();
            v.sort_by(f64::total_cmp);
            percentile(&v, p)
        }))
    }

    /// The median of every sample.
    pub fn median_ms(&self) -> f64 {
        median(self.all())
    }

    fn all(&self) -> impl Iterator<Item = f64> + '_ {
        self.rounds.iter().flatten().copied()
    }

    pub fn min_ms(&self) -> f64 {
        self.all().fold(f64::NAN, f64::min)
    }

    pub fn max_ms(&self) -> f64 {
        self.all().fold(f64::NAN, f64::max)
    }

    pub fn samples(&self) -> usize {
        self.rounds.iter().map(Vec::len).sum()
    }
}

/// Every path's samples, behind a holder whose lease was `lease_ms`.
#[derive(Debug, Clone)]
pub struct Late<P> {
    pub lease_ms: u64,
    pub cells: Vec<Lateness<P>>,
}

impl<P: Path> Late<P> {
    pub fn cell(&self, path: P) -> Option<&Lateness<P>> {
        self.cells.iter().find(|c| c.path == path)
    }
}
