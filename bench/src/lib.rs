//! `make bench`: rlock's commands against the ways people build locks without it,
//! each pair of paths run in one process, on one server, interleaved round by round.
//!
//! 1. uncontended pairs: R (RLOCK) vs L (Redisson's Lua scripts) vs S (SET NX / DEL);
//! 2. contended hand-off: B (BLOCK) vs P (10 ms poller) vs Q (Redisson pub/sub waiter), with
//!    BLPOP on a one-token list as the floor for a hand-off's latency;
//! 3. lease expiry: how late after the deadline a waiter gets the lock, B vs Q;
//! 4. fair queue cost: one fair acquire/release cycle with Q owners queued, R vs F (Lua);
//! 5. uncontended pairs with FAIR and with REQ: RF (FAIR), RQ (REQ) vs R;
//! 6. memory per blocked waiter: N RLOCK.ACQUIRE BLOCK 0 waiters vs N BLPOP waiters;
//! 7. the stall when N blocked waiters disconnect at once: FAIR vs plain BLOCK vs BLPOP;
//! 8. uncontended pairs on a 3-primary cluster against one node;
//! 9. a mixed fleet: a Redisson-style client beside clients blocked in the server.
//! 10. the read-write lock: uncontended read and write pairs against Redisson's scripts,
//!     and a contended lock with 90 % readers, BLOCK against a Redisson-style waiter.
//! 11. the semaphore: uncontended acquire/release and lease/return pairs against Redisson's
//!     scripts, a contended semaphore (32 clients, 4 permits), BLOCK against a Redisson-style
//!     waiter, and how late after a lease's deadline a waiter gets the expired permit.
//! 12. guarded writes: G (RLOCK.GUARD ... CALL SET) vs C (a check-and-set script) vs P (a plain
//!     SET, no guard).
//!
//! By default the server runs on one CPU and this process on another (`pin`).
//!
//! Each scenario file says only what it measures: its paths, what one run sends and counts,
//! and its figures. What every scenario shares is in `harness/`: cells of runs and their
//! medians, the order of the runs (paths interleaved round by round), the measured window of
//! a load, clients on one key, Redisson-style wake-ups, lateness samples and the report's
//! tables. `start_server` starts and pins each server; `measure` reads the clocks.

pub mod cluster;
pub mod contended;
pub mod cost;
pub mod deadlock_cost;
pub mod expiry;
pub mod fair;
pub mod guard;
pub mod harness;
pub mod measure;
pub mod memory;
pub mod mixed;
pub mod pin;
pub mod report;
pub mod rwlock;
pub mod scripts;
pub mod semaphore;
pub mod stall;
pub mod uncontended;
pub mod waiters;

use std::time::Duration;

use rlock_module_tests::{Flavor, Server};

/// A Redisson-shaped owner (`<client uuid>:<thread id>`); the thread id is appended.
pub const OWNER_PREFIX: &str = "0f8e2a64-5b1c-4f7d-9e3a-6c2b8d1f4a70";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Uncontended,
    Contended,
    Expiry,
    Fair,
    FairUncontended,
    Memory,
    Stall,
    Cluster,
    Mixed,
    Guard,
    ReadWrite,
    Semaphore,
}

impl Scenario {
    pub const ALL: [Scenario; 12] = [
        Scenario::Uncontended,
        Scenario::Contended,
        Scenario::Expiry,
        Scenario::Fair,
        Scenario::FairUncontended,
        Scenario::Memory,
        Scenario::Stall,
        Scenario::Cluster,
        Scenario::Mixed,
        Scenario::ReadWrite,
        Scenario::Semaphore,
        Scenario::Guard,
    ];

    pub fn parse(s: &str) -> Option<Scenario> {
        match s {
            "uncontended" | "1" => Some(Scenario::Uncontended),
            "contended" | "handoff" | "2" => Some(Scenario::Contended),
            "expiry" | "3" => Some(Scenario::Expiry),
            "fair" | "4" => Some(Scenario::Fair),
            "fair-uncontended" | "uncontended-fair" | "5" => Some(Scenario::FairUncontended),
            "memory" | "waiter-memory" | "6" => Some(Scenario::Memory),
            "stall" | "disconnect-stall" | "7" => Some(Scenario::Stall),
            "cluster" | "8" => Some(Scenario::Cluster),
            "mixed" | "mixed-fleet" | "9" => Some(Scenario::Mixed),
            "rwlock" | "read-write" | "10" => Some(Scenario::ReadWrite),
            "semaphore" | "sem" | "11" => Some(Scenario::Semaphore),
            "guard" | "12" => Some(Scenario::Guard),
            _ => None,
        }
    }
}

