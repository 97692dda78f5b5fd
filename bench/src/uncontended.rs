//! Scenario 1: uncontended acquire/release pairs on many distinct keys.
//! R = RLOCK.ACQUIRE/RELEASE, L = Redisson's Lua scripts by EVALSHA, S = SET NX PX / DEL.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;

use crate::harness::pairs::{blind_batch, run_pairs, PairCommands, PairLoad, Pairs};
use crate::harness::{self, Path};
use crate::measure::{connect, connect_many};
use crate::paths;
use crate::scripts::Shas;
use crate::Plan;

pub const LEASE_MS: u64 = 30_000;

paths! {
    pub enum PairPath {
        R => "R", "RLOCK.ACQUIRE k o LEASE 30000 + RLOCK.RELEASE k o";
        L => "L", "EVALSHA Redisson tryLock + unlock";
        S => "S", "SET k o NX PX 30000 + DEL k";
        /// Scenario 5 only: R with FAIR.
        RF => "RF", "RLOCK.ACQUIRE k o FAIR LEASE 30000 + RLOCK.RELEASE k o";
        /// Scenario 5 only: R with a fresh `REQ id` on each call.
        RQ => "RQ", "RLOCK.ACQUIRE k o LEASE 30000 REQ id1 + RLOCK.RELEASE k o REQ id2 (a record key each)";
        /// Scenario 10: a read hold (`READ`), then its release.
        RR => "RR", "RLOCK.ACQUIRE k o READ LEASE 30000 + RLOCK.RELEASE k o READ";
        /// Scenario 10: Redisson's read lock and unlock scripts.
        LR => "LR", "EVALSHA Redisson read lock + read unlock (RedissonReadLock)";
        /// Scenario 10: a write hold (`WRITE`), then its release.
        RW => "RW", "RLOCK.ACQUIRE k o WRITE LEASE 30000 + RLOCK.RELEASE k o WRITE";
        /// Scenario 10: Redisson's write lock and unlock scripts.
        LW => "LW", "EVALSHA Redisson write lock + write unlock (RedissonWriteLock)";
    }
}

/// `REQ` ids, unique for the whole run so that no call replays another's record.
static NEXT_REQUEST: AtomicU64 = AtomicU64::new(1);

fn request_id() -> String {
    format!("{:x}", NEXT_REQUEST.fetch_add(1, Ordering::Relaxed))
}

impl PairPath {
    /// Scenario 1: rlock, Redisson's scripts, SET NX.
    pub const PLAIN: [PairPath; 3] = [PairPath::R, PairPath::L, PairPath::S];
    /// Scenario 5: plain, then FAIR, then with REQ.
    pub const FAIR_VS_PLAIN: [PairPath; 3] = [PairPath::R, PairPath::RF, PairPath::RQ];
    /// Scenario 10: read-write lock pairs against Redisson's scripts.
    pub const READ_WRITE: [PairPath; 4] = [PairPath::RR, PairPath::LR, PairPath::RW, PairPath::LW];

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

/// Scenarios 1, 5 and 10's pairs: by path and pipeline depth.
pub type Uncontended = Pairs<PairPath>;

impl harness::pairs::PairPath for PairPath {
    type Scripts = Shas;

    fn key(self, n: u64) -> Vec<u8> {
        format!("lock:{}:{n:06}", self.letter()).into_bytes()
    }

    async fn batch(
        self,
        shas: &Shas,
        con: &mut MultiplexedConnection,
        keys: &[Vec<u8>],
        owner: &[u8],
    ) -> u64 {
        let pair = PairCommands {
            acquire: |key: &[u8]| self.acquire(shas, key, owner),
            release: |key: &[u8]| self.release(shas, key, owner),
            acquired: |v: &Value| self.acquired(v),
            released: |v: &Value| self.released(v),
        };
        blind_batch(con, keys, pair).await
    }
}

/// Scenario 1: R, L and S at every pipeline depth of the plan.
pub async fn run(server: &Server, plan: &Plan) -> Uncontended {
    run_paths(
        server,
        plan,
        &PairPath::PLAIN,
        &plan.pipelines,
        "uncontended",
    )
    .await
}

/// Scenario 5: R, RF (FAIR) and RQ (REQ) at pipeline 16, the rest of the shape as scenario 1.
pub async fn run_fair(server: &Server, plan: &Plan) -> Uncontended {
    let pipelines = [FAIR_PIPELINE];
    let paths = PairPath::FAIR_VS_PLAIN;
    run_paths(server, plan, &paths, &pipelines, "uncontended-fair").await
}

/// Scenario 10's first part: read and write pairs against Redisson's scripts, at every
/// pipeline depth of the plan.
pub async fn run_read_write(server: &Server, plan: &Plan) -> Uncontended {
    let paths = PairPath::READ_WRITE;
    run_paths(server, plan, &paths, &plan.pipelines, "rwlock").await
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
    let mut control = connect(server).await;
    let shas = Arc::new(Shas::load(&mut control).await.expect("SCRIPT LOAD"));
    let conns = connect_many(server, plan.conns).await;
    let per_conn = plan.keys / conns.len();
    let load = PairLoad {
        conns: &conns,
        control: &mut control,
        scripts: shas,
        slice: &|pipeline| per_conn.max(pipeline) as u64,
    };
    run_pairs(load, plan, paths, pipelines, label).await
}
