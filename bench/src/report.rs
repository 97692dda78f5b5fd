//! Markdown tables, and the facts that make a run reproducible: command, date,
//! machine, server and module versions.

pub mod json;

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::contended::{Contended, WaitPath, WaitRun};
use crate::expiry::Expiry;
use crate::fair::{Fair, FairPath, FairRun};
use crate::harness::late::Lateness;
use crate::harness::pairs::{PairRun, Pairs};
use crate::harness::table::{num, paths, rate, table, thousands};
use crate::harness::{Cell, Path};
use crate::measure::{median, ratio};
use crate::memory::{MemPath, MemRun, Memory};
use crate::stall::{Stall, StallPath};
use crate::uncontended::{PairPath, Uncontended, FAIR_PIPELINE};
use crate::{FlavorReport, Plan};
use rlock_module_tests::Flavor;

/// Where and how a run happened.
#[derive(Debug, Clone)]
pub struct Meta {
    pub command: String,
    pub date: String,
    pub nproc: usize,
    pub cpu: String,
    pub load_before: String,
    pub commit: String,
}

impl Meta {
    pub fn collect(args: &[String]) -> Meta {
        let mut command = String::from("cargo run --release -p rlock-bench --");
        for a in args {
            command.push(' ');
            command.push_str(a);
        }
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "?".into());
        let load_before = std::fs::read_to_string("/proc/loadavg")
            .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "?".into());
        let commit = git(&["rev-parse", "--short", "HEAD"]).map_or_else(
            || "?".into(),
            |c| {
                let dirty = git(&["status", "--porcelain", "--", "src", "Cargo.toml"])
                    .is_some_and(|s| !s.is_empty());
                if dirty {
                    format!("{c} + uncommitted changes")
                } else {
                    c
                }
            },
        );
        Meta {
            command,
            date: utc_now(),
            nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu,
            load_before,
            commit,
        }
    }
}

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// "YYYY-MM-DD HH:MM UTC" without a date crate.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// Which side of the bar a figure must be on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bound {
    AtLeast,
    Below,
    AtMost,
}

/// One target: the figure, the bar, and whether it was met.
struct Target {
    what: String,
    value: f64,
    bar: f64,
    bound: Bound,
    decimals: usize,
}

/// A target `what`: `value` against `bar` (NaN: no target), shown with `decimals`.
fn target(what: impl Into<String>, value: f64, bound: Bound, bar: f64, decimals: usize) -> Target {
    Target {
        what: what.into(),
        value,
        bar,
        bound,
        decimals,
    }
}

impl Target {
    fn row(&self, flavor: &str) -> String {
        let met = match self.bound {
            Bound::AtLeast => self.value >= self.bar,
            Bound::Below => self.value < self.bar,
            Bound::AtMost => self.value <= self.bar,
        };
        let verdict = if !self.value.is_finite() {
            "not run"
        } else if self.bar.is_nan() {
            "no target"
        } else if met {
            "**met**"
        } else {
            "**missed**"
        };
        let bar = if self.bar.is_nan() {
            "—".to_string()
        } else {
            let sign = match self.bound {
                Bound::AtLeast => "≥",
                Bound::Below => "<",
                Bound::AtMost => "≤",
            };
            format!("{sign} {}", num(self.bar, self.decimals))
        };
        format!(
            "| {flavor} | {} | {bar} | {} | {verdict} |\n",
            self.what,
            num(self.value, self.decimals),
        )
    }
}

