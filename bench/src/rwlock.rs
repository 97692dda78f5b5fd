//! Scenario 10: the read-write lock.
//!
//! Uncontended read and write pairs against Redisson's `RedissonReadLock` and
//! `RedissonWriteLock` scripts (the shape of scenario 1), and one contended lock: 32
//! clients, each operation a read with probability 0.9, else a write, held `hold` ms.
//! B waits in the server (`RLOCK.ACQUIRE lock o READ|WRITE BLOCK 0`); Q follows
//! Redisson's `lock()`: the Lua tryLock, on a miss wait for a message on
//! `redisson_rwlock:{lock}` or the returned TTL, then try again. A checker counts
//! holders: a writer beside anyone is a violation.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;
use tokio::sync::Semaphore;

use crate::measure::{connect, connect_many, median, ratio, Rng, Snapshot, Window};
use crate::scripts::{rw_channel, Shas};
use crate::uncontended::{self, Uncontended, LEASE_MS};
use crate::{Plan, OWNER_PREFIX};

/// Clients on the contended lock, and the share of their operations that read.
pub const CLIENTS: usize = 32;
pub const READ_PERCENT: u64 = 90;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwWaitPath {
    B,
    Q,
}

impl RwWaitPath {
    pub const ALL: [RwWaitPath; 2] = [RwWaitPath::B, RwWaitPath::Q];

    pub fn letter(self) -> &'static str {
        match self {
            RwWaitPath::B => "B",
            RwWaitPath::Q => "Q",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            RwWaitPath::B => {
                "RLOCK.ACQUIRE lock o READ|WRITE BLOCK 0 LEASE 30000, RLOCK.RELEASE lock o READ|WRITE"
            }
            RwWaitPath::Q => {
                "Redisson's read/write tryLock; on a miss wait for a message on redisson_rwlock:{lock} \
                 or the TTL, retry; Redisson's unlock"
            }
        }
    }
}

/// One measured run.
#[derive(Debug, Clone)]
pub struct RwRun {
    pub reads: u64,
    pub writes: u64,
    pub tries: u64,
    pub window: Window,
    pub violations: u64,
    pub errors: u64,
    pub stragglers: u64,
}

impl RwRun {
    pub fn ops_per_sec(&self) -> f64 {
        (self.reads + self.writes) as f64 / self.window.secs
    }
    pub fn writes_per_sec(&self) -> f64 {
        self.writes as f64 / self.window.secs
    }
    pub fn tries_per_op(&self) -> f64 {
        ratio(self.tries as f64, (self.reads + self.writes) as f64)
    }
}

#[derive(Debug, Clone)]
pub struct RwCell {
    pub path: RwWaitPath,
    pub hold_ms: u64,
    pub runs: Vec<RwRun>,
}

impl RwCell {
    fn med(&self, f: impl Fn(&RwRun) -> f64) -> f64 {
        median(self.runs.iter().map(f))
    }
    pub fn ops_per_sec(&self) -> f64 {
        self.med(RwRun::ops_per_sec)
    }
    pub fn writes_per_sec(&self) -> f64 {
        self.med(RwRun::writes_per_sec)
    }
    pub fn tries_per_op(&self) -> f64 {
        self.med(RwRun::tries_per_op)
    }
    pub fn server_busy(&self) -> f64 {
        self.med(|r| r.window.server_busy())
    }
    pub fn problems(&self) -> u64 {
        self.runs
            .iter()
            .map(|r| r.violations + r.errors + r.stragglers)
            .sum()
    }
}

#[derive(Debug, Clone)]
pub struct ReadWrite {
    pub uncontended: Uncontended,
    pub contended: Vec<RwCell>,
}

impl ReadWrite {
    /// Median operations/s of B ÷ Q at one hold time.
    pub fn contended_ratio(&self, hold_ms: u64) -> f64 {
        let ops = |path| {
            self.contended
                .iter()
                .find(|c| c.path == path && c.hold_ms == hold_ms)
                .map_or(f64::NAN, RwCell::ops_per_sec)
        };
        ratio(ops(RwWaitPath::B), ops(RwWaitPath::Q))
    }
}

