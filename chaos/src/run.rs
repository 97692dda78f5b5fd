//! One chaos run: per server flavor, two phases of load with faults (a primary
//! restarted from its AOF; then a primary with a standby it fails over to), then a
//! cluster phase (resharding and failovers, `cluster.rs`), the checks after each, and
//! the fuzzer.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rlock_module_tests::{Flavor, Server};

use crate::capacity::{self, PermitHistory};
use crate::checks;
use crate::churn;
use crate::deadlocks;
use crate::faults::{inject, Fault, Topology};
use crate::fuzz;
use crate::history::{self, History};
use crate::latches::Latches;
use crate::permits::{self, Semaphores};
use crate::redisson;
use crate::resp::{Conn, Frame};
use crate::rng::Rng;
use crate::rwload;
use crate::workload::{self, Shared};

/// A run on one server of its own: the fuzzer's or the churn's (flavor, seed, calls).
type SingleServerRun = fn(Flavor, u64, u64) -> fuzz::Outcome;

#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    /// Seconds of load per flavor, split between the two phases.
    pub seconds: u64,
    pub flavors: Vec<Flavor>,
    pub clients: usize,
    pub locks: usize,
    pub fuzz_calls: u64,
    /// Calls of the keyspace churn per server (`churn`), 0 for none.
    pub churn_calls: u64,
    /// Seconds of the deadlock workload per server (`deadlocks`), 0 for none.
    pub deadlock_seconds: u64,
    /// Only the fuzzer, with this seed.
    pub fuzz_seed: Option<u64>,
    pub faults: Vec<Fault>,
    /// Milliseconds between faults, at most (uniform from a fifth of it).
    pub fault_every_ms: u64,
    /// Which phases run: `restarts`, `failovers`, `cluster`.
    pub phases: Vec<String>,
}

#[derive(Debug, Default)]
pub struct Report {
    pub violations: Vec<String>,
    /// Per flavor and phase: what was counted.
    pub counts: Vec<(String, BTreeMap<String, u64>)>,
    pub holds_checked: usize,
    /// Semaphore holds checked for capacity, over every phase.
    pub semaphore_holds: u64,
    /// Latch rounds run to zero, and waiters' opens checked against them.
    pub latch_rounds: u64,
    pub latch_opens: u64,
}

impl Report {
    /// What one part of the run (`what`: flavor and phase) found and counted.
    fn add(
        &mut self,
        what: String,
        seed: u64,
        violations: Vec<String>,
        counts: BTreeMap<String, u64>,
    ) {
        for v in violations {
            self.violations.push(format!("{what} (seed {seed}): {v}"));
        }
        self.counts.push((what, counts));
    }
}

/// Whether the server takes `REQ id`.
fn supports_req(port: u16) -> bool {
    Conn::connect(port, Duration::from_secs(5))
        .and_then(|mut c| {
            c.call(&[b"RLOCK.ACQUIRE", b"req-probe", b"o", b"REQ", b"probe"])
                .and_then(|r| {
                    c.call(&[b"DEL", b"req-probe", b"rlock_request:{req-probe}:probe"])
                        .map(|_| r)
                })
        })
        .is_ok_and(|reply| reply == Frame::Int(1))
}

