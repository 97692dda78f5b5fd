//! Scenario 4: the cost of one fair acquire/release cycle while Q owners queue.
//! R = RLOCK.ACQUIRE ... FAIR / RLOCK.RELEASE; F = the classic fair-lock Lua scripts,
//! which re-score every queued owner (ZRANGE + one ZINCRBY each) on every acquire.
//!
//! Setup: owner w0 holds the lock and w1..wQ queue behind it (Q polling fair acquires,
//! pipelined). One cycle, sent as one pipeline on one connection, one cycle at a time:
//! 1. the holder releases (the head is woken on its channel);
//! 2. the head acquires FAIR and takes the lock (Q - 1 owners stay queued);
//! 3. the old holder acquires FAIR again and queues at the tail (Q queued again).
//!
//! So the holder and the queue rotate and every cycle does the same logical job on both paths.

use std::collections::VecDeque;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;

use crate::harness::cells::errors_note;
use crate::harness::{Cells, Grid, Path};
use crate::measure::{connect, ratio, Snapshot, Window};
use crate::paths;
use crate::scripts::{FairKeys, FairShas};
use crate::{Plan, OWNER_PREFIX};

pub const LEASE_MS: u64 = 30_000;
/// Even a slow cell measures at least this many cycles.
pub const MIN_CYCLES: u64 = 5;
/// Queue set-up commands per pipeline.
const SETUP_BATCH: usize = 1000;

paths! {
    pub enum FairPath {
        R => "R", "RLOCK.ACQUIRE k o FAIR LEASE 30000 + RLOCK.RELEASE k o";
        F => "F", "EVALSHA classic fair tryLock (purge head, re-score every waiter on acquire, \
                 cumulative deadlines, threadWaitTime 300000) + fair unlock";
    }
}

impl FairPath {
    fn acquire(self, shas: &FairShas, keys: &FairKeys, owner: &[u8], now: u64) -> redis::Cmd {
        match self {
            FairPath::R => {
                let mut cmd = redis::cmd("RLOCK.ACQUIRE");
                cmd.arg(&keys.lock)
                    .arg(owner)
                    .arg("FAIR")
                    .arg("LEASE")
                    .arg(LEASE_MS);
                cmd
            }
            FairPath::F => shas.try_lock_cmd(keys, LEASE_MS, owner, now),
        }
    }

    fn release(self, shas: &FairShas, keys: &FairKeys, owner: &[u8], now: u64) -> redis::Cmd {
        match self {
            FairPath::R => {
                let mut cmd = redis::cmd("RLOCK.RELEASE");
                cmd.arg(&keys.lock).arg(owner);
                cmd
            }
            FairPath::F => shas.unlock_cmd(keys, LEASE_MS, owner, now),
        }
    }

    fn took(self, reply: &Value) -> bool {
        match self {
            FairPath::R => matches!(reply, Value::Int(1)),
            FairPath::F => matches!(reply, Value::Nil),
        }
    }

    fn queued(self, reply: &Value) -> bool {
        match self {
            FairPath::R => matches!(reply, Value::Nil),
            FairPath::F => matches!(reply, Value::Int(ttl) if *ttl > 0),
        }
    }
}

/// One measured run of one path at one queue length.
#[derive(Debug, Clone)]
pub struct FairRun {
    pub cycles: u64,
    pub errors: u64,
    pub window: Window,
    /// `MEMORY USAGE` (SAMPLES 0) of the queue list plus the deadline zset, with Q queued.
    pub queue_bytes: u64,
    /// Q.
    pub queued: usize,
}

crate::windowed!(FairRun {
    cycles_per_sec: cycles
});

impl FairRun {
    pub fn wall_us_per_cycle(&self) -> f64 {
        ratio(self.window.secs * 1e6, self.cycles as f64)
    }
    pub fn bytes_per_waiter(&self) -> f64 {
        ratio(self.queue_bytes as f64, self.queued as f64)
    }
}

crate::progress!(FairRun, |r| {
    format!(
            "{} cycles, {:.0} cycles/s, {:.1} us/cycle wall, {:.1} us/cycle server, server {:.0}% client {:.0}%, {:.1} B/waiter{}",
            r.cycles,
            r.cycles_per_sec(),
            r.wall_us_per_cycle(),
            r.window.server_us_per(r.cycles),
            r.window.server_busy(),
            r.window.client_busy(),
            r.queue_bytes as f64 / r.queued as f64,
            errors_note(r.errors)
    )
});

