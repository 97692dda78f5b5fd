//! Scenario 11: the semaphore.
//!
//! 1. Uncontended pairs against Redisson's scripts (the shape of scenario 1): a semaphore
//!    acquire and release (`RSEM.ACQUIRE` + `RSEM.RELEASE` against `RedissonSemaphore`'s
//!    tryAcquire + release), and a permit-expirable semaphore's lease and return
//!    (`RSEM.LEASE` + `RSEM.RETURN` against `RedissonPermitExpirableSemaphore`'s tryAcquire
//!    + release), each key a semaphore of one permit.
//! 2. One contended semaphore: [`CLIENTS`] clients, [`PERMITS`] permits, each client loops
//!    acquire, hold `hold` ms, release. B waits in the server (`RSEM.ACQUIRE K BLOCK 0`); Q
//!    follows Redisson's `acquire()`: the Lua tryAcquire, on a miss wait for a message on
//!    `redisson_sc:{K}` (its `SemaphorePubSub`) or a fallback timeout, then try again. A
//!    checker counts holders: more than [`PERMITS`] at once is a violation.
//! 3. Expired-permit reclaim: a holder leases the only permit for a short lease and never
//!    returns it; how long after the lease's deadline does a waiter get a permit? B waits
//!    in `RSEM.LEASE K LEASE 30000 BLOCK 0` (the module takes the permit back by timer); Q
//!    follows Redisson's `acquire(lease)`: its tryAcquire replies the earliest deadline, the
//!    waiter sleeps until then (client clock) or a message on `redisson_sc:{K}`, and its
//!    next tryAcquire takes the expired permit back itself.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;

use crate::measure::{connect, connect_many, median, percentile, ratio, Rng, Snapshot, Window};
use crate::scripts::{permit_timeout_key, semaphore_channel, SemShas};
use crate::uncontended::{PairRun, LEASE_MS};
use crate::Plan;

/// Clients and permits of the contended semaphore.
pub const CLIENTS: usize = 32;
pub const PERMITS: u64 = 4;
/// Q's wait when its tryAcquire gave it no deadline and no message comes: a safety net
/// only (every release publishes), counted as `fallbacks`.
pub const FALLBACK_MS: u64 = 1_000;
/// The waiters' lease in part 3.
const WAITER_LEASE_MS: u64 = 30_000;

/// Unix ms now, this machine's clock (the server's too: it runs here).
fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn unix_ms_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// Permit ids for Redisson's scripts, 16 raw bytes made by the client (Redisson makes
/// random ones; these only need to be unique).
static NEXT_PERMIT: AtomicU64 = AtomicU64::new(1);

fn new_permit_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(b"rlockbch");
    id[8..].copy_from_slice(&NEXT_PERMIT.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    id
}

