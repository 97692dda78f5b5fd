//! Scenario 3: a holder takes the lock with a short lease and never renews; how long
//! after the lease deadline does a waiter get the lock?
//! B = RLOCK.ACQUIRE BLOCK 0 waiter behind an RLOCK holder; B* = the same waiter behind a
//! Redisson (Lua) holder; Q = a Redisson waiter behind a Redisson holder, which hears no
//! unlock message on expiry and relies on sleeping for the TTL it was told.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::Value;
use rlock_module_tests::Server;
use tokio::sync::Semaphore;

use crate::measure::{connect, median, percentile};
use crate::scripts::{unlock_channel, Shas};
use crate::{Plan, OWNER_PREFIX};

const WAITER_LEASE_MS: u64 = 30_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpiryPath {
    B,
    BehindLua,
    Q,
}

impl ExpiryPath {
    pub const ALL: [ExpiryPath; 3] = [ExpiryPath::B, ExpiryPath::BehindLua, ExpiryPath::Q];

    pub fn letter(self) -> &'static str {
        match self {
            ExpiryPath::B => "B",
            ExpiryPath::BehindLua => "B*",
            ExpiryPath::Q => "Q",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            ExpiryPath::B => "holder RLOCK.ACQUIRE LEASE; waiter RLOCK.ACQUIRE BLOCK 0",
            ExpiryPath::BehindLua => "holder Lua tryLock (Redisson); waiter RLOCK.ACQUIRE BLOCK 0",
            ExpiryPath::Q => "holder Lua tryLock; waiter Redisson-style (pub/sub + sleep min(ttl))",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ExpiryCell {
    pub path: ExpiryPath,
    /// Waiter's grant minus (holder's acquire reply + lease), ms; one per sample.
    pub late_ms: Vec<f64>,
    pub errors: u64,
}

impl ExpiryCell {
    fn sorted(&self) -> Vec<f64> {
        let mut v = self.late_ms.clone();
        v.sort_by(f64::total_cmp);
        v
    }
    pub fn p50_ms(&self) -> f64 {
        median(self.late_ms.iter().copied())
    }
    pub fn p99_ms(&self) -> f64 {
        percentile(&self.sorted(), 99.0)
    }
    pub fn max_ms(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(f64::NAN)
    }
    pub fn min_ms(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(f64::NAN)
    }
}

#[derive(Debug, Clone)]
pub struct Expiry {
    pub lease_ms: u64,
    pub cells: Vec<ExpiryCell>,
}

impl Expiry {
    pub fn cell(&self, path: ExpiryPath) -> Option<&ExpiryCell> {
        self.cells.iter().find(|c| c.path == path)
    }
}

pub async fn run(server: &Server, plan: &Plan) -> Expiry {
    let mut holder = connect(server).await;
    let mut waiter = connect(server).await;
    let shas = Shas::load(&mut holder).await.expect("SCRIPT LOAD");
    let (mut sink, mut stream) = server
        .client()
        .get_async_pubsub()
        .await
        .expect("pub/sub connection")
        .split();
    let latch = Arc::new(Semaphore::new(0));
    let listener = {
        let latch = latch.clone();
        tokio::spawn(async move {
            while let Some(msg) = stream.next().await {
                if msg.get_payload_bytes() == b"0" {
                    latch.add_permits(1);
                }
            }
        })
    };
    let holder_owner = format!("{OWNER_PREFIX}:holder").into_bytes();
    let waiter_owner = format!("{OWNER_PREFIX}:waiter").into_bytes();
    let lease = plan.expiry_lease_ms;
    let mut cells: Vec<ExpiryCell> = ExpiryPath::ALL
        .iter()
        .map(|&path| ExpiryCell {
            path,
            late_ms: Vec::new(),
            errors: 0,
        })
        .collect();
    for sample in 0..plan.expiry_samples {
        for cell in cells.iter_mut() {
            let key = format!("bench:expiry:{}:{sample}", cell.path.letter()).into_bytes();
            let channel = unlock_channel(&key);
            if cell.path == ExpiryPath::Q {
                sink.subscribe(&channel).await.expect("SUBSCRIBE");
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
                        redisson_wait(&mut waiter, &shas, &key, &waiter_owner, &latch).await
                    }
                }
            };
            match got {
                Some(at) => {
                    let late = if at >= deadline {
                        (at - deadline).as_secs_f64() * 1e3
                    } else {
                        -((deadline - at).as_secs_f64() * 1e3)
                    };
                    if plan.verbose {
                        eprintln!(
                            "  expiry {} sample {}: {late:.2} ms after the deadline",
                            cell.path.letter(),
                            sample + 1
                        );
                    }
                    cell.late_ms.push(late);
                }
                None => cell.errors += 1,
            }
            if cell.path == ExpiryPath::Q {
                sink.unsubscribe(&channel).await.expect("UNSUBSCRIBE");
                let stale = latch.available_permits();
                latch.forget_permits(stale);
            }
            let _: Value = redis::cmd("RLOCK.FORCERELEASE")
                .arg(&key)
                .query_async(&mut holder)
                .await
                .expect("FORCERELEASE");
        }
    }
    listener.abort();
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
        let wait = if ttl >= 0 {
            remaining.min(Duration::from_millis(ttl as u64))
        } else {
            remaining
        };
        if let Ok(Ok(permit)) = tokio::time::timeout(wait, latch.acquire()).await {
            permit.forget();
        }
    }
    None
}