/// Scenario 4's runs: by path and queue length.
pub type Fair = Cells<FairPath, usize, FairRun>;

impl Fair {
    /// Server CPU per cycle of `a` over `b` (each at its own queue length).
    pub fn server_cost_ratio(&self, a: (FairPath, usize), b: (FairPath, usize)) -> f64 {
        self.cost_ratio(a, b, |r| r.window.server_us_per(r.cycles))
    }

    /// Wall time per cycle of `a` over `b`.
    pub fn wall_cost_ratio(&self, a: (FairPath, usize), b: (FairPath, usize)) -> f64 {
        self.cost_ratio(a, b, FairRun::wall_us_per_cycle)
    }

    fn cost_ratio(
        &self,
        a: (FairPath, usize),
        b: (FairPath, usize),
        f: impl Fn(&FairRun) -> f64 + Copy,
    ) -> f64 {
        match (self.cell(a.0, a.1), self.cell(b.0, b.1)) {
            (Some(a), Some(b)) => ratio(a.med(f), b.med(f)),
            _ => f64::NAN,
        }
    }
}

pub async fn run(server: &Server, plan: &Plan) -> Fair {
    let mut control = connect(server).await;
    let mut con = connect(server).await;
    let shas = FairShas::load(&mut control).await.expect("SCRIPT LOAD");
    // Q=10 R, F, Q=1000 R, F, ... in every round: drift hits every cell alike.
    let mut grid = Grid::new(&plan.fair_queues, &FairPath::ALL, plan).by_round();
    for turn in grid.turns() {
        let (path, queue) = grid.at(turn);
        let key = format!("bench:fair:{}:{queue}:{}", path.letter(), turn.round);
        let run = run_once(&mut con, &mut control, &shas, path, queue, &key, plan).await;
        grid.record(turn, &format!("fair Q={queue}"), run);
    }
    grid.done()
}

/// The lock's holder and its queue, as the client expects them to be.
struct Rotation {
    owners: Vec<Vec<u8>>,
    holder: usize,
    queue: VecDeque<usize>,
}

impl Rotation {
    fn new(queued: usize) -> Rotation {
        Rotation {
            owners: (0..=queued)
                .map(|i| format!("{OWNER_PREFIX}:w{i}").into_bytes())
                .collect(),
            holder: 0,
            queue: (1..=queued).collect(),
        }
    }

    fn holder(&self) -> &[u8] {
        &self.owners[self.holder]
    }

    fn head(&self) -> &[u8] {
        &self.owners[self.queue[0]]
    }

    /// The head took the lock; the old holder queued at the tail.
    fn rotate(&mut self) {
        let head = self.queue.pop_front().expect("a non-empty queue");
        self.queue.push_back(self.holder);
        self.holder = head;
    }
}

#[allow(clippy::too_many_arguments)]
async fn run_once(
    con: &mut MultiplexedConnection,
    control: &mut MultiplexedConnection,
    shas: &FairShas,
    path: FairPath,
    queued: usize,
    key: &str,
    plan: &Plan,
) -> FairRun {
    let keys = FairKeys::new(key.as_bytes());
    clear(control, &keys).await;
    let mut rotation = Rotation::new(queued);
    let mut errors = setup(con, shas, path, &keys, &rotation).await;
    let queue_bytes =
        memory_usage(control, &keys.queue).await + memory_usage(control, &keys.timeout).await;

    let mut cycles = 0;
    if errors == 0 {
        let warm_until = Instant::now() + plan.warmup();
        while Instant::now() < warm_until && errors == 0 {
            errors += cycle(con, shas, path, &keys, &mut rotation).await;
        }
    }
    let s0 = Snapshot::take(control).await;
    if errors == 0 {
        let until = s0.at + plan.fair_run;
        while errors == 0 && (Instant::now() < until || cycles < MIN_CYCLES) {
            match cycle(con, shas, path, &keys, &mut rotation).await {
                0 => cycles += 1,
                bad => errors += bad,
            }
        }
    }
    let s1 = Snapshot::take(control).await;
    if errors == 0 {
        errors += check_queue(control, &keys, &rotation).await;
    }
    clear(control, &keys).await;
    FairRun {
        cycles,
        errors,
        window: Window::between(&s0, &s1),
        queue_bytes,
        queued,
    }
}

