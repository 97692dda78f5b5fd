//! `--json FILE`: the run's results in the schema every benchmark writes
//! (bench/report/README.md), for `scripts/bench-report` to turn into docs/BENCHMARKS.md.
//! Every value is a run's own figure or a median of them: nothing is carried in from elsewhere.

use std::fmt::Write as _;

use super::Meta;
use crate::contended::{WaitPath, WaitRun};
use crate::expiry::ExpiryPath;
use crate::fair::{FairPath, FairRun};
use crate::guard::GuardPath;
use crate::harness::late::Lateness;
use crate::harness::{Cell, Path};
use crate::measure::{median, percentile, ratio};
use crate::memory::{MemPath, MemRun};
use crate::mixed::{redisson_share, MixedCell};
use crate::rwlock::{RwRun, RwWaitPath};
use crate::semaphore::{ReclaimPath, SemPairPath, SemRun, SemWaitPath};
use crate::stall::{StallPath, StallRun};
use crate::uncontended::{PairPath, FAIR_PIPELINE};
use crate::{FlavorReport, Plan, Scenario};
use rlock_module_tests::Flavor;

/// A JSON value; objects keep their keys in the order written, so a file is stable.
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
}

impl Json {
    fn num(x: f64) -> Json {
        if x.is_finite() {
            Json::Num(x)
        } else {
            Json::Null
        }
    }

    fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    fn write(&self, out: &mut String, indent: usize) {
        let pad = |out: &mut String, n: usize| out.push_str(&" ".repeat(n));
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            // Integers without a fraction; everything else as Rust's shortest round-trip form.
            Json::Num(x) if x.fract() == 0.0 && x.abs() < 1e15 => {
                let _ = write!(out, "{}", *x as i64);
            }
            Json::Num(x) => {
                let _ = write!(out, "{x}");
            }
            Json::Str(s) => escape(out, s),
            Json::Arr(items)
                if items
                    .iter()
                    .all(|i| !matches!(i, Json::Arr(_) | Json::Obj(_))) =>
            {
                // Scalars on one line: per-round values read as a row.
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write(out, indent);
                }
                out.push(']');
            }
            Json::Arr(items) => {
                out.push_str("[\n");
                for (i, item) in items.iter().enumerate() {
                    pad(out, indent + 2);
                    item.write(out, indent + 2);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                pad(out, indent);
                out.push(']');
            }
            Json::Obj(fields) if fields.is_empty() => out.push_str("{}"),
            Json::Obj(fields) => {
                out.push_str("{\n");
                for (i, (k, v)) in fields.iter().enumerate() {
                    pad(out, indent + 2);
                    escape(out, k);
                    out.push_str(": ");
                    v.write(out, indent + 2);
                    out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
                }
                pad(out, indent);
                out.push('}');
            }
        }
    }
}