/// 32 hex characters → 16 bytes.
fn hex_to_bytes(hex: &[u8]) -> Option<Vec<u8>> {
    if hex.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    hex.chunks(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// The one id of an `RSEM.LEASE` reply (hex), or None.
fn leased_id(reply: &Value) -> Option<Vec<u8>> {
    match reply {
        Value::Array(ids) if ids.len() == 1 => match &ids[0] {
            Value::BulkString(id) if id.len() == 32 => Some(id.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Redisson's permit tryAcquire took the permits (`'OK'` from Lua: a bulk string).
fn is_ok(reply: &Value) -> bool {
    match reply {
        Value::Okay => true,
        Value::SimpleString(s) => s == "OK",
        Value::BulkString(b) => b == b"OK",
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// Part 1: uncontended pairs.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemPairPath {
    /// `RSEM.ACQUIRE K` + `RSEM.RELEASE K`.
    R,
    /// Redisson's semaphore tryAcquire + release scripts.
    L,
    /// `RSEM.LEASE K LEASE 30000` + `RSEM.RETURN K id`.
    RX,
    /// Redisson's permit-expirable tryAcquire (lease 30000) + release scripts.
    LX,
}

impl SemPairPath {
    pub const ALL: [SemPairPath; 4] = [
        SemPairPath::R,
        SemPairPath::L,
        SemPairPath::RX,
        SemPairPath::LX,
    ];

    pub fn letter(self) -> &'static str {
        match self {
            SemPairPath::R => "R",
            SemPairPath::L => "L",
            SemPairPath::RX => "RX",
            SemPairPath::LX => "LX",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            SemPairPath::R => "RSEM.ACQUIRE K + RSEM.RELEASE K",
            SemPairPath::L => {
                "EVALSHA Redisson semaphore tryAcquire + release (publishes on redisson_sc:{K})"
            }
            SemPairPath::RX => "RSEM.LEASE K LEASE 30000 + RSEM.RETURN K <id from the reply>",
            SemPairPath::LX => {
                "EVALSHA Redisson permit-expirable tryAcquire (client-made 16-byte id, lease 30000, \
                 now = client ms) + release (publishes)"
            }
        }
    }

    /// The Redisson path this module path is compared with.
    pub fn baseline(self) -> Option<SemPairPath> {
        match self {
            SemPairPath::R => Some(SemPairPath::L),
            SemPairPath::RX => Some(SemPairPath::LX),
            _ => None,
        }
    }

    /// A lease pair: the release needs what the acquire replied (or was sent with).
    fn leased(self) -> bool {
        matches!(self, SemPairPath::RX | SemPairPath::LX)
    }

    fn setup(self, shas: &SemShas, key: &[u8]) -> redis::Cmd {
        match self {
            SemPairPath::R | SemPairPath::RX => {
                let mut cmd = redis::cmd("RSEM.TRYSETPERMITS");
                cmd.arg(key).arg(1);
                cmd
            }
            SemPairPath::L => shas.try_set_permits_cmd(key, 1),
            SemPairPath::LX => shas.permit_try_set_permits_cmd(key, 1),
        }
    }
}

/// Every run of one path at one pipeline depth, and their medians.
#[derive(Debug, Clone)]
pub struct SemPairCell {
    pub path: SemPairPath,
    pub pipeline: usize,
    pub runs: Vec<PairRun>,
}

impl SemPairCell {
    pub fn pairs_per_sec(&self) -> f64 {
        median(self.runs.iter().map(PairRun::pairs_per_sec))
    }
    pub fn server_us_per_pair(&self) -> f64 {
        median(self.runs.iter().map(|r| r.window.server_us_per(r.pairs)))
    }
    pub fn server_busy(&self) -> f64 {
        median(self.runs.iter().map(|r| r.window.server_busy()))
    }
    pub fn client_busy(&self) -> f64 {
        median(self.runs.iter().map(|r| r.window.client_busy()))
    }
    pub fn errors(&self) -> u64 {
        self.runs.iter().map(|r| r.errors).sum()
    }
}

#[derive(Debug, Clone)]
pub struct SemPairs {
    pub cells: Vec<SemPairCell>,
}

impl SemPairs {
    pub fn cell(&self, path: SemPairPath, pipeline: usize) -> Option<&SemPairCell> {
        self.cells
            .iter()
            .find(|c| c.path == path && c.pipeline == pipeline)
    }

    /// Ratio of median pairs/s, `a / b`, at one pipeline depth.
    pub fn ratio(&self, a: SemPairPath, b: SemPairPath, pipeline: usize) -> f64 {
        match (self.cell(a, pipeline), self.cell(b, pipeline)) {
            (Some(a), Some(b)) => ratio(a.pairs_per_sec(), b.pairs_per_sec()),
            _ => f64::NAN,
        }
    }
}

async fn run_pairs(server: &Server, plan: &Plan, shas: &Arc<SemShas>) -> SemPairs {
    let mut control = connect(server).await;
    let conns = connect_many(server, plan.conns).await;
    let deepest = plan.pipelines.iter().copied().max().unwrap_or(1);
    let slice = (plan.keys / conns.len()).max(deepest) as u64;
    setup_pairs(&conns, shas, slice).await;
    let mut cells = Vec::new();
    for &pipeline in &plan.pipelines {
        let mut row: Vec<SemPairCell> = SemPairPath::ALL
            .iter()
            .map(|&path| SemPairCell {
                path,
                pipeline,
                runs: Vec::new(),
            })
            .collect();
        // R, L, RX, LX, R, L, ...: drift in machine load hits every path alike.
        for round in 0..plan.rounds {
            for cell in row.iter_mut() {
                let seed = (round * 31 + pipeline) as u64;
                let run = run_pairs_once(
                    &conns,
                    &mut control,
                    shas,
                    cell.path,
                    pipeline,
                    slice,
                    plan,
                    seed,
                )
                .await;
                if plan.verbose {
                    eprintln!(
                        "  semaphore p{pipeline} {} round {}: {:.0} pairs/s, {:.1} us/pair server, server {:.0}% client {:.0}%{}",
                        cell.path.letter(),
                        round + 1,
                        run.pairs_per_sec(),
                        run.window.server_us_per(run.pairs),
                        run.window.server_busy(),
                        run.window.client_busy(),
                        if run.errors > 0 { format!(", {} ERRORS", run.errors) } else { String::new() }
                    );
                }
                cell.runs.push(run);
            }
        }
        cells.extend(row);
    }
    SemPairs { cells }
}

fn pair_key(path: SemPairPath, n: u64) -> Vec<u8> {
    format!("sem:{}:{:06}", path.letter(), n).into_bytes()
}

/// Every key of every path: a semaphore of one permit, made by its own side's
/// trySetPermits (not measured).
async fn setup_pairs(conns: &[MultiplexedConnection], shas: &SemShas, slice: u64) {
    const CHUNK: u64 = 1_000;
    let jobs = conns.iter().enumerate().map(|(c, con)| {
        let mut con = con.clone();
        async move {
            let mut bad = 0usize;
            for path in SemPairPath::ALL {
                let (first, end) = (c as u64 * slice, (c as u64 + 1) * slice);
                let mut n = first;
                while n < end {
                    let mut pipe = redis::pipe();
                    for k in n..(n + CHUNK).min(end) {
                        pipe.add_command(path.setup(shas, &pair_key(path, k)));
                    }
                    let replies: Vec<Value> =
                        pipe.query_async(&mut con).await.expect("semaphore setup");
                    bad += replies.iter().filter(|v| **v != Value::Int(1)).count();
                    n += CHUNK;
                }
            }
            bad
        }
    });
    let bad: usize = futures_util::future::join_all(jobs).await.into_iter().sum();
    assert_eq!(bad, 0, "semaphore setup: {bad} keys already existed");
}

#[allow(clippy::too_many_arguments)]
async fn run_pairs_once(
    conns: &[MultiplexedConnection],
    control: &mut MultiplexedConnection,
    shas: &Arc<SemShas>,
    path: SemPairPath,
    pipeline: usize,
    slice: u64,
    plan: &Plan,
    seed: u64,
) -> PairRun {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for (c, con) in conns.iter().enumerate() {
        let worker = PairWorker {
            con: con.clone(),
            path,
            shas: shas.clone(),
            first_key: c as u64 * slice,
            slice,
            pairs_per_batch: (pipeline / 2).max(1),
            stop: stop.clone(),
            done: done.clone(),
            errors: errors.clone(),
            rng: Rng::new(seed * 1000 + c as u64 + 1),
        };
        workers.push(tokio::spawn(worker.run()));
    }
    tokio::time::sleep(plan.warmup()).await;
    let (d0, e0, s0) = (
        done.load(Ordering::SeqCst),
        errors.load(Ordering::SeqCst),
        Snapshot::take(control).await,
    );
    tokio::time::sleep(plan.uncontended_run).await;
    let s1 = Snapshot::take(control).await;
    let (d1, e1) = (done.load(Ordering::SeqCst), errors.load(Ordering::SeqCst));
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.expect("semaphore pair worker panicked");
    }
    PairRun {
        pairs: d1 - d0,
        errors: e1 - e0,
        window: Window::between(&s0, &s1),
    }
}

struct PairWorker {
    con: MultiplexedConnection,
    path: SemPairPath,
    shas: Arc<SemShas>,
    first_key: u64,
    slice: u64,
    pairs_per_batch: usize,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    rng: Rng,
}

impl PairWorker {
    async fn run(mut self) {
        while !self.stop.load(Ordering::Relaxed) {
            let start = self.rng.below(self.slice);
            let b = self.pairs_per_batch as u64;
            let keys: Vec<Vec<u8>> = (0..b)
                .map(|j| pair_key(self.path, self.first_key + (start + j) % self.slice))
                .collect();
            let bad = if self.path.leased() {
                self.lease_pairs(&keys).await
            } else {
                self.blind_pairs(&keys).await
            };
            if bad > 0 {
                self.errors.fetch_add(bad, Ordering::Relaxed);
            }
            self.done.fetch_add(b, Ordering::Relaxed);
        }
    }

    /// Scenario 1's convention: with one pair per batch, the acquire, then the release;
    /// else one pipeline of b acquires on b keys then their b releases.
    async fn blind_pairs(&mut self, keys: &[Vec<u8>]) -> u64 {
        let (path, shas) = (self.path, self.shas.clone());
        let acquire = |key: &[u8]| match path {
            SemPairPath::L => shas.try_acquire_cmd(key),
            _ => {
                let mut cmd = redis::cmd("RSEM.ACQUIRE");
                cmd.arg(key);
                cmd
            }
        };
        let release = |key: &[u8]| match path {
            SemPairPath::L => shas.release_cmd(key),
            _ => {
                let mut cmd = redis::cmd("RSEM.RELEASE");
                cmd.arg(key);
                cmd
            }
        };
        // RSEM.RELEASE replies the permits now (1 again); Redisson's release replies nil.
        let released = |v: &Value| match path {
            SemPairPath::L => *v == Value::Nil,
            _ => *v == Value::Int(1),
        };
        let acquired = |v: &Value| *v == Value::Int(1);
        if keys.len() == 1 {
            let a = acquire(&keys[0]).query_async::<Value>(&mut self.con).await;
            let r = release(&keys[0]).query_async::<Value>(&mut self.con).await;
            let ok = matches!(&a, Ok(v) if acquired(v)) && matches!(&r, Ok(v) if released(v));
            return u64::from(!ok);
        }
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.add_command(acquire(key));
        }
        for key in keys {
            pipe.add_command(release(key));
        }
        let b = keys.len();
        match pipe.query_async::<Vec<Value>>(&mut self.con).await {
            Ok(replies) if replies.len() == 2 * b => {
                let (acq, rel) = replies.split_at(b);
                (acq.iter().filter(|v| !acquired(v)).count()
                    + rel.iter().filter(|v| !released(v)).count()) as u64
            }
            _ => b as u64,
        }
    }

    /// Lease pairs: the return names the permit the lease replied (RX), or the id sent with
    /// it (LX, whose release is sent only once the acquire said `OK`, as Redisson's caller
    /// holds an id only then). One pipeline of b leases on b keys, then one of the b
    /// returns: two round trips per batch, on both sides; with one pair per batch, the
    /// same two calls as the blind pairs.
    async fn lease_pairs(&mut self, keys: &[Vec<u8>]) -> u64 {
        let now = unix_ms();
        let made: Vec<[u8; 16]> = match self.path {
            SemPairPath::LX => keys.iter().map(|_| new_permit_id()).collect(),
            _ => Vec::new(),
        };
        let acquires: Vec<redis::Cmd> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| match self.path {
                SemPairPath::LX => self
                    .shas
                    .permit_try_acquire_cmd(key, &made[i], LEASE_MS, now),
                _ => {
                    let mut cmd = redis::cmd("RSEM.LEASE");
                    cmd.arg(key).arg("LEASE").arg(LEASE_MS);
                    cmd
                }
            })
            .collect();
        let b = keys.len() as u64;
        let Ok(replies) = send(&mut self.con, acquires).await else {
            return b;
        };
        let mut bad = 0;
        let mut releases = Vec::new();
        for (i, (key, reply)) in keys.iter().zip(&replies).enumerate() {
            match self.path {
                SemPairPath::LX if is_ok(reply) => {
                    releases.push(self.shas.permit_release_cmd(key, &made[i], unix_ms()));
                }
                SemPairPath::RX => match leased_id(reply) {
                    Some(id) => {
                        let mut cmd = redis::cmd("RSEM.RETURN");
                        cmd.arg(key).arg(id);
                        releases.push(cmd);
                    }
                    None => bad += 1,
                },
                _ => bad += 1,
            }
        }
        if releases.is_empty() {
            return bad;
        }
        match send(&mut self.con, releases).await {
            Ok(replies) => bad + replies.iter().filter(|v| **v != Value::Int(1)).count() as u64,
            Err(_) => b,
        }
    }
}

/// One command alone, or several in one pipeline.
async fn send(
    con: &mut MultiplexedConnection,
    mut cmds: Vec<redis::Cmd>,
) -> redis::RedisResult<Vec<Value>> {
    if cmds.len() == 1 {
        let cmd = cmds.pop().expect("one command");
        return Ok(vec![cmd.query_async::<Value>(con).await?]);
    }
    let mut pipe = redis::pipe();
    for cmd in cmds {
        pipe.add_command(cmd);
    }
    let replies: Vec<Value> = pipe.query_async(con).await?;
    Ok(replies)
}

// ---------------------------------------------------------------------------------------
// Part 2: one contended semaphore.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SemWaitPath {
    B,
    Q,
}

impl SemWaitPath {
    pub const ALL: [SemWaitPath; 2] = [SemWaitPath::B, SemWaitPath::Q];

    pub fn letter(self) -> &'static str {
        match self {
            SemWaitPath::B => "B",
            SemWaitPath::Q => "Q",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            SemWaitPath::B => "RSEM.ACQUIRE K BLOCK 0, RSEM.RELEASE K",
            SemWaitPath::Q => {
                "Redisson's acquire(): Lua tryAcquire; on 0 wait for a message on redisson_sc:{K} \
                 (a positive total wakes the waiter, as its SemaphorePubSub) or the fallback, retry; \
                 Redisson's release (publishes the new total)"
            }
        }
    }
}

/// One measured run: counts inside the window only.
#[derive(Debug, Clone)]
pub struct SemRun {
    pub acquisitions: u64,
    /// Acquisitions by a client after another client acquired since its own last release
    /// (not a client taking back the permit it just gave).
    pub handoffs: u64,
    /// Acquire calls sent (tryAcquire scripts, BLOCK calls).
    pub tries: u64,
    /// Q: waits that ended by the fallback timeout, not a message.
    pub fallbacks: u64,
    pub per_client: Vec<u64>,
    /// The most holders the checker saw at once.
    pub max_holders: i64,
    pub window: Window,
    pub violations: u64,
    pub errors: u64,
    pub stragglers: u64,
}

impl SemRun {
    pub fn handoffs_per_sec(&self) -> f64 {
        self.handoffs as f64 / self.window.secs
    }
    pub fn acquisitions_per_sec(&self) -> f64 {
        self.acquisitions as f64 / self.window.secs
    }
    pub fn tries_per_acquisition(&self) -> f64 {
        ratio(self.tries as f64, self.acquisitions as f64)
    }
    /// min/max acquisitions per client; 1.0 is perfectly even.
    pub fn fairness(&self) -> f64 {
        let max = self.per_client.iter().copied().max().unwrap_or(0);
        let min = self.per_client.iter().copied().min().unwrap_or(0);
        if max == 0 {
            f64::NAN
        } else {
            min as f64 / max as f64
        }
    }
}

#[derive(Debug, Clone)]
pub struct SemCell {
    pub path: SemWaitPath,
    pub hold_ms: u64,
    pub runs: Vec<SemRun>,
}

impl SemCell {
    fn med(&self, f: impl Fn(&SemRun) -> f64) -> f64 {
        median(self.runs.iter().map(f))
    }
    pub fn handoffs_per_sec(&self) -> f64 {
        self.med(SemRun::handoffs_per_sec)
    }
    pub fn acquisitions_per_sec(&self) -> f64 {
        self.med(SemRun::acquisitions_per_sec)
    }
    pub fn tries_per_acquisition(&self) -> f64 {
        self.med(SemRun::tries_per_acquisition)
    }
    pub fn fairness(&self) -> f64 {
        self.med(SemRun::fairness)
    }
    pub fn server_us_per_acquisition(&self) -> f64 {
        self.med(|r| r.window.server_us_per(r.acquisitions))
    }
    pub fn server_busy(&self) -> f64 {
        self.med(|r| r.window.server_busy())
    }
    pub fn fallbacks(&self) -> u64 {
        self.runs.iter().map(|r| r.fallbacks).sum()
    }
    pub fn max_holders(&self) -> i64 {
        self.runs.iter().map(|r| r.max_holders).max().unwrap_or(0)
    }
    pub fn violations(&self) -> u64 {
        self.runs.iter().map(|r| r.violations).sum()
    }
    pub fn problems(&self) -> u64 {
        self.runs
            .iter()
            .map(|r| r.violations + r.errors + r.stragglers)
            .sum()
    }
}

async fn run_contended(server: &Server, plan: &Plan, shas: &Arc<SemShas>) -> Vec<SemCell> {
    let mut control = connect(server).await;
    let mut cells = Vec::new();
    for &hold_ms in &plan.holds_ms {
        let mut row: Vec<SemCell> = SemWaitPath::ALL
            .iter()
            .map(|&path| SemCell {
                path,
                hold_ms,
                runs: Vec::new(),
            })
            .collect();
        for round in 0..plan.rounds {
            for cell in row.iter_mut() {
                let key = format!("bench:sem:{hold_ms}:{}:{round}", cell.path.letter());
                let run =
                    contended_once(server, &mut control, shas, cell.path, hold_ms, &key, plan)
                        .await;
                if plan.verbose {
                    eprintln!(
                        "  semaphore N={CLIENTS} permits={PERMITS} hold={hold_ms} {} round {}: {:.0} hand-offs/s ({:.0} acq/s), {:.2} tries/acq, min/max {:.2}, max holders {}, {} fallbacks, server {:.0}%{}",
                        cell.path.letter(),
                        round + 1,
                        run.handoffs_per_sec(),
                        run.acquisitions_per_sec(),
                        run.tries_per_acquisition(),
                        run.fairness(),
                        run.max_holders,
                        run.fallbacks,
                        run.window.server_busy(),
                        match (run.violations, run.errors, run.stragglers) {
                            (0, 0, 0) => String::new(),
                            (v, e, s) => format!(", {v} VIOLATIONS {e} ERRORS {s} STRAGGLERS"),
                        }
                    );
                }
                cell.runs.push(run);
            }
        }
        cells.extend(row);
    }
    cells
}

/// What the clients of one run share. Holders are counted from the acquire reply's
/// arrival to just before the release is sent, inside the server's own interval, so a
/// count above [`PERMITS`] is a real violation.
struct Shared {
    stop: AtomicBool,
    holders: AtomicI64,
    max_holders: AtomicI64,
    /// Acquisitions so far, all clients: the sequence that tells a hand-off from a re-take.
    sequence: AtomicU64,
    acquisitions: Vec<AtomicU64>,
    handoffs: AtomicU64,
    tries: AtomicU64,
    fallbacks: AtomicU64,
    violations: AtomicU64,
    errors: AtomicU64,
}

impl Shared {
    fn new(clients: usize) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            holders: AtomicI64::new(0),
            max_holders: AtomicI64::new(0),
            sequence: AtomicU64::new(0),
            acquisitions: (0..clients).map(|_| AtomicU64::new(0)).collect(),
            handoffs: AtomicU64::new(0),
            tries: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            violations: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// `released_at`: the sequence when this client last released (None before its first).
    fn acquired(&self, me: usize, released_at: Option<u64>) {
        let holders = self.holders.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_holders.fetch_max(holders, Ordering::SeqCst);
        if holders > PERMITS as i64 {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        self.acquisitions[me].fetch_add(1, Ordering::Relaxed);
        let seq = self.sequence.fetch_add(1, Ordering::SeqCst);
        if released_at.is_some_and(|r| r != seq) {
            self.handoffs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Just before the release is sent; returns the sequence now.
    fn releasing(&self) -> u64 {
        self.holders.fetch_sub(1, Ordering::SeqCst);
        self.sequence.load(Ordering::SeqCst)
    }

    fn error(&self, what: &str) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!("  semaphore: unexpected reply: {what}");
        }
    }

    fn counts(&self) -> (Vec<u64>, [u64; 5]) {
        (
            self.acquisitions
                .iter()
                .map(|a| a.load(Ordering::SeqCst))
                .collect(),
            [
                self.handoffs.load(Ordering::SeqCst),
                self.tries.load(Ordering::SeqCst),
                self.fallbacks.load(Ordering::SeqCst),
                self.violations.load(Ordering::SeqCst),
                self.errors.load(Ordering::SeqCst),
            ],
        )
    }
}

struct Client {
    me: usize,
    path: SemWaitPath,
    con: MultiplexedConnection,
    key: Vec<u8>,
    hold: Duration,
    shas: Arc<SemShas>,
    shared: Arc<Shared>,
    /// Q only: permits added by messages on the semaphore's channel (the entry's latch).
    latch: Arc<tokio::sync::Semaphore>,
    give_up: Instant,
}

impl Client {
    async fn run(mut self) {
        let mut released_at = None;
        while !self.shared.stopping() && Instant::now() < self.give_up {
            let got = match self.path {
                SemWaitPath::B => self.acquire_blocking().await,
                SemWaitPath::Q => self.acquire_redisson().await,
            };
            if !got {
                return;
            }
            self.shared.acquired(self.me, released_at);
            if !self.hold.is_zero() {
                // As scenario 2: a blocking thread's sleep holds for what was asked.
                let hold = self.hold;
                tokio::task::spawn_blocking(move || std::thread::sleep(hold))
                    .await
                    .expect("hold");
            }
            released_at = Some(self.shared.releasing());
            let (release, ok) = match self.path {
                SemWaitPath::B => {
                    let mut cmd = redis::cmd("RSEM.RELEASE");
                    cmd.arg(&self.key);
                    (cmd, "an integer")
                }
                SemWaitPath::Q => (self.shas.release_cmd(&self.key), "nil"),
            };
            let released = release.query_async::<Value>(&mut self.con).await;
            let fine = match self.path {
                SemWaitPath::B => matches!(released, Ok(Value::Int(_))),
                SemWaitPath::Q => matches!(released, Ok(Value::Nil)),
            };
            if !fine {
                self.shared
                    .error(&format!("release: {released:?}, expected {ok}"));
                return;
            }
        }
    }

    /// True once held; false on an error.
    async fn acquire_blocking(&mut self) -> bool {
        self.shared.tries.fetch_add(1, Ordering::Relaxed);
        let reply = redis::cmd("RSEM.ACQUIRE")
            .arg(&self.key)
            .arg("BLOCK")
            .arg(0)
            .query_async::<Value>(&mut self.con)
            .await;
        match reply {
            Ok(Value::Int(1)) => true,
            other => {
                self.shared
                    .error(&format!("RSEM.ACQUIRE BLOCK 0: {other:?}"));
                false
            }
        }
    }

    /// Redisson's `acquire()`: tryAcquire until it holds, waiting on the latch between
    /// tries. False on an error or when the run is over.
    async fn acquire_redisson(&mut self) -> bool {
        loop {
            self.shared.tries.fetch_add(1, Ordering::Relaxed);
            match self
                .shas
                .try_acquire_cmd(&self.key)
                .query_async::<Value>(&mut self.con)
                .await
            {
                Ok(Value::Int(1)) => {
                    // Redisson unsubscribes once it holds and starts a fresh entry next
                    // time: forget wake-ups that arrived meanwhile.
                    let stale = self.latch.available_permits();
                    if stale > 0 {
                        self.latch.forget_permits(stale);
                    }
                    return true;
                }
                Ok(Value::Int(0)) => {}
                other => {
                    self.shared.error(&format!("tryAcquire: {other:?}"));
                    return false;
                }
            }
            if self.shared.stopping() || Instant::now() >= self.give_up {
                return false;
            }
            let wait = Duration::from_millis(FALLBACK_MS);
            match tokio::time::timeout(wait, self.latch.acquire()).await {
                Ok(Ok(permit)) => permit.forget(),
                _ => {
                    self.shared.fallbacks.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// A listener for `redisson_sc:{K}`: each message with a positive total adds one permit
/// to `latch` (Redisson's `SemaphorePubSub` releases min(waiters, total), and each
/// subscription here has one waiter).
async fn listen(
    server: &Server,
    key: &[u8],
    latch: Arc<tokio::sync::Semaphore>,
) -> tokio::task::JoinHandle<()> {
    let mut pubsub = server
        .client()
        .get_async_pubsub()
        .await
        .expect("pub/sub connection");
    pubsub
        .subscribe(semaphore_channel(key))
        .await
        .expect("SUBSCRIBE");
    let mut stream = pubsub.into_on_message();
    tokio::spawn(async move {
        while let Some(msg) = stream.next().await {
            if positive(msg.get_payload_bytes()) {
                latch.add_permits(1);
            }
        }
    })
}

fn positive(payload: &[u8]) -> bool {
    std::str::from_utf8(payload)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .is_some_and(|n| n > 0)
}

async fn contended_once(
    server: &Server,
    control: &mut MultiplexedConnection,
    shas: &Arc<SemShas>,
    path: SemWaitPath,
    hold_ms: u64,
    key: &str,
    plan: &Plan,
) -> SemRun {
    let key_bytes = key.as_bytes().to_vec();
    let set = match path {
        SemWaitPath::B => {
            let mut cmd = redis::cmd("RSEM.TRYSETPERMITS");
            cmd.arg(key).arg(PERMITS);
            cmd
        }
        SemWaitPath::Q => shas.try_set_permits_cmd(&key_bytes, PERMITS),
    };
    let set: Value = set.query_async(control).await.expect("trySetPermits");
    assert_eq!(set, Value::Int(1), "semaphore {key} existed");
    let shared = Arc::new(Shared::new(CLIENTS));
    let conns = connect_many(server, CLIENTS).await;
    let give_up = Instant::now() + plan.warmup() + plan.contended_run + Duration::from_secs(60);
    let mut listeners = Vec::new();
    let mut tasks = Vec::new();
    for (me, con) in conns.into_iter().enumerate() {
        let latch = Arc::new(tokio::sync::Semaphore::new(0));
        if path == SemWaitPath::Q {
            // Each client stands for a JVM of its own: its own subscription, for the run
            // (Redisson subscribes on a miss and unsubscribes once it holds; the bench
            // spares the baseline those commands).
            listeners.push(listen(server, &key_bytes, latch.clone()).await);
        }
        let client = Client {
            me,
            path,
            con,
            key: key_bytes.clone(),
            hold: Duration::from_millis(hold_ms),
            shas: shas.clone(),
            shared: shared.clone(),
            latch,
            give_up,
        };
        tasks.push(tokio::spawn(client.run()));
    }
    tokio::time::sleep(plan.warmup()).await;
    let (a0, c0) = shared.counts();
    shared.max_holders.store(0, Ordering::SeqCst);
    let s0 = Snapshot::take(control).await;
    tokio::time::sleep(plan.contended_run).await;
    let s1 = Snapshot::take(control).await;
    let (a1, c1) = shared.counts();
    let max_holders = shared.max_holders.load(Ordering::SeqCst);
    shared.stop.store(true, Ordering::SeqCst);
    // Everyone leaves once they next hold a permit (and give it back), or, for Q, at
    // their next miss; a client still stuck after the grace period is cut off and counted.
    let grace = Instant::now() + Duration::from_secs(10);
    let mut stragglers = 0;
    for task in tasks {
        let left = grace.saturating_duration_since(Instant::now());
        let abort = task.abort_handle();
        if tokio::time::timeout(left, task).await.is_err() {
            abort.abort();
            stragglers += 1;
        }
    }
    for listener in listeners {
        listener.abort();
    }
    let _: Value = redis::cmd("DEL")
        .arg(key)
        .query_async(control)
        .await
        .expect("DEL");
    let per_client: Vec<u64> = a1.iter().zip(&a0).map(|(b, a)| b - a).collect();
    let d = |i: usize| c1[i] - c0[i];
    SemRun {
        acquisitions: per_client.iter().sum(),
        handoffs: d(0),
        tries: d(1),
        fallbacks: d(2),
        per_client,
        max_holders,
        window: Window::between(&s0, &s1),
        violations: d(3),
        errors: d(4),
        stragglers,
    }
}

// ---------------------------------------------------------------------------------------
// Part 3: expired-permit reclaim.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReclaimPath {
    B,
    BehindLua,
    Q,
}

impl ReclaimPath {
    pub const ALL: [ReclaimPath; 3] = [ReclaimPath::B, ReclaimPath::BehindLua, ReclaimPath::Q];

    pub fn letter(self) -> &'static str {
        match self {
            ReclaimPath::B => "B",
            ReclaimPath::BehindLua => "B*",
            ReclaimPath::Q => "Q",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            ReclaimPath::B => "holder RSEM.LEASE K LEASE l; waiter RSEM.LEASE K LEASE 30000 BLOCK 0",
            ReclaimPath::BehindLua => {
                "holder Redisson permit tryAcquire (lease l); waiter RSEM.LEASE K LEASE 30000 BLOCK 0"
            }
            ReclaimPath::Q => {
                "holder Redisson permit tryAcquire (lease l); waiter Redisson's acquire(lease): \
                 tryAcquire, on `:<deadline>` sleep until then (client clock) or a message on \
                 redisson_sc:{K}, retry"
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct ReclaimCell {
    pub path: ReclaimPath,
    /// Per round, per sample: the waiter's grant minus the holder's lease deadline, ms.
    pub rounds: Vec<Vec<f64>>,
    pub errors: u64,
}

impl ReclaimCell {
    fn per_round(&self, p: f64) -> f64 {
        median(self.rounds.iter().map(|r| {
            let mut v = r.clone();
            v.sort_by(f64::total_cmp);
            percentile(&v, p)
        }))
    }
    /// Median over rounds of each round's p50.
    pub fn p50_ms(&self) -> f64 {
        self.per_round(50.0)
    }
    /// Median over rounds of each round's p99.
    pub fn p99_ms(&self) -> f64 {
        self.per_round(99.0)
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

#[derive(Debug, Clone)]
pub struct Reclaim {
    pub lease_ms: u64,
    pub cells: Vec<ReclaimCell>,
}

impl Reclaim {
    pub fn cell(&self, path: ReclaimPath) -> Option<&ReclaimCell> {
        self.cells.iter().find(|c| c.path == path)
    }

    /// Q's median lateness ÷ B's (p50, or p99).
    pub fn ratio(&self, p99: bool) -> f64 {
        let late = |path| {
            self.cell(path).map_or(f64::NAN, |c| match p99 {
                true => c.p99_ms(),
                false => c.p50_ms(),
            })
        };
        ratio(late(ReclaimPath::Q), late(ReclaimPath::B))
    }
}

async fn run_reclaim(server: &Server, plan: &Plan, shas: &SemShas) -> Reclaim {
    let mut holder = connect(server).await;
    let mut waiter = connect(server).await;
    let (mut sink, mut stream) = server
        .client()
        .get_async_pubsub()
        .await
        .expect("pub/sub connection")
        .split();
    let latch = Arc::new(tokio::sync::Semaphore::new(0));
    let listener = {
        let latch = latch.clone();
        tokio::spawn(async move {
            while let Some(msg) = stream.next().await {
                if positive(msg.get_payload_bytes()) {
                    latch.add_permits(1);
                }
            }
        })
    };
    let lease = plan.expiry_lease_ms;
    let mut cells: Vec<ReclaimCell> = ReclaimPath::ALL
        .iter()
        .map(|&path| ReclaimCell {
            path,
            rounds: Vec::new(),
            errors: 0,
        })
        .collect();
    for round in 0..plan.rounds {
        for cell in cells.iter_mut() {
            cell.rounds.push(Vec::new());
        }
        for sample in 0..plan.sem_samples {
            for cell in cells.iter_mut() {
                let key = format!("bench:semreclaim:{}:{round}:{sample}", cell.path.letter())
                    .into_bytes();
                let channel = semaphore_channel(&key);
                if cell.path == ReclaimPath::Q {
                    sink.subscribe(&channel).await.expect("SUBSCRIBE");
                }
                let late = reclaim_once(
                    &mut holder,
                    &mut waiter,
                    shas,
                    cell.path,
                    &key,
                    lease,
                    &latch,
                )
                .await;
                if cell.path == ReclaimPath::Q {
                    sink.unsubscribe(&channel).await.expect("UNSUBSCRIBE");
                    let stale = latch.available_permits();
                    latch.forget_permits(stale);
                }
                match late {
                    Some(late) => {
                        if plan.verbose {
                            eprintln!(
                                "  semaphore reclaim {} round {} sample {}: {late:.2} ms after the deadline",
                                cell.path.letter(),
                                round + 1,
                                sample + 1
                            );
                        }
                        cell.rounds.last_mut().expect("round").push(late);
                    }
                    None => cell.errors += 1,
                }
            }
        }
    }
    listener.abort();
    Reclaim {
        lease_ms: lease,
        cells,
    }
}

/// One sample: ms from the holder's deadline (its permit's score in `{K}:timeout`, unix
/// ms) to the waiter's grant reply (this machine's unix clock, the server's too). None on
/// an unexpected reply.
async fn reclaim_once(
    holder: &mut MultiplexedConnection,
    waiter: &mut MultiplexedConnection,
    shas: &SemShas,
    path: ReclaimPath,
    key: &[u8],
    lease: u64,
    latch: &tokio::sync::Semaphore,
) -> Option<f64> {
    let timeout_key = permit_timeout_key(key);
    // One permit, made by the holder's side.
    let set = match path {
        ReclaimPath::B => {
            let mut cmd = redis::cmd("RSEM.TRYSETPERMITS");
            cmd.arg(key).arg(1);
            cmd
        }
        ReclaimPath::BehindLua | ReclaimPath::Q => shas.permit_try_set_permits_cmd(key, 1),
    };
    let set: Value = set.query_async(holder).await.ok()?;
    if set != Value::Int(1) {
        eprintln!("  semaphore reclaim: trySetPermits got {set:?}");
        return None;
    }
    // The holder takes the only permit for `lease` ms and is never heard from again.
    let holder_id: Vec<u8> = match path {
        ReclaimPath::B => {
            let mut cmd = redis::cmd("RSEM.LEASE");
            cmd.arg(key).arg("LEASE").arg(lease);
            let reply: Value = cmd.query_async(holder).await.ok()?;
            let Some(hex) = leased_id(&reply) else {
                eprintln!("  semaphore reclaim: holder RSEM.LEASE got {reply:?}");
                return None;
            };
            hex_to_bytes(&hex)?
        }
        ReclaimPath::BehindLua | ReclaimPath::Q => {
            let id = new_permit_id();
            let reply: Value = shas
                .permit_try_acquire_cmd(key, &id, lease, unix_ms())
                .query_async(holder)
                .await
                .ok()?;
            if !is_ok(&reply) {
                eprintln!("  semaphore reclaim: holder tryAcquire got {reply:?}");
                return None;
            }
            id.to_vec()
        }
    };
    let score: Option<String> = redis::cmd("ZSCORE")
        .arg(&timeout_key)
        .arg(&holder_id)
        .query_async(holder)
        .await
        .ok()?;
    let deadline: f64 = score?.parse().ok()?;
    let (granted_at, return_cmd) = match path {
        ReclaimPath::B | ReclaimPath::BehindLua => {
            let reply: Value = redis::cmd("RSEM.LEASE")
                .arg(key)
                .arg("LEASE")
                .arg(WAITER_LEASE_MS)
                .arg("BLOCK")
                .arg(0)
                .query_async(waiter)
                .await
                .ok()?;
            let at = unix_ms_f64();
            let Some(id) = leased_id(&reply) else {
                eprintln!("  semaphore reclaim: BLOCK waiter got {reply:?}");
                return None;
            };
            let mut cmd = redis::cmd("RSEM.RETURN");
            cmd.arg(key).arg(id);
            (at, cmd)
        }
        ReclaimPath::Q => {
            let (at, id) = redisson_acquire(waiter, shas, key, latch).await?;
            (at, shas.permit_release_cmd(key, &id, unix_ms()))
        }
    };
    let returned: Value = return_cmd.query_async(waiter).await.ok()?;
    if returned != Value::Int(1) {
        eprintln!("  semaphore reclaim: waiter's return got {returned:?}");
        return None;
    }
    let _: Value = redis::cmd("DEL")
        .arg(key)
        .arg(&timeout_key)
        .query_async(holder)
        .await
        .ok()?;
    Some(granted_at - deadline)
}

/// Redisson's `RPermitExpirableSemaphore.acquire(lease)`: tryAcquire (a fresh id each
/// time, now = the client's ms); on `:<deadline>` wait on the latch for
/// `deadline - currentTimeMillis()` ms, on nil for a message only (here: up to the
/// fallback); retry. The timed wait runs on a thread (`std::thread::sleep`, as Java's
/// `parkNanos`), not tokio's millisecond timer wheel, which would add up to 1 ms.
/// Returns the unix ms the grant arrived and the permit id.
async fn redisson_acquire(
    con: &mut MultiplexedConnection,
    shas: &SemShas,
    key: &[u8],
    latch: &tokio::sync::Semaphore,
) -> Option<(f64, [u8; 16])> {
    let give_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < give_up {
        let id = new_permit_id();
        let now = unix_ms();
        let reply: Value = shas
            .permit_try_acquire_cmd(key, &id, WAITER_LEASE_MS, now)
            .query_async(con)
            .await
            .ok()?;
        let at = unix_ms_f64();
        if is_ok(&reply) {
            return Some((at, id));
        }
        let wait = match &reply {
            Value::BulkString(b) if b.first() == Some(&b':') => {
                let deadline: u64 = std::str::from_utf8(&b[1..]).ok()?.parse().ok()?;
                Duration::from_millis(deadline.saturating_sub(unix_ms()))
            }
            Value::Nil => Duration::from_millis(FALLBACK_MS),
            other => {
                eprintln!("  semaphore reclaim: tryAcquire got {other:?}");
                return None;
            }
        };
        if wait.is_zero() {
            continue;
        }
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            std::thread::sleep(wait);
            let _ = tx.send(());
        });
        tokio::select! {
            permit = latch.acquire() => {
                if let Ok(permit) = permit {
                    permit.forget();
                }
            }
            _ = rx => {}
        }
    }
    None
}

// ---------------------------------------------------------------------------------------

/// Everything scenario 11 measured on one server.
#[derive(Debug, Clone)]
pub struct SemaphoreReport {
    pub pairs: SemPairs,
    pub contended: Vec<SemCell>,
    pub reclaim: Reclaim,
}

impl SemaphoreReport {
    pub fn contended_cell(&self, path: SemWaitPath, hold_ms: u64) -> Option<&SemCell> {
        self.contended
            .iter()
            .find(|c| c.path == path && c.hold_ms == hold_ms)
    }

    /// Median hand-offs/s of B ÷ Q at one hold time.
    pub fn handoff_ratio(&self, hold_ms: u64) -> f64 {
        let h = |path| {
            self.contended_cell(path, hold_ms)
                .map_or(f64::NAN, SemCell::handoffs_per_sec)
        };
        ratio(h(SemWaitPath::B), h(SemWaitPath::Q))
    }

    /// Median acquisitions/s of B ÷ Q at one hold time.
    pub fn acquisition_ratio(&self, hold_ms: u64) -> f64 {
        let a = |path| {
            self.contended_cell(path, hold_ms)
                .map_or(f64::NAN, SemCell::acquisitions_per_sec)
        };
        ratio(a(SemWaitPath::B), a(SemWaitPath::Q))
    }
}

pub async fn run(server: &Server, plan: &Plan) -> SemaphoreReport {
    let mut control = connect(server).await;
    let shas = Arc::new(SemShas::load(&mut control).await.expect("SCRIPT LOAD"));
    let pairs = run_pairs(server, plan, &shas).await;
    let contended = run_contended(server, plan, &shas).await;
    let reclaim = run_reclaim(server, plan, &shas).await;
    SemaphoreReport {
        pairs,
        contended,
        reclaim,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_replies() {
        assert_eq!(hex_to_bytes(b"00ff10"), Some(vec![0x00, 0xff, 0x10]));
        assert_eq!(hex_to_bytes(b"0g"), None);
        let a = new_permit_id();
        let b = new_permit_id();
        assert_ne!(a, b);
        assert!(positive(b"3"));
        assert!(!positive(b"0"));
        assert!(!positive(b"-1"));
        assert!(is_ok(&Value::BulkString(b"OK".to_vec())));
        assert!(!is_ok(&Value::BulkString(b":123".to_vec())));
    }
}
