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

use crate::checks;
use crate::churn;
use crate::deadlocks;
use crate::extras::{Extras, LATCH_OPENS, LATCH_ROUNDS, SEMAPHORE_HOLDS};
use crate::faults::{inject, Fault, Topology, MODULE_ARGS};
use crate::fuzz;
use crate::history::{self, History};
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
    /// Seconds of the guarded-write workload per server (`guarded`), and on a cluster when
    /// the cluster phase runs; 0 for none.
    pub guard_seconds: u64,
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
    /// Unplanned failovers, and the unacknowledged grants they lost (another owner was
    /// granted the lock while the first believed it held it).
    pub promotions: u64,
    pub lost_unacknowledged: u64,
}

/// The unplanned phase's seed, from the run's and the flavor.
fn unplanned_seed(run_seed: u64, flavor: Flavor) -> u64 {
    let salt = flavor
        .name()
        .bytes()
        .fold(0x9E37_79B9_u64, |h, b| h.rotate_left(8) ^ u64::from(b));
    Rng::new(run_seed ^ salt).next_u64()
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
        let count = |name: &str| counts.get(name).copied().unwrap_or(0);
        self.semaphore_holds += count(SEMAPHORE_HOLDS);
        self.latch_rounds += count(LATCH_ROUNDS);
        self.latch_opens += count(LATCH_OPENS);
        self.promotions += count(PROMOTIONS);
        self.lost_unacknowledged += count(LOST_UNACKNOWLEDGED);
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
        for phase in [Phase::Restarts, Phase::Failovers, Phase::Unplanned] {
            // The unplanned phase's seed comes from the run's without a draw: the other
            // seeds stay what they were before it existed.
            let seed = match phase {
                Phase::Unplanned => unplanned_seed(options.seed, flavor),
                _ => rng.next_u64(),
            };
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
        // Seeded from the run's without a draw, as the deadlocks: other seeds stay.
        if options.guard_seconds > 0 {
            let seed = deadlocks::seed(options.seed ^ 0x6A4D, flavor);
            let secs = options.guard_seconds;
            println!("{flavor} guarded writes: seed {seed}, {secs} s");
            let (violations, counts) = crate::guarded::run(flavor, seed, secs);
            report.add(format!("{flavor} guarded"), seed, violations, counts);
            if options.phases.iter().any(|p| p == "cluster") {
                println!("{flavor} guarded writes in a cluster: seed {seed}, {secs} s");
                let (violations, counts) = crate::guarded::run_cluster(flavor, seed, secs);
                report.add(
                    format!("{flavor} guarded cluster"),
                    seed,
                    violations,
                    counts,
                );
            }
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
    /// A primary killed now and then and its standby promoted (`Fault::Promote`); a
    /// fresh standby each time, the module-less replica under it.
    Unplanned,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Restarts => "restarts",
            Phase::Failovers => "failovers",
            Phase::Unplanned => "unplanned",
        }
    }

    fn allows(self, fault: Fault) -> bool {
        match fault {
            Fault::Restart => self == Phase::Restarts,
            Fault::Failover => self == Phase::Failovers,
            // Scheduled by the phase itself (`PROMOTE_EVERY`), not drawn.
            Fault::Promote => false,
            _ => true,
        }
    }
}