fn escape(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One figure of a run: its name, unit, which way is better, and how to read it off a run.
struct Metric<R> {
    name: &'static str,
    unit: &'static str,
    higher_is_better: bool,
    of: fn(&R) -> f64,
}

const fn metric<R>(
    name: &'static str,
    unit: &'static str,
    higher_is_better: bool,
    of: fn(&R) -> f64,
) -> Metric<R> {
    Metric {
        name,
        unit,
        higher_is_better,
        of,
    }
}

/// The document being filled: what the schema's lists hold.
#[derive(Default)]
struct Doc {
    scenarios: Vec<Json>,
    paths: Vec<Json>,
    results: Vec<Json>,
    ratios: Vec<Json>,
    not_measured: Vec<Json>,
    seen_paths: Vec<(&'static str, String)>,
}

impl Doc {
    fn scenario(&mut self, id: &'static str, title: &str, primary: &str) {
        self.scenarios.push(Json::Obj(vec![
            ("id", Json::str(id)),
            ("title", Json::str(title)),
            ("primary_metric", Json::str(primary)),
        ]));
    }

    /// Describes `paths` of `scenario` once; `rlock` names the paths that are rlock's.
    fn paths<P: Path>(&mut self, scenario: &'static str, paths: &[P], rlock: &[P]) {
        for &p in paths {
            let key = (scenario, p.letter().to_string());
            if self.seen_paths.contains(&key) {
                continue;
            }
            self.seen_paths.push(key);
            let role = if rlock.contains(&p) {
                "rlock"
            } else {
                "baseline"
            };
            let short = short_name(scenario, p.letter());
            self.path(scenario, p.letter(), p.describe(), short, role);
        }
    }

    fn path(&mut self, scenario: &str, path: &str, label: &str, short: &str, role: &str) {
        self.paths.push(Json::Obj(vec![
            ("scenario", Json::str(scenario)),
            ("path", Json::str(path)),
            ("label", Json::str(label)),
            ("short", Json::str(short)),
            ("role", Json::str(role)),
        ]));
    }

    /// Each cell's runs as per-round values and their median, one result per metric.
    fn cells<P: Path, S: Copy, R>(
        &mut self,
        scenario: &'static str,
        server: &'static str,
        cells: &[Cell<P, S, R>],
        setting: impl Fn(S) -> Json,
        metrics: &[Metric<R>],
    ) {
        for cell in cells {
            for m in metrics {
                let rounds: Vec<f64> = cell.runs.iter().map(m.of).collect();
                self.result(
                    scenario,
                    server,
                    setting(cell.setting),
                    cell.path,
                    m,
                    &rounds,
                );
            }
        }
    }

    fn result<P: Path, R>(
        &mut self,
        scenario: &'static str,
        server: &'static str,
        setting: Json,
        path: P,
        m: &Metric<R>,
        rounds: &[f64],
    ) {
        self.named_result(scenario, server, setting, path.letter(), m, rounds);
    }

    /// A result of a path the scenario names by a string rather than a [`Path`].
    fn named_result<R>(
        &mut self,
        scenario: &'static str,
        server: &'static str,
        setting: Json,
        path: &str,
        m: &Metric<R>,
        rounds: &[f64],
    ) {
        self.results.push(Json::Obj(vec![
            ("scenario", Json::str(scenario)),
            ("server", Json::str(server)),
            ("setting", setting),
            ("path", Json::str(path)),
            ("metric", Json::str(m.name)),
            ("unit", Json::str(m.unit)),
            (
                "better",
                Json::str(if m.higher_is_better {
                    "higher"
                } else {
                    "lower"
                }),
            ),
            (
                "rounds",
                Json::Arr(rounds.iter().map(|&x| Json::num(x)).collect()),
            ),
            ("median", Json::num(median(rounds.iter().copied()))),
        ]));
    }

    /// Median of `metric` on `path` ÷ on `baseline`, in every setting both were run in.
    fn ratios<P: Path, S: Copy + PartialEq, R>(
        &mut self,
        scenario: &'static str,
        server: &'static str,
        cells: &[Cell<P, S, R>],
        setting: impl Fn(S) -> Json,
        m: &Metric<R>,
        pairs: &[(P, P)],
    ) {
        for &(path, baseline) in pairs {
            for a in cells.iter().filter(|c| c.path == path) {
                let Some(b) = cells
                    .iter()
                    .find(|c| c.path == baseline && c.setting == a.setting)
                else {
                    continue;
                };
                let value = ratio(a.med(m.of), b.med(m.of));
                let names = (path.letter(), baseline.letter());
                self.ratio(scenario, server, setting(a.setting), m.name, names, value);
            }
        }
    }

    /// `value` = the median of `metric` on `path` ÷ on `baseline`, as the caller computed it.
    fn ratio(
        &mut self,
        scenario: &str,
        server: &str,
        setting: Json,
        metric: &str,
        (path, baseline): (&str, &str),
        value: f64,
    ) {
        self.ratios.push(Json::Obj(vec![
            ("scenario", Json::str(scenario)),
            ("server", Json::str(server)),
            ("setting", setting),
            ("metric", Json::str(metric)),
            ("path", Json::str(path)),
            ("baseline", Json::str(baseline)),
            ("value", Json::num(value)),
        ]));
    }

    /// How late each path's waiter was served: each round's p50 and p99, and `path` ÷
    /// `baseline` of their medians.
    fn lateness<P: Path>(
        &mut self,
        scenario: &'static str,
        server: &'static str,
        setting: impl Fn() -> Json,
        cells: &[Lateness<P>],
        pairs: &[(P, P)],
    ) {
        let per_round = |c: &Lateness<P>, p: f64| -> Vec<f64> {
            c.rounds
                .iter()
                .map(|r| {
                    let mut v = r.clone();
                    v.sort_by(f64::total_cmp);
                    percentile(&v, p)
                })
                .collect()
        };
        for (p, m) in [(50.0, &LATE[0]), (99.0, &LATE[1])] {
            for c in cells {
                self.result(scenario, server, setting(), c.path, m, &per_round(c, p));
            }
        }
        for &(path, baseline) in pairs {
            let find = |x: P| cells.iter().find(|c| c.path == x);
            if let (Some(a), Some(b)) = (find(path), find(baseline)) {
                let value = ratio(median(per_round(a, 50.0)), median(per_round(b, 50.0)));
                let names = (path.letter(), baseline.letter());
                self.ratio(scenario, server, setting(), LATE[0].name, names, value);
            }
        }
    }

    fn not_measured(&mut self, scenario: &str, server: &str, reason: &str) {
        self.not_measured.push(Json::Obj(vec![
            ("scenario", Json::str(scenario)),
            ("server", Json::str(server)),
            ("reason", Json::str(reason)),
        ]));
    }
}

/// A path's name on the plots, where its letter alone says little.
fn short_name(scenario: &str, letter: &str) -> &'static str {
    match (scenario, letter) {
        ("fair", "R") => "RLOCK FAIR",
        ("fair", "F") => "classic fair Lua",
        ("guard", "P") => "plain SET",
        (_, "R") => "RLOCK",
        (_, "L") => "Redisson's Lua",
        (_, "S") => "SET NX PX",
        (_, "RF") => "RLOCK FAIR",
        (_, "RQ") => "RLOCK REQ",
        (_, "RR" | "RW") => "RLOCK READ/WRITE",
        (_, "LR" | "LW") => "Redisson's Lua",
        (_, "RX") => "RSEM.LEASE",
        (_, "LX") => "Redisson's Lua",
        (_, "B") => "RLOCK BLOCK",
        (_, "B*") => "BLOCK behind Lua",
        (_, "P") => "10 ms poller",
        (_, "Q") => "Redisson-style",
        (_, "F") => "RLOCK FAIR BLOCK",
        (_, "BLPOP") => "BLPOP token list",
        (_, "G") => "RLOCK.GUARD SET",
        (_, "C") => "check-and-set Lua",
        _ => "",
    }
}

/// The `--flavor` name, the servers' id in every benchmark's results.
fn server_id(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Redis => "redis",
        Flavor::Redis8 => "redis8",
        Flavor::Valkey => "valkey",
    }
}