fn targets(r: &FlavorReport) -> Vec<Target> {
    use Bound::{AtLeast, AtMost, Below};
    let mut out = Vec::new();
    if let Some(u) = &r.uncontended {
        // The three-servers issue's bars (NaN: no target on that server).
        let (against_lua, against_set) = match r.flavor {
            Flavor::Redis => (2.6, 0.60),
            Flavor::Valkey => (f64::NAN, 0.68),
            Flavor::Redis8 => (f64::NAN, f64::NAN),
        };
        for (other, bar) in [(PairPath::L, against_lua), (PairPath::S, against_set)] {
            let what = format!("uncontended pairs/s R/{}, pipeline 16", other.letter());
            let value = u.pairs_ratio(PairPath::R, other, 16);
            out.push(target(what, value, AtLeast, bar, 2));
        }
    }
    if let Some(c) = &r.contended {
        let b = c.cell(WaitPath::B, (32, 0));
        for (other, bar) in [(WaitPath::Q, 3.0), (WaitPath::P, 10.0)] {
            let what = format!("hand-offs/s B/{}, 32 clients, hold 0", other.letter());
            let value = c.handoff_ratio(WaitPath::B, other, 32, 0);
            out.push(target(what, value, AtLeast, bar, 2));
        }
        let p50 = b.map_or(f64::NAN, |b| b.med(|r| r.p50_ms));
        let what = "B hand-off latency p50 (ms), 32 clients, hold 0";
        out.push(target(what, p50, Below, 0.5, 3));
        let fairness = b.map_or(f64::NAN, |b| b.med(WaitRun::fairness));
        let what = "B min/max acquisitions per client, 32 clients, hold 0";
        out.push(target(what, fairness, AtLeast, 0.8, 2));
    }
    if let Some(f) = &r.fair {
        let value = f.server_cost_ratio((FairPath::R, 10_000), (FairPath::R, 10));
        let what = "fair R server CPU µs/cycle, Q=10,000 ÷ Q=10";
        out.push(target(what, value, AtMost, 1.5, 2));
        let value = f.server_cost_ratio((FairPath::F, 10_000), (FairPath::R, 10_000));
        let what = "fair server CPU µs/cycle F ÷ R, Q=10,000";
        out.push(target(what, value, AtLeast, 50.0, 1));
    }
    if let Some(g) = &r.guard {
        use crate::guard::GuardPath;
        let what = "guarded writes/s G/C (RLOCK.GUARD ÷ check-and-set EVALSHA), pipeline 16";
        let value = g.pairs_ratio(GuardPath::G, GuardPath::C, 16);
        out.push(target(what.to_string(), value, AtLeast, 1.5, 2));
        let what = "guarded writes/s G/P (the guarantee's cost: ÷ plain SET), pipeline 16";
        let value = g.pairs_ratio(GuardPath::G, GuardPath::P, 16);
        out.push(target(what.to_string(), value, AtLeast, f64::NAN, 2));
    }
    if let Some(u) = &r.fair_uncontended {
        let what = format!("uncontended pairs/s FAIR/plain (RF/R), pipeline {FAIR_PIPELINE}");
        let value = u.pairs_ratio(PairPath::RF, PairPath::R, FAIR_PIPELINE);
        out.push(target(what, value, AtLeast, 0.8, 2));
    }
    if let Some(m) = &r.memory {
        let n = thousands(m.waiters as u64);
        let what = format!("bytes per blocked waiter, RLOCK.ACQUIRE BLOCK 0 ÷ BLPOP, N={n}");
        out.push(target(what, m.ratio(), AtMost, 1.5, 2));
    }
    if let Some(rw) = &r.read_write {
        for (a, b, side) in [
            (PairPath::RR, PairPath::LR, "read"),
            (PairPath::RW, PairPath::LW, "write"),
        ] {
            let (a_, b_) = (a.letter(), b.letter());
            let what = format!("uncontended {side}-lock pairs/s {a_}/{b_}, pipeline 16");
            let value = rw.uncontended.pairs_ratio(a, b, 16);
            out.push(target(what, value, AtLeast, 2.5, 2));
        }
        let what = format!(
            "read-write lock operations/s B/Q, {} clients, {} % readers, hold 0",
            crate::rwlock::CLIENTS,
            crate::rwlock::READ_PERCENT
        );
        out.push(target(what, rw.contended_ratio(0), AtLeast, 3.0, 2));
    }
    if let Some(sem) = &r.semaphore {
        use crate::semaphore::{SemPairPath, CLIENTS, PERMITS};
        for (a, b, kind) in [
            (SemPairPath::R, SemPairPath::L, "semaphore acquire/release"),
            (
                SemPairPath::RX,
                SemPairPath::LX,
                "permit-expirable lease/return",
            ),
        ] {
            let (a_, b_) = (a.letter(), b.letter());
            let what = format!("uncontended {kind} pairs/s {a_}/{b_}, pipeline 16");
            out.push(target(
                what,
                sem.pairs.pairs_ratio(a, b, 16),
                AtLeast,
                2.5,
                2,
            ));
        }
        let what =
            format!("semaphore hand-offs/s B/Q, {CLIENTS} clients, {PERMITS} permits, hold 0");
        out.push(target(what, sem.handoff_ratio(0), AtLeast, 3.0, 2));
        let b = sem.reclaim.cell(crate::semaphore::ReclaimPath::B);
        for p in [50.0, 99.0] {
            let what =
                format!("expired permit: B waiter served after the lease deadline, p{p} (ms)");
            let value = b.map_or(f64::NAN, |c| c.per_round(p));
            out.push(target(what, value, AtMost, 10.0, 2));
        }
    }
    if let Some(st) = &r.stall {
        let n = thousands(st.waiters as u64);
        let what =
            format!("stall (ms, longest PING) when N={n} FAIR BLOCK 0 waiters disconnect at once");
        let value = st
            .cells
            .cell(StallPath::F, ())
            .map_or(f64::NAN, |c| c.clean(|r| r.stall_ms));
        out.push(target(what, value, AtMost, 100.0, 1));
    }
    out
}

