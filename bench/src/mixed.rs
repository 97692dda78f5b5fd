//! Scenario 9: a mixed fleet on one lock. One client follows Redisson's algorithm (Q:
//! Lua tryLock, on a miss wait for the unlock message or the TTL) beside N − 1 clients
//! blocked in the server (B). Before the module shared the lock with listening
//! Redisson clients, Q got 1 acquisition in 1,531. The figure is min/max acquisitions
//! per client (1.0 is perfectly even) and Q's acquisitions against the B clients'
//! mean, with the hand-offs/s of the same N clients all on B, in the same run, as the
//! cost of sharing.

use std::sync::Arc;

use crate::contended::{run_once, WaitPath, WaitRun};
use crate::measure::{connect, median, ratio};
use crate::scripts::Shas;
use crate::Plan;
use rlock_module_tests::Server;

/// Clients per run: 1 Redisson-style client and the rest blocked in the server.
pub const CLIENTS: [usize; 2] = [4, 8];

#[derive(Debug, Clone)]
pub struct MixedCell {
    pub clients: usize,
    pub hold_ms: u64,
    /// Client 0 is Q, the others B.
    pub mixed: Vec<WaitRun>,
    /// The same clients all on B.
    pub all_blocked: Vec<WaitRun>,
}

impl MixedCell {
    /// min/max acquisitions per client, median over rounds.
    pub fn fairness(&self) -> f64 {
        median(self.mixed.iter().map(WaitRun::fairness))
    }

    /// Q's acquisitions ÷ the mean of the B clients', median over rounds.
    pub fn redisson_share(&self) -> f64 {
        median(self.mixed.iter().map(redisson_share))
    }

    pub fn acquisitions_per_sec(&self) -> f64 {
        median(self.mixed.iter().map(WaitRun::acquisitions_per_sec))
    }

    pub fn all_blocked_per_sec(&self) -> f64 {
        median(self.all_blocked.iter().map(WaitRun::acquisitions_per_sec))
    }

    /// Mixed acquisitions/s ÷ all-B acquisitions/s.
    pub fn throughput_ratio(&self) -> f64 {
        ratio(self.acquisitions_per_sec(), self.all_blocked_per_sec())
    }

    pub fn problems(&self) -> u64 {
        self.mixed
            .iter()
            .chain(&self.all_blocked)
            .map(|r| r.trouble.total())
            .sum()
    }
}

/// Q's acquisitions ÷ the mean of the B clients' in one mixed run (client 0 is Q).
pub fn redisson_share(run: &WaitRun) -> f64 {
    let blocked = &run.per_client[1..];
    let mean = blocked.iter().sum::<u64>() as f64 / blocked.len().max(1) as f64;
    ratio(run.per_client[0] as f64, mean)
}

#[derive(Debug, Clone)]
pub struct Mixed {
    pub cells: Vec<MixedCell>,
}

pub async fn run(server: &Server, plan: &Plan) -> Mixed {
    let mut control = connect(server).await;
    let shas = Arc::new(Shas::load(&mut control).await.expect("SCRIPT LOAD"));
    let mut cells = Vec::new();
    for clients in CLIENTS {
        for &hold_ms in &plan.holds_ms {
            let mut cell = MixedCell {
                clients,
                hold_ms,
                mixed: Vec::new(),
                all_blocked: Vec::new(),
            };
            let mut paths = vec![WaitPath::B; clients];
            paths[0] = WaitPath::Q;
            for round in 0..plan.rounds {
                let key = format!("bench:mixed:{clients}:{hold_ms}:{round}");
                let mixed =
                    run_once(server, &mut control, &shas, &paths, hold_ms, &key, plan).await;
                let key = format!("bench:mixed-b:{clients}:{hold_ms}:{round}");
                let blocked = vec![WaitPath::B; clients];
                let all_blocked =
                    run_once(server, &mut control, &shas, &blocked, hold_ms, &key, plan).await;
                if plan.verbose {
                    eprintln!(
                        "  mixed N={clients} hold={hold_ms} round {}: per client {:?} (Q first), min/max {:.2}; {:.0} acq/s against {:.0} all on BLOCK",
                        round + 1,
                        mixed.per_client,
                        mixed.fairness(),
                        mixed.acquisitions_per_sec(),
                        all_blocked.acquisitions_per_sec(),
                    );
                }
                cell.mixed.push(mixed);
                cell.all_blocked.push(all_blocked);
            }
            cells.push(cell);
        }
    }
    Mixed { cells }
}