const PAIRS: [Metric<crate::harness::pairs::PairRun>; 2] = [
    metric("pairs_per_sec", "pairs/s", true, |r| r.pairs_per_sec()),
    metric("server_us_per_pair", "µs", false, |r| {
        r.window.server_us_per(r.done)
    }),
];

const WRITES: [Metric<crate::harness::pairs::PairRun>; 2] = [
    metric("writes_per_sec", "writes/s", true, |r| r.pairs_per_sec()),
    metric("server_us_per_write", "µs", false, |r| {
        r.window.server_us_per(r.done)
    }),
];

const CLUSTER_PAIRS: Metric<f64> = metric("pairs_per_sec", "pairs/s", true, |r| *r);

/// Scenario 9: the fleet's runs. Q's share is of the mixed fleet only (client 0 is Q).
const FLEET: [Metric<WaitRun>; 2] = [
    metric("acquisitions_per_sec", "acquisitions/s", true, |r| {
        r.acquisitions_per_sec()
    }),
    metric("fairness", "min/max per client", true, |r| r.fairness()),
];
const REDISSON_SHARE: Metric<WaitRun> = metric(
    "redisson_share",
    "Q's acquisitions ÷ the B clients' mean",
    true,
    redisson_share,
);

const HANDOFFS: [Metric<WaitRun>; 7] = [
    metric("handoffs_per_sec", "hand-offs/s", true, |r| {
        r.handoffs_per_sec()
    }),
    metric("acquisitions_per_sec", "acquisitions/s", true, |r| {
        r.acquisitions_per_sec()
    }),
    metric("fairness", "min/max per worker", true, |r| r.fairness()),
    metric("latency_p50_ms", "ms", false, |r| r.p50_ms),
    metric("latency_p99_ms", "ms", false, |r| r.p99_ms),
    metric("tries_per_handoff", "tries", false, |r| {
        r.tries_per_handoff()
    }),
    metric("server_us_per_handoff", "µs", false, |r| {
        r.window.server_us_per(r.handoffs)
    }),
];