/// The whole report. `how_to_read` adds the explanation that docs/BENCHMARKS.md carries.
pub fn markdown(meta: &Meta, plan: &Plan, reports: &[FlavorReport], how_to_read: bool) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "# rlock benchmarks\n");
    let _ = writeln!(
        w,
        "Produced by `{}` (`make bench BENCH_ARGS='…'` runs the same), on {}.\n",
        meta.command, meta.date
    );
    let _ = writeln!(
        w,
        "- Machine: nproc {}, {}; load average before the run {}.",
        meta.nproc, meta.cpu, meta.load_before
    );
    for r in reports {
        let _ = writeln!(
            w,
            "- {}: {} with librlock.so (module ver {}, tree {}), started by the harness on loopback.",
            r.flavor, r.server_version, r.module_version, meta.commit
        );
    }
    for r in reports {
        let _ = writeln!(w, "- CPU pinning, {}: {}.", r.flavor, r.pinning);
        if let Some(note) = &r.waiters_note {
            let _ = writeln!(w, "- Waiters, {}: {note}.", r.flavor);
        }
    }
    plan_line(w, plan);
    if how_to_read {
        let _ = writeln!(w, "{HOW_TO_READ}");
    }

    let _ = writeln!(w, "## Targets\n");
    let _ = writeln!(w, "| server | figure | target | measured | |");
    let _ = writeln!(w, "|---|---|---|---|---|");
    for r in reports {
        for t in targets(r) {
            w.push_str(&t.row(&r.flavor.to_string()));
        }
    }
    let _ = writeln!(w);

    for r in reports {
        let _ = writeln!(w, "## {} ({})\n", r.flavor, r.server_version);
        if let Some(u) = &r.uncontended {
            uncontended_section(w, u);
        }
        if let Some(c) = &r.contended {
            contended_section(w, c);
        }
        if let Some(e) = &r.expiry {
            expiry_section(w, e);
        }
        if let Some(f) = &r.fair {
            fair_section(w, f);
        }
        if let Some(u) = &r.fair_uncontended {
            fair_uncontended_section(w, u);
        }
        if let Some(m) = &r.memory {
            memory_section(w, m);
        }
        if let Some(st) = &r.stall {
            stall_section(w, st);
        }
        if let Some(c) = &r.cluster {
            cluster_section(w, c);
        }
        if let Some(m) = &r.mixed {
            mixed_section(w, m);
        }
        if let Some(rw) = &r.read_write {
            read_write_section(w, rw);
        }
        if let Some(sem) = &r.semaphore {
            semaphore_section(w, sem);
        }
        if let Some(g) = &r.guard {
            guard_section(w, g);
        }
    }
    s
}

fn plan_line(w: &mut String, plan: &Plan) {
    let _ = writeln!(
        w,
        "- Plan: {} rounds, paths interleaved within each round; warm-up {} ms; uncontended {} s per run, \
         {} connections, {} keys, pipelines {:?}; contended {} s per run, clients {:?}, holds {:?} ms; \
         expiry {} samples, lease {} ms; fair {} s per run, queues {:?}; \
         FAIR vs plain pairs at pipeline {FAIR_PIPELINE}; memory and stall: {} waiters, {} rounds, \
         settle ≥ {} ms; semaphore reclaim {} samples per path and round. Client: one process, \
         one tokio thread, redis-rs multiplexed connections (memory and stall: one plain \
         connection per waiter, a probe thread).\n",
        plan.rounds,
        plan.warmup_ms,
        plan.uncontended_run.as_secs_f64(),
        plan.conns,
        plan.keys,
        plan.pipelines,
        plan.contended_run.as_secs_f64(),
        plan.clients,
        plan.holds_ms,
        plan.expiry_samples,
        plan.expiry_lease_ms,
        plan.fair_run.as_secs_f64(),
        plan.fair_queues,
        plan.waiters,
        plan.waiter_rounds,
        plan.waiter_settle.as_millis(),
        plan.sem_samples,
    );
}

/// The pairs table of scenarios 1, 5, 10 and 11: `versus` names the ratio column and gives
/// each cell's ratio (empty where there is none).
fn pairs_table<P: Path>(
    w: &mut String,
    pairs: &Pairs<P>,
    versus: &str,
    ratio_of: impl Fn(&Cell<P, usize, PairRun>) -> Option<f64>,
) {
    let columns = [
        "pipeline:",
        "path",
        "pairs/s:",
        versus,
        "server CPU µs/pair:",
        "server CPU %:",
        "client CPU %:",
        "errors:",
    ];
    let rows = pairs.cells.iter().map(|cell| {
        vec![
            cell.setting.to_string(),
            cell.path.letter().to_string(),
            rate(cell.med(PairRun::pairs_per_sec)),
            ratio_of(cell).map_or(String::new(), |x| num(x, 2)),
            num(cell.server_us_per(|r| r.done), 2),
            num(cell.server_busy(), 0),
            num(cell.client_busy(), 0),
            cell.sum(|r| r.errors).to_string(),
        ]
    });
    table(w, &columns, rows);
}