/// What to run and for how long.
#[derive(Debug, Clone)]
pub struct Plan {
    pub flavors: Vec<Flavor>,
    pub scenarios: Vec<Scenario>,
    pub rounds: usize,
    /// Warm-up before each measured window (connections, caches, the first waiters queued).
    pub warmup_ms: u64,
    pub conns: usize,
    pub keys: usize,
    pub pipelines: Vec<usize>,
    pub uncontended_run: Duration,
    pub clients: Vec<usize>,
    pub holds_ms: Vec<u64>,
    pub contended_run: Duration,
    pub expiry_samples: usize,
    pub expiry_lease_ms: u64,
    /// Scenario 11: expired-permit reclaim samples per path and round (lease `expiry_lease_ms`).
    pub sem_samples: usize,
    /// Fair scenario: queue lengths, and the measured run per cell.
    pub fair_queues: Vec<usize>,
    pub fair_run: Duration,
    /// Scenarios 6 and 7: blocked waiters per run, and rounds (each round opens N connections).
    pub waiters: usize,
    pub waiter_rounds: usize,
    /// Scenario 6: the least wait for the server to trim new clients' buffers before a reading.
    pub waiter_settle: Duration,
    /// Server on one CPU, this process on another (when there are 2).
    pub pin: bool,
    pub verbose: bool,
}

impl Plan {
    /// The full run: about 7 minutes per flavor.
    pub fn full() -> Plan {
        Plan {
            // Filled by the caller: `--flavor`, else `rlock_module_tests::flavors()`.
            flavors: Vec::new(),
            scenarios: Scenario::ALL.to_vec(),
            rounds: 5,
            warmup_ms: 300,
            conns: 50,
            keys: 100_000,
            pipelines: vec![1, 16],
            uncontended_run: Duration::from_secs(2),
            clients: vec![1, 8, 32, 128],
            holds_ms: vec![0, 1],
            contended_run: Duration::from_secs(2),
            expiry_samples: 40,
            expiry_lease_ms: 200,
            sem_samples: 20,
            fair_queues: vec![10, 1_000, 10_000],
            fair_run: Duration::from_secs(2),
            waiters: 10_000,
            waiter_rounds: 3,
            waiter_settle: Duration::from_millis(3000),
            pin: true,
            verbose: true,
        }
    }

    /// A smoke run of every path, in seconds.
    pub fn quick() -> Plan {
        Plan {
            rounds: 1,
            warmup_ms: 100,
            conns: 8,
            keys: 10_000,
            uncontended_run: Duration::from_millis(300),
            clients: vec![1, 8],
            contended_run: Duration::from_millis(300),
            expiry_samples: 3,
            sem_samples: 3,
            fair_queues: vec![10, 1_000],
            fair_run: Duration::from_millis(300),
            waiters: 200,
            waiter_rounds: 1,
            waiter_settle: Duration::from_millis(300),
            ..Plan::full()
        }
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_millis(self.warmup_ms)
    }
}

/// Everything measured on one server.
#[derive(Debug, Clone)]
pub struct FlavorReport {
    pub flavor: Flavor,
    /// e.g. "Redis 7.0.15" or "Valkey 9.1.2 (redis_version 7.2.4)".
    pub server_version: String,
    pub module_version: String,
    pub uncontended: Option<uncontended::Uncontended>,
    pub contended: Option<contended::Contended>,
    pub expiry: Option<expiry::Expiry>,
    pub fair: Option<fair::Fair>,
    pub fair_uncontended: Option<uncontended::Uncontended>,
    pub memory: Option<memory::Memory>,
    pub stall: Option<stall::Stall>,
    pub cluster: Option<cluster::ClusterScale>,
    pub mixed: Option<mixed::Mixed>,
    pub read_write: Option<rwlock::ReadWrite>,
    pub semaphore: Option<semaphore::SemaphoreReport>,
    pub guard: Option<guard::GuardWrites>,
    /// Whether and how the server and this process were pinned to CPUs.
    pub pinning: String,
    /// Waiters for scenarios 6 and 7, when the plan's number had to be lowered, and why.
    pub waiters_note: Option<String>,
}

/// File descriptors kept free besides the waiters' sockets (control connections, the
/// load connections, the server's own).
const SPARE_FDS: u64 = 256;

/// Runs the plan on each flavor in turn, one fresh server each, on a
/// single-threaded runtime so that the client uses at most one core.
/// With `plan.pin`, this process is pinned (for the run) to one CPU and each server to another.
pub fn run(plan: &Plan) -> Vec<FlavorReport> {
    // Before any server starts: servers inherit the raised limit, for `maxclients`.
    let nofile = pin::raise_nofile();
    let mut plan = plan.clone();
    let mut waiters_note = None;
    let waiter_scenarios = plan
        .scenarios
        .iter()
        .any(|s| matches!(s, Scenario::Memory | Scenario::Stall));
    if waiter_scenarios && plan.waiters as u64 + SPARE_FDS > nofile {
        let n = nofile.saturating_sub(SPARE_FDS).max(1) as usize;
        waiters_note = Some(format!(
            "{} waiters asked for, {n} run: RLIMIT_NOFILE is {nofile}",
            plan.waiters
        ));
        plan.waiters = n;
    }
    let mut pinning = pin::Pinning::apply(plan.pin);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let reports = plan
        .flavors
        .iter()
        .map(|&flavor| runtime.block_on(run_flavor(flavor, &plan, &pinning, waiters_note.clone())))
        .collect();
    drop(runtime);
    pinning.restore();
    reports
}

