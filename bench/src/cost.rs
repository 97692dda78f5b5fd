//! The cost check (`make cost-check`, run by `make test`): server instructions per uncontended
//! pair on each command path, counted by callgrind, against a baseline committed in
//! `bench/cost-baseline.toml`. A path more than 5 % above its baseline fails.
//!
//! Instruction counts do not swing with the machine's load as timings do. The server runs under
//! `valgrind --tool=callgrind --dump-before=echoCommand`: every `ECHO` makes callgrind write the
//! instructions counted since the previous dump and start again from zero, synchronously, at the
//! same point of the command's processing. Each window is: `FLUSHALL SYNC`, the path's set-up,
//! a warm-up, `ECHO`, K pairs, `ECHO`. Windows of N and of 2N pairs are measured and the per-pair
//! cost is their difference over N, so what a window costs besides its pairs (the two `ECHO`s, the
//! event-loop turns around them) cancels out. The server runs with `hz 1` and `dynamic-hz no`, so
//! that its periodic work (`serverCron`: about once a second) adds well under 0.1 % to a window.
//!
//! A pair is the bench's: one pipeline of 16 acquires on 16 keys, then their 16 releases in the
//! same pipeline (`RSEM.LEASE` + `RSEM.RETURN`: a pipeline of leases, then one of returns naming
//! the ids replied). Each lock pair takes a key of its own; semaphore pairs rotate over 800
//! semaphores set up before the window (see `Driver` for why).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use redis::Value;
use rlock_module_tests::{Flavor, Server};

use crate::OWNER_PREFIX;

/// A path fails when it costs more than its baseline times this (+5 %).
pub const MAX_RATIO: f64 = 1.05;

/// Below baseline by more than this, the check still passes but suggests re-baselining, so
/// that the slack does not hide a later regression.
pub const CHEAPER_NOTE_RATIO: f64 = 0.95;

/// Pairs per pipeline (the bench's default depth).
pub const BATCH: usize = 16;

/// Lease of every acquire, ms (the bench's).
const LEASE_MS: u64 = 30_000;

/// The paths measured, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostPath {
    Plain,
    Fair,
    Token,
    Req,
    Read,
    Write,
    Sem,
    SemLease,
    /// One blocked hand-off: a holder releases a lock another connection waits for.
    Handoff,
    /// A plain pair with one guarded write in between (RLOCK.GUARD).
    Guard,
}

impl CostPath {
    pub const ALL: [CostPath; 10] = [
        CostPath::Plain,
        CostPath::Fair,
        CostPath::Token,
        CostPath::Req,
        CostPath::Read,
        CostPath::Write,
        CostPath::Sem,
        CostPath::SemLease,
        CostPath::Handoff,
        CostPath::Guard,
    ];

    /// The name in the baseline file and the report.
    pub fn name(self) -> &'static str {
        match self {
            CostPath::Plain => "plain",
            CostPath::Fair => "fair",
            CostPath::Token => "token",
            CostPath::Req => "req",
            CostPath::Read => "read",
            CostPath::Write => "write",
            CostPath::Sem => "rsem",
            CostPath::SemLease => "rsem-lease",
            CostPath::Handoff => "handoff",
            CostPath::Guard => "guard",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            CostPath::Plain => "RLOCK.ACQUIRE k o LEASE 30000 + RLOCK.RELEASE k o",
            CostPath::Fair => "RLOCK.ACQUIRE k o FAIR LEASE 30000 + RLOCK.RELEASE k o",
            CostPath::Token => "RLOCK.ACQUIRE k o LEASE 30000 TOKEN + RLOCK.RELEASE k o",
            CostPath::Req => "RLOCK.ACQUIRE k o LEASE 30000 REQ id1 + RLOCK.RELEASE k o REQ id2",
            CostPath::Read => "RLOCK.ACQUIRE k o READ LEASE 30000 + RLOCK.RELEASE k o READ",
            CostPath::Write => "RLOCK.ACQUIRE k o WRITE LEASE 30000 + RLOCK.RELEASE k o WRITE",
            CostPath::Sem => "RSEM.ACQUIRE k + RSEM.RELEASE k (RSEM.TRYSETPERMITS k 1 first)",
            CostPath::SemLease => "RSEM.LEASE k LEASE 30000 + RSEM.RETURN k <id replied>",
            CostPath::Guard => {
                "RLOCK.ACQUIRE k o LEASE 30000 + RLOCK.GUARD k o CALL SET k:d v + RLOCK.RELEASE k o"
            }
            CostPath::Handoff => {
                "a: RLOCK.ACQUIRE k a LEASE 30000; b: RLOCK.ACQUIRE k b LEASE 30000 BLOCK 5000 \
                 (blocks); a: PING; a: RLOCK.RELEASE k a (k passes to b); b: RLOCK.RELEASE k b"
            }
        }
    }

    /// The path named `name` (as in the baseline file).
    pub fn from_name(name: &str) -> Option<CostPath> {
        CostPath::ALL.into_iter().find(|p| p.name() == name.trim())
    }

    /// `plain,handoff`: the paths of a comma-separated list, in `ALL`'s order, each once.
    pub fn parse_list(list: &str) -> Result<Vec<CostPath>, String> {
        let mut named = Vec::new();
        for name in list.split(',').filter(|n| !n.trim().is_empty()) {
            let path = CostPath::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = CostPath::ALL.iter().map(|p| p.name()).collect();
                format!("unknown path {name:?} (known: {})", known.join(", "))
            })?;
            named.push(path);
        }
        if named.is_empty() {
            return Err("no path named".into());
        }
        Ok(CostPath::ALL
            .into_iter()
            .filter(|p| named.contains(p))
            .collect())
    }
}