fn uncontended_section(w: &mut String, u: &Uncontended) {
    let _ = writeln!(w, "### 1. Uncontended acquire/release pairs\n");
    paths(w, &PairPath::PLAIN);
    let _ = writeln!(
        w,
        "\nA pipeline of 16 is 8 acquires on 8 distinct keys, then their 8 releases.\n"
    );
    pairs_table(w, u, "R ÷ path:", |cell| {
        Some(u.pairs_ratio(PairPath::R, cell.path, cell.setting))
    });
    let _ = writeln!(w);
}

fn contended_section(w: &mut String, c: &Contended) {
    let _ = writeln!(w, "### 2. Contended hand-off on one lock\n");
    paths(w, &WaitPath::ALL);
    let _ = writeln!(w);
    let columns = [
        "clients:",
        "hold ms:",
        "path",
        "hand-offs/s:",
        "B ÷ path:",
        "acquisitions/s:",
        "latency p50 ms:",
        "p99 ms:",
        "min/max per client:",
        "tries/hand-off:",
        "server CPU µs/hand-off:",
        "server CPU %:",
        "errors:",
    ];
    let rows = c.cells.iter().map(|cell| {
        let (clients, hold_ms) = cell.setting;
        vec![
            clients.to_string(),
            hold_ms.to_string(),
            cell.path.letter().to_string(),
            rate(cell.med(WaitRun::handoffs_per_sec)),
            num(c.handoff_ratio(WaitPath::B, cell.path, clients, hold_ms), 2),
            rate(cell.med(WaitRun::acquisitions_per_sec)),
            num(cell.med(|r| r.p50_ms), 3),
            num(cell.med(|r| r.p99_ms), 3),
            num(cell.med(WaitRun::fairness), 2),
            num(cell.med(WaitRun::tries_per_handoff), 1),
            num(cell.server_us_per(|r| r.handoffs), 1),
            num(cell.server_busy(), 0),
            cell.sum(|r| r.trouble.total()).to_string(),
        ]
    });
    table(w, &columns, rows);
    let _ = writeln!(w);
}

/// The lateness table of scenarios 3 and 11; `setup` adds a column saying what each path sends.
fn lateness_table<P: Path>(
    w: &mut String,
    cells: &[Lateness<P>],
    setup: bool,
    p50: impl Fn(&Lateness<P>) -> f64,
) {
    let mut columns = vec!["path"];
    if setup {
        columns.push("setup");
    }
    columns.extend([
        "samples:",
        "late p50 ms:",
        "p99 ms:",
        "min ms:",
        "max ms:",
        "errors:",
    ]);
    let rows = cells.iter().map(|cell| {
        let mut row = vec![cell.path.letter().to_string()];
        if setup {
            row.push(cell.path.describe().to_string());
        }
        row.extend([
            cell.samples().to_string(),
            num(p50(cell), 2),
            num(cell.per_round(99.0), 2),
            num(cell.min_ms(), 2),
            num(cell.max_ms(), 2),
            cell.errors.to_string(),
        ]);
        row
    });
    table(w, &columns, rows);
}

fn expiry_section(w: &mut String, e: &Expiry) {
    let _ = writeln!(
        w,
        "### 3. Lease expiry: the holder stops, lease {} ms\n",
        e.lease_ms
    );
    let _ = writeln!(
        w,
        "Lateness = the waiter's grant reply received − (the holder's acquire reply received + lease).\n"
    );
    lateness_table(w, &e.cells, true, Lateness::median_ms);
    let _ = writeln!(w);
}

fn fair_section(w: &mut String, f: &Fair) {
    let _ = writeln!(
        w,
        "### 4. Fair queue cost: one cycle with Q owners queued\n"
    );
    paths(w, &FairPath::ALL);
    let _ = writeln!(
        w,
        "\nOwner w0 holds the lock and w1..wQ queue behind it (polling fair acquires). One cycle is \
         one pipeline on one connection, one cycle at a time: the holder releases (the head is woken \
         on its channel); the head acquires FAIR and takes the lock; the old holder acquires FAIR again \
         and queues at the tail. The queue is back to Q owners after every cycle; F's acquire re-scores \
         the Q − 1 owners behind the head. Bytes/waiter = (`MEMORY USAGE` of `redisson_lock_queue:{{K}}` \
         + of `redisson_lock_timeout:{{K}}`, SAMPLES 0) ÷ Q, with Q queued.\n"
    );
    let base = f.cells.first().map_or(0, |c| c.setting);
    let at_base = format!("÷ same path at Q={base}, server CPU:");
    let columns = [
        "Q:",
        "path",
        "cycles/s:",
        "wall µs/cycle:",
        "server CPU µs/cycle:",
        "÷ R, server CPU:",
        "÷ R, wall:",
        &at_base,
        "server CPU %:",
        "client CPU %:",
        "queue bytes/waiter:",
        "cycles:",
        "errors:",
    ];
    let rows = f.cells.iter().map(|cell| {
        let (me, r) = ((cell.path, cell.setting), (FairPath::R, cell.setting));
        vec![
            rate(cell.setting as f64),
            cell.path.letter().to_string(),
            rate(cell.med(FairRun::cycles_per_sec)),
            num(cell.med(FairRun::wall_us_per_cycle), 1),
            num(cell.server_us_per(|r| r.cycles), 1),
            num(f.server_cost_ratio(me, r), 1),
            num(f.wall_cost_ratio(me, r), 1),
            num(f.server_cost_ratio(me, (cell.path, base)), 2),
            num(cell.server_busy(), 0),
            num(cell.client_busy(), 0),
            num(cell.med(FairRun::bytes_per_waiter), 1),
            cell.sum(|r| r.cycles).to_string(),
            cell.sum(|r| r.errors).to_string(),
        ]
    });
    table(w, &columns, rows);
    let _ = writeln!(w);
}