fn start(flavor: Flavor, phase: Phase) -> Topology {
    let primary = match phase {
        // Its data is the standby's once it is killed: no AOF.
        Phase::Unplanned => Server::builder(flavor),
        _ => Server::builder(flavor)
            .config("appendonly", "yes")
            .config("appendfsync", "always"),
    }
    .module_args(MODULE_ARGS)
    .start();
    let standby = (phase != Phase::Restarts).then(|| {
        Server::builder(flavor)
            .module_args(MODULE_ARGS)
            .replica_of(primary.port)
            .start()
    });
    // In the unplanned phase the module-less replica hangs under the standby, so that
    // `WAIT 1` on the primary counts the standby alone: the server a promotion picks.
    let upstream = match (phase, &standby) {
        (Phase::Unplanned, Some(standby)) => standby.port,
        _ => primary.port,
    };
    let bare = Server::builder(flavor)
        .module(false)
        .replica_of(upstream)
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
    let original_primary = topology.primary.port;
    let shared = Arc::new(Shared::new(topology.primary.port, req));
    let (threads, extras, scratch) = spawn_load(
        &shared,
        options,
        locks,
        redisson_clients(options),
        rng,
        "warm-",
    );
    // No restart, failover or kill of the primary while the baseline warms: the server
    // measured must be the one warmed. (A kill drawn here promoted the standby without
    // writes it had not yet received, unacknowledged in the warm-up: the warm-up's
    // semaphores "vanished".)
    let faults: Vec<Fault> = options
        .faults
        .iter()
        .copied()
        .filter(|f| !matches!(f, Fault::Restart | Fault::Failover | Fault::Promote))
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

/// The load's threads, each with its own fork of `rng` (in this order): the module's
/// lock clients, `redisson` Redisson-style ones, the read-write clients; the semaphore
/// and latch clients (`Extras`, keys tagged `tag`); the scratch client.
fn spawn_load(
    shared: &Arc<Shared>,
    options: &Options,
    locks: &[String],
    redisson: usize,
    rng: &mut Rng,
    tag: &str,
) -> (
    Vec<thread::JoinHandle<History>>,
    Extras,
    thread::JoinHandle<()>,
) {
    let mut threads: Vec<_> = (0..options.clients)
        .map(|index| {
            let (shared, rng, locks) = (shared.clone(), rng.fork(), locks.to_vec());
            thread::spawn(move || workload::client(shared, index, rng, locks))
        })
        .collect();
    for index in 0..redisson {
        let (shared, rng, locks) = (shared.clone(), rng.fork(), locks.to_vec());
        threads.push(thread::spawn(move || {
            redisson::client(shared, index, rng, locks)
        }));
    }
    threads.extend(spawn_read_write_clients(shared, options, rng));
    let extras = Extras::spawn(shared, rng, tag);
    let scratch = {
        let (shared, rng) = (shared.clone(), rng.fork());
        thread::spawn(move || workload::scratch(shared, rng))
    };
    (threads, extras, scratch)
}

/// How often the unplanned phase kills its primary.
const PROMOTE_EVERY: Duration = Duration::from_millis(2000);

/// The unplanned phase's figures.
const PROMOTIONS: &str = "unplanned failovers (kill -9, REPLICAOF NO ONE)";
const LOST_UNACKNOWLEDGED: &str =
    "unacknowledged grants lost (another owner granted while it was held)";

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
    // The primary changes for good at each promotion: no memory baseline to compare with.
    let baseline = (phase != Phase::Unplanned)
        .then(|| warm_baseline(&mut topology, req, options, &locks, &mut rng));
    let original_primary = topology.primary.port;
    let shared = {
        let mut shared = Shared::new(topology.primary.port, req);
        if phase == Phase::Unplanned {
            shared.unplanned = true;
            shared.acknowledge = true;
        }
        Arc::new(shared)
    };
    // Redisson's lock clients do not acknowledge their grants: not beside promotions.
    let redisson = match phase {
        Phase::Unplanned => 0,
        _ => redisson_clients(options),
    };
    let (threads, extras, scratch) = spawn_load(&shared, options, &locks, redisson, &mut rng, "");
    let faults: Vec<Fault> = options
        .faults
        .iter()
        .copied()
        .filter(|f| phase.allows(*f))
        .collect();
    let until = Instant::now() + Duration::from_secs(secs);
    // Every 2 s, or 4 times in a short phase (the slice), at most once a second.
    let promote_every = PROMOTE_EVERY.min(Duration::from_millis((secs * 1000 / 4).max(1000)));
    let mut next_promotion = Instant::now() + promote_every;
    while Instant::now() < until {
        let pause = rng.range(options.fault_every_ms / 5, options.fault_every_ms);
        thread::sleep(Duration::from_millis(pause));
        if phase == Phase::Unplanned && Instant::now() >= next_promotion {
            inject(Fault::Promote, &mut topology, &shared, &mut rng);
            next_promotion = Instant::now() + promote_every;
            continue;
        }
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
    // Back on the primary the baseline was taken on (after a coordinated failover).
    for _ in 0..5 {
        if phase == Phase::Unplanned || topology.primary.port == original_primary {
            break;
        }
        inject(Fault::Failover, &mut topology, &shared, &mut rng);
    }
    let mut history = workload::join_clients(&shared, threads);
    let extras = extras.join(&shared);
    if scratch.join().is_err() {
        shared.violation("the scratch client panicked".into());
    }
    let mut violations = shared.violations.lock().unwrap().clone();
    history::end_at_force_releases(&mut history, &shared.forced.lock().unwrap());
    let fault_log = shared.fault_log.lock().unwrap().clone();
    violations.extend(history::mutual_exclusion(&history, &fault_log));
    violations.extend(history::fencing(
        &history,
        &shared.promotions.lock().unwrap(),
    ));
    // Semaphores and latches, before the checks after the load flush the data.
    let promotions = shared.promotions.lock().unwrap().clone();
    let (found, extra_counts) = extras.check(&fault_log, &promotions, topology.primary.port);
    violations.extend(found);
    violations.extend(checks::after_load(&mut topology, &locks, baseline.as_ref()));
    let mut counts = shared.counts.lock().unwrap().clone();
    if phase == Phase::Unplanned {
        let unacknowledged = shared.unacknowledged.lock().unwrap();
        counts.insert(
            PROMOTIONS.into(),
            shared.promotions.lock().unwrap().len() as u64,
        );
        counts.insert(
            LOST_UNACKNOWLEDGED.into(),
            history::lost(&unacknowledged, &history) as u64,
        );
    }
    counts.insert("holds checked".into(), history.holds.len() as u64);
    counts.extend(extra_counts);
    (violations, counts, history.holds.len())
}