/// `"redis 7.0.15"`: how the baseline file names a server. The full version, so that a server
/// of another version never takes this one's numbers.
pub fn server_key(name: &str, version: (u32, u32, u32)) -> String {
    format!("{name} {}.{}.{}", version.0, version.1, version.2)
}

/// The server's product name and version: both Redis flavors are `redis`, told apart by
/// their versions.
pub fn flavor_key(flavor: Flavor) -> String {
    let product = if flavor.is_redis() { "redis" } else { "valkey" };
    server_key(product, flavor.version())
}

/// The committed baseline: server key → path name → instructions per pair.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    pub servers: BTreeMap<String, BTreeMap<String, u64>>,
}

pub const BASELINE_HEADER: &str = "\
# Server instructions per uncontended pair (handoff: per blocked hand-off), per server and
# path: the cost check's baseline (bench/src/cost.rs; `make cost-check`, run by `make test`,
# fails on a path more than 5 % above its number here). Written by `make cost-baseline`; see
# docs/PROFILE.md, \"Cost check\".
#
# Update it deliberately: run `make cost-baseline` and commit this file in the same commit as
# the change that moved the numbers, saying in the message why they moved. A new server version
# gets its own section (the old ones stay for machines that still run them).
";

impl Baseline {
    /// Parses the file: `["<server> <version>"]` sections of `<path> = <integer>` lines;
    /// `#` comments and blank lines are skipped. A subset of TOML.
    pub fn parse(text: &str) -> Result<Baseline, String> {
        let mut out = Baseline::default();
        let mut section: Option<String> = None;
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| format!("line {}: {why}: {raw:?}", n + 1);
            if let Some(name) = line.strip_prefix("[\"").and_then(|l| l.strip_suffix("\"]")) {
                if name.is_empty() || name.contains('"') {
                    return Err(bad("bad section name"));
                }
                if out.servers.contains_key(name) {
                    return Err(bad("section given twice"));
                }
                out.servers.insert(name.to_string(), BTreeMap::new());
                section = Some(name.to_string());
                continue;
            }
            let Some((path, value)) = line.split_once('=') else {
                return Err(bad("expected [\"server version\"] or path = instructions"));
            };
            let Some(server) = &section else {
                return Err(bad("a path before any [\"server version\"] section"));
            };
            let value: u64 = value
                .trim()
                .replace('_', "")
                .parse()
                .map_err(|_| bad("instructions must be a whole number"))?;
            let paths = out.servers.get_mut(server).expect("section inserted");
            if paths.insert(path.trim().to_string(), value).is_some() {
                return Err(bad("path given twice in this section"));
            }
        }
        Ok(out)
    }

    pub fn to_text(&self) -> String {
        let mut s = String::from(BASELINE_HEADER);
        for (server, paths) in &self.servers {
            let _ = write!(s, "\n[\"{server}\"]\n");
            // In CostPath order, then any others (none expected).
            let mut names: Vec<&String> = paths.keys().collect();
            names.sort_by_key(|n| {
                CostPath::ALL
                    .iter()
                    .position(|p| p.name() == n.as_str())
                    .unwrap_or(usize::MAX)
            });
            for name in names {
                let _ = writeln!(s, "{name} = {}", paths[name]);
            }
        }
        s
    }

    /// Puts `costs` in `server`'s section (made if new). The section's other paths keep
    /// their numbers: a run of some paths only (`--paths`) updates those.
    pub fn update(&mut self, server: &str, costs: &[(&str, u64)]) {
        let paths = self.servers.entry(server.to_string()).or_default();
        for (path, cost) in costs {
            paths.insert(path.to_string(), *cost);
        }
    }

    pub fn load(path: &Path) -> Result<Baseline, String> {
        match fs::read_to_string(path) {
            Ok(text) => Baseline::parse(&text).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Baseline::default()),
            Err(e) => Err(format!("read {}: {e}", path.display())),
        }
    }
}

/// The verdict on one path.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Pass,
    /// Passes, but costs less than `CHEAPER_NOTE_RATIO` of the baseline.
    Cheaper,
    /// Above `MAX_RATIO` of the baseline.
    TooCostly,
    /// The baseline has no number for this path.
    NoBaseline,
}