fn fair_uncontended_section(w: &mut String, u: &Uncontended) {
    let _ = writeln!(w, "### 5. Uncontended pairs, FAIR and REQ vs plain\n");
    paths(w, &PairPath::FAIR_VS_PLAIN);
    let _ = writeln!(
        w,
        "\nThe shape of scenario 1 (same connections and keys); a pipeline of {FAIR_PIPELINE} is {} acquires \
         on distinct keys, then their releases. No one ever queues: this is what FAIR costs when \
         nobody waits, and what REQ costs (a record key written and replicated per call, kept for \
         the lease).\n",
        FAIR_PIPELINE / 2
    );
    pairs_table(w, u, "path ÷ R:", |cell| {
        Some(u.pairs_ratio(cell.path, PairPath::R, cell.setting))
    });
    let _ = writeln!(w);
}

fn mixed_section(w: &mut String, m: &crate::mixed::Mixed) {
    let _ = writeln!(
        w,
        "### 9. Mixed fleet: one Redisson-style client beside clients blocked in the server\n"
    );
    let _ = writeln!(
        w,
        "Client 0 follows Redisson's `lock()` (Q: Lua tryLock, on a miss wait for `0` on \
         `redisson_lock__channel:{{lock}}` or the TTL, Lua unlock); the other N − 1 send \
         `RLOCK.ACQUIRE lock o BLOCK 0 LEASE 30000` (B). Beside it, in the same round, the same N \
         clients all on B. min/max = the fewest acquisitions of a client ÷ the most; Q ÷ B = Q's \
         acquisitions ÷ the B clients' mean.\n"
    );
    let columns = [
        "clients:",
        "hold ms:",
        "min/max per client:",
        "Q ÷ B mean:",
        "acquisitions/s:",
        "all on B:",
        "mixed ÷ all B:",
        "errors:",
    ];
    let rows = m.cells.iter().map(|cell| {
        vec![
            cell.clients.to_string(),
            cell.hold_ms.to_string(),
            num(cell.fairness(), 2),
            num(cell.redisson_share(), 2),
            rate(cell.acquisitions_per_sec()),
            rate(cell.all_blocked_per_sec()),
            num(cell.throughput_ratio(), 2),
            cell.problems().to_string(),
        ]
    });
    table(w, &columns, rows);
    let _ = writeln!(w);
}

fn read_write_section(w: &mut String, rw: &crate::rwlock::ReadWrite) {
    use crate::rwlock::{RwRun, RwWaitPath, CLIENTS, READ_PERCENT};
    let _ = writeln!(w, "### 10. Read-write lock\n");
    let _ = writeln!(
        w,
        "Uncontended pairs, the shape of scenario 1 (same connections and keys); Redisson's \
         unlock scripts write an unlock latch key each (`redisson_unlock_latch:{{K}}:<id>`, \
         {} ms), which Redisson deletes afterwards with one more command the bench does not send.\n",
        crate::scripts::UNLOCK_LATCH_MS
    );
    paths(w, &PairPath::READ_WRITE);
    let _ = writeln!(w);
    let u = &rw.uncontended;
    pairs_table(w, u, "÷ Redisson's scripts:", |cell| {
        let base = match cell.path {
            PairPath::RR => PairPath::LR,
            PairPath::RW => PairPath::LW,
            _ => return None,
        };
        Some(u.pairs_ratio(cell.path, base, cell.setting))
    });
    let _ = writeln!(
        w,
        "\nContended: {CLIENTS} clients on one lock, each operation a read with probability \
         {READ_PERCENT} %, else a write, held for the hold time.\n"
    );
    paths(w, &RwWaitPath::ALL);
    let _ = writeln!(w);
    let columns = [
        "hold ms:",
        "path",
        "operations/s:",
        "writes/s:",
        "B ÷ Q:",
        "tries/operation:",
        "server CPU %:",
        "errors:",
    ];
    let rows = rw.contended.iter().map(|cell| {
        let versus = match cell.path {
            RwWaitPath::B => num(rw.contended_ratio(cell.setting), 2),
            RwWaitPath::Q => String::new(),
        };
        vec![
            cell.setting.to_string(),
            cell.path.letter().to_string(),
            rate(cell.med(RwRun::ops_per_sec)),
            rate(cell.med(RwRun::writes_per_sec)),
            versus,
            num(cell.med(RwRun::tries_per_op), 2),
            num(cell.server_busy(), 0),
            cell.sum(|r| r.trouble.total()).to_string(),
        ]
    });
    table(w, &columns, rows);
    let _ = writeln!(w);
}

