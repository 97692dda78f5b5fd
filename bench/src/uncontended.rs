//! Scenario 1: uncontended acquire/release pairs on many distinct keys.
//! R = RLOCK.ACQUIRE/RELEASE, L = Redisson's Lua scripts by EVALSHA, S = SET NX PX / DEL.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;

use crate::measure::{connect_many, median, ratio, Rng, Snapshot, Window};
use crate::scripts::Shas;
use crate::{Plan, OWNER_PREFIX};

pub const LEASE_MS: u64 = 30_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairPath {
    R,
    L,
    S,
    /// Scenario 5 only: R with FAIR.
    RF,
    /// Scenario 5 only: R with a fresh `REQ id` on each call.
    RQ,
    /// Scenario 10: a read hold (`READ`), then its release.
    RR,
    /// Scenario 10: Redisson's read lock and unlock scripts.
    LR,
    /// Scenario 10: a write hold (`WRITE`), then its release.
    RW,
    /// Scenario 10: Redisson's write lock and unlock scripts.
    LW,
}

/// `REQ` ids, unique for the whole run so that no call replays another's record.
static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

fn request_id() -> String {
    format!("{:x}", NEXT_REQUEST.fetch_add(1, Ordering::Relaxed))
}

impl PairPath {
    /// Scenario 1.
    pub const ALL: [PairPath; 3] = [PairPath::R, PairPath::L, PairPath::S];
    /// Scenario 5: plain, then FAIR, then with REQ.
    pub const FAIR_VS_PLAIN: [PairPath; 3] = [PairPath::R, PairPath::RF, PairPath::RQ];
    /// Scenario 10: read-write lock pairs against Redisson's scripts.
    pub const READ_WRITE: [PairPath; 4] = [PairPath::RR, PairPath::LR, PairPath::RW, PairPath::LW];

    pub fn letter(self) -> &'static str {
        match self {
            PairPath::R => "R",
            PairPath::L => "L",
            PairPath::S => "S",
            PairPath::RF => "RF",
            PairPath::RQ => "RQ",
            PairPath::RR => "RR",
            PairPath::LR => "LR",
            PairPath::RW => "RW",
            PairPath::LW => "LW",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            PairPath::R => "RLOCK.ACQUIRE k o LEASE 30000 + RLOCK.RELEASE k o",
            PairPath::L => "EVALSHA Redisson tryLock + unlock",
            PairPath::S => "SET k o NX PX 30000 + DEL k",
            PairPath::RF => "RLOCK.ACQUIRE k o FAIR LEASE 30000 + RLOCK.RELEASE k o",
            PairPath::RQ => {
                "RLOCK.ACQUIRE k o LEASE 30000 REQ id1 + RLOCK.RELEASE k o REQ id2 (a record key each)"
            }
            PairPath::RR => "RLOCK.ACQUIRE k o READ LEASE 30000 + RLOCK.RELEASE k o READ",
            PairPath::LR => "EVALSHA Redisson read lock + read unlock (RedissonReadLock)",
            PairPath::RW => "RLOCK.ACQUIRE k o WRITE LEASE 30000 + RLOCK.RELEASE k o WRITE",
            PairPath::LW => "EVALSHA Redisson write lock + write unlock (RedissonWriteLock)",
        }
    }

    fn acquire(self, shas: &Shas, key: &[u8], owner: &[u8]) -> redis::Cmd {
        match self {
            PairPath::R => {
                let mut cmd = redis::cmd("RLOCK.ACQUIRE");
                cmd.arg(key).arg(owner).arg("LEASE").arg(LEASE_MS);
                cmd
            }
            PairPath::RF => {
                let mut cmd = redis::cmd("RLOCK.ACQUIRE");
                cmd.arg(key)
                    .arg(owner)
                    .arg("FAIR")
                    .arg("LEASE")
                    .arg(LEASE_MS);
                cmd
            }
            PairPath::RQ => {
                let mut cmd = redis::cmd("RLOCK.ACQUIRE");
                cmd.arg(key)
                    .arg(owner)
                    .arg("LEASE")
                    .arg(LEASE_MS)
                    .arg("REQ")
                    .arg(request_id());
                cmd
            }
            PairPath::L => shas.try_lock_cmd(key, LEASE_MS, owner),
            PairPath::RR | PairPath::RW => {
                let mut cmd = redis::cmd("RLOCK.ACQUIRE");
                cmd.arg(key)
                    .arg(owner)
                    .arg(self.side())
                    .arg("LEASE")
                    .arg(LEASE_MS);
                cmd
            }
            PairPath::LR => shas.read_lock_cmd(key, LEASE_MS, owner),
            PairPath::LW => shas.write_lock_cmd(key, LEASE_MS, owner),
            PairPath::S => {
                let mut cmd = redis::cmd("SET");
                cmd.arg(key).arg(owner).arg("NX").arg("PX").arg(LEASE_MS);
                cmd
            }
        }
    }

    fn release(self, shas: &Shas, key: &[u8], owner: &[u8]) -> redis::Cmd {
        match self {
            PairPath::R | PairPath::RF => {
                let mut cmd = redis::cmd("RLOCK.RELEASE");
                cmd.arg(key).arg(owner);
                cmd
            }
            PairPath::RQ => {
                let mut cmd = redis::cmd("RLOCK.RELEASE");
                cmd.arg(key).arg(owner).arg("REQ").arg(request_id());
                cmd
            }
            PairPath::L => shas.unlock_cmd(key, LEASE_MS, owner),
            PairPath::RR | PairPath::RW => {
                let mut cmd = redis::cmd("RLOCK.RELEASE");
                cmd.arg(key).arg(owner).arg(self.side());
                cmd
            }
            PairPath::LR => shas.read_unlock_cmd(key, owner),
            PairPath::LW => shas.write_unlock_cmd(key, LEASE_MS, owner),
            PairPath::S => {
                let mut cmd = redis::cmd("DEL");
                cmd.arg(key);
                cmd
            }
        }
    }

    fn side(self) -> &'static str {
        match self {
            PairPath::RW | PairPath::LW => "WRITE",
            _ => "READ",
        }
    }

    fn acquired(self, reply: &Value) -> bool {
        match self {
            PairPath::R | PairPath::RF | PairPath::RQ | PairPath::RR | PairPath::RW => {
                matches!(reply, Value::Int(1))
            }
            PairPath::L | PairPath::LR | PairPath::LW => matches!(reply, Value::Nil),
            PairPath::S => {
                matches!(reply, Value::Okay) || matches!(reply, Value::SimpleString(s) if s == "OK")
            }
        }
    }

    fn released(self, reply: &Value) -> bool {
        matches!(reply, Value::Int(1))
    }
}

