//! Scenario 3: a holder takes the lock with a short lease and never renews; how long
//! after the lease deadline does a waiter get the lock?
//! B = RLOCK.ACQUIRE BLOCK 0 waiter behind an RLOCK holder; B* = the same waiter behind a
//! Redisson (Lua) holder; Q = a Redisson waiter behind a Redisson holder, which hears no
//! unlock message on expiry and relies on sleeping for the TTL it was told.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;
use tokio::sync::Semaphore;

use crate::harness::late::{Late, Lateness};
use crate::harness::wake::{ttl_wait, unlock_message, wait_wakeup, Wakeups};
use crate::harness::Path;
use crate::measure::connect;
use crate::paths;
use crate::scripts::{unlock_channel, Shas};
use crate::{Plan, OWNER_PREFIX};

const WAITER_LEASE_MS: u64 = 30_000;

paths! {
    pub enum ExpiryPath {
        B => "B", "holder RLOCK.ACQUIRE LEASE; waiter RLOCK.ACQUIRE BLOCK 0";
        BehindLua => "B*", "holder Lua tryLock (Redisson); waiter RLOCK.ACQUIRE BLOCK 0";
        Q => "Q", "holder Lua tryLock; waiter Redisson-style (pub/sub + sleep min(ttl))";
    }
}

/// Waiter's grant minus (holder's acquire reply + lease), ms; one round of samples.
pub type ExpiryCell = Lateness<ExpiryPath>;

/// Scenario 3: every path's samples.
pub type Expiry = Late<ExpiryPath>;

pub async fn run(server: &Server, plan: &Plan) -> Expiry {
    let mut holder = connect(server).await;
    let mut waiter = connect(server).await;
    let shas = Shas::load(&mut holder).await.expect("SCRIPT LOAD");
    let mut wakeups = Wakeups::open(server, unlock_message).await;
    let holder_owner = format!("{OWNER_PREFIX}:holder").into_bytes();
    let waiter_owner = format!("{OWNER_PREFIX}:waiter").into_bytes();
    let lease = plan.expiry_lease_ms;
    let mut cells: Vec<ExpiryCell> = ExpiryPath::ALL.map(Lateness::new).to_vec();
    for sample in 0..plan.expiry_samples {
        for cell in cells.iter_mut() {
            let key = format!("bench:expiry:{}:{sample}", cell.path.letter()).into_bytes();
            let channel = unlock_channel(&key);
            if cell.path == ExpiryPath::Q {
                wakeups.subscribe(&channel).await;
            }
            // The holder: takes the lock with a short lease and is never heard from again.
            let taken = match cell.path {
                ExpiryPath::B => redis::cmd("RLOCK.ACQUIRE")
                    .arg(&key)
                    .arg(&holder_owner)
                    .arg("LEASE")
                    .arg(lease)
                    .query_async::<Value>(&mut holder)
                    .await
                    .is_ok_and(|v| v == Value::Int(1)),
                ExpiryPath::BehindLua | ExpiryPath::Q => shas
                    .try_lock_cmd(&key, lease, &holder_owner)
                    .query_async::<Value>(&mut holder)
                    .await
                    .is_ok_and(|v| v == Value::Nil),
            };
            let deadline = Instant::now() + Duration::from_millis(lease);
            let got = if !taken {
                None
            } else {
                match cell.path {
                    ExpiryPath::B | ExpiryPath::BehindLua => {
                        block_until_granted(&mut waiter, &key, &waiter_owner).await
                    }
                    ExpiryPath::Q => {
                        redisson_wait(&mut waiter, &shas, &key, &waiter_owner, &wakeups.latch).await
                    }
                }
            };
            let late = got.map(|at| {
                if at >= deadline {
                    (at - deadline).as_secs_f64() * 1e3
                } else {
                    -((deadline - at).as_secs_f64() * 1e3)
                }
            });
            let at = format!("sample {}", sample + 1);
            cell.record(late, plan.verbose, "expiry", &at);
            if cell.path == ExpiryPath::Q {
                wakeups.unsubscribe(&channel).await;
            }
            let _: Value = redis::cmd("RLOCK.FORCERELEASE")
                .arg(&key)
                .query_async(&mut holder)
                .await
                .expect("FORCERELEASE");
        }
    }
    wakeups.close();
    Expiry {
        lease_ms: lease,
        cells,
    }
}

async fn block_until_granted(
    con: &mut MultiplexedConnection,
    key: &[u8],
    owner: &[u8],
) -> Option<Instant> {
    let reply = redis::cmd("RLOCK.ACQUIRE")
        .arg(key)
        .arg(owner)
        .arg("BLOCK")
        .arg(0)
        .arg("LEASE")
        .arg(WAITER_LEASE_MS)
        .query_async::<Value>(con)
        .await;
    let at = Instant::now();
    match reply {
        Ok(Value::Int(1)) => Some(at),
        other => {
            eprintln!("  expiry: BLOCK waiter got {other:?}");
            None
        }
    }
}

/// Redisson's `lock()`: tryLock; on a miss wait for an unlock message or the TTL, retry.
async fn redisson_wait(
    con: &mut MultiplexedConnection,
    shas: &Shas,
    key: &[u8],
    owner: &[u8],
    latch: &Semaphore,
) -> Option<Instant> {
    let give_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < give_up {
        let reply = shas
            .try_lock_cmd(key, WAITER_LEASE_MS, owner)
            .query_async::<Value>(con)
            .await;
        let at = Instant::now();
        let ttl = match reply {
            Ok(Value::Nil) => return Some(at),
            Ok(Value::Int(ttl)) => ttl,
            other => {
                eprintln!("  expiry: tryLock got {other:?}");
                return None;
            }
        };
        let remaining = give_up.saturating_duration_since(at);
        wait_wakeup(latch, ttl_wait(ttl, remaining)).await;
    }
    None
}
