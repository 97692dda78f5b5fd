//! Scenario 2: N clients hand one lock around, each looping acquire, hold, release.
//! B = RLOCK.ACQUIRE ... BLOCK 0 (the server queues and hands off),
//! P = RLOCK.ACQUIRE without BLOCK, retried 10 ms after a miss (as redis-semaphore does),
//! Q = Redisson: Lua tryLock; on a miss wait for an unlock message or the holder's TTL.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;
use tokio::sync::Semaphore;

use crate::measure::{connect, median, percentile, ratio, Snapshot, Window};
use crate::scripts::{unlock_channel, Shas};
use crate::{Plan, OWNER_PREFIX};

const LEASE_MS: u64 = 30_000;
/// redis-semaphore's default retry delay.
pub const POLL_MS: u64 = 10;
const NONE: usize = usize::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPath {
    B,
    P,
    Q,
}

impl WaitPath {
    pub const ALL: [WaitPath; 3] = [WaitPath::B, WaitPath::P, WaitPath::Q];

    pub fn letter(self) -> &'static str {
        match self {
            WaitPath::B => "B",
            WaitPath::P => "P",
            WaitPath::Q => "Q",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            WaitPath::B => "RLOCK.ACQUIRE lock o BLOCK 0 LEASE 30000, RLOCK.RELEASE",
            WaitPath::P => "RLOCK.ACQUIRE lock o LEASE 30000, sleep 10 ms on null, RLOCK.RELEASE",
            WaitPath::Q => "Lua tryLock; on a miss wait for `0` on redisson_lock__channel:{lock} or the TTL; Lua unlock",
        }
    }
}

/// One measured run: counts inside the window only.
#[derive(Debug, Clone)]
pub struct WaitRun {
    pub acquisitions: u64,
    /// Acquisitions by a client other than the previous holder (every one when N = 1).
    pub handoffs: u64,
    /// Acquire attempts sent (polls, tryLock calls, BLOCK calls).
    pub tries: u64,
    pub per_client: Vec<u64>,
    /// Hand-off latency percentiles, ms (NaN without hand-offs).
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub window: Window,
    pub violations: u64,
    pub errors: u64,
    pub stragglers: u64,
}

impl WaitRun {
    pub fn handoffs_per_sec(&self) -> f64 {
        self.handoffs as f64 / self.window.secs
    }
    pub fn acquisitions_per_sec(&self) -> f64 {
        self.acquisitions as f64 / self.window.secs
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
    pub fn tries_per_handoff(&self) -> f64 {
        ratio(self.tries as f64, self.handoffs as f64)
    }
}

#[derive(Debug, Clone)]
pub struct WaitCell {
    pub path: WaitPath,
    pub clients: usize,
    pub hold_ms: u64,
    pub runs: Vec<WaitRun>,
}

impl WaitCell {
    fn med(&self, f: impl Fn(&WaitRun) -> f64) -> f64 {
        median(self.runs.iter().map(f))
    }
    pub fn handoffs_per_sec(&self) -> f64 {
        self.med(WaitRun::handoffs_per_sec)
    }
    pub fn acquisitions_per_sec(&self) -> f64 {
        self.med(WaitRun::acquisitions_per_sec)
    }
    pub fn p50_ms(&self) -> f64 {
        self.med(|r| r.p50_ms)
    }
    pub fn p99_ms(&self) -> f64 {
        self.med(|r| r.p99_ms)
    }
    pub fn fairness(&self) -> f64 {
        self.med(WaitRun::fairness)
    }
    pub fn tries_per_handoff(&self) -> f64 {
        self.med(WaitRun::tries_per_handoff)
    }
    pub fn server_us_per_handoff(&self) -> f64 {
        self.med(|r| r.window.server_us_per(r.handoffs))
    }
    pub fn server_busy(&self) -> f64 {
        self.med(|r| r.window.server_busy())
    }
    pub fn client_busy(&self) -> f64 {
        self.med(|r| r.window.client_busy())
    }
    pub fn violations(&self) -> u64 {
        self.runs.iter().map(|r| r.violations).sum()
    }
    pub fn errors(&self) -> u64 {
        self.runs.iter().map(|r| r.errors + r.stragglers).sum()
    }
}

#[derive(Debug, Clone)]
pub struct Contended {
    pub cells: Vec<WaitCell>,
}

impl Contended {
    pub fn cell(&self, path: WaitPath, clients: usize, hold_ms: u64) -> Option<&WaitCell> {
        self.cells
            .iter()
            .find(|c| c.path == path && c.clients == clients && c.hold_ms == hold_ms)
    }