/// One measured run of one path.
#[derive(Debug, Clone)]
pub struct PairRun {
    pub pairs: u64,
    pub errors: u64,
    pub window: Window,
}

impl PairRun {
    pub fn pairs_per_sec(&self) -> f64 {
        self.pairs as f64 / self.window.secs
    }
}

/// Every run of one path at one pipeline depth, and their medians.
#[derive(Debug, Clone)]
pub struct PairCell {
    pub path: PairPath,
    pub pipeline: usize,
    pub runs: Vec<PairRun>,
}

impl PairCell {
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
pub struct Uncontended {
    pub cells: Vec<PairCell>,
}

impl Uncontended {
    pub fn cell(&self, path: PairPath, pipeline: usize) -> Option<&PairCell> {
        self.cells
            .iter()
            .find(|c| c.path == path && c.pipeline == pipeline)
    }

    /// Ratio of median pairs/s, `a / b`, at one pipeline depth.
    pub fn ratio(&self, a: PairPath, b: PairPath, pipeline: usize) -> f64 {
        match (self.cell(a, pipeline), self.cell(b, pipeline)) {
            (Some(a), Some(b)) => ratio(a.pairs_per_sec(), b.pairs_per_sec()),
            _ => f64::NAN,
        }
    }
}

/// Scenario 1: R, L and S at every pipeline depth of the plan.
pub async fn run(server: &Server, plan: &Plan) -> Uncontended {
    run_paths(server, plan, &PairPath::ALL, &plan.pipelines, "uncontended").await
}

/// Scenario 5: R, RF (FAIR) and RQ (REQ) at pipeline 16, the rest of the shape as scenario 1.
pub async fn run_fair(server: &Server, plan: &Plan) -> Uncontended {
    run_paths(
        server,
        plan,
        &PairPath::FAIR_VS_PLAIN,
        &[FAIR_PIPELINE],
        "uncontended-fair",
    )
    .await
}

/// Scenario 10's first part: read and write pairs against Redisson's scripts, at every
/// pipeline depth of the plan.
pub async fn run_read_write(server: &Server, plan: &Plan) -> Uncontended {
    run_paths(
        server,
        plan,
        &PairPath::READ_WRITE,
        &plan.pipelines,
        "rwlock",
    )
    .await
}

/// The pipeline depth of scenario 5.
pub const FAIR_PIPELINE: usize = 16;

async fn run_paths(
    server: &Server,
    plan: &Plan,
    paths: &[PairPath],
    pipelines: &[usize],
    label: &str,
) -> Uncontended {
    let mut control = crate::measure::connect(server).await;
    let shas = Arc::new(Shas::load(&mut control).await.expect("SCRIPT LOAD"));
    let conns = connect_many(server, plan.conns).await;
    let mut cells = Vec::new();
    for &pipeline in pipelines {
        let mut row: Vec<PairCell> = paths
            .iter()
            .map(|&path| PairCell {
                path,
                pipeline,
                runs: Vec::new(),
            })
            .collect();
        // R, L, S, R, L, S, ...: drift in machine load hits every path alike.
        for round in 0..plan.rounds {
            for cell in row.iter_mut() {
                let seed = (round * 31 + pipeline) as u64;
                let run =
                    run_once(&conns, &mut control, &shas, cell.path, pipeline, plan, seed).await;
                if plan.verbose {
                    eprintln!(
                        "  {label} p{pipeline} {} round {}: {:.0} pairs/s, {:.1} us/pair server, server {:.0}% client {:.0}%{}",
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
    Uncontended { cells }
}

async fn run_once(
    conns: &[MultiplexedConnection],
    control: &mut MultiplexedConnection,
    shas: &Arc<Shas>,
    path: PairPath,
    pipeline: usize,
    plan: &Plan,
    seed: u64,
) -> PairRun {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let slice = (plan.keys / conns.len()).max(pipeline) as u64;
    let mut workers = Vec::new();
    for (c, con) in conns.iter().enumerate() {
        let worker = Worker {
            con: con.clone(),
            path,
            shas: shas.clone(),
            owner: format!("{OWNER_PREFIX}:{c}").into_bytes(),
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
        w.await.expect("uncontended worker panicked");
    }
    PairRun {
        pairs: d1 - d0,
        errors: e1 - e0,
        window: Window::between(&s0, &s1),
    }
}

struct Worker {
    con: MultiplexedConnection,
    path: PairPath,
    shas: Arc<Shas>,
    owner: Vec<u8>,
    first_key: u64,
    slice: u64,
    pairs_per_batch: usize,
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    rng: Rng,
}

impl Worker {
    fn key(&self, n: u64) -> Vec<u8> {
        format!(
            "lock:{}:{:06}",
            self.path.letter(),
            self.first_key + n % self.slice
        )
        .into_bytes()
    }

    async fn run(mut self) {
        let (path, shas) = (self.path, self.shas.clone());
        while !self.stop.load(Ordering::Relaxed) {
            let start = self.rng.below(self.slice);
            let b = self.pairs_per_batch;
            let keys: Vec<Vec<u8>> = (0..b as u64).map(|j| self.key(start + j)).collect();
            let bad = if b == 1 {
                let acquired = path
                    .acquire(&shas, &keys[0], &self.owner)
                    .query_async::<Value>(&mut self.con)
                    .await;
                let released = path
                    .release(&shas, &keys[0], &self.owner)
                    .query_async::<Value>(&mut self.con)
                    .await;
                let ok = matches!(&acquired, Ok(v) if path.acquired(v))
                    && matches!(&released, Ok(v) if path.released(v));
                u64::from(!ok)
            } else {
                // Acquires then releases, one pipeline of 2b commands on b keys.
                let mut pipe = redis::pipe();
                for key in &keys {
                    pipe.add_command(path.acquire(&shas, key, &self.owner));
                }
                for key in &keys {
                    pipe.add_command(path.release(&shas, key, &self.owner));
                }
                match pipe.query_async::<Vec<Value>>(&mut self.con).await {
                    Ok(replies) if replies.len() == 2 * b => {
                        let (acq, rel) = replies.split_at(b);
                        (acq.iter().filter(|v| !path.acquired(v)).count()
                            + rel.iter().filter(|v| !path.released(v)).count())
                            as u64
                    }
                    _ => b as u64,
                }
            };
            if bad > 0 {
                self.errors.fetch_add(bad, Ordering::Relaxed);
            }
            self.done.fetch_add(b as u64, Ordering::Relaxed);
        }
    }
}