async fn run_flavor(
    flavor: Flavor,
    plan: &Plan,
    pin: &pin::Pinning,
    waiters_note: Option<String>,
) -> FlavorReport {
    let (server, pinning) = start_server(flavor, plan, pin);
    let (server_version, module_version) = versions(&server);
    if plan.verbose {
        eprintln!(
            "{server_version}, rlock {module_version}, port {}; pinning {pinning}",
            server.port
        );
    }
    let mut report = FlavorReport {
        flavor,
        server_version,
        module_version,
        uncontended: None,
        contended: None,
        expiry: None,
        fair: None,
        fair_uncontended: None,
        memory: None,
        stall: None,
        cluster: None,
        mixed: None,
        read_write: None,
        semaphore: None,
        guard: None,
        pinning,
        waiters_note,
    };
    for scenario in &plan.scenarios {
        match scenario {
            Scenario::Uncontended => {
                report.uncontended = Some(uncontended::run(&server, plan).await)
            }
            Scenario::Contended => report.contended = Some(contended::run(&server, plan).await),
            Scenario::Expiry => report.expiry = Some(expiry::run(&server, plan).await),
            Scenario::Fair => report.fair = Some(fair::run(&server, plan).await),
            Scenario::FairUncontended => {
                report.fair_uncontended = Some(uncontended::run_fair(&server, plan).await)
            }
            // Synchronous: one plain connection per waiter, and a probe thread.
            Scenario::Memory => report.memory = Some(memory::run(flavor, plan, pin)),
            Scenario::Stall => report.stall = Some(stall::run(&server, plan)),
            Scenario::Cluster => {
                report.cluster = Some(cluster::run(flavor, &server, plan, pin).await)
            }
            Scenario::Mixed => report.mixed = Some(mixed::run(&server, plan).await),
            Scenario::ReadWrite => report.read_write = Some(rwlock::run(&server, plan).await),
            Scenario::Semaphore => report.semaphore = Some(semaphore::run(&server, plan).await),
            Scenario::Guard => report.guard = Some(guard::run(&server, plan).await),
        }
    }
    let mut server = server;
    server.assert_alive("the benchmark");
    server.stop();
    report
}

/// A fresh server with room for every waiter of scenarios 6 and 7 plus the bench's own
/// connections, pinned; with what pinning did.
pub(crate) fn start_server(
    flavor: Flavor,
    plan: &Plan,
    pinning: &pin::Pinning,
) -> (Server, String) {
    let maxclients = (plan.waiters + SPARE_FDS as usize).max(10_000);
    let server = Server::builder(flavor)
        .config("maxclients", &maxclients.to_string())
        .start();
    let text = pinning.pin_server(server_pid(&server));
    (server, text)
}

/// The server's process id, as `INFO server` says it.
pub(crate) fn server_pid(server: &Server) -> i32 {
    server
        .info("server")
        .get("process_id")
        .and_then(|p| p.parse().ok())
        .expect("INFO server process_id")
}

fn versions(server: &Server) -> (String, String) {
    let info = server.info("server");
    let redis_version = info.get("redis_version").cloned().unwrap_or_default();
    let server_version = match info.get("valkey_version") {
        Some(v) => format!("Valkey {v} (redis_version {redis_version})"),
        None => format!("Redis {redis_version}"),
    };
    let mut con = server.conn();
    let modules: redis::Value = redis::cmd("MODULE")
        .arg("LIST")
        .query(&mut con)
        .expect("MODULE LIST");
    (
        server_version,
        module_version(&modules).unwrap_or_else(|| "?".into()),
    )
}

/// The `ver` of the module named `rlock` in a `MODULE LIST` reply (RESP2).
fn module_version(list: &redis::Value) -> Option<String> {
    use redis::Value;
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).to_string()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    };
    let Value::Array(modules) = list else {
        return None;
    };
    modules.iter().find_map(|m| {
        let Value::Array(fields) = m else { return None };
        let pairs: Vec<(String, String)> = fields
            .chunks(2)
            .filter_map(|p| Some((text(&p[0])?, text(p.get(1)?)?)))
            .collect();
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        (get("name").as_deref() == Some("rlock"))
            .then(|| get("ver"))
            .flatten()
    })
}