    /// Ratio of median hand-offs/s, `a / b`, in one cell.
    pub fn ratio(&self, a: WaitPath, b: WaitPath, clients: usize, hold_ms: u64) -> f64 {
        match (
            self.cell(a, clients, hold_ms),
            self.cell(b, clients, hold_ms),
        ) {
            (Some(a), Some(b)) => ratio(a.handoffs_per_sec(), b.handoffs_per_sec()),
            _ => f64::NAN,
        }
    }
}

pub async fn run(server: &Server, plan: &Plan) -> Contended {
    let mut control = connect(server).await;
    let shas = Arc::new(Shas::load(&mut control).await.expect("SCRIPT LOAD"));
    let mut cells = Vec::new();
    for &clients in &plan.clients {
        for &hold_ms in &plan.holds_ms {
            let mut row: Vec<WaitCell> = WaitPath::ALL
                .iter()
                .map(|&path| WaitCell {
                    path,
                    clients,
                    hold_ms,
                    runs: Vec::new(),
                })
                .collect();
            for round in 0..plan.rounds {
                for cell in row.iter_mut() {
                    let key = format!(
                        "bench:handoff:{clients}:{hold_ms}:{}:{round}",
                        cell.path.letter()
                    );
                    let run = run_once(
                        server,
                        &mut control,
                        &shas,
                        &vec![cell.path; clients],
                        hold_ms,
                        &key,
                        plan,
                    )
                    .await;
                    if plan.verbose {
                        eprintln!(
                            "  contended N={clients} hold={hold_ms} {} round {}: {:.0} hand-offs/s ({:.0} acq/s), p50 {:.3} ms p99 {:.3} ms, min/max {:.2}, {:.1} tries/hand-off, {:.1} us/hand-off server, server {:.0}% client {:.0}%{}",
                            cell.path.letter(),
                            round + 1,
                            run.handoffs_per_sec(),
                            run.acquisitions_per_sec(),
                            run.p50_ms,
                            run.p99_ms,
                            run.fairness(),
                            run.tries_per_handoff(),
                            run.window.server_us_per(run.handoffs),
                            run.window.server_busy(),
                            run.window.client_busy(),
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
    }
    Contended { cells }
}

/// What every client of one run shares. All clients live in this process, so one
/// monotonic clock times a hand-off from the release being sent to the next grant.
struct Shared {
    epoch: Instant,
    clients: usize,
    stop: AtomicBool,
    measuring: AtomicBool,
    holder: AtomicUsize,
    last_holder: AtomicUsize,
    release_sent_ns: AtomicU64,
    acquisitions: Vec<AtomicU64>,
    handoffs: AtomicU64,
    tries: AtomicU64,
    violations: AtomicU64,
    errors: AtomicU64,
    latencies_ms: Mutex<Vec<f64>>,
}

impl Shared {
    fn new(clients: usize) -> Shared {
        Shared {
            epoch: Instant::now(),
            clients,
            stop: AtomicBool::new(false),
            measuring: AtomicBool::new(false),
            holder: AtomicUsize::new(NONE),
            last_holder: AtomicUsize::new(NONE),
            release_sent_ns: AtomicU64::new(0),
            acquisitions: (0..clients).map(|_| AtomicU64::new(0)).collect(),
            handoffs: AtomicU64::new(0),
            tries: AtomicU64::new(0),
            violations: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latencies_ms: Mutex::new(Vec::new()),
        }
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn tried(&self) {
        self.tries.fetch_add(1, Ordering::Relaxed);
    }

    fn error(&self, what: &str) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            eprintln!("  contended: unexpected reply: {what}");
        }
    }

    fn acquired(&self, me: usize) {
        let now = self.now_ns();
        if self
            .holder
            .compare_exchange(NONE, me, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            self.violations.fetch_add(1, Ordering::SeqCst);
            self.holder.store(me, Ordering::SeqCst);
        }
        self.acquisitions[me].fetch_add(1, Ordering::Relaxed);
        let previous = self.last_holder.swap(me, Ordering::SeqCst);
        if previous == NONE || (previous == me && self.clients > 1) {
            return;
        }
        self.handoffs.fetch_add(1, Ordering::Relaxed);
        if self.measuring.load(Ordering::SeqCst) {
            let sent = self.release_sent_ns.load(Ordering::SeqCst);
            let ms = now.saturating_sub(sent) as f64 / 1e6;
            self.latencies_ms.lock().expect("latencies").push(ms);
        }
    }

    /// Called just before the release is sent.
    fn releasing(&self, me: usize) {
        if self
            .holder
            .compare_exchange(me, NONE, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            self.violations.fetch_add(1, Ordering::SeqCst);
            self.holder.store(NONE, Ordering::SeqCst);
        }
        self.release_sent_ns.store(self.now_ns(), Ordering::SeqCst);
    }

    fn counts(&self) -> (Vec<u64>, u64, u64, u64, u64) {
        (
            self.acquisitions
                .iter()
                .map(|a| a.load(Ordering::SeqCst))
                .collect(),
            self.handoffs.load(Ordering::SeqCst),
            self.tries.load(Ordering::SeqCst),
            self.violations.load(Ordering::SeqCst),
            self.errors.load(Ordering::SeqCst),
        )
    }
}

struct Client {
    me: usize,
    path: WaitPath,
    con: MultiplexedConnection,
    key: Vec<u8>,
    owner: Vec<u8>,
    hold: Duration,
    shas: Arc<Shas>,
    shared: Arc<Shared>,
    /// Q only: permits added by unlock messages, as Redisson's `RedissonLockEntry` latch.
    latch: Arc<Semaphore>,
    /// Q only: the wait bound (Redisson's remaining `waitTime`).
    give_up: Instant,
}

impl Client {
    async fn run(mut self) {
        while !self.shared.stopping() && Instant::now() < self.give_up {
            self.shared.tried();
            let got = match self.path {
                WaitPath::B => self.acquire_rlock(true).await,
                WaitPath::P => self.acquire_rlock(false).await,
                WaitPath::Q => self.try_lock_redisson().await,
            };
            let Some(got) = got else { return };
            if !got {
                match self.path {
                    WaitPath::B => {
                        self.shared.error("BLOCK 0 returned null");
                        return;
                    }
                    WaitPath::P => tokio::time::sleep(Duration::from_millis(POLL_MS)).await,
                    WaitPath::Q => {} // try_lock_redisson waited already
                }
                continue;
            }
            self.shared.acquired(self.me);
            if !self.hold.is_zero() {
                // tokio's timer wheel rounds up to whole ms (a 1 ms sleep takes ~2 ms);
                // a blocking thread's sleep holds for what was asked.
                let hold = self.hold;
                tokio::task::spawn_blocking(move || std::thread::sleep(hold))
                    .await
                    .expect("hold");
            }
            self.shared.releasing(self.me);
            let released = match self.path {
                WaitPath::B | WaitPath::P => {
                    redis::cmd("RLOCK.RELEASE")
                        .arg(&self.key)
                        .arg(&self.owner)
                        .query_async::<Value>(&mut self.con)
                        .await
                }
                WaitPath::Q => {
                    self.shas
                        .unlock_cmd(&self.key, LEASE_MS, &self.owner)
                        .query_async::<Value>(&mut self.con)
                        .await
                }
            };
            if !matches!(released, Ok(Value::Int(1))) {
                self.shared.error(&format!("release: {released:?}"));
                return;
            }
        }
    }

    /// Some(true) acquired, Some(false) busy, None on error.
    async fn acquire_rlock(&mut self, block: bool) -> Option<bool> {
        let mut cmd = redis::cmd("RLOCK.ACQUIRE");
        cmd.arg(&self.key).arg(&self.owner);
        if block {
            cmd.arg("BLOCK").arg(0);
        }
        cmd.arg("LEASE").arg(LEASE_MS);
        match cmd.query_async::<Value>(&mut self.con).await {
            Ok(Value::Int(1)) => Some(true),
            Ok(Value::Nil) => Some(false),
            other => {
                self.shared.error(&format!("acquire: {other:?}"));
                None
            }
        }
    }

    /// One turn of Redisson's `lock()` loop: tryLock; on a miss, wait on the latch
    /// for min(ttl, remaining wait) (`RedissonLock.lock`/`tryLock`).
    async fn try_lock_redisson(&mut self) -> Option<bool> {
        let reply = self
            .shas
            .try_lock_cmd(&self.key, LEASE_MS, &self.owner)
            .query_async::<Value>(&mut self.con)
            .await;
        let ttl = match reply {
            Ok(Value::Nil) => {
                // Redisson unsubscribes once it holds the lock and starts a fresh
                // latch next time: forget wake-ups that arrived meanwhile.
                let stale = self.latch.available_permits();
                if stale > 0 {
                    self.latch.forget_permits(stale);
                }
                return Some(true);
            }
            Ok(Value::Int(ttl)) => ttl,
            other => {
                self.shared.error(&format!("tryLock: {other:?}"));
                return None;
            }
        };
        let remaining = self.give_up.saturating_duration_since(Instant::now());
        let wait = if ttl >= 0 {
            remaining.min(Duration::from_millis(ttl as u64))
        } else {
            remaining
        };
        if let Ok(Ok(permit)) = tokio::time::timeout(wait, self.latch.acquire()).await {
            permit.forget();
        }
        Some(false)
    }
}

/// One measured run: client `i` waits by `paths[i]`.
pub async fn run_once(
    server: &Server,
    control: &mut MultiplexedConnection,
    shas: &Arc<Shas>,
    paths: &[WaitPath],
    hold_ms: u64,
    key: &str,
    plan: &Plan,
) -> WaitRun {
    let clients = paths.len();
    let shared = Arc::new(Shared::new(clients));
    let conns = crate::measure::connect_many(server, clients).await;
    let key_bytes = key.as_bytes().to_vec();
    let give_up = Instant::now() + plan.warmup() + plan.contended_run + Duration::from_secs(60);
    let mut listeners = Vec::new();
    let mut latches = Vec::new();
    for &path in paths {
        let latch = Arc::new(Semaphore::new(0));
        if path == WaitPath::Q {
            let mut pubsub = server
                .client()
                .get_async_pubsub()
                .await
                .expect("pub/sub connection");
            pubsub
                .subscribe(unlock_channel(&key_bytes))
                .await
                .expect("SUBSCRIBE");
            let mut stream = pubsub.into_on_message();
            let latch = latch.clone();
            listeners.push(tokio::spawn(async move {
                while let Some(msg) = stream.next().await {
                    if msg.get_payload_bytes() == b"0" {
                        latch.add_permits(1);
                    }
                }
            }));
        }
        latches.push(latch);
    }
    let mut tasks = Vec::new();
    for (me, (con, latch)) in conns.into_iter().zip(latches).enumerate() {
        let client = Client {
            me,
            path: paths[me],
            con,
            key: key_bytes.clone(),
            owner: format!("{OWNER_PREFIX}:{me}").into_bytes(),
            hold: Duration::from_millis(hold_ms),
            shas: shas.clone(),
            shared: shared.clone(),
            latch,
            give_up,
        };
        tasks.push(tokio::spawn(client.run()));
    }

    tokio::time::sleep(plan.warmup()).await;
    let (acq0, h0, t0, v0, e0) = shared.counts();
    shared.measuring.store(true, Ordering::SeqCst);
    let s0 = Snapshot::take(control).await;
    tokio::time::sleep(plan.contended_run).await;
    let s1 = Snapshot::take(control).await;
    shared.measuring.store(false, Ordering::SeqCst);
    let (acq1, h1, t1, v1, e1) = shared.counts();
    shared.stop.store(true, Ordering::SeqCst);

    // Everyone leaves once they next hold the lock (B, Q) or wake (P); a client
    // still stuck after the grace period is cut off and counted.
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

    let mut latencies = std::mem::take(&mut *shared.latencies_ms.lock().expect("latencies"));
    latencies.sort_by(f64::total_cmp);
    let per_client: Vec<u64> = acq1.iter().zip(&acq0).map(|(b, a)| b - a).collect();
    WaitRun {
        acquisitions: per_client.iter().sum(),
        handoffs: h1 - h0,
        tries: t1 - t0,
        per_client,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        window: Window::between(&s0, &s1),
        violations: v1 - v0,
        errors: e1 - e0,
        stragglers,
    }
}
