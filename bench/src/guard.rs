//! Scenario 12: writes guarded by a held lock (RLOCK.GUARD, issue 41). Each "pair" of the
//! pairs harness is one write here: G, the guarded `SET`; C, the check-and-set script a user
//! writes today (`HEXISTS` of the holder, then `SET`, by `EVALSHA`); P, a plain `SET`, the
//! write with no guarantee. Every lock is held by its connection's owner for the whole run.

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;

use crate::harness;
use crate::harness::pairs::{run_pairs, PairLoad, Pairs};
use crate::measure::{connect, connect_many};
use crate::{paths, Plan, OWNER_PREFIX};

paths! {
    pub enum GuardPath {
        G => "G", "RLOCK.GUARD k o CALL SET k:d v";
        C => "C", "EVALSHA check-and-set: HEXISTS k o, then SET k:d v";
        P => "P", "SET k:d v (no guard)";
    }
}

/// The script a user writes today for a guarded write on a Redisson-layout lock.
const CHECK_AND_SET: &str = "if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then \
     return redis.call('set', KEYS[2], ARGV[2]) end return false";

/// How long each lock is held: longer than any run.
const HOLD_MS: u64 = 3_600_000;

pub type GuardWrites = Pairs<GuardPath>;

fn data_key(lock: &[u8]) -> Vec<u8> {
    let mut key = lock.to_vec();
    key.extend_from_slice(b":d");
    key
}

impl GuardPath {
    fn write(self, sha: &str, lock: &[u8], owner: &[u8]) -> redis::Cmd {
        let data = data_key(lock);
        match self {
            GuardPath::G => {
                let mut cmd = redis::cmd("RLOCK.GUARD");
                cmd.arg(lock)
                    .arg(owner)
                    .arg("CALL")
                    .arg("SET")
                    .arg(data)
                    .arg("v");
                cmd
            }
            GuardPath::C => {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(sha).arg(2).arg(lock).arg(data).arg(owner).arg("v");
                cmd
            }
            GuardPath::P => {
                let mut cmd = redis::cmd("SET");
                cmd.arg(data).arg("v");
                cmd
            }
        }
    }
}

impl harness::pairs::PairPath for GuardPath {
    /// The check-and-set script's SHA.
    type Scripts = String;

    fn key(self, n: u64) -> Vec<u8> {
        format!("{{guard:{n:06}}}").into_bytes()
    }

    async fn batch(
        self,
        sha: &String,
        con: &mut MultiplexedConnection,
        keys: &[Vec<u8>],
        owner: &[u8],
    ) -> u64 {
        let written = |v: &Value| {
            matches!(v, Value::Okay) || matches!(v, Value::SimpleString(s) if s == "OK")
        };
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.add_command(self.write(sha, key, owner));
        }
        match pipe.query_async::<Vec<Value>>(con).await {
            Ok(replies) if replies.len() == keys.len() => {
                replies.iter().filter(|v| !written(v)).count() as u64
            }
            _ => keys.len() as u64,
        }
    }
}

/// G, C and P at every pipeline depth of the plan, each connection's locks held by it.
pub async fn run(server: &Server, plan: &Plan) -> GuardWrites {
    let mut control = connect(server).await;
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(CHECK_AND_SET)
        .query_async(&mut control)
        .await
        .expect("SCRIPT LOAD");
    let conns = connect_many(server, plan.conns).await;
    let deepest = plan.pipelines.iter().copied().max().unwrap_or(1);
    // One slice per connection whatever the depth, so each lock has one holder.
    let slice = (plan.keys / conns.len()).max(deepest) as u64;
    for c in 0..conns.len() as u64 {
        let owner = format!("{OWNER_PREFIX}:{c}");
        let mut pipe = redis::pipe();
        for n in c * slice..(c + 1) * slice {
            let lock = harness::pairs::PairPath::key(GuardPath::G, n);
            pipe.cmd("RLOCK.ACQUIRE")
                .arg(lock)
                .arg(&owner)
                .arg("LEASE")
                .arg(HOLD_MS)
                .ignore();
        }
        pipe.query_async::<()>(&mut control)
            .await
            .expect("holding the locks");
    }
    let load = PairLoad {
        conns: &conns,
        control: &mut control,
        scripts: std::sync::Arc::new(sha),
        slice: &|_| slice,
    };
    run_pairs(load, plan, &GuardPath::ALL, &plan.pipelines, "guard").await
}
