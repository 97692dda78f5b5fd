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

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;

use crate::harness::load::{hold_for, seats, Seat, Trouble};
use crate::harness::wake::{any_message, forget_stale, wait_wakeup, Wakes};
use crate::harness::{self, measure_clients, Cell, Counts, Grid, Path, Windowed};
use crate::measure::{connect, ratio, Rng, Window};
use crate::paths;
use crate::scripts::{rw_channel, Shas};
use crate::uncontended::{self, Uncontended, LEASE_MS};
use crate::Plan;

/// Clients on the contended lock, and the share of their operations that read.
pub const CLIENTS: usize = 32;
pub const READ_PERCENT: u64 = 90;

paths! {
    pub enum RwWaitPath {
        B => "B", "RLOCK.ACQUIRE lock o READ|WRITE BLOCK 0 LEASE 30000, RLOCK.RELEASE lock o READ|WRITE";
        Q => "Q", "Redisson's read/write tryLock; on a miss wait for a message on redisson_rwlock:{lock} \
                 or the TTL, retry; Redisson's unlock";
    }
}

/// One measured run.
#[derive(Debug, Clone)]
pub struct RwRun {
    pub reads: u64,
    pub writes: u64,
    pub tries: u64,
    pub window: Window,
    pub trouble: Trouble,
}

crate::windowed!(RwRun {
    writes_per_sec: writes
});

impl RwRun {
    pub fn ops_per_sec(&self) -> f64 {
        self.per_sec(self.reads + self.writes)
    }
    pub fn tries_per_op(&self) -> f64 {
        ratio(self.tries as f64, (self.reads + self.writes) as f64)
    }
}

crate::progress!(RwRun, |r| {
    format!(
        "{:.0} ops/s ({:.0} writes/s), {:.2} tries/op, server {:.0}%{}",
        r.ops_per_sec(),
        r.writes_per_sec(),
        r.tries_per_op(),
        r.window.server_busy(),
        r.trouble.note()
    )
});

/// The contended runs: by path and hold time (ms).
pub type RwCell = Cell<RwWaitPath, u64, RwRun>;

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
                .find(|c| c.path == path && c.setting == hold_ms)
                .map_or(f64::NAN, |c| c.med(RwRun::ops_per_sec))
        };
        ratio(ops(RwWaitPath::B), ops(RwWaitPath::Q))
    }
}

pub async fn run(server: &Server, plan: &Plan) -> ReadWrite {
    let uncontended = uncontended::run_read_write(server, plan).await;
    let mut control = connect(server).await;
    let shas = Arc::new(Shas::load(&mut control).await.expect("SCRIPT LOAD"));
    let mut grid = Grid::new(&plan.holds_ms, &RwWaitPath::ALL, plan);
    for turn in grid.turns() {
        let (path, hold_ms) = grid.at(turn);
        let key = format!("bench:rw:{hold_ms}:{}:{}", path.letter(), turn.round);
        let run = run_once(server, &mut control, &shas, path, hold_ms, &key, plan).await;
        grid.record(turn, &format!("rwlock N={CLIENTS} hold={hold_ms}"), run);
    }
    let contended = grid.done().cells;
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
        harness::load::unexpected(&self.errors, "rwlock", what);
    }
}

impl harness::Shared for Shared {
    fn counts(&self) -> Counts {
        let totals = [
            &self.reads,
            &self.writes,
            &self.tries,
            &self.violations,
            &self.errors,
        ];
        Counts::read(&[], &totals)
    }

    fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }
}

struct Client {
    seat: Seat,
    path: RwWaitPath,
    shas: Arc<Shas>,
    shared: Arc<Shared>,
    rng: Rng,
}

impl Client {
    async fn run(mut self) {
        while !self.shared.stop.load(Ordering::SeqCst) && Instant::now() < self.seat.give_up {
            let write = self.rng.below(100) >= READ_PERCENT;
            let got = match self.path {
                RwWaitPath::B => self.acquire_blocking(write).await,
                RwWaitPath::Q => self.acquire_redisson(write).await,
            };
            if !got {
                return;
            }
            self.shared.acquired(write);
            hold_for(self.seat.hold).await;
            self.shared.releasing(write);
            let release = match (self.path, write) {
                (RwWaitPath::B, _) => {
                    let mut cmd = redis::cmd("RLOCK.RELEASE");
                    cmd.arg(&self.seat.key)
                        .arg(&self.seat.owner)
                        .arg(side(write));
                    cmd
                }
                (RwWaitPath::Q, false) => {
                    self.shas.read_unlock_cmd(&self.seat.key, &self.seat.owner)
                }
                (RwWaitPath::Q, true) => {
                    self.shas
                        .write_unlock_cmd(&self.seat.key, LEASE_MS, &self.seat.owner)
                }
            };
            let released = release.query_async::<Value>(&mut self.seat.con).await;
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
            .arg(&self.seat.key)
            .arg(&self.seat.owner)
            .arg(side(write))
            .arg("BLOCK")
            .arg(0)
            .arg("LEASE")
            .arg(LEASE_MS)
            .query_async::<Value>(&mut self.seat.con)
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
                true => self
                    .shas
                    .write_lock_cmd(&self.seat.key, LEASE_MS, &self.seat.owner),
                false => self
                    .shas
                    .read_lock_cmd(&self.seat.key, LEASE_MS, &self.seat.owner),
            };
            let ttl = match cmd.query_async::<Value>(&mut self.seat.con).await {
                Ok(Value::Nil) => {
                    forget_stale(&self.seat.latch);
                    return true;
                }
                Ok(Value::Int(ttl)) => ttl,
                other => {
                    self.shared.error(&format!("tryLock: {other:?}"));
                    return false;
                }
            };
            if self.shared.stop.load(Ordering::SeqCst) || Instant::now() >= self.seat.give_up {
                return false;
            }
            let wait = Duration::from_millis(ttl.max(0) as u64);
            wait_wakeup(&self.seat.latch, wait).await;
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
    // Each client stands for a JVM of its own: its own subscription. Redisson's `LockPubSub`
    // releases one waiter on `0` and all on `1`; with one waiter per subscription, either
    // wakes it.
    let channel = rw_channel(key.as_bytes());
    let listens = |_| (path == RwWaitPath::Q).then(|| (channel.clone(), any_message as Wakes));
    let client = |seat: Seat| {
        Client {
            rng: Rng::new(seat.me as u64 * 7919 + hold_ms + 1),
            seat,
            path,
            shas: shas.clone(),
            shared: shared.clone(),
        }
        .run()
    };
    let clients = seats(server, plan, CLIENTS, (key, hold_ms), listens).await;
    let m = measure_clients(control, plan, &*shared, clients, client).await;
    let trouble = Trouble::of(&m, 3, 4);
    RwRun {
        reads: m.totals[0],
        writes: m.totals[1],
        tries: m.totals[2],
        trouble,
        window: m.window,
    }
}