pub async fn run(server: &Server, plan: &Plan) -> ReadWrite {
    let uncontended = uncontended::run_read_write(server, plan).await;
    let mut control = connect(server).await;
    let shas = Arc::new(Shas::load(&mut control).await.expect("SCRIPT LOAD"));
    let mut contended = Vec::new();
    for &hold_ms in &plan.holds_ms {
        let mut row: Vec<RwCell> = RwWaitPath::ALL
            .iter()
            .map(|&path| RwCell {
                path,
                hold_ms,
                runs: Vec::new(),
            })
            .collect();
        for round in 0..plan.rounds {
            for cell in row.iter_mut() {
                let key = format!("bench:rw:{hold_ms}:{}:{round}", cell.path.letter());
                let run =
                    run_once(server, &mut control, &shas, cell.path, hold_ms, &key, plan).await;
                if plan.verbose {
                    eprintln!(
                        "  rwlock N={CLIENTS} hold={hold_ms} {} round {}: {:.0} ops/s ({:.0} writes/s), {:.2} tries/op, server {:.0}%{}",
                        cell.path.letter(),
                        round + 1,
                        run.ops_per_sec(),
                        run.writes_per_sec(),
                        run.tries_per_op(),
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
        contended.extend(row);
    }
    ReadWrite {
        uncontended,
        contended,
    }
}

/// Holders right now, as the clients report them: readers, and writers (at most one).
struct Shared {
    stop: AtomicBool,
    readers: AtomicI64,
    writers: AtomicI64,
    reads: AtomicU64,
    writes: AtomicU64,
    tries: AtomicU64,
    violations: AtomicU64,
    errors: AtomicU64,
}

impl Shared {
    fn acquired(&self, write: bool) {
        let bad = if write {
            self.writers.fetch_add(1, Ordering::SeqCst) != 0
                || self.readers.load(Ordering::SeqCst) != 0
        } else {
            self.readers.fetch_add(1, Ordering::SeqCst);
            self.writers.load(Ordering::SeqCst) != 0
        };
        if bad {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        let count = if write { &self.writes } else { &self.reads };
        count.fetch_add(1, Ordering::Relaxed);
    }

    fn releasing(&self, write: bool) {
        let side = if write { &self.writers } else { &self.readers };
        side.fetch_sub(1, Ordering::SeqCst);
    }

    fn error(&self, what: &str) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!("  rwlock: unexpected reply: {what}");
        }
    }

    fn counts(&self) -> [u64; 5] {
        [
            self.reads.load(Ordering::SeqCst),
            self.writes.load(Ordering::SeqCst),
            self.tries.load(Ordering::SeqCst),
            self.violations.load(Ordering::SeqCst),
            self.errors.load(Ordering::SeqCst),
        ]
    }
}

struct Client {
    path: RwWaitPath,
    con: MultiplexedConnection,
    key: Vec<u8>,
    owner: Vec<u8>,
    hold: Duration,
    shas: Arc<Shas>,
    shared: Arc<Shared>,
    rng: Rng,
    /// Q only: permits added by messages on the lock's channel.
    latch: Arc<Semaphore>,
    give_up: Instant,
}

impl Client {
    async fn run(mut self) {
        while !self.shared.stop.load(Ordering::SeqCst) && Instant::now() < self.give_up {
            let write = self.rng.below(100) >= READ_PERCENT;
            let got = match self.path {
                RwWaitPath::B => self.acquire_blocking(write).await,
                RwWaitPath::Q => self.acquire_redisson(write).await,
            };
            if !got {
                return;
            }
            self.shared.acquired(write);
            if !self.hold.is_zero() {
                let hold = self.hold;
                tokio::task::spawn_blocking(move || std::thread::sleep(hold))
                    .await
                    .expect("hold");
            }
            self.shared.releasing(write);
            let release = match (self.path, write) {
                (RwWaitPath::B, _) => {
                    let mut cmd = redis::cmd("RLOCK.RELEASE");
                    cmd.arg(&self.key).arg(&self.owner).arg(side(write));
                    cmd
                }
                (RwWaitPath::Q, false) => self.shas.read_unlock_cmd(&self.key, &self.owner),
                (RwWaitPath::Q, true) => {
                    self.shas.write_unlock_cmd(&self.key, LEASE_MS, &self.owner)
                }
            };
            let released = release.query_async::<Value>(&mut self.con).await;
            // Redisson's read unlock replies 0 while others still read.
            if !matches!(released, Ok(Value::Int(0 | 1))) {
                self.shared.error(&format!("release: {released:?}"));
                return;
            }
        }
    }

    /// True once held; false on an error.
    async fn acquire_blocking(&mut self, write: bool) -> bool {
        self.shared.tries.fetch_add(1, Ordering::Relaxed);
        let reply = redis::cmd("RLOCK.ACQUIRE")
            .arg(&self.key)
            .arg(&self.owner)
            .arg(side(write))
            .arg("BLOCK")
            .arg(0)
            .arg("LEASE")
            .arg(LEASE_MS)
            .query_async::<Value>(&mut self.con)
            .await;
        match reply {
            Ok(Value::Int(1)) => true,
            other => {
                self.shared.error(&format!("acquire: {other:?}"));
                false
            }
        }
    }

    /// Redisson's `lock()`: tryLock until it holds, waiting on the channel's latch for
    /// at most the TTL between tries. False on an error or when the run is over.
    async fn acquire_redisson(&mut self, write: bool) -> bool {
        loop {
            self.shared.tries.fetch_add(1, Ordering::Relaxed);
            let cmd = match write {
                true => self.shas.write_lock_cmd(&self.key, LEASE_MS, &self.owner),
                false => self.shas.read_lock_cmd(&self.key, LEASE_MS, &self.owner),
            };
            let ttl = match cmd.query_async::<Value>(&mut self.con).await {
                Ok(Value::Nil) => {
                    let stale = self.latch.available_permits();
                    if stale > 0 {
                        self.latch.forget_permits(stale);
                    }
                    return true;
                }
                Ok(Value::Int(ttl)) => ttl,
                other => {
                    self.shared.error(&format!("tryLock: {other:?}"));
                    return false;
                }
            };
            if self.shared.stop.load(Ordering::SeqCst) || Instant::now() >= self.give_up {
                return false;
            }
            let wait = Duration::from_millis(ttl.max(0) as u64);
            if let Ok(Ok(permit)) = tokio::time::timeout(wait, self.latch.acquire()).await {
                permit.forget();
            }
        }
    }
}

fn side(write: bool) -> &'static str {
    if write {
        "WRITE"
    } else {
        "READ"
    }
}

async fn run_once(
    server: &Server,
    control: &mut MultiplexedConnection,
    shas: &Arc<Shas>,
    path: RwWaitPath,
    hold_ms: u64,
    key: &str,
    plan: &Plan,
) -> RwRun {
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        readers: AtomicI64::new(0),
        writers: AtomicI64::new(0),
        reads: AtomicU64::new(0),
        writes: AtomicU64::new(0),
        tries: AtomicU64::new(0),
        violations: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    });
    let conns = connect_many(server, CLIENTS).await;
    let key_bytes = key.as_bytes().to_vec();
    let give_up = Instant::now() + plan.warmup() + plan.contended_run + Duration::from_secs(60);
    let mut listeners = Vec::new();
    let mut tasks = Vec::new();
    for (me, con) in conns.into_iter().enumerate() {
        let latch = Arc::new(Semaphore::new(0));
        if path == RwWaitPath::Q {
            // Each client stands for a JVM of its own: its own subscription. Redisson's
            // `LockPubSub` releases one waiter on `0` and all on `1`; with one waiter per
            // subscription, either wakes it.
            let mut pubsub = server
                .client()
                .get_async_pubsub()
                .await
                .expect("pub/sub connection");
            pubsub
                .subscribe(rw_channel(&key_bytes))
                .await
                .expect("SUBSCRIBE");
            let mut stream = pubsub.into_on_message();
            let latch = latch.clone();
            listeners.push(tokio::spawn(async move {
                while stream.next().await.is_some() {
                    latch.add_permits(1);
                }
            }));
        }
        let client = Client {
            path,
            con,
            key: key_bytes.clone(),
            owner: format!("{OWNER_PREFIX}:{me}").into_bytes(),
            hold: Duration::from_millis(hold_ms),
            shas: shas.clone(),
            shared: shared.clone(),
            rng: Rng::new(me as u64 * 7919 + hold_ms + 1),
            latch,
            give_up,
        };
        tasks.push(tokio::spawn(client.run()));
    }
    tokio::time::sleep(plan.warmup()).await;
    let c0 = shared.counts();
    let s0 = Snapshot::take(control).await;
    tokio::time::sleep(plan.contended_run).await;
    let s1 = Snapshot::take(control).await;
    let c1 = shared.counts();
    shared.stop.store(true, Ordering::SeqCst);
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
    let _: Value = redis::cmd("RLOCK.FORCERELEASE")
        .arg(key)
        .query_async(control)
        .await
        .expect("FORCERELEASE");
    let d = |i: usize| c1[i] - c0[i];
    RwRun {
        reads: d(0),
        writes: d(1),
        tries: d(2),
        violations: d(3),
        errors: d(4),
        stragglers,
        window: Window::between(&s0, &s1),
    }
}
