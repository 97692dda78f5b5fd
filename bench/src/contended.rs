//! Scenario 2: N clients hand one lock around, each looping acquire, hold, release.
//! B = RLOCK.ACQUIRE ... BLOCK 0 (the server queues and hands off),
//! P = RLOCK.ACQUIRE without BLOCK, retried 10 ms after a miss (as redis-semaphore does),
//! Q = Redisson: Lua tryLock; on a miss wait for an unlock message or the holder's TTL;
//! BLPOP = no lock at all: one token in a list, taken by `BLPOP` and put back by `RPUSH`, the
//! server's own blocking hand-off, as the floor a hand-off's latency is measured against.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;

use crate::harness::cells::min_over_max;
use crate::harness::load::{hold_for, seats, Seat, Trouble};
use crate::harness::wake::{forget_stale, ttl_wait, unlock_message, wait_wakeup, Wakes};
use crate::harness::{self, measure_clients, Cells, Counts, Grid, Path};
use crate::measure::{connect, percentile, ratio, Window};
use crate::paths;
use crate::scripts::{unlock_channel, Shas};
use crate::Plan;

const LEASE_MS: u64 = 30_000;
/// redis-semaphore's default retry delay.
pub const POLL_MS: u64 = 10;
const NONE: usize = usize::MAX;
/// The one element of the BLPOP path's list.
const TOKEN: &str = "token";

paths! {
    pub enum WaitPath {
        B => "B", "RLOCK.ACQUIRE lock o BLOCK 0 LEASE 30000, RLOCK.RELEASE";
        P => "P", "RLOCK.ACQUIRE lock o LEASE 30000, sleep 10 ms on null, RLOCK.RELEASE";
        Q => "Q", "Lua tryLock; on a miss wait for `0` on redisson_lock__channel:{lock} or the TTL; Lua unlock";
        Blpop => "BLPOP", "BLPOP list 0 takes the one token, RPUSH list token puts it back (no lease, no owner)";
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
    pub trouble: Trouble,
}

crate::windowed!(WaitRun {
    handoffs_per_sec: handoffs,
    acquisitions_per_sec: acquisitions,
});

impl WaitRun {
    /// min/max acquisitions per client; 1.0 is perfectly even.
    pub fn fairness(&self) -> f64 {
        min_over_max(&self.per_client)
    }
    pub fn tries_per_handoff(&self) -> f64 {
        ratio(self.tries as f64, self.handoffs as f64)
    }
}

crate::progress!(WaitRun, |r| {
    format!(
            "{:.0} hand-offs/s ({:.0} acq/s), p50 {:.3} ms p99 {:.3} ms, min/max {:.2}, {:.1} tries/hand-off, {:.1} us/hand-off server, server {:.0}% client {:.0}%{}",
            r.handoffs_per_sec(),
            r.acquisitions_per_sec(),
            r.p50_ms,
            r.p99_ms,
            r.fairness(),
            r.tries_per_handoff(),
            r.window.server_us_per(r.handoffs),
            r.window.server_busy(),
            r.window.client_busy(),
            r.trouble.note()
    )
});

/// Scenario 2's runs: by path, and by clients and hold time (ms).
pub type Contended = Cells<WaitPath, (usize, u64), WaitRun>;

impl Contended {
    /// Ratio of median hand-offs/s, `a / b`, in one cell.
    pub fn handoff_ratio(&self, a: WaitPath, b: WaitPath, clients: usize, hold_ms: u64) -> f64 {
        self.ratio(a, b, (clients, hold_ms), |c| {
            c.med(WaitRun::handoffs_per_sec)
        })
    }
}

pub async fn run(server: &Server, plan: &Plan) -> Contended {
    let mut control = connect(server).await;
    let shas = Arc::new(Shas::load(&mut control).await.expect("SCRIPT LOAD"));
    let settings: Vec<(usize, u64)> = plan
        .clients
        .iter()
        .flat_map(|&c| plan.holds_ms.iter().map(move |&h| (c, h)))
        .collect();
    let mut grid = Grid::new(&settings, &WaitPath::ALL, plan);
    for turn in grid.turns() {
        let (path, (clients, hold_ms)) = grid.at(turn);
        let key = format!(
            "bench:handoff:{clients}:{hold_ms}:{}:{}",
            path.letter(),
            turn.round
        );
        let paths = vec![path; clients];
        let run = run_once(server, &mut control, &shas, &paths, hold_ms, &key, plan).await;
        grid.record(turn, &format!("contended N={clients} hold={hold_ms}"), run);
    }
    grid.done()
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
    /// What clears the run's key: the lock's forced release, or `DEL` of the token list.
    cleanup: &'static str,
}

impl Shared {
    fn new(clients: usize, cleanup: &'static str) -> Shared {
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
            cleanup,
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
        harness::load::unexpected(&self.errors, "contended", what);
    }

    /// The holder passes from `from` to `to`; any other holder is a violation (and `to` holds
    /// all the same).
    fn pass(&self, from: usize, to: usize) {
        if self
            .holder
            .compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            self.violations.fetch_add(1, Ordering::SeqCst);
            self.holder.store(to, Ordering::SeqCst);
        }
    }

    fn acquired(&self, me: usize) {
        let now = self.now_ns();
        self.pass(NONE, me);
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
        self.pass(me, NONE);
        self.release_sent_ns.store(self.now_ns(), Ordering::SeqCst);
    }
}