fn semaphore_section(w: &mut String, sem: &crate::semaphore::SemaphoreReport) {
    use crate::semaphore::{
        ReclaimPath, SemPairPath, SemRun, SemWaitPath, CLIENTS, FALLBACK_MS, PERMITS,
    };
    let _ = writeln!(w, "### 11. Semaphore\n");
    let _ = writeln!(
        w,
        "Uncontended pairs, the shape of scenario 1 (same connections and keys, each connection \
         on its own keys), every key a semaphore of one permit, made beforehand by its side's \
         trySetPermits. \
         R and L: a pipeline of 16 is 8 acquires on 8 distinct keys, then their 8 releases. \
         RX and LX: the return names the permit the lease gave (RX: the id in the reply; LX: \
         the id the client made and sent, released only after the script said `OK`, as \
         Redisson's caller holds an id only then), so a batch is two pipelines: 8 leases on \
         8 keys, then, after their replies, the 8 returns; two round trips per batch on both \
         sides. At pipeline 1 every path sends the acquire, then the release.\n"
    );
    paths(w, &SemPairPath::ALL);
    let _ = writeln!(w);
    let u = &sem.pairs;
    pairs_table(w, u, "÷ Redisson's scripts:", |cell| {
        let base = cell.path.baseline()?;
        Some(u.pairs_ratio(cell.path, base, cell.setting))
    });
    let _ = writeln!(
        w,
        "\nContended: {CLIENTS} clients on one semaphore of {PERMITS} permits, each looping \
         acquire, hold, release. A **hand-off** is an acquisition by a client after another \
         client acquired since its own last release; the rest are re-takes (a client taking \
         back, before anyone else could, the permit it just gave). With {PERMITS} permits in \
         play other clients almost always acquire in between, so the test is lenient and \
         hand-offs come close to acquisitions: compare both columns. Q's clients each keep one \
         subscription for the run (Redisson subscribes after a miss and unsubscribes once it \
         holds: commands the bench spares the baseline); a wait with no message ends after \
         {FALLBACK_MS} ms (fallbacks, a safety net). Holders are counted from the grant's \
         arrival to just before the release is sent: max holders above {PERMITS} is a \
         violation, counted in errors.\n"
    );
    paths(w, &SemWaitPath::ALL);
    let _ = writeln!(w);
    let columns = [
        "hold ms:",
        "path",
        "hand-offs/s:",
        "B ÷ Q:",
        "acquisitions/s:",
        "B ÷ Q:",
        "tries/acquisition:",
        "min/max per client:",
        "max holders:",
        "fallbacks:",
        "server CPU µs/acquisition:",
        "server CPU %:",
        "errors:",
    ];
    let rows = sem.contended.cells.iter().map(|cell| {
        let hold_ms = cell.setting;
        let (h, a) = match cell.path {
            SemWaitPath::B => (
                num(sem.handoff_ratio(hold_ms), 2),
                num(sem.acquisition_ratio(hold_ms), 2),
            ),
            SemWaitPath::Q => (String::new(), String::new()),
        };
        let max_holders = cell.runs.iter().map(|r| r.max_holders).max().unwrap_or(0);
        vec![
            hold_ms.to_string(),
            cell.path.letter().to_string(),
            rate(cell.med(SemRun::handoffs_per_sec)),
            h,
            rate(cell.med(SemRun::acquisitions_per_sec)),
            a,
            num(cell.med(SemRun::tries_per_acquisition), 2),
            num(cell.med(SemRun::fairness), 2),
            max_holders.to_string(),
            cell.sum(|r| r.fallbacks).to_string(),
            num(cell.server_us_per(|r| r.acquisitions), 1),
            num(cell.server_busy(), 0),
            cell.sum(|r| r.trouble.total()).to_string(),
        ]
    });
    table(w, &columns, rows);
    let rc = &sem.reclaim;
    let _ = writeln!(
        w,
        "\nExpired-permit reclaim: a semaphore of one permit; the holder leases it for {} ms and \
         never returns it; the waiter asks right after. Lateness = the waiter's grant reply \
         received (this machine's unix clock) − the holder's deadline (its permit's score in \
         `{{K}}:timeout`, unix ms: the server's clock for RSEM.LEASE, the client's for \
         Redisson's script; server and client run on this machine, one clock). p50 and p99 \
         are medians over rounds of each round's. Q sleeps on a thread (as Java's timed \
         wait), not tokio's millisecond timer.\n",
        rc.lease_ms
    );
    paths(w, &ReclaimPath::ALL);
    let _ = writeln!(w);
    lateness_table(w, &rc.cells, false, |c| c.per_round(50.0));
    let _ = writeln!(
        w,
        "\nQ ÷ B lateness: p50 **{}**, p99 **{}**.\n",
        num(rc.ratio(false), 2),
        num(rc.ratio(true), 2)
    );
}