impl Verdict {
    pub fn failed(&self) -> bool {
        matches!(self, Verdict::TooCostly | Verdict::NoBaseline)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub path: String,
    pub baseline: Option<u64>,
    pub measured: u64,
    pub verdict: Verdict,
}

impl Row {
    pub fn ratio(&self) -> Option<f64> {
        self.baseline
            .filter(|b| *b > 0)
            .map(|b| self.measured as f64 / b as f64)
    }
}

/// Measured costs of one server against the baseline. `Err` (with what to do) when the
/// baseline has no section for this server: another version, or a server never measured.
pub fn compare(
    baseline: &Baseline,
    server: &str,
    measured: &[(&str, u64)],
) -> Result<Vec<Row>, String> {
    let Some(paths) = baseline.servers.get(server) else {
        let known: Vec<&str> = baseline.servers.keys().map(String::as_str).collect();
        return Err(format!(
            "the cost baseline has no numbers for {server} (it has: {}). Instruction counts \
             differ between server versions, so each version needs its own: run \
             `make cost-baseline` on this server and commit bench/cost-baseline.toml, saying why \
             (e.g. \"cost baseline for {server}\").",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    };
    Ok(measured
        .iter()
        .map(|&(path, m)| {
            let b = paths.get(path).copied();
            let verdict = match b {
                None => Verdict::NoBaseline,
                // Exact integer comparison: m > b * 1.05.
                Some(b) if u128::from(m) * 100 > u128::from(b) * 105 => Verdict::TooCostly,
                Some(b) if (m as f64) < b as f64 * CHEAPER_NOTE_RATIO => Verdict::Cheaper,
                Some(_) => Verdict::Pass,
            };
            Row {
                path: path.to_string(),
                baseline: b,
                measured: m,
                verdict,
            }
        })
        .collect())
}

/// `36855` → `"36,855"`.
pub use crate::harness::table::thousands;

/// The report table of one server.
pub fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "  {:<11} {:>10} {:>10} {:>7}\n",
        "path", "baseline", "measured", "ratio"
    );
    for r in rows {
        let base = r.baseline.map(thousands).unwrap_or_else(|| "-".into());
        let ratio = r
            .ratio()
            .map(|x| format!("{x:.3}"))
            .unwrap_or_else(|| "-".into());
        let verdict = match r.verdict {
            Verdict::Pass => "ok".to_string(),
            Verdict::Cheaper => format!(
                "ok (cheaper by over {:.0} %: consider `make cost-baseline`)",
                (1.0 - CHEAPER_NOTE_RATIO) * 100.0
            ),
            Verdict::TooCostly => format!(
                "FAIL: more than +{:.0} % over the baseline",
                (MAX_RATIO - 1.0) * 100.0
            ),
            Verdict::NoBaseline => "FAIL: no baseline for this path".to_string(),
        };
        let _ = writeln!(
            s,
            "  {:<11} {:>10} {:>10} {:>7}  {verdict}",
            r.path,
            base,
            thousands(r.measured),
            ratio
        );
    }
    s
}

// ---------------------------------------------------------------------------------------
// Measuring.

/// What one path cost on one server.
#[derive(Debug, Clone)]
pub struct Measured {
    pub path: CostPath,
    /// Instructions of the window of N pairs, and of the window of 2N.
    pub small: u64,
    pub large: u64,
    pub pairs: usize,
}

impl Measured {
    /// (large − small) / N, rounded.
    pub fn per_pair(&self) -> u64 {
        let diff = self.large.saturating_sub(self.small);
        (diff + self.pairs as u64 / 2) / self.pairs as u64
    }
}

/// Fails with what to do when valgrind is missing.
pub fn check_valgrind() -> Result<(), String> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err(
            "valgrind not found: the cost check runs the server under callgrind. \
                  Run `make test` (scripts/deps.sh installs it) or `apt-get install -y valgrind`."
                .into(),
        ),
    }
}

/// A preload library that makes the server read fixed bytes from `/dev/urandom`.
///
/// The server seeds the hash function of its dicts from `/dev/urandom` at start (through
/// `fopen`), so which command names share a bucket of the command table, and so how many
/// string compares each command lookup costs (one per incoming command, one per
/// `RedisModule_Replicate`), changes from start to start: on Redis 7.0 and 8.2 that moved the
/// per-pair counts by up to 1.5 %. With the seed fixed they repeat. Built with `cc`, which
/// cargo needs for linking anyway.
const FIXED_SEED_C: &str = r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
static unsigned char bytes[4096];
static FILE *fixed(void) {
    for (unsigned i = 0; i < sizeof bytes; i++) bytes[i] = (unsigned char)(i * 167u + 13u);
    return fmemopen(bytes, sizeof bytes, "r");
}
#define WRAP(name)                                                            \
    FILE *name(const char *path, const char *mode) {                          \
        static FILE *(*real)(const char *, const char *);                     \
        if (path && strcmp(path, "/dev/urandom") == 0) return fixed();        \
        if (!real) real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, #name); \
        return real(path, mode);                                              \
    }
WRAP(fopen)
WRAP(fopen64)
"#;