const MEMORY: [Metric<MemRun>; 3] = [
    metric("bytes_per_waiter", "bytes", false, |r| r.bytes_per_waiter()),
    metric("client_bytes_per_waiter", "bytes", false, |r| {
        r.client_bytes_per_waiter()
    }),
    metric("idle_connection_bytes", "bytes", false, |r| {
        r.connection_bytes()
    }),
];

/// Lateness: only names and units; the values are each round's percentile.
const LATE: [Metric<()>; 2] = [
    metric("late_p50_ms", "ms", false, |_| f64::NAN),
    metric("late_p99_ms", "ms", false, |_| f64::NAN),
];

const FAIR_CYCLES: [Metric<FairRun>; 3] = [
    metric("cycles_per_sec", "cycles/s", true, |r| r.cycles_per_sec()),
    metric("server_us_per_cycle", "µs", false, |r| {
        r.window.server_us_per(r.cycles)
    }),
    metric("queue_bytes_per_waiter", "bytes", false, |r| {
        r.bytes_per_waiter()
    }),
];

const RW_OPS: [Metric<RwRun>; 3] = [
    metric("operations_per_sec", "operations/s", true, |r| {
        r.ops_per_sec()
    }),
    metric("writes_per_sec", "writes/s", true, |r| r.writes_per_sec()),
    metric("tries_per_operation", "tries", false, |r| r.tries_per_op()),
];

const SEM_HANDOFFS: [Metric<SemRun>; 4] = [
    metric("handoffs_per_sec", "hand-offs/s", true, |r| {
        r.handoffs_per_sec()
    }),
    metric("acquisitions_per_sec", "acquisitions/s", true, |r| {
        r.acquisitions_per_sec()
    }),
    metric("fairness", "min/max per worker", true, |r| r.fairness()),
    metric("server_us_per_acquisition", "µs", false, |r| {
        r.window.server_us_per(r.acquisitions)
    }),
];

/// Runs with errors count in the stall's median no more than in the markdown table.
const STALL: [Metric<StallRun>; 2] = [
    metric("stall_ms", "ms", false, |r| {
        if r.errors == 0 {
            r.stall_ms
        } else {
            f64::NAN
        }
    }),
    metric("forgotten_ms", "ms", false, |r| {
        if r.errors == 0 {
            r.forget_ms
        } else {
            f64::NAN
        }
    }),
];

fn pipeline(p: usize) -> Json {
    Json::Obj(vec![("pipeline", Json::Num(p as f64))])
}

fn clients_hold((clients, hold_ms): (usize, u64)) -> Json {
    Json::Obj(vec![
        ("clients", Json::Num(clients as f64)),
        ("hold_ms", Json::Num(hold_ms as f64)),
    ])
}

fn waiters(n: usize) -> impl Fn(()) -> Json {
    move |()| Json::Obj(vec![("waiters", Json::Num(n as f64))])
}

fn hold(hold_ms: u64) -> Json {
    Json::Obj(vec![("hold_ms", Json::Num(hold_ms as f64))])
}

fn queue(q: usize) -> Json {
    Json::Obj(vec![("queued", Json::Num(q as f64))])
}

/// Scenario 8's paths: the one node of the other scenarios, and the 3-primary cluster.
const ONE_NODE: &str = "1 node";
const THREE_PRIMARIES: &str = "3 primaries";
/// Scenario 9's: one Redisson-style client beside N − 1 blocked in the server, and all on B.
const MIXED: &str = "Q + B";
const ALL_BLOCKED: &str = "all B";

fn clients_hold_of(cell: &MixedCell) -> Json {
    clients_hold((cell.clients, cell.hold_ms))
}