pub fn run(options: &Options) -> Report {
    let mut report = Report::default();
    let mut rng = Rng::new(options.seed);
    for &flavor in &options.flavors {
        for phase in [Phase::Restarts, Phase::Failovers] {
            let seed = rng.next_u64();
            if !options.phases.iter().any(|p| p == phase.name()) {
                continue;
            }
            println!(
                "{flavor} {}: seed {seed} (run seed {})",
                phase.name(),
                options.seed
            );
            let secs = (options.seconds / 2).max(1);
            let (violations, counts, holds) = run_phase(flavor, phase, seed, secs, options);
            report.holds_checked += holds;
            let count = |name: &str| counts.get(name).copied().unwrap_or(0);
            report.semaphore_holds += count(SEMAPHORE_HOLDS);
            report.latch_rounds += count(LATCH_ROUNDS);
            report.latch_opens += count(LATCH_OPENS);
            report.add(
                format!("{flavor} {}", phase.name()),
                seed,
                violations,
                counts,
            );
        }
        if options.phases.iter().any(|p| p == "cluster") {
            let seed = rng.next_u64();
            println!("{flavor} cluster: seed {seed} (run seed {})", options.seed);
            let secs = (options.seconds / 4).max(1);
            let locks: Vec<String> = (0..options.locks).map(|i| format!("lock:{i}")).collect();
            let (violations, counts, holds) = crate::cluster::run_phase(
                flavor,
                seed,
                secs,
                options.clients,
                &locks,
                options.fault_every_ms.max(300),
            );
            report.holds_checked += holds;
            report.add(format!("{flavor} cluster"), seed, violations, counts);
        }
        // The fuzzer, then the churn: single-server runs with a seed each.
        let single: [(&str, u64, SingleServerRun); 2] = [
            ("fuzz", options.fuzz_calls, fuzz::run),
            ("churn", options.churn_calls, churn::run),
        ];
        for (name, calls, run_one) in single {
            if calls == 0 {
                continue;
            }
            let seed = rng.next_u64();
            println!("{flavor} {name}: seed {seed}, {calls} calls");
            let outcome = run_one(flavor, seed, calls);
            report.add(
                format!("{flavor} {name}"),
                seed,
                outcome.violations,
                outcome.counts,
            );
        }
        // Its seed comes from the run's without a draw: the other seeds stay as they were.
        if options.deadlock_seconds > 0 {
            let seed = deadlocks::seed(options.seed, flavor);
            let secs = options.deadlock_seconds;
            println!("{flavor} deadlocks: seed {seed}, {secs} s");
            let (violations, counts, holds) = deadlocks::run(flavor, seed, secs);
            report.holds_checked += holds;
            report.add(format!("{flavor} deadlocks"), seed, violations, counts);
        }
    }
    report
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A primary with an AOF, `kill -9`ed and restarted; a module-less replica.
    Restarts,
    /// A primary, a standby with the module it fails over to and back, a module-less
    /// replica.
    Failovers,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Restarts => "restarts",
            Phase::Failovers => "failovers",
        }
    }

    fn allows(self, fault: Fault) -> bool {
        match fault {
            Fault::Restart => self == Phase::Restarts,
            Fault::Failover => self == Phase::Failovers,
            _ => true,
        }
    }
}

/// Leases of 2 s by default, and a polling FAIR caller's place kept 3 s (the `config-set`
/// fault picks 0.3 to 3 s too): once the load stops, every deadline passes within seconds,
/// and the checks after it expect nothing left tracked (`checks::after_load`).
const MODULE_ARGS: &[&str] = &["lease-ms", "2000", "fair-wait-ms", "3000"];

fn start(flavor: Flavor, phase: Phase) -> Topology {
    let primary = Server::builder(flavor)
        .config("appendonly", "yes")
        .config("appendfsync", "always")
        .module_args(MODULE_ARGS)
        .start();
    let standby = (phase == Phase::Failovers).then(|| {
        Server::builder(flavor)
            .module_args(MODULE_ARGS)
            .replica_of(primary.port)
            .start()
    });
    let bare = Server::builder(flavor)
        .module(false)
        .replica_of(primary.port)
        .start();
    Topology {
        primary,
        standby,
        bare,
        writes_paused_until: None,
    }
}

