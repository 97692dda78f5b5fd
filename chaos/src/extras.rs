//! The semaphore and latch load that runs beside the locks in every phase, and its checks:
//! semaphores of `permits::PERMITS` permits taken by module and Redisson-style clients
//! (capacity over the load, conservation once every lease ended: `capacity`), and
//! count-down latches (no early open: `latches`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crate::capacity::{self, PermitHistory};
use crate::latches::Latches;
use crate::permits::{self, Semaphores};
use crate::rng::Rng;
use crate::workload::Shared;

/// The counts the phases report for the summary.
pub const SEMAPHORE_HOLDS: &str = "semaphore holds checked";
pub const LATCH_ROUNDS: &str = "latch rounds";
pub const LATCH_OPENS: &str = "latch opens checked";

/// Module clients on the semaphores, and Redisson-style ones.
const SEMAPHORE_CLIENTS: usize = 5;
const SEMAPHORE_REDISSON_CLIENTS: usize = 2;

/// The clients, while they run.
pub struct Extras {
    semaphores: Arc<Semaphores>,
    latches: Arc<Latches>,
    permit_threads: Vec<thread::JoinHandle<PermitHistory>>,
    latch_threads: Vec<thread::JoinHandle<()>>,
}

/// What they did, once they stopped.
pub struct Done {
    history: PermitHistory,
    semaphores: Arc<Semaphores>,
    latches: Arc<Latches>,
}

impl Extras {
    /// Starts the clients, on keys whose names begin with `tag`.
    pub fn spawn(shared: &Arc<Shared>, rng: &mut Rng, tag: &str) -> Extras {
        let semaphores = Arc::new(Semaphores::new(&format!("{tag}sem")));
        let latches = Arc::new(Latches::new(&format!("{tag}latch")));
        let permit_threads = (0..SEMAPHORE_CLIENTS + SEMAPHORE_REDISSON_CLIENTS)
            .map(|index| {
                let (shared, semaphores, rng) = (shared.clone(), semaphores.clone(), rng.fork());
                let redisson = index >= SEMAPHORE_CLIENTS;
                thread::spawn(move || permits::client(shared, semaphores, index, rng, redisson))
            })
            .collect();
        let latch_threads = latches.spawn(shared, rng);
        Extras {
            semaphores,
            latches,
            permit_threads,
            latch_threads,
        }
    }

    /// Waits for the clients (the load must have been told to stop).
    pub fn join(self, shared: &Shared) -> Done {
        let mut history = PermitHistory::default();
        for t in self.permit_threads {
            match t.join() {
                Ok(h) => history.merge(h),
                Err(_) => shared.violation("a semaphore client thread panicked".into()),
            }
        }
        for t in self.latch_threads {
            if t.join().is_err() {
                shared.violation("a latch client thread panicked".into());
            }
        }
        Done {
            history,
            semaphores: self.semaphores,
            latches: self.latches,
        }
    }
}

impl Done {
    /// Capacity over the load, then conservation once every lease ended (read from `port`,
    /// following `MOVED` in a cluster), and no early open of a latch; before the checks
    /// after the load flush the data. `promotions`: when primaries were killed.
    pub fn check(
        &self,
        faults: &[(Instant, String)],
        promotions: &[Instant],
        port: u16,
    ) -> (Vec<String>, BTreeMap<String, u64>) {
        let mut violations = Vec::new();
        let ledger = self.semaphores.ledger.lock().unwrap().clone();
        let capacity = capacity::over_capacity(&self.history, &ledger, faults);
        let capacity_violations = capacity.violations.len();
        violations.extend(capacity.violations);
        let conservation = permits::conservation(port, &self.semaphores, faults, promotions);
        let conservation_violations = conservation.len();
        violations.extend(conservation);
        let latch = self.latches.check(promotions);
        let latch_violations = latch.violations.len();
        violations.extend(latch.violations);
        let counts = BTreeMap::from([
            (SEMAPHORE_HOLDS.into(), self.history.holds.len() as u64),
            (
                "semaphore most permits certainly held at once".into(),
                capacity.peak,
            ),
            (
                "semaphore grants that made it full (certainly)".into(),
                capacity.full,
            ),
            ("semaphores used".into(), ledger.semaphores.len() as u64),
            (
                "semaphores with doubts".into(),
                ledger
                    .semaphores
                    .values()
                    .filter(|a| !a.doubts.is_empty())
                    .count() as u64,
            ),
            (
                "semaphore violations (capacity)".into(),
                capacity_violations as u64,
            ),
            (
                "semaphore violations (conservation)".into(),
                conservation_violations as u64,
            ),
            (LATCH_ROUNDS.into(), latch.rounds),
            (LATCH_OPENS.into(), latch.opens_checked),
            (
                "latch violations (early open)".into(),
                latch_violations as u64,
            ),
        ]);
        (violations, counts)
    }
}