/// The scenario ids a scenario of the plan writes (bench/report/README.md).
fn ids(s: Scenario) -> &'static [&'static str] {
    match s {
        Scenario::Uncontended => &["uncontended"],
        Scenario::Contended => &["contended"],
        Scenario::Expiry => &["expiry"],
        Scenario::Fair => &["fair"],
        Scenario::FairUncontended => &["fair-uncontended"],
        Scenario::Memory => &["memory"],
        Scenario::Stall => &["stall"],
        Scenario::Cluster => &["cluster"],
        Scenario::Mixed => &["mixed"],
        Scenario::ReadWrite => &["rwlock-uncontended", "rwlock-contended"],
        Scenario::Semaphore => &[
            "semaphore-uncontended",
            "semaphore-contended",
            "semaphore-reclaim",
        ],
        Scenario::Guard => &["guard"],
    }
}

/// The whole results file.
pub fn results(meta: &Meta, plan: &Plan, reports: &[FlavorReport]) -> String {
    let mut d = Doc::default();
    let ran = |s: Scenario| plan.scenarios.contains(&s);
    if ran(Scenario::Uncontended) {
        d.scenario(
            "uncontended",
            "Uncontended acquire/release pairs",
            "pairs_per_sec",
        );
        d.paths("uncontended", &PairPath::PLAIN, &[PairPath::R]);
    }
    if ran(Scenario::Contended) {
        d.scenario(
            "contended",
            "Contended hand-off on one lock",
            "handoffs_per_sec",
        );
        d.paths("contended", &WaitPath::ALL, &[WaitPath::B]);
    }
    if ran(Scenario::FairUncontended) {
        d.scenario(
            "fair-uncontended",
            "Uncontended pairs, FAIR and REQ against plain",
            "pairs_per_sec",
        );
        d.paths(
            "fair-uncontended",
            &PairPath::FAIR_VS_PLAIN,
            &PairPath::FAIR_VS_PLAIN,
        );
    }
    if ran(Scenario::Memory) {
        d.scenario("memory", "Memory per blocked waiter", "bytes_per_waiter");
        d.paths("memory", &MemPath::ALL, &[MemPath::R]);
    }
    if ran(Scenario::Stall) {
        d.scenario(
            "stall",
            "Stall when the blocked waiters disconnect at once",
            "stall_ms",
        );
        d.paths("stall", &StallPath::ALL, &[StallPath::F, StallPath::B]);
    }
    if ran(Scenario::Expiry) {
        let title = "Lease expiry: how late after the deadline a waiter gets the lock";
        d.scenario("expiry", title, "late_p50_ms");
        let rlock = [ExpiryPath::B, ExpiryPath::BehindLua];
        d.paths("expiry", &ExpiryPath::ALL, &rlock);
    }
    if ran(Scenario::Fair) {
        let title = "Fair queue cost: one cycle with Q owners queued";
        d.scenario("fair", title, "server_us_per_cycle");
        d.paths("fair", &FairPath::ALL, &[FairPath::R]);
    }
    if ran(Scenario::ReadWrite) {
        let title = "Read-write lock: uncontended pairs";
        d.scenario("rwlock-uncontended", title, "pairs_per_sec");
        let rlock = [PairPath::RR, PairPath::RW];
        d.paths("rwlock-uncontended", &PairPath::READ_WRITE, &rlock);
        let title = "Read-write lock: contended, 90 % readers";
        d.scenario("rwlock-contended", title, "operations_per_sec");
        d.paths("rwlock-contended", &RwWaitPath::ALL, &[RwWaitPath::B]);
    }
    if ran(Scenario::Semaphore) {
        let title = "Semaphore: uncontended pairs";
        d.scenario("semaphore-uncontended", title, "pairs_per_sec");
        let rlock = [SemPairPath::R, SemPairPath::RX];
        d.paths("semaphore-uncontended", &SemPairPath::ALL, &rlock);
        let title = "Semaphore: contended";
        d.scenario("semaphore-contended", title, "handoffs_per_sec");
        d.paths("semaphore-contended", &SemWaitPath::ALL, &[SemWaitPath::B]);
        let title = "Semaphore: an expired permit's waiter, late after the deadline";
        d.scenario("semaphore-reclaim", title, "late_p50_ms");
        let rlock = [ReclaimPath::B, ReclaimPath::BehindLua];
        d.paths("semaphore-reclaim", &ReclaimPath::ALL, &rlock);
    }
    if ran(Scenario::Cluster) {
        let title = "Cluster: uncontended pairs (R, pipeline 16) on 3 primaries against one node";
        d.scenario("cluster", title, "pairs_per_sec");
        let label = "RLOCK.ACQUIRE k o LEASE 30000 + RLOCK.RELEASE k o, pipeline 16, each connection on one node's keys";
        d.path(
            "cluster",
            THREE_PRIMARIES,
            label,
            "3-primary cluster",
            "rlock",
        );
        d.path("cluster", ONE_NODE, label, "one node", "baseline");
    }
    if ran(Scenario::Mixed) {
        let title = "Mixed fleet: one Redisson-style client beside clients blocked in the server";
        d.scenario("mixed", title, "fairness");
        let label =
            "client 0 Redisson's lock() (Lua tryLock, wait for the unlock message or the TTL), \
                     the others RLOCK.ACQUIRE lock o BLOCK 0 LEASE 30000";
        d.path("mixed", MIXED, label, "1 Redisson-style + BLOCK", "rlock");
        let label = "the same clients, all RLOCK.ACQUIRE lock o BLOCK 0 LEASE 30000";
        d.path("mixed", ALL_BLOCKED, label, "all BLOCK", "baseline");
    }
    if ran(Scenario::Guard) {
        let title = "Guarded writes: RLOCK.GUARD against a check-and-set script";
        d.scenario("guard", title, "writes_per_sec");
        d.paths("guard", &GuardPath::ALL, &[GuardPath::G]);
    }
    for r in reports {
        let server = server_id(r.flavor);
        if let Some(u) = &r.uncontended {
            use PairPath::{L, R, S};
            d.cells("uncontended", server, &u.cells, pipeline, &PAIRS);
            d.ratios(
                "uncontended",
                server,
                &u.cells,
                pipeline,
                &PAIRS[0],
                &[(R, L), (R, S)],
            );
        }
        if let Some(c) = &r.contended {
            use WaitPath::{B, P, Q};
            d.cells("contended", server, &c.cells, clients_hold, &HANDOFFS);
            let pairs = [(B, P), (B, Q)];
            d.ratios(
                "contended",
                server,
                &c.cells,
                clients_hold,
                &HANDOFFS[0],
                &pairs,
            );
            // BLPOP is no lock: what a hand-off's latency is set against, not its throughput.
            let floor = [(B, WaitPath::Blpop)];
            d.ratios(
                "contended",
                server,
                &c.cells,
                clients_hold,
                &HANDOFFS[3],
                &floor,
            );
        }
        if let Some(u) = &r.fair_uncontended {
            use PairPath::{R, RF, RQ};
            let s = "fair-uncontended";
            d.cells(s, server, &u.cells, pipeline, &PAIRS);
            d.ratios(
                s,
                server,
                &u.cells,
                pipeline,
                &PAIRS[0],
                &[(RF, R), (RQ, R)],
            );
        }
        if let Some(m) = &r.memory {
            let at = waiters(m.waiters);
            d.cells("memory", server, &m.cells.cells, &at, &MEMORY);
            let pair = [(MemPath::R, MemPath::L)];
            d.ratios("memory", server, &m.cells.cells, &at, &MEMORY[0], &pair);
        }
        if let Some(st) = &r.stall {
            use StallPath::{B, F, L};
            let at = waiters(st.waiters);
            d.cells("stall", server, &st.cells.cells, &at, &STALL);
            d.ratios(
                "stall",
                server,
                &st.cells.cells,
                &at,
                &STALL[0],
                &[(F, L), (B, L)],
            );
        }
        if let Some(e) = &r.expiry {
            let lease = || Json::Obj(vec![("lease_ms", Json::Num(e.lease_ms as f64))]);
            let pairs = [(ExpiryPath::B, ExpiryPath::Q)];
            d.lateness("expiry", server, lease, &e.cells, &pairs);
        }
        if let Some(f) = &r.fair {
            d.cells("fair", server, &f.cells, queue, &FAIR_CYCLES);
            let pair = [(FairPath::R, FairPath::F)];
            d.ratios("fair", server, &f.cells, queue, &FAIR_CYCLES[1], &pair);
        }
        if let Some(rw) = &r.read_write {
            use PairPath::{LR, LW, RR, RW};
            let (s, u) = ("rwlock-uncontended", &rw.uncontended.cells);
            d.cells(s, server, u, pipeline, &PAIRS);
            d.ratios(s, server, u, pipeline, &PAIRS[0], &[(RR, LR), (RW, LW)]);
            let (s, c) = ("rwlock-contended", &rw.contended);
            d.cells(s, server, c, hold, &RW_OPS);
            let pair = [(RwWaitPath::B, RwWaitPath::Q)];
            d.ratios(s, server, c, hold, &RW_OPS[0], &pair);
        }
        if let Some(sem) = &r.semaphore {
            use SemPairPath::{L, LX, R, RX};
            let (s, u) = ("semaphore-uncontended", &sem.pairs.cells);
            d.cells(s, server, u, pipeline, &PAIRS);
            d.ratios(s, server, u, pipeline, &PAIRS[0], &[(R, L), (RX, LX)]);
            let (s, c) = ("semaphore-contended", &sem.contended.cells);
            d.cells(s, server, c, hold, &SEM_HANDOFFS);
            let pair = [(SemWaitPath::B, SemWaitPath::Q)];
            d.ratios(s, server, c, hold, &SEM_HANDOFFS[0], &pair);
            let rc = &sem.reclaim;
            let lease = || Json::Obj(vec![("lease_ms", Json::Num(rc.lease_ms as f64))]);
            let pairs = [(ReclaimPath::B, ReclaimPath::Q)];
            d.lateness("semaphore-reclaim", server, lease, &rc.cells, &pairs);
        }
        if let Some(c) = &r.cluster {
            let at = Json::Obj(vec![("pipeline", Json::Num(16.0))]);
            let s = "cluster";
            d.named_result(s, server, at, THREE_PRIMARIES, &CLUSTER_PAIRS, &c.cluster);
            let at = Json::Obj(vec![("pipeline", Json::Num(16.0))]);
            d.named_result(s, server, at, ONE_NODE, &CLUSTER_PAIRS, &c.single);
            let at = Json::Obj(vec![("pipeline", Json::Num(16.0))]);
            let names = (THREE_PRIMARIES, ONE_NODE);
            d.ratio(s, server, at, CLUSTER_PAIRS.name, names, c.ratio());
        }
        if let Some(m) = &r.mixed {
            for cell in &m.cells {
                let runs = [(MIXED, &cell.mixed), (ALL_BLOCKED, &cell.all_blocked)];
                for (path, runs) in runs {
                    for metric in &FLEET {
                        let rounds: Vec<f64> = runs.iter().map(metric.of).collect();
                        d.named_result(
                            "mixed",
                            server,
                            clients_hold_of(cell),
                            path,
                            metric,
                            &rounds,
                        );
                    }
                }
                let share: Vec<f64> = cell.mixed.iter().map(redisson_share).collect();
                let at = clients_hold_of(cell);
                d.named_result("mixed", server, at, MIXED, &REDISSON_SHARE, &share);
                let names = (MIXED, ALL_BLOCKED);
                let (at, metric) = (clients_hold_of(cell), FLEET[0].name);
                d.ratio("mixed", server, at, metric, names, cell.throughput_ratio());
            }
        }
        if let Some(g) = &r.guard {
            use GuardPath::{C, G, P};
            d.cells("guard", server, &g.cells, pipeline, &WRITES);
            let pairs = [(G, C), (G, P)];
            d.ratios("guard", server, &g.cells, pipeline, &WRITES[0], &pairs);
        }
        for s in Scenario::ALL.into_iter().filter(|&s| !ran(s)) {
            for id in ids(s) {
                d.not_measured(id, server, "not in this run (--only)");
            }
        }
    }
    let (commit, dirty) = match meta.commit.strip_suffix(" + uncommitted changes") {
        Some(c) => (c.to_string(), true),
        None => (meta.commit.clone(), false),
    };
    let doc = Json::Obj(vec![
        ("schema", Json::str("rlock-bench/1")),
        ("suite", Json::str("module")),
        ("language", Json::str("Rust")),
        (
            "title",
            Json::str("The module: rlock's commands against Lua scripts, SET NX and polling"),
        ),
        ("command", Json::str(&meta.command)),
        ("date", Json::str(&meta.date)),
        (
            "machine",
            Json::Obj(vec![
                ("cpu", Json::str(&meta.cpu)),
                ("nproc", Json::Num(meta.nproc as f64)),
                ("load_before", Json::str(&meta.load_before)),
                (
                    "pinning",
                    Json::str(reports.first().map_or("", |r| r.pinning.as_str())),
                ),
            ]),
        ),
        (
            "build",
            Json::Obj(vec![
                ("commit", Json::str(commit)),
                ("dirty", Json::Bool(dirty)),
                (
                    "module_version",
                    Json::str(reports.first().map_or("?", |r| r.module_version.as_str())),
                ),
                (
                    "client",
                    Json::str("redis-rs (the bench's own load, no rlock client)"),
                ),
            ]),
        ),
        (
            "plan",
            Json::Obj(vec![
                ("rounds", Json::Num(plan.rounds as f64)),
                ("seconds", Json::Num(plan.contended_run.as_secs_f64())),
                (
                    "clients",
                    Json::Arr(plan.clients.iter().map(|&c| Json::Num(c as f64)).collect()),
                ),
                ("fair_pipeline", Json::Num(FAIR_PIPELINE as f64)),
                ("waiters", Json::Num(plan.waiters as f64)),
                ("waiter_rounds", Json::Num(plan.waiter_rounds as f64)),
            ]),
        ),
        (
            "servers",
            Json::Arr(
                reports
                    .iter()
                    .map(|r| {
                        Json::Obj(vec![
                            ("id", Json::str(server_id(r.flavor))),
                            ("version", Json::str(&r.server_version)),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("scenarios", Json::Arr(d.scenarios)),
        ("paths", Json::Arr(d.paths)),
        ("results", Json::Arr(d.results)),
        ("ratios", Json::Arr(d.ratios)),
        ("not_measured", Json::Arr(d.not_measured)),
    ]);
    let mut out = String::new();
    doc.write(&mut out, 0);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(j: &Json) -> String {
        let mut out = String::new();
        j.write(&mut out, 0);
        out
    }

    #[test]
    fn figures_that_could_not_be_computed_are_null_and_text_is_escaped() {
        let doc = Json::Obj(vec![
            (
                "rounds",
                Json::Arr(vec![Json::num(1.5), Json::num(f64::NAN), Json::num(3.0)]),
            ),
            ("label", Json::str("say \"B\"\\n")),
            ("empty", Json::Obj(vec![])),
        ]);
        assert_eq!(
            text(&doc),
            "{\n  \"rounds\": [1.5, null, 3],\n  \"label\": \"say \\\"B\\\"\\\\n\",\n  \"empty\": {}\n}"
        );
    }

    #[test]
    fn ratios_are_of_medians_in_the_same_setting_only() {
        use crate::harness::Cells;
        let cell = |path, setting, runs: Vec<f64>| Cell {
            path,
            setting,
            runs,
        };
        let cells = Cells {
            cells: vec![
                cell(WaitPath::B, 1usize, vec![4.0, 6.0, 5.0]),
                cell(WaitPath::Q, 1, vec![2.0, 3.0, 1.0]),
                cell(WaitPath::B, 2, vec![9.0]),
            ],
        };
        let by = |s: usize| Json::Obj(vec![("n", Json::Num(s as f64))]);
        let m = metric("x", "u", true, |r: &f64| *r);
        let mut d = Doc::default();
        d.ratios(
            "s",
            "redis",
            &cells.cells,
            by,
            &m,
            &[(WaitPath::B, WaitPath::Q)],
        );
        assert_eq!(d.ratios.len(), 1, "setting 2 has no Q to divide by");
        assert!(text(&d.ratios[0]).contains("\"value\": 2.5"));
    }
}