/// The memory baseline: taken after a few seconds of the same load and faults (no
/// restart) and a quiet spell, so that what the server keeps once for its peak
/// concurrency (its pool of module helper clients, kept down to 8 by its cron; its
/// tables at their largest) is in it; in the failovers phase also after a failover
/// and back, which leave about 400 KB of the server's own replication structures
/// behind whatever the load. Growth past it is a leak.
fn warm_baseline(
    topology: &mut Topology,
    req: bool,
    options: &Options,
    locks: &[String],
    rng: &mut Rng,
) -> (i64, BTreeMap<String, i64>) {
    let clients = options.clients;
    let original_primary = topology.primary.port;
    let shared = Arc::new(Shared::new(topology.primary.port, req));
    let mut threads: Vec<_> = (0..clients)
        .map(|index| {
            let (shared, rng, locks) = (shared.clone(), rng.fork(), locks.to_vec());
            thread::spawn(move || workload::client(shared, index, rng, locks))
        })
        .collect();
    for index in 0..redisson_clients(options) {
        let (shared, rng, locks) = (shared.clone(), rng.fork(), locks.to_vec());
        threads.push(thread::spawn(move || {
            redisson::client(shared, index, rng, locks)
        }));
    }
    threads.extend(spawn_read_write_clients(&shared, options, rng));
    let extras = Extras::spawn(&shared, rng, "warm-");
    let scratch = {
        let (shared, rng) = (shared.clone(), rng.fork());
        thread::spawn(move || workload::scratch(shared, rng))
    };
    let faults: Vec<Fault> = options
        .faults
        .iter()
        .copied()
        .filter(|f| !matches!(f, Fault::Restart | Fault::Failover))
        .collect();
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        thread::sleep(Duration::from_millis(
            rng.range(options.fault_every_ms / 5, options.fault_every_ms),
        ));
        if !faults.is_empty() {
            inject(*rng.pick(&faults), topology, &shared, rng);
        }
    }
    if topology.standby.is_some() {
        for _ in 0..5 {
            inject(Fault::Failover, topology, &shared, rng);
            thread::sleep(Duration::from_millis(300));
            if topology.primary.port == original_primary {
                break;
            }
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    for t in threads {
        let _ = t.join();
    }
    let _ = extras.join(&shared);
    let _ = scratch.join();
    if let Ok(mut c) = Conn::connect(topology.primary.port, Duration::from_secs(5)) {
        let _ = c.call(&[b"FLUSHALL"]);
        // The wait statistics keep their histograms (bounded: docs/OBSERVABILITY.md); the
        // memory check compares everything else, so both readings start from none.
        let _ = c.call(&[b"RLOCK.RESETSTAT"]);
    }
    thread::sleep(Duration::from_millis(1500));
    checks::used_memory(topology.primary.port)
}

/// Read-write lock clients on locks of their own: one module client per 4 reentrant-lock
/// clients, and one Redisson-style client running Redisson's read and write scripts.
/// (Semaphores and latches: `Extras`.)
pub fn spawn_read_write_clients(
    shared: &Arc<Shared>,
    options: &Options,
    rng: &mut Rng,
) -> Vec<thread::JoinHandle<History>> {
    let locks = rwload::lock_names(2);
    let module_clients = options.clients.div_ceil(4);
    let threads: Vec<thread::JoinHandle<History>> = (0..=module_clients)
        .map(|index| {
            let (shared, rng, locks) = (shared.clone(), rng.fork(), locks.clone());
            let redisson = index == module_clients;
            thread::spawn(move || rwload::client(shared, index, rng, locks, redisson))
        })
        .collect();
    threads
}

/// The counts the phases report for the summary.
const SEMAPHORE_HOLDS: &str = "semaphore holds checked";
const LATCH_ROUNDS: &str = "latch rounds";
const LATCH_OPENS: &str = "latch opens checked";

/// Module clients on the semaphores, and Redisson-style ones.
const SEMAPHORE_CLIENTS: usize = 5;
const SEMAPHORE_REDISSON_CLIENTS: usize = 2;

/// The semaphore and latch load beside the locks: semaphores of `permits::PERMITS`
/// permits taken by module and Redisson-style clients, and count-down latches.
struct Extras {
    semaphores: Arc<Semaphores>,
    latches: Arc<Latches>,
    permit_threads: Vec<thread::JoinHandle<PermitHistory>>,
    latch_threads: Vec<thread::JoinHandle<()>>,
}

impl Extras {
    /// Starts the clients, on keys whose names begin with `tag`.
    fn spawn(shared: &Arc<Shared>, rng: &mut Rng, tag: &str) -> Extras {
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

    /// Waits for the clients (the load must have been told to stop); their holds.
    fn join(self, shared: &Shared) -> (PermitHistory, Arc<Semaphores>, Arc<Latches>) {
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
        (history, self.semaphores, self.latches)
    }
}

/// Clients that act as Redisson does, beside the module's: one per 8 of those.
fn redisson_clients(options: &Options) -> usize {
    options.clients.div_ceil(8)
}

fn run_phase(
    flavor: Flavor,
    phase: Phase,
    seed: u64,
    secs: u64,
    options: &Options,
) -> (Vec<String>, BTreeMap<String, u64>, usize) {
    let mut rng = Rng::new(seed);
    let mut topology = start(flavor, phase);
    let req = supports_req(topology.primary.port);
    if !req {
        println!("  the server does not take REQ: retries are not exercised");
    }
    let locks: Vec<String> = (0..options.locks).map(|i| format!("lock:{i}")).collect();
    let baseline = warm_baseline(&mut topology, req, options, &locks, &mut rng);
    let original_primary = topology.primary.port;
    let shared = Arc::new(Shared::new(topology.primary.port, req));
    let mut threads = Vec::new();
    for index in 0..options.clients {
        let (shared, rng, locks) = (shared.clone(), rng.fork(), locks.clone());
        threads.push(thread::spawn(move || {
            workload::client(shared, index, rng, locks)
        }));
    }
    for index in 0..redisson_clients(options) {
        let (shared, rng, locks) = (shared.clone(), rng.fork(), locks.clone());
        threads.push(thread::spawn(move || {
            redisson::client(shared, index, rng, locks)
        }));
    }
    threads.extend(spawn_read_write_clients(&shared, options, &mut rng));
    let extras = Extras::spawn(&shared, &mut rng, "");
    let scratch = {
        let (shared, rng) = (shared.clone(), rng.fork());
        thread::spawn(move || workload::scratch(shared, rng))
    };
    let faults: Vec<Fault> = options
        .faults
        .iter()
        .copied()
        .filter(|f| phase.allows(*f))
        .collect();
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        let pause = rng.range(options.fault_every_ms / 5, options.fault_every_ms);
        thread::sleep(Duration::from_millis(pause));
        if !faults.is_empty() {
            // Half the faults are races, where a grant meets an unblock or a kill.
            let fault = match faults.contains(&Fault::Race) && rng.chance(50) {
                true => Fault::Race,
                false => *rng.pick(&faults),
            };
            inject(fault, &mut topology, &shared, &mut rng);
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    let mut history = History::default();
    // Back on the primary the baseline was taken on.
    for _ in 0..5 {
        if topology.primary.port == original_primary {
            break;
        }
        inject(Fault::Failover, &mut topology, &shared, &mut rng);
    }
    for t in threads {
        match t.join() {
            Ok(h) => history.merge(h),
            Err(_) => shared.violation("a client thread panicked".into()),
        }
    }
    let (permit_history, semaphores, latches) = extras.join(&shared);
    if scratch.join().is_err() {
        shared.violation("the scratch client panicked".into());
    }
    let mut violations = shared.violations.lock().unwrap().clone();
    history::end_at_force_releases(&mut history, &shared.forced.lock().unwrap());
    let fault_log = shared.fault_log.lock().unwrap().clone();
    violations.extend(history::mutual_exclusion(&history, &fault_log));
    violations.extend(history::fencing(&history));
    // Semaphores: capacity over the load, then conservation once every lease ended (before
    // the checks after the load flush the data); latches: no early open.
    let ledger = semaphores.ledger.lock().unwrap().clone();
    let capacity = capacity::over_capacity(&permit_history, &ledger, &fault_log);
    let semaphore_violations = capacity.violations.len();
    violations.extend(capacity.violations);
    let conservation = permits::conservation(topology.primary.port, &semaphores, &fault_log);
    let conservation_violations = conservation.len();
    violations.extend(conservation);
    let latch = latches.check();
    let latch_violations = latch.violations.len();
    violations.extend(latch.violations);
    violations.extend(checks::after_load(&mut topology, &locks, &baseline));
    let mut counts = shared.counts.lock().unwrap().clone();
    counts.insert("holds checked".into(), history.holds.len() as u64);
    counts.insert(SEMAPHORE_HOLDS.into(), permit_history.holds.len() as u64);
    counts.insert(
        "semaphore most permits certainly held at once".into(),
        capacity.peak,
    );
    counts.insert(
        "semaphore grants that made it full (certainly)".into(),
        capacity.full,
    );
    counts.insert("semaphores used".into(), ledger.semaphores.len() as u64);
    counts.insert(
        "semaphores with doubts".into(),
        ledger
            .semaphores
            .values()
            .filter(|a| !a.doubts.is_empty())
            .count() as u64,
    );
    counts.insert(
        "semaphore violations (capacity)".into(),
        semaphore_violations as u64,
    );
    counts.insert(
        "semaphore violations (conservation)".into(),
        conservation_violations as u64,
    );
    counts.insert(LATCH_ROUNDS.into(), latch.rounds);
    counts.insert(LATCH_OPENS.into(), latch.opens_checked);
    counts.insert(
        "latch violations (early open)".into(),
        latch_violations as u64,
    );
    (violations, counts, history.holds.len())
}