fn cluster_section(w: &mut String, c: &crate::cluster::ClusterScale) {
    let _ = writeln!(
        w,
        "### 8. Cluster: uncontended pairs on 3 primaries against one node\n"
    );
    let _ = writeln!(
        w,
        "R pairs (`RLOCK.ACQUIRE k o LEASE 30000` + `RLOCK.RELEASE k o`), pipeline 16, the same \
         connections either way, each on keys of one primary (no redirection). Server pinning: {}.\n",
        c.pinning
    );
    let runs = |v: &[f64]| v.iter().map(|x| rate(*x)).collect::<Vec<_>>().join(", ");
    let rows = [("one node", &c.single), ("3 primaries", &c.cluster)]
        .map(|(what, v)| vec![what.to_string(), rate(median(v.clone())), runs(v)]);
    table(w, &["", "pairs/s (median):", "runs"], rows);
    let _ = writeln!(
        w,
        "\n3 primaries ÷ one node: **{}**. This machine has {} CPUs; every server process is \
         pinned to one CPU and the load generator to another, so the three primaries share the \
         one core the single node had: the ratio is what a cluster costs per node (cluster \
         bookkeeping, slot checks, more connections' turns), not what it scales to. Each \
         primary is one event-loop thread: with a core per primary and enough load, \
         throughput grows with the primaries (up to 3× here), which this machine cannot show.\n",
        num(c.ratio(), 2),
        c.nproc
    );
}

fn memory_section(w: &mut String, m: &Memory) {
    let _ = writeln!(
        w,
        "### 6. Memory per blocked waiter, N = {}\n",
        thousands(m.waiters as u64)
    );
    paths(w, &MemPath::ALL);
    let _ = writeln!(
        w,
        "\nOne plain connection per waiter. `used_memory` with the N connections open and idle, then \
         with all N blocked (the server counting N `blocked_clients`, and `rlock_blocked` for R), each \
         read once the server settled (it trims a new client's buffers after 2 s idle). Bytes/waiter = \
         (blocked − idle) ÷ N; of which client memory = the same for `mem_clients_normal` (the \
         connections' own structures and buffers); the rest is outside the real clients (keys, the \
         server's blocking bookkeeping, the module's, the helper clients a module-blocked client \
         gets). Idle connection = (idle − before opening) ÷ N; left after = what is still allocated \
         once the waiters disconnected and the server settled, ÷ N.\n"
    );
    let columns = [
        "path",
        "bytes/waiter blocked:",
        "÷ BLPOP:",
        "of which client memory:",
        "outside client memory:",
        "idle connection bytes:",
        "left after, bytes/waiter:",
        "rounds:",
        "errors:",
    ];
    let base = m
        .cells
        .cell(MemPath::L, ())
        .map_or(f64::NAN, |c| c.med(MemRun::bytes_per_waiter));
    let rows = m.cells.cells.iter().map(|cell| {
        let blocked = cell.med(MemRun::bytes_per_waiter);
        let clients = cell.med(MemRun::client_bytes_per_waiter);
        vec![
            cell.path.letter().to_string(),
            num(blocked, 0),
            num(ratio(blocked, base), 2),
            num(clients, 0),
            num(blocked - clients, 0),
            num(cell.med(MemRun::connection_bytes), 0),
            num(cell.med(MemRun::left_bytes), 0),
            cell.runs.len().to_string(),
            cell.sum(|r| r.errors).to_string(),
        ]
    });
    table(w, &columns, rows);
    let _ = writeln!(w);
}

fn stall_section(w: &mut String, st: &Stall) {
    let _ = writeln!(
        w,
        "### 7. Stall when N = {} blocked waiters disconnect at once\n",
        thousands(st.waiters as u64)
    );
    paths(w, &StallPath::ALL);
    let _ = writeln!(
        w,
        "\nN plain connections block (F's owners are in `redisson_lock_queue:{{lock}}` too); a probe \
         thread sends PING in a tight loop on its own connection; then this process closes the N \
         sockets, one `close` after another (close ms). Stall = the longest PING round trip that ended \
         after the close began and started before a third connection saw every waiter forgotten (0 \
         `blocked_clients`, `rlock_blocked` 0, for F the queue empty); forgotten ms = from the close \
         until then; quiet = the longest PING in the 100 ms before the close. The probe shares the \
         bench's CPU with the closing thread, which every path pays alike.\n"
    );
    let columns = [
        "path",
        "stall ms:",
        "÷ BLPOP:",
        "÷ B:",
        "forgotten ms:",
        "close ms:",
        "PINGs in window:",
        "quiet ms:",
        "rounds:",
        "errors:",
    ];
    let rows = st.cells.cells.iter().map(|cell| {
        vec![
            cell.path.letter().to_string(),
            num(cell.clean(|r| r.stall_ms), 1),
            num(st.ratio(cell.path, StallPath::L), 2),
            num(st.ratio(cell.path, StallPath::B), 2),
            num(cell.clean(|r| r.forget_ms), 1),
            num(cell.clean(|r| r.close_ms), 1),
            num(cell.clean(|r| r.pings as f64), 0),
            num(cell.clean(|r| r.quiet_ms), 2),
            cell.runs.len().to_string(),
            cell.sum(|r| r.errors).to_string(),
        ]
    });
    table(w, &columns, rows);
    let _ = writeln!(w);
}

