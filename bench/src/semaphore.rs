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

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;

use crate::harness::cells::min_over_max;
use crate::harness::late::{Late, Lateness};
use crate::harness::load::{hold_for, seats, Seat, Trouble};
use crate::harness::pairs::{blind_batch, PairCommands, PairLoad, PairPath, Pairs};
use crate::harness::wake::{forget_stale, positive, wait_wakeup, Wakes, Wakeups};
use crate::harness::{self, measure_clients, Cells, Counts, Grid, Path};
use crate::measure::{connect, connect_many, ratio, Window};
use crate::paths;
use crate::scripts::{permit_timeout_key, semaphore_channel, SemShas};
use crate::uncontended::LEASE_MS;
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

paths! {
    pub enum SemPairPath {
        /// `RSEM.ACQUIRE K` + `RSEM.RELEASE K`.
        R => "R", "RSEM.ACQUIRE K + RSEM.RELEASE K";
        /// Redisson's semaphore tryAcquire + release scripts.
        L => "L", "EVALSHA Redisson semaphore tryAcquire + release (publishes on redisson_sc:{K})";
        /// `RSEM.LEASE K LEASE 30000` + `RSEM.RETURN K id`.
        RX => "RX", "RSEM.LEASE K LEASE 30000 + RSEM.RETURN K <id from the reply>";
        /// Redisson's permit-expirable tryAcquire (lease 30000) + release scripts.
        LX => "LX", "EVALSHA Redisson permit-expirable tryAcquire (client-made 16-byte id, lease 30000, \
                 now = client ms) + release (publishes)";
    }
}

impl SemPairPath {
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

/// Scenario 11's pairs: by path and pipeline depth.
pub type SemPairs = Pairs<SemPairPath>;

impl PairPath for SemPairPath {
    type Scripts = SemShas;

    fn key(self, n: u64) -> Vec<u8> {
        format!("sem:{}:{n:06}", self.letter()).into_bytes()
    }