impl harness::Shared for Shared {
    fn counts(&self) -> Counts {
        let totals = [&self.handoffs, &self.tries, &self.violations, &self.errors];
        Counts::read(&self.acquisitions, &totals)
    }

    fn stop_flag(&self) -> &AtomicBool {
        &self.stop
    }

    fn measuring(&self, on: bool) {
        self.measuring.store(on, Ordering::SeqCst);
    }

    fn cleanup(&self) -> &'static str {
        self.cleanup
    }
}

struct Client {
    seat: Seat,
    path: WaitPath,
    shas: Arc<Shas>,
    shared: Arc<Shared>,
}

impl Client {
    async fn run(mut self) {
        while !self.shared.stopping() && Instant::now() < self.seat.give_up {
            self.shared.tried();
            let got = match self.path {
                WaitPath::B => self.acquire_rlock(true).await,
                WaitPath::P => self.acquire_rlock(false).await,
                WaitPath::Q => self.try_lock_redisson().await,
                WaitPath::Blpop => self.take_token().await,
            };
            let Some(got) = got else { return };
            if !got {
                match self.path {
                    WaitPath::B | WaitPath::Blpop => {
                        self.shared.error("a wait without a timeout returned null");
                        return;
                    }
                    WaitPath::P => tokio::time::sleep(Duration::from_millis(POLL_MS)).await,
                    WaitPath::Q => {} // try_lock_redisson waited already
                }
                continue;
            }
            self.shared.acquired(self.seat.me);
            hold_for(self.seat.hold).await;
            self.shared.releasing(self.seat.me);
            let released = match self.path {
                WaitPath::B | WaitPath::P => {
                    redis::cmd("RLOCK.RELEASE")
                        .arg(&self.seat.key)
                        .arg(&self.seat.owner)
                        .query_async::<Value>(&mut self.seat.con)
                        .await
                }
                WaitPath::Q => {
                    self.shas
                        .unlock_cmd(&self.seat.key, LEASE_MS, &self.seat.owner)
                        .query_async::<Value>(&mut self.seat.con)
                        .await
                }
                // The list held no token while this client had it: the push makes it one long.
                WaitPath::Blpop => {
                    redis::cmd("RPUSH")
                        .arg(&self.seat.key)
                        .arg(TOKEN)
                        .query_async::<Value>(&mut self.seat.con)
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
        cmd.arg(&self.seat.key).arg(&self.seat.owner);
        if block {
            cmd.arg("BLOCK").arg(0);
        }
        cmd.arg("LEASE").arg(LEASE_MS);
        match cmd.query_async::<Value>(&mut self.seat.con).await {
            Ok(Value::Int(1)) => Some(true),
            Ok(Value::Nil) => Some(false),
            other => {
                self.shared.error(&format!("acquire: {other:?}"));
                None
            }
        }
    }

    /// `BLPOP key 0`: Some(true) with the token, None on anything else.
    async fn take_token(&mut self) -> Option<bool> {
        let reply = redis::cmd("BLPOP")
            .arg(&self.seat.key)
            .arg(0)
            .query_async::<Value>(&mut self.seat.con)
            .await;
        match reply {
            Ok(Value::Array(ref kv)) if kv.len() == 2 => Some(true),
            other => {
                self.shared.error(&format!("BLPOP: {other:?}"));
                None
            }
        }
    }

    /// One turn of Redisson's `lock()` loop: tryLock; on a miss, wait on the latch
    /// for min(ttl, remaining wait) (`RedissonLock.lock`/`tryLock`).
    async fn try_lock_redisson(&mut self) -> Option<bool> {
        let reply = self
            .shas
            .try_lock_cmd(&self.seat.key, LEASE_MS, &self.seat.owner)
            .query_async::<Value>(&mut self.seat.con)
            .await;
        let ttl = match reply {
            Ok(Value::Nil) => {
                forget_stale(&self.seat.latch);
                return Some(true);
            }
            Ok(Value::Int(ttl)) => ttl,
            other => {
                self.shared.error(&format!("tryLock: {other:?}"));
                return None;
            }
        };
        let remaining = self.seat.give_up.saturating_duration_since(Instant::now());
        wait_wakeup(&self.seat.latch, ttl_wait(ttl, remaining)).await;
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
    let tokens = paths.contains(&WaitPath::Blpop);
    let shared = Arc::new(Shared::new(
        clients,
        if tokens { "DEL" } else { "RLOCK.FORCERELEASE" },
    ));
    let key_bytes = key.as_bytes().to_vec();
    if tokens {
        let _: Value = redis::cmd("RPUSH")
            .arg(key)
            .arg(TOKEN)
            .query_async(control)
            .await
            .expect("the BLPOP path's token");
    }
    let listens = |me: usize| {
        (paths[me] == WaitPath::Q).then(|| (unlock_channel(&key_bytes), unlock_message as Wakes))
    };
    let client = |seat: Seat| {
        Client {
            path: paths[seat.me],
            seat,
            shas: shas.clone(),
            shared: shared.clone(),
        }
        .run()
    };
    let clients = seats(server, plan, clients, (key, hold_ms), listens).await;
    let m = measure_clients(control, plan, &*shared, clients, client).await;

    let mut latencies = std::mem::take(&mut *shared.latencies_ms.lock().expect("latencies"));
    latencies.sort_by(f64::total_cmp);
    let trouble = Trouble::of(&m, 2, 3);
    WaitRun {
        acquisitions: m.per_client.iter().sum(),
        handoffs: m.totals[0],
        tries: m.totals[1],
        per_client: m.per_client,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        window: m.window,
        trouble,
    }
}