const HOW_TO_READ: &str = "## How to read this

- Every figure is the **median over rounds** of that figure in one round (latency
  percentiles too: the median of each round's p50 / p99). In each round the paths run one
  after another (R, L, S, R, L, S, ...; B, P, Q, ...) on the **same server, from the same
  process**, so drift in machine load hits every path alike. Quote **ratios** (R ÷ path,
  B ÷ path), not absolute rates: these are shared 2-core machines, and the client competes
  with the server for the second core.
- **Server CPU** is the server process's own user+sys time (`INFO cpu`) over the measured
  window, divided by the operations in it. It does not depend on how fast the client is.
  Server CPU % near 100 means the server was the bottleneck; client CPU % near 100 means the
  client was, and then the throughput ratio understates the difference in server cost.
- **Hand-off** (scenario 2): an acquisition by a different client than the previous holder
  (with 1 client, every acquisition). **Acquisitions/s** counts re-acquisitions by the
  client that just released too: the poller (P) and Redisson (Q) let the releasing client
  barge back in, which shows as acquisitions/s far above hand-offs/s and a low min/max.
  **Latency** is from the moment the releasing client sends its release to the moment the
  next holder's acquire reply arrives, one monotonic clock for all clients. **Tries/hand-off**
  counts acquire attempts (polls, tryLock calls) per hand-off: the thundering herd of Q's
  unlock message and P's polling. Hold 1 ms is a tokio sleep (≥ 1 ms).
- **Errors** counts unexpected replies, clients that never finished, and mutual-exclusion
  violations seen by the client (a grant while another client held the lock); all should be 0.
- Scenario 3: no unlock message is published when a lease runs out, so a Redisson waiter
  (Q) relies on its `min(ttl, wait)` sleep; a BLOCK waiter relies on the module's lease timer.
- Scenario 4: the **cost** of a fair cycle is the median over rounds of wall time and of
  server CPU per cycle; its targets compare server CPU, which does not include the loopback
  round trip. Cycles per cell are bounded by time (the Lua path at Q = 10,000 manages only
  tens to hundreds per run), so compare F with R, and R with itself at a shorter queue.
- Scenarios 6 and 7 hold N (default 10,000) blocked connections at once, one plain connection
  each; the bench raises its open-file limit and starts the server with `maxclients` above N.
  Their figures are medians over fewer rounds (`--waiter-rounds`, default 3): each round opens
  N connections per path and, for scenario 6, waits for the server to settle.
- Scenario 11: a semaphore **hand-off** is an acquisition by a client after another client
  acquired since its own last release (not a client taking back the permit it just gave).
  At hold 0 a client gives its permit back in the same turn of this single-threaded
  process that its grant arrived in, so the holder checker sees one holder at a time; at
  hold 1 it sees up to the permits. Reclaim lateness uses the holder's deadline as stored
  in `{K}:timeout` (unix ms) and the unix clock at the waiter's grant, one clock on one
  machine. Redisson's permit waiter is told the earliest deadline and sleeps until it, so
  with one waiter it is late by about a round trip and its millisecond rounding too.
- **Pinning** (default; `--no-pin` turns it off): every thread of the server on the first CPU
  this process may use, every thread of this process on the second, so client and server do
  not share a core. Skipped, and said so above, with fewer than 2 CPUs.
";

fn guard_section(w: &mut String, g: &crate::guard::GuardWrites) {
    use crate::guard::GuardPath;
    let _ = writeln!(w, "### 12. Guarded writes (RLOCK.GUARD)\n");
    paths(w, &GuardPath::ALL);
    let _ = writeln!(
        w,
        "\nEach lock is held by its connection's owner for the whole run; a \"pair\" is one \
         write. G ÷ C is the guard against the script a user writes today (target ≥ 1.5); \
         G ÷ P is the cost of the guarantee.\n"
    );
    pairs_table(w, g, "G ÷ path:", |cell| {
        (cell.path != GuardPath::G).then(|| g.pairs_ratio(GuardPath::G, cell.path, cell.setting))
    });
    let _ = writeln!(w);
}