fn build_fixed_seed(dir: &Path) -> Result<PathBuf, String> {
    let src = dir.join("fixed_seed.c");
    let lib = dir.join("fixed_seed.so");
    fs::write(&src, FIXED_SEED_C).map_err(|e| format!("write {}: {e}", src.display()))?;
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-ldl")
        .output()
        .map_err(|e| format!("cannot run cc to build the fixed-seed preload: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cc failed to build the fixed-seed preload:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(lib)
}

/// A server under callgrind, dumping its counts at every `ECHO`.
pub(crate) struct Counted {
    pub(crate) server: Server,
    pub(crate) con: redis::Connection,
    /// The `handoff` path's second connection (the one that blocks), made when first needed.
    waiter: Option<redis::Connection>,
    /// The server's `/proc/<pid>/io` (Linux), whose `syscr` tells when it has read a call.
    proc_io: Option<PathBuf>,
    out_dir: tempfile::TempDir,
    dumps: u32,
}

impl Counted {
    pub(crate) fn start(flavor: Flavor) -> Result<Counted, String> {
        Self::start_with(flavor, &[])
    }

    /// `start`, with more server configs (name, value).
    pub(crate) fn start_with(flavor: Flavor, configs: &[(&str, &str)]) -> Result<Counted, String> {
        let out_dir = tempfile::Builder::new()
            .prefix("rlock-cost-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        let out_file = format!(
            "--callgrind-out-file={}",
            out_dir.path().join("callgrind.out").display()
        );
        let preload = format!("LD_PRELOAD={}", build_fixed_seed(out_dir.path())?.display());
        let mut builder = Server::builder(flavor);
        for (name, value) in configs {
            builder = builder.config(name, value);
        }
        let server = builder
            .wrapper(&[
                "env",
                &preload,
                "valgrind",
                "--tool=callgrind",
                "--dump-before=echoCommand",
                "--toggle-collect=serverCron",
                "--collect-atstart=yes",
                "--dump-line=no",
                &out_file,
            ])
            .config("hz", "1")
            .config("dynamic-hz", "no")
            .config("activerehashing", "no")
            .config("save", "")
            .config("appendonly", "no")
            .start();
        let con = server.conn();
        con.set_read_timeout(Some(Duration::from_secs(120)))
            .map_err(|e| e.to_string())?;
        Ok(Counted {
            server,
            con,
            waiter: None,
            proc_io: None,
            out_dir,
            dumps: 0,
        })
    }

    /// `ECHO`: callgrind dumps what was counted since the last dump. Returns that count.
    pub(crate) fn mark(&mut self) -> Result<u64, String> {
        let _: Value = redis::cmd("ECHO")
            .arg("rlock-cost-mark")
            .query(&mut self.con)
            .map_err(|e| format!("ECHO: {e}"))?;
        self.dumps += 1;
        let file = self.dump_file(self.dumps);
        let text = fs::read_to_string(&file).map_err(|e| {
            format!(
                "callgrind wrote no {} at ECHO ({e}): does this server binary export \
                 `echoCommand` (nm -D)?",
                file.display()
            )
        })?;
        // For finding what moved (callgrind_annotate): keep every dump.
        if let Some(keep) = std::env::var_os("RLOCK_COST_KEEP_DUMPS") {
            let _ = fs::copy(&file, PathBuf::from(keep).join(format!("d{}", self.dumps)));
        }
        let _ = fs::remove_file(&file);
        text.lines()
            .find_map(|l| {
                l.strip_prefix("totals:")
                    .or_else(|| l.strip_prefix("summary:"))
            })
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("no totals line in {}", file.display()))
    }

    fn dump_file(&self, n: u32) -> PathBuf {
        self.out_dir.path().join(format!("callgrind.out.{n}"))
    }

    fn query(&mut self, pipe: &redis::Pipeline) -> Result<Vec<Value>, String> {
        pipe.query::<Vec<Value>>(&mut self.con)
            .map_err(|e| format!("pipeline: {e}"))
    }

    pub(crate) fn call(&mut self, cmd: &redis::Cmd) -> Result<Value, String> {
        cmd.query::<Value>(&mut self.con).map_err(|e| e.to_string())
    }

    /// `INFO rlock`'s `rlock_handoffs`: locks passed to a blocked call since load.
    fn handoffs(&mut self) -> Result<i64, String> {
        let text: String = redis::cmd("INFO")
            .arg("rlock")
            .query(&mut self.con)
            .map_err(|e| format!("INFO rlock: {e}"))?;
        info_field(&text, "rlock_handoffs")
            .ok_or_else(|| format!("INFO rlock has no rlock_handoffs: {text}"))
    }

    /// Read system calls the server has made (`syscr` of `/proc/<pid>/io`), if known.
    fn reads(&self) -> Option<u64> {
        let text = fs::read_to_string(self.proc_io.as_ref()?).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("syscr:"))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Waits until the server has made a read system call since `before` (its count of
    /// them): it has read the call just written, and is running it.
    fn await_read(&self, before: Option<u64>) -> Result<(), String> {
        let Some(before) = before else {
            return Ok(());
        };
        let started = std::time::Instant::now();
        while self.reads().is_some_and(|n| n <= before) {
            if started.elapsed() > Duration::from_secs(60) {
                return Err("the server did not read the blocking call in 60 s".into());
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(())
    }

    /// One blocked hand-off of `key` from `holder` to `waiter` (`CostPath::Handoff`).
    ///
    /// The waiter's call must be blocked before the holder releases: it is written first,
    /// then the holder makes a round trip (`PING`). Sent after the waiter's call was in the
    /// server's socket, the `PING` is read in the same turn of the event loop or a later
    /// one, and its reply written at the end of that turn: so when it arrives the waiter's
    /// call has run. (`window` also checks that every iteration was a hand-off.)
    ///
    /// Which turn reads the `PING` would be a race, and each turn of the event loop costs
    /// the server about 1,000 instructions (`beforeSleep` and the rest): the counts moved
    /// by 1.7 % between runs. So the `PING` is written only once the server has read the
    /// waiter's call (its count of read system calls, `/proc/<pid>/io`, has moved): always
    /// in a turn of its own.
    pub(crate) fn handoff(&mut self, key: &str, holder: &str, waiter: &str) -> Result<(), String> {
        if self.waiter.is_none() {
            let w = self.server.conn();
            w.set_read_timeout(Some(Duration::from_secs(120)))
                .map_err(|e| e.to_string())?;
            self.waiter = Some(w);
            let info: String = redis::cmd("INFO")
                .arg("server")
                .query(&mut self.con)
                .map_err(|e| format!("INFO server: {e}"))?;
            self.proc_io = info_field(&info, "process_id")
                .map(|pid| PathBuf::from(format!("/proc/{pid}/io")))
                .filter(|p| fs::read_to_string(p).is_ok());
        }
        let expect_one = |what: &str, v: Value| match v {
            Value::Int(1) => Ok(()),
            other => Err(format!("{what} replied {other:?}")),
        };
        let acquire = |owner: &str| {
            let mut cmd = redis::cmd("RLOCK.ACQUIRE");
            cmd.arg(key).arg(owner).arg("LEASE").arg(LEASE_MS);
            cmd
        };
        let release = |owner: &str| {
            let mut cmd = redis::cmd("RLOCK.RELEASE");
            cmd.arg(key).arg(owner);
            cmd
        };
        expect_one("the holder's RLOCK.ACQUIRE", self.call(&acquire(holder))?)?;
        let mut blocking = acquire(waiter);
        blocking.arg("BLOCK").arg(HANDOFF_BLOCK_MS);
        let reads = self.reads();
        let w = self.waiter.as_mut().expect("made above");
        w.send_packed_command(&blocking.get_packed_command())
            .map_err(|e| format!("send the blocking RLOCK.ACQUIRE: {e}"))?;
        self.await_read(reads)?;
        match self.call(&redis::cmd("PING"))? {
            Value::SimpleString(s) if s == "PONG" => {}
            other => return Err(format!("PING replied {other:?}")),
        }
        expect_one("the holder's RLOCK.RELEASE", self.call(&release(holder))?)?;
        let w = self.waiter.as_mut().expect("made above");
        let granted = w
            .recv_response()
            .map_err(|e| format!("the blocked RLOCK.ACQUIRE: {e}"))?;
        expect_one("the blocked RLOCK.ACQUIRE", granted)?;
        let released = release(waiter)
            .query::<Value>(w)
            .map_err(|e| format!("the waiter's RLOCK.RELEASE: {e}"))?;
        expect_one("the waiter's RLOCK.RELEASE", released)
    }
}

/// The integer `field` of an `INFO` reply.
pub fn info_field(info: &str, field: &str) -> Option<i64> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
}

/// The `BLOCK` of the `handoff` path's waiter, ms: far longer than a hand-off takes under
/// callgrind.
const HANDOFF_BLOCK_MS: u64 = 5_000;

/// Drives one path: set-up, then batches of `BATCH` pairs, every reply checked.
///
/// Keys: the server's dict and the module's maps hash with a seed drawn at start, so where a
/// key lands (and how long a chain it walks) changes from run to run. A few keys reused all
/// run long would carry one run's luck into every pair (the counts swung by 2 %); a fresh key
/// for every lock pair, and a pool of `SEM_POOL` semaphores, average it out. Key numbers restart at 0 in each window, so the two windows share their first N keys.
struct Driver {
    path: CostPath,
    owner: String,
    next_request: u64,
    /// The next key number, and the prefix of the key names.
    next_key: usize,
    prefix: &'static str,
    /// Semaphores: how many there are (`SEM_POOL`, set up before the window); keys rotate
    /// over them.
    pool: Option<usize>,
}

impl Driver {
    fn new(path: CostPath) -> Driver {
        Driver {
            path,
            owner: format!("{OWNER_PREFIX}:1"),
            next_request: 1,
            next_key: 0,
            prefix: "cost",
            pool: None,
        }
    }

    fn next_keys(&mut self) -> Vec<String> {
        (0..BATCH)
            .map(|_| {
                let n = self.next_key;
                self.next_key += 1;
                let n = self.pool.map_or(n, |p| n % p);
                format!("{}:{}:{n:08}", self.prefix, self.path.name())
            })
            .collect()
    }

    fn request_id(&mut self) -> String {
        let id = format!("{:016x}", self.next_request);
        self.next_request += 1;
        id
    }

    /// `FLUSHALL SYNC`, then for a semaphore path `SEM_POOL` semaphores of one permit.
    ///
    /// `SYNC`: Valkey 8+ flushes on its lazy-free thread by default, and its frees, racing
    /// the window's allocations in glibc's malloc (Valkey's allocator as packaged), moved
    /// Valkey's per-pair counts by up to 6 % between runs of the same module.
    fn setup(&mut self, c: &mut Counted) -> Result<(), String> {
        let mut pipe = redis::pipe();
        pipe.cmd("FLUSHALL").arg("SYNC");
        c.query(&pipe)?;
        self.pool = None;
        if matches!(self.path, CostPath::Sem | CostPath::SemLease) {
            self.next_key = 0;
            self.prefix = "cost";
            self.pool = Some(SEM_POOL);
            for _ in 0..SEM_POOL.div_ceil(BATCH) {
                let mut pipe = redis::pipe();
                for k in self.next_keys() {
                    pipe.cmd("RSEM.TRYSETPERMITS").arg(k).arg(1);
                }
                let replies = c.query(&pipe)?;
                if let Some(bad) = replies.iter().find(|v| **v != Value::Int(1)) {
                    return Err(format!("RSEM.TRYSETPERMITS replied {bad:?}"));
                }
            }
        }
        Ok(())
    }

    fn acquire(&mut self, pipe: &mut redis::Pipeline, key: &str) {
        let owner = self.owner.clone();
        let lock = |pipe: &mut redis::Pipeline| {
            pipe.cmd("RLOCK.ACQUIRE").arg(key).arg(&owner);
        };
        match self.path {
            CostPath::Plain | CostPath::Guard => {
                lock(pipe);
                pipe.arg("LEASE").arg(LEASE_MS);
            }
            CostPath::Fair => {
                lock(pipe);
                pipe.arg("FAIR").arg("LEASE").arg(LEASE_MS);
            }
            CostPath::Token => {
                lock(pipe);
                pipe.arg("LEASE").arg(LEASE_MS).arg("TOKEN");
            }
            CostPath::Req => {
                let id = self.request_id();
                lock(pipe);
                pipe.arg("LEASE").arg(LEASE_MS).arg("REQ").arg(id);
            }
            CostPath::Read => {
                lock(pipe);
                pipe.arg("READ").arg("LEASE").arg(LEASE_MS);
            }
            CostPath::Write => {
                lock(pipe);
                pipe.arg("WRITE").arg("LEASE").arg(LEASE_MS);
            }
            CostPath::Sem => {
                pipe.cmd("RSEM.ACQUIRE").arg(key);
            }
            CostPath::SemLease => {
                pipe.cmd("RSEM.LEASE").arg(key).arg("LEASE").arg(LEASE_MS);
            }
            CostPath::Handoff => unreachable!("hand-offs go one by one (Counted::handoff)"),
        }
    }

    fn release(&mut self, pipe: &mut redis::Pipeline, key: &str) {
        match self.path {
            CostPath::Plain | CostPath::Fair | CostPath::Token | CostPath::Guard => {
                pipe.cmd("RLOCK.RELEASE").arg(key).arg(&self.owner);
            }
            CostPath::Req => {
                let id = self.request_id();
                pipe.cmd("RLOCK.RELEASE")
                    .arg(key)
                    .arg(&self.owner)
                    .arg("REQ")
                    .arg(id);
            }
            CostPath::Read => {
                pipe.cmd("RLOCK.RELEASE")
                    .arg(key)
                    .arg(&self.owner)
                    .arg("READ");
            }
            CostPath::Write => {
                pipe.cmd("RLOCK.RELEASE")
                    .arg(key)
                    .arg(&self.owner)
                    .arg("WRITE");
            }
            CostPath::Sem => {
                pipe.cmd("RSEM.RELEASE").arg(key);
            }
            CostPath::SemLease => unreachable!("returns name the ids leased"),
            CostPath::Handoff => unreachable!("hand-offs go one by one (Counted::handoff)"),
        }
    }

    /// One batch of `BATCH` pairs; every reply must say the pair did what it should.
    fn batch(&mut self, c: &mut Counted) -> Result<(), String> {
        let keys = self.next_keys();
        if self.path == CostPath::Handoff {
            let waiter = format!("{OWNER_PREFIX}:2");
            for k in &keys {
                c.handoff(k, &self.owner, &waiter)?;
            }
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for k in &keys {
            self.acquire(&mut pipe, k);
        }
        if self.path == CostPath::SemLease {
            let leased = c.query(&pipe)?;
            let mut returns = redis::pipe();
            for (k, reply) in keys.iter().zip(&leased) {
                let id = match reply {
                    Value::Array(ids) if ids.len() == 1 => match &ids[0] {
                        Value::BulkString(id) => id.clone(),
                        _ => return Err(format!("RSEM.LEASE replied {reply:?}")),
                    },
                    _ => return Err(format!("RSEM.LEASE replied {reply:?}")),
                };
                returns.cmd("RSEM.RETURN").arg(k).arg(id);
            }
            let returned = c.query(&returns)?;
            if let Some(bad) = returned.iter().find(|v| **v != Value::Int(1)) {
                return Err(format!("RSEM.RETURN replied {bad:?}"));
            }
            return Ok(());
        }
        let guarded = if self.path == CostPath::Guard {
            for k in &keys {
                pipe.cmd("RLOCK.GUARD")
                    .arg(k)
                    .arg(&self.owner)
                    .arg("CALL")
                    .arg("SET")
                    .arg(format!("{k}:d"))
                    .arg("v");
            }
            BATCH
        } else {
            0
        };
        for k in &keys {
            self.release(&mut pipe, k);
        }
        let replies = c.query(&pipe)?;
        let (acquired, rest) = replies.split_at(BATCH);
        let (writes, released) = rest.split_at(guarded);
        if let Some(bad) = writes.iter().find(|v| **v != Value::Okay) {
            return Err(format!("guard replied {bad:?}"));
        }
        for a in acquired {
            let ok = match (self.path, a) {
                (CostPath::Token, Value::Int(t)) => *t >= 1,
                (_, v) => *v == Value::Int(1),
            };
            if !ok {
                return Err(format!("{} acquire replied {a:?}", self.path.name()));
            }
        }
        if let Some(bad) = released.iter().find(|v| **v != Value::Int(1)) {
            return Err(format!("{} release replied {bad:?}", self.path.name()));
        }
        Ok(())
    }

    /// Instructions of one window of `pairs` pairs (a multiple of `BATCH`).
    fn window(&mut self, c: &mut Counted, pairs: usize) -> Result<u64, String> {
        self.setup(c)?;
        let handoffs_before = if self.path == CostPath::Handoff {
            // An empty contention history at each window (see `handoff_window`). A module
            // without wait statistics (before 2.1) refuses the command: nothing to empty.
            let _ = c.call(&redis::cmd("RLOCK.RESETSTAT"));
            Some(c.handoffs()?)
        } else {
            None
        };
        // Warm up on keys of their own (locks), or on every semaphore once, so that every
        // pair measured is on a semaphore used before (a semaphore's first lease costs more).
        self.prefix = "warm";
        let mut warmup = WARMUP_BATCHES;
        if self.pool.is_some() {
            self.prefix = "cost";
            warmup = SEM_POOL / BATCH;
        }
        self.next_key = 0;
        for _ in 0..warmup {
            self.batch(c)?;
        }
        self.prefix = "cost";
        self.next_key = 0;
        c.mark()?;
        for _ in 0..pairs / BATCH {
            self.batch(c)?;
        }
        let counted = c.mark()?;
        if let Some(before) = handoffs_before {
            let expected = ((warmup * BATCH + pairs) as i64, c.handoffs()? - before);
            if expected.0 != expected.1 {
                return Err(format!(
                    "{} hand-offs made, but INFO rlock counted {}: a waiter was not blocked \
                     when its lock was released",
                    expected.0, expected.1
                ));
            }
        }
        Ok(counted)
    }
}

const WARMUP_BATCHES: usize = 2;

/// Keys the module's contention history (`RLOCK.TOP`) remembers at most
/// (`core::wait_stats::MAX_KEYS`).
pub const HISTORY_KEYS: usize = 1000;

/// The `handoff` path's windows: hand-offs in the small one, for `pairs` asked (the large
/// one has twice as many). Every hand-off is on a key of its own, which the contention
/// history remembers; the history is emptied (`RLOCK.RESETSTAT`) before each window and must
/// not fill up within it: a full history looks through every key it holds to choose one to
/// forget, for every new key (about 165,000 instructions a wait on Redis 8.2), so windows
/// that filled it part way would mix the two costs. So at most 480 (and 2 x 480 + the
/// warm-up's 32 keys stay under `HISTORY_KEYS`).
pub fn handoff_window(pairs: usize) -> usize {
    let most = (HISTORY_KEYS - WARMUP_BATCHES * BATCH) / 2 / BATCH * BATCH;
    pairs.div_ceil(BATCH).max(1).min(most / BATCH) * BATCH
}

/// Semaphores per window (a whole number of batches). Well below a power of two, even with the
/// 16 lease zsets of a batch: with as many keys as buckets, the server's cron (on its own clock)
/// may start growing the keyspace's table, and the pairs would pay for moving every key in some
/// runs only (that moved RSEM.LEASE pairs by 1 % with 1,008 semaphores).
const SEM_POOL: usize = 50 * BATCH;

/// Every path on one server: windows of `pairs` and `2 * pairs` pairs (`pairs` is rounded up to
/// a multiple of `BATCH`).
pub fn measure(flavor: Flavor, pairs: usize, paths: &[CostPath]) -> Result<Vec<Measured>, String> {
    let pairs = pairs.div_ceil(BATCH).max(1) * BATCH;
    let mut c = Counted::start(flavor)?;
    let mut out = Vec::new();
    for &path in paths {
        let pairs = if path == CostPath::Handoff {
            handoff_window(pairs)
        } else {
            pairs
        };
        let mut d = Driver::new(path);
        let small = d
            .window(&mut c, pairs)
            .map_err(|e| format!("{flavor}, {}: {e}", path.name()))?;
        let large = d
            .window(&mut c, 2 * pairs)
            .map_err(|e| format!("{flavor}, {}: {e}", path.name()))?;
        out.push(Measured {
            path,
            small,
            large,
            pairs,
        });
    }
    c.server.stop();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn baseline() -> Baseline {
        Baseline::parse(
            "# comment\n\n[\"redis 7.0.15\"]\nplain = 30000\nfair = 40_000\n\n[\"valkey 9.1.2\"]\nplain = 20000\n",
        )
        .expect("parse")
    }

    #[test]
    fn parses_and_writes_back_the_same() {
        let b = baseline();
        assert_eq!(b.servers["redis 7.0.15"]["fair"], 40_000);
        assert_eq!(b.servers["valkey 9.1.2"]["plain"], 20_000);
        assert_eq!(Baseline::parse(&b.to_text()).expect("reparse"), b);
    }

    #[test]
    fn rejects_malformed_files() {
        for bad in [
            "plain = 1\n",                        // no section
            "[\"redis 7.0.15\"]\nplain = lots\n", // not a number
            "[\"redis 7.0.15\"]\nplain 1\n",      // no =
            "[\"redis 7.0.15\"]\nplain = 1\nplain = 2\n",
            "[\"redis 7.0.15\"]\n[\"redis 7.0.15\"]\n",
        ] {
            assert!(Baseline::parse(bad).is_err(), "accepted {bad:?}");
        }
    }

    #[test]
    fn five_percent_over_passes_and_a_bit_more_fails() {
        let b = baseline();
        let rows = compare(&b, "redis 7.0.15", &[("plain", 31_500), ("fair", 42_001)])
            .expect("known server");
        assert_eq!(rows[0].verdict, Verdict::Pass, "exactly +5 % passes");
        assert_eq!(rows[1].verdict, Verdict::TooCostly, "+5.0025 % fails");
        assert!(rows[1].verdict.failed());
        assert!((rows[1].ratio().expect("ratio") - 1.050025).abs() < 1e-9);
    }

    #[test]
    fn a_planted_ten_percent_fails() {
        let rows = compare(&baseline(), "valkey 9.1.2", &[("plain", 22_000)]).expect("known");
        assert_eq!(rows[0].verdict, Verdict::TooCostly);
        assert!(table(&rows).contains("FAIL"));
    }

    #[test]
    fn cheaper_passes_with_a_note() {
        let rows = compare(
            &baseline(),
            "redis 7.0.15",
            &[("plain", 20_000), ("fair", 39_000)],
        )
        .expect("known");
        assert_eq!(rows[0].verdict, Verdict::Cheaper);
        assert!(!rows[0].verdict.failed());
        assert_eq!(rows[1].verdict, Verdict::Pass);
    }

    #[test]
    fn an_unknown_version_or_path_fails_saying_how_to_rebaseline() {
        let err = compare(&baseline(), "redis 7.0.16", &[("plain", 30_000)]).unwrap_err();
        assert!(err.contains("redis 7.0.16"), "{err}");
        assert!(err.contains("make cost-baseline"), "{err}");
        assert!(err.contains("redis 7.0.15, valkey 9.1.2"), "{err}");
        let rows = compare(&baseline(), "valkey 9.1.2", &[("rsem", 1)]).expect("known");
        assert_eq!(rows[0].verdict, Verdict::NoBaseline);
        assert!(rows[0].verdict.failed());
    }

    #[test]
    fn per_pair_is_the_difference_over_n() {
        let m = Measured {
            path: CostPath::Plain,
            small: 1_000_000 + 512 * 30_000,
            large: 1_000_000 + 1024 * 30_000 + 300,
            pairs: 512,
        };
        assert_eq!(m.per_pair(), 30_001);
        assert_eq!(thousands(36_855), "36,855");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }

    #[test]
    fn handoff_windows_keep_the_contention_history_from_filling() {
        assert_eq!(handoff_window(1024), 480);
        assert_eq!(handoff_window(100), 112);
        assert_eq!(handoff_window(1), BATCH);
        for pairs in [1, 16, 448, 480, 481, 1024, 1 << 20] {
            let n = handoff_window(pairs);
            assert_eq!(n % BATCH, 0);
            assert!(
                WARMUP_BATCHES * BATCH + 2 * n < HISTORY_KEYS,
                "{pairs}: {n}"
            );
        }
    }

    #[test]
    fn path_lists_name_known_paths_in_report_order() {
        assert_eq!(
            CostPath::parse_list("handoff, plain").expect("known"),
            vec![CostPath::Plain, CostPath::Handoff]
        );
        assert_eq!(
            CostPath::parse_list("rsem-lease,rsem-lease").expect("known"),
            vec![CostPath::SemLease]
        );
        let err = CostPath::parse_list("plain,hand-off").unwrap_err();
        assert!(err.contains("hand-off") && err.contains("handoff"), "{err}");
        assert!(CostPath::parse_list(" , ").is_err());
        for path in CostPath::ALL {
            assert_eq!(CostPath::from_name(path.name()), Some(path));
        }
    }

    #[test]
    fn updating_some_paths_keeps_the_others() {
        let mut b = baseline();
        b.update("redis 7.0.15", &[("handoff", 101_000), ("plain", 30_100)]);
        b.update("redis 8.2.3", &[("handoff", 99_000)]);
        assert_eq!(b.servers["redis 7.0.15"]["plain"], 30_100);
        assert_eq!(
            b.servers["redis 7.0.15"]["fair"], 40_000,
            "not measured: kept"
        );
        assert_eq!(b.servers["redis 7.0.15"]["handoff"], 101_000);
        assert_eq!(b.servers["redis 8.2.3"].len(), 1);
        assert_eq!(b.servers["valkey 9.1.2"]["plain"], 20_000);
        let text = b.to_text();
        assert!(
            text.find("fair = ").expect("fair") < text.find("handoff = ").expect("handoff"),
            "handoff written after the uncontended paths:\n{text}"
        );
        assert_eq!(Baseline::parse(&text).expect("reparse"), b);
    }

    #[test]
    fn info_fields_are_read_by_their_whole_name() {
        let info = "# rlock\r\nrlock_permit_handoffs:7\r\nrlock_handoffs:42\r\n";
        assert_eq!(info_field(info, "rlock_handoffs"), Some(42));
        assert_eq!(info_field(info, "rlock_permit_handoffs"), Some(7));
        assert_eq!(info_field(info, "rlock_hand"), None);
    }

    #[test]
    fn server_keys_carry_the_full_version() {
        assert_eq!(server_key("redis", (8, 2, 3)), "redis 8.2.3");
        assert_ne!(
            server_key("redis", (7, 0, 15)),
            server_key("redis", (7, 0, 16))
        );
    }
}
