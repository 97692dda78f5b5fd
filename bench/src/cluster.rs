//! Scenario 8: uncontended acquire/release pairs (scenario 1's R path, pipeline 16) on a
//! 3-primary cluster against the one node of the other scenarios, in the same run,
//! rounds interleaved. Every server process is pinned to the server CPU, as the single
//! node is; each load connection talks to one primary, on keys of that primary's
//! slots, so no request is redirected.

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::cluster::untagged_key_slot;
use rlock_module_tests::{Cluster, Flavor, Server};

use crate::harness::{measure_load, Tally};
use crate::measure::{connect, median, ratio};
use crate::uncontended::LEASE_MS;
use crate::{pin, Plan, OWNER_PREFIX};

/// Pairs per pipeline: 8 acquires then 8 releases, as scenario 1 at pipeline 16.
const PAIRS_PER_BATCH: usize = 8;
const PRIMARIES: usize = 3;

#[derive(Debug, Clone)]
pub struct ClusterScale {
    /// Pairs/s per round on the single node, and on the cluster.
    pub single: Vec<f64>,
    pub cluster: Vec<f64>,
    pub pinning: String,
    pub nproc: usize,
}

impl ClusterScale {
    pub fn ratio(&self) -> f64 {
        ratio(median(self.cluster.clone()), median(self.single.clone()))
    }
}

/// Keys whose slots the harness gave primary `node` (it splits the slots evenly).
fn keys_of(node: usize, n: usize, tag: &str) -> Vec<Vec<u8>> {
    let per = 16384 / PRIMARIES;
    (0u64..)
        .map(|i| format!("lock:C:{tag}:{i}").into_bytes())
        .filter(|k| (untagged_key_slot(k) as usize / per).min(PRIMARIES - 1) == node)
        .take(n)
        .collect()
}

pub async fn run(flavor: Flavor, single: &Server, plan: &Plan, pin: &pin::Pinning) -> ClusterScale {
    let cluster = Cluster::start(flavor, PRIMARIES, 0);
    let pinning = cluster
        .primaries
        .iter()
        .map(|p| pin.pin_server(crate::server_pid(p)))
        .collect::<Vec<_>>()
        .join("; ");
    // The same number of connections either way, spread over the primaries.
    let mut single_conns = Vec::new();
    let mut cluster_conns = Vec::new();
    for c in 0..plan.conns {
        let node = c % PRIMARIES;
        single_conns.push((connect(single).await, keys_of(node, 1000, &format!("s{c}"))));
        cluster_conns.push((
            connect(&cluster.primaries[node]).await,
            keys_of(node, 1000, &format!("c{c}")),
        ));
    }
    let mut result = ClusterScale {
        single: Vec::new(),
        cluster: Vec::new(),
        pinning,
        nproc: pin::online_cpus(),
    };
    for round in 0..plan.rounds {
        for (label, conns) in [("one node", &single_conns), ("3 primaries", &cluster_conns)] {
            let rate = measure(conns, plan).await;
            if plan.verbose {
                eprintln!("  cluster {label} round {}: {rate:.0} pairs/s", round + 1);
            }
            if label == "one node" {
                result.single.push(rate);
            } else {
                result.cluster.push(rate);
            }
        }
    }
    result
}

async fn measure(conns: &[(MultiplexedConnection, Vec<Vec<u8>>)], plan: &Plan) -> f64 {
    let tally = Tally::default();
    let workers = conns
        .iter()
        .enumerate()
        .map(|(c, (con, keys))| {
            let (mut con, keys, tally) = (con.clone(), keys.clone(), tally.clone());
            let owner = format!("{OWNER_PREFIX}:{c}");
            tokio::spawn(async move {
                let mut at = 0;
                while tally.running() {
                    let batch: Vec<&Vec<u8>> = (0..PAIRS_PER_BATCH)
                        .map(|j| &keys[(at + j) % keys.len()])
                        .collect();
                    at += PAIRS_PER_BATCH;
                    let mut pipe = redis::pipe();
                    for k in &batch {
                        pipe.cmd("RLOCK.ACQUIRE")
                            .arg(k.as_slice())
                            .arg(&owner)
                            .arg("LEASE")
                            .arg(LEASE_MS);
                    }
                    for k in &batch {
                        pipe.cmd("RLOCK.RELEASE").arg(k.as_slice()).arg(&owner);
                    }
                    let ok = matches!(
                        pipe.query_async::<Vec<Value>>(&mut con).await,
                        Ok(replies) if replies.iter().all(|v| matches!(v, Value::Int(1)))
                    );
                    assert!(ok, "a cluster bench pair failed");
                    tally.add(PAIRS_PER_BATCH as u64, 0);
                }
            })
        })
        .collect();
    let run = measure_load(None, plan, plan.uncontended_run, &tally, workers).await;
    run.done as f64 / run.window.secs
}