/// The holder takes the lock and every other owner queues behind it, in order.
async fn setup(
    con: &mut MultiplexedConnection,
    shas: &FairShas,
    path: FairPath,
    keys: &FairKeys,
    rotation: &Rotation,
) -> u64 {
    let took: Value = path
        .acquire(shas, keys, rotation.holder(), now_ms())
        .query_async(con)
        .await
        .unwrap_or_else(|e| panic!("fair {} setup: {e}", path.letter()));
    if !path.took(&took) {
        eprintln!("  fair {}: the first owner got {took:?}", path.letter());
        return 1;
    }
    let order: Vec<usize> = rotation.queue.iter().copied().collect();
    let mut errors = 0;
    for batch in order.chunks(SETUP_BATCH) {
        let mut pipe = redis::pipe();
        for &i in batch {
            pipe.add_command(path.acquire(shas, keys, &rotation.owners[i], now_ms()));
        }
        let replies: Vec<Value> = pipe
            .query_async(con)
            .await
            .unwrap_or_else(|e| panic!("fair {} setup: {e}", path.letter()));
        errors += replies.iter().filter(|r| !path.queued(r)).count() as u64;
    }
    if errors > 0 {
        eprintln!("  fair {}: {errors} owners did not queue", path.letter());
    }
    errors
}

/// One cycle, one pipeline: release, the head takes the lock, the old holder re-queues.
/// Returns 1 on any unexpected reply.
async fn cycle(
    con: &mut MultiplexedConnection,
    shas: &FairShas,
    path: FairPath,
    keys: &FairKeys,
    rotation: &mut Rotation,
) -> u64 {
    let now = now_ms();
    let mut pipe = redis::pipe();
    pipe.add_command(path.release(shas, keys, rotation.holder(), now))
        .add_command(path.acquire(shas, keys, rotation.head(), now))
        .add_command(path.acquire(shas, keys, rotation.holder(), now));
    match pipe.query_async::<Vec<Value>>(con).await {
        Ok(r)
            if r.len() == 3 && r[0] == Value::Int(1) && path.took(&r[1]) && path.queued(&r[2]) =>
        {
            rotation.rotate();
            0
        }
        other => {
            eprintln!(
                "  fair {}: unexpected cycle replies {other:?}",
                path.letter()
            );
            1
        }
    }
}

/// The queue after the run is exactly the client's idea of it.
async fn check_queue(con: &mut MultiplexedConnection, keys: &FairKeys, rotation: &Rotation) -> u64 {
    let list: Vec<Vec<u8>> = redis::cmd("LRANGE")
        .arg(&keys.queue)
        .arg(0)
        .arg(-1)
        .query_async(con)
        .await
        .expect("LRANGE");
    let zcard: usize = redis::cmd("ZCARD")
        .arg(&keys.timeout)
        .query_async(con)
        .await
        .expect("ZCARD");
    let holder: Option<Vec<u8>> = redis::cmd("HGET")
        .arg(&keys.lock)
        .arg(rotation.holder())
        .query_async(con)
        .await
        .expect("HGET");
    let expected = rotation.queue.iter().map(|&i| &rotation.owners[i]);
    let in_order = list.len() == rotation.queue.len() && list.iter().eq(expected);
    if in_order && zcard == list.len() && holder.as_deref() == Some(b"1") {
        0
    } else {
        eprintln!(
            "  fair: after the run the queue has {} entries (zset {zcard}), expected {}; in order {in_order}; holder count {holder:?}",
            list.len(),
            rotation.queue.len()
        );
        1
    }
}

async fn memory_usage(con: &mut MultiplexedConnection, key: &[u8]) -> u64 {
    let bytes: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(con)
        .await
        .expect("MEMORY USAGE");
    bytes.unwrap_or(0)
}

async fn clear(con: &mut MultiplexedConnection, keys: &FairKeys) {
    let _: Value = redis::cmd("DEL")
        .arg(&keys.queue)
        .arg(&keys.timeout)
        .arg(&keys.lock)
        .query_async(con)
        .await
        .expect("DEL");
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