    async fn batch(
        self,
        shas: &SemShas,
        con: &mut MultiplexedConnection,
        keys: &[Vec<u8>],
        _owner: &[u8],
    ) -> u64 {
        if self.leased() {
            return self.lease_pairs(shas, con, keys).await;
        }
        let command = |name: &str, key: &[u8]| {
            let mut cmd = redis::cmd(name);
            cmd.arg(key);
            cmd
        };
        let lua = self == SemPairPath::L;
        let pair = PairCommands {
            acquire: |key: &[u8]| match lua {
                true => shas.try_acquire_cmd(key),
                false => command("RSEM.ACQUIRE", key),
            },
            release: |key: &[u8]| match lua {
                true => shas.release_cmd(key),
                false => command("RSEM.RELEASE", key),
            },
            acquired: |v: &Value| *v == Value::Int(1),
            // RSEM.RELEASE replies the permits now (1 again); Redisson's release replies nil.
            released: |v: &Value| match lua {
                true => *v == Value::Nil,
                false => *v == Value::Int(1),
            },
        };
        blind_batch(con, keys, pair).await
    }
}

async fn run_pairs(server: &Server, plan: &Plan, shas: &Arc<SemShas>) -> SemPairs {
    let mut control = connect(server).await;
    let conns = connect_many(server, plan.conns).await;
    let deepest = plan.pipelines.iter().copied().max().unwrap_or(1);
    let slice = (plan.keys / conns.len()).max(deepest) as u64;
    setup_pairs(&conns, shas, slice).await;
    let load = PairLoad {
        conns: &conns,
        control: &mut control,
        scripts: shas.clone(),
        slice: &|_| slice,
    };
    harness::pairs::run_pairs(load, plan, &SemPairPath::ALL, &plan.pipelines, "semaphore").await
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
                        pipe.add_command(path.setup(shas, &path.key(k)));
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

impl SemPairPath {
    /// Lease pairs: the return names the permit the lease replied (RX), or the id sent with
    /// it (LX, whose release is sent only once the acquire said `OK`, as Redisson's caller
    /// holds an id only then). One pipeline of b leases on b keys, then one of the b
    /// returns: two round trips per batch, on both sides; with one pair per batch, the
    /// same two calls as the blind pairs.
    async fn lease_pairs(
        self,
        shas: &SemShas,
        con: &mut MultiplexedConnection,
        keys: &[Vec<u8>],
    ) -> u64 {
        let now = unix_ms();
        let made: Vec<[u8; 16]> = match self {
            SemPairPath::LX => keys.iter().map(|_| new_permit_id()).collect(),
            _ => Vec::new(),
        };
        let acquires: Vec<redis::Cmd> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| match self {
                SemPairPath::LX => shas.permit_try_acquire_cmd(key, &made[i], LEASE_MS, now),
                _ => {
                    let mut cmd = redis::cmd("RSEM.LEASE");
                    cmd.arg(key).arg("LEASE").arg(LEASE_MS);
                    cmd
                }
            })
            .collect();
        let b = keys.len() as u64;
        let Ok(replies) = send(con, acquires).await else {
            return b;
        };
        let mut bad = 0;
        let mut releases = Vec::new();
        for (i, (key, reply)) in keys.iter().zip(&replies).enumerate() {
            match self {
                SemPairPath::LX if is_ok(reply) => {
                    releases.push(shas.permit_release_cmd(key, &made[i], unix_ms()));
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
        match send(con, releases).await {
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

paths! {
    pub enum SemWaitPath {
        B => "B", "RSEM.ACQUIRE K BLOCK 0, RSEM.RELEASE K";
        Q => "Q", "Redisson's acquire(): Lua tryAcquire; on 0 wait for a message on redisson_sc:{K} \
                 (a positive total wakes the waiter, as its SemaphorePubSub) or the fallback, retry; \
                 Redisson's release (publishes the new total)";
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
    pub trouble: Trouble,
}

crate::windowed!(SemRun {
    handoffs_per_sec: handoffs,
    acquisitions_per_sec: acquisitions,
});

impl SemRun {
    pub fn tries_per_acquisition(&self) -> f64 {
        ratio(self.tries as f64, self.acquisitions as f64)
    }
    /// min/max acquisitions per client; 1.0 is perfectly even.
    pub fn fairness(&self) -> f64 {
        min_over_max(&self.per_client)
    }
}

crate::progress!(SemRun, |r| {
    format!(
            "{:.0} hand-offs/s ({:.0} acq/s), {:.2} tries/acq, min/max {:.2}, max holders {}, {} fallbacks, server {:.0}%{}",
            r.handoffs_per_sec(),
            r.acquisitions_per_sec(),
            r.tries_per_acquisition(),
            r.fairness(),
            r.max_holders,
            r.fallbacks,
            r.window.server_busy(),
            r.trouble.note()
    )
});

async fn run_contended(
    server: &Server,
    plan: &Plan,
    shas: &Arc<SemShas>,
) -> Cells<SemWaitPath, u64, SemRun> {
    let mut control = connect(server).await;
    let mut grid = Grid::new(&plan.holds_ms, &SemWaitPath::ALL, plan);
    for turn in grid.turns() {
        let (path, hold_ms) = grid.at(turn);
        let key = format!("bench:sem:{hold_ms}:{}:{}", path.letter(), turn.round);
        let run = contended_once(server, &mut control, shas, path, hold_ms, &key, plan).await;
        let what = format!("semaphore N={CLIENTS} permits={PERMITS} hold={hold_ms}");
        grid.record(turn, &what, run);
    }
    grid.done()
}

/// What the clients of one run share. Holders are counted from the acquire reply's
/// arrival to just before the release is sent, inside the server's own interval, so a
/// count above [`PERMITS`] is a real violation.
struct Shared {
    stop: AtomicBool,
    holders: AtomicI64,
    max_holders: AtomicI64,
    /// The most holders inside the window, kept when it closes.
    max_in_window: AtomicI64,
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
            max_in_window: AtomicI64::new(0),
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
        harness::load::unexpected(&self.errors, "semaphore", what);
    }
}

impl harness::Shared for Shared {
    fn counts(&self) -> Counts {
        let totals = [
            &self.handoffs,
            &self.tries,
            &self.fallbacks,
            &self.violations,
            &self.errors,
        ];
        Counts::read(&self.acquisitions, &totals)
    }

    fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }

    /// A semaphore is no lock to force-release: its key is deleted.
    fn cleanup(&self) -> &'static str {
        "DEL"
    }

    fn measuring(&self, on: bool) {
        if on {
            self.max_holders.store(0, Ordering::SeqCst);
        } else {
            let max = self.max_holders.load(Ordering::SeqCst);
            self.max_in_window.store(max, Ordering::SeqCst);
        }
    }
}

struct Client {
    seat: Seat,
    path: SemWaitPath,
    shas: Arc<SemShas>,
    shared: Arc<Shared>,
}

impl Client {
    async fn run(mut self) {
        let mut released_at = None;
        while !self.shared.stopping() && Instant::now() < self.seat.give_up {
            let got = match self.path {
                SemWaitPath::B => self.acquire_blocking().await,
                SemWaitPath::Q => self.acquire_redisson().await,
            };
            if !got {
                return;
            }
            self.shared.acquired(self.seat.me, released_at);
            hold_for(self.seat.hold).await;
            released_at = Some(self.shared.releasing());
            let (release, ok) = match self.path {
                SemWaitPath::B => {
                    let mut cmd = redis::cmd("RSEM.RELEASE");
                    cmd.arg(&self.seat.key);
                    (cmd, "an integer")
                }
                SemWaitPath::Q => (self.shas.release_cmd(&self.seat.key), "nil"),
            };
            let released = release.query_async::<Value>(&mut self.seat.con).await;
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
            .arg(&self.seat.key)
            .arg("BLOCK")
            .arg(0)
            .query_async::<Value>(&mut self.seat.con)
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
                .try_acquire_cmd(&self.seat.key)
                .query_async::<Value>(&mut self.seat.con)
                .await
            {
                Ok(Value::Int(1)) => {
                    forget_stale(&self.seat.latch);
                    return true;
                }
                Ok(Value::Int(0)) => {}
                other => {
                    self.shared.error(&format!("tryAcquire: {other:?}"));
                    return false;
                }
            }
            if self.shared.stopping() || Instant::now() >= self.seat.give_up {
                return false;
            }
            let wait = Duration::from_millis(FALLBACK_MS);
            if !wait_wakeup(&self.seat.latch, wait).await {
                self.shared.fallbacks.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
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
    // Redisson's `SemaphorePubSub` releases min(waiters, total) on a message, and each
    // subscription here has one waiter: a positive total wakes it. Redisson subscribes on a
    // miss and unsubscribes once it holds; the bench spares the baseline those commands.
    let listens =
        |_| (path == SemWaitPath::Q).then(|| (semaphore_channel(&key_bytes), positive as Wakes));
    let client = |seat: Seat| {
        Client {
            seat,
            path,
            shas: shas.clone(),
            shared: shared.clone(),
        }
        .run()
    };
    let clients = seats(server, plan, CLIENTS, (key, hold_ms), listens).await;
    let m = measure_clients(control, plan, &*shared, clients, client).await;
    let d = |i: usize| m.totals[i];
    let trouble = Trouble::of(&m, 3, 4);
    SemRun {
        acquisitions: m.per_client.iter().sum(),
        handoffs: d(0),
        tries: d(1),
        fallbacks: d(2),
        per_client: m.per_client,
        max_holders: shared.max_in_window.load(Ordering::SeqCst),
        window: m.window,
        trouble,
    }
}

// ---------------------------------------------------------------------------------------
// Part 3: expired-permit reclaim.

paths! {
    pub enum ReclaimPath {
        B => "B", "holder RSEM.LEASE K LEASE l; waiter RSEM.LEASE K LEASE 30000 BLOCK 0";
        BehindLua => "B*", "holder Redisson permit tryAcquire (lease l); waiter RSEM.LEASE K LEASE 30000 BLOCK 0";
        Q => "Q", "holder Redisson permit tryAcquire (lease l); waiter Redisson's acquire(lease): \
                 tryAcquire, on `:<deadline>` sleep until then (client clock) or a message on \
                 redisson_sc:{K}, retry";
    }
}

/// Per round, per sample: the waiter's grant minus the holder's lease deadline, ms.
pub type ReclaimCell = Lateness<ReclaimPath>;

/// Part 3: every path's samples.
pub type Reclaim = Late<ReclaimPath>;

impl Reclaim {
    /// Q's median lateness ÷ B's (p50, or p99).
    pub fn ratio(&self, p99: bool) -> f64 {
        let late = |path| {
            self.cell(path)
                .map_or(f64::NAN, |c| c.per_round(if p99 { 99.0 } else { 50.0 }))
        };
        ratio(late(ReclaimPath::Q), late(ReclaimPath::B))
    }
}

async fn run_reclaim(server: &Server, plan: &Plan, shas: &SemShas) -> Reclaim {
    let mut holder = connect(server).await;
    let mut waiter = connect(server).await;
    let mut wakeups = Wakeups::open(server, positive).await;
    let lease = plan.expiry_lease_ms;
    let mut cells: Vec<ReclaimCell> = ReclaimPath::ALL.map(Lateness::new).to_vec();
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
                    wakeups.subscribe(&channel).await;
                }
                let late = reclaim_once(
                    &mut holder,
                    &mut waiter,
                    shas,
                    cell.path,
                    &key,
                    lease,
                    &wakeups.latch,
                )
                .await;
                if cell.path == ReclaimPath::Q {
                    wakeups.unsubscribe(&channel).await;
                }
                let at = format!("round {} sample {}", round + 1, sample + 1);
                cell.record(late, plan.verbose, "semaphore reclaim", &at);
            }
        }
    }
    wakeups.close();
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
    pub contended: Cells<SemWaitPath, u64, SemRun>,
    pub reclaim: Reclaim,
}

impl SemaphoreReport {
    /// Median hand-offs/s of B ÷ Q at one hold time.
    pub fn handoff_ratio(&self, hold_ms: u64) -> f64 {
        let (b, q) = (SemWaitPath::B, SemWaitPath::Q);
        self.contended
            .ratio(b, q, hold_ms, |c| c.med(SemRun::handoffs_per_sec))
    }

    /// Median acquisitions/s of B ÷ Q at one hold time.
    pub fn acquisition_ratio(&self, hold_ms: u64) -> f64 {
        let (b, q) = (SemWaitPath::B, SemWaitPath::Q);
        self.contended
            .ratio(b, q, hold_ms, |c| c.med(SemRun::acquisitions_per_sec))
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
