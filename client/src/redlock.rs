//! [`RedLocks`]: one lock over N independent primaries, held when a majority grants it
//! (the Redlock scheme, on rlock's commands).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::runtime::Handle;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::command::{self, AcquireOptions, HoldName, Wait};
use crate::conn::{Conn, Endpoint};
use crate::error::{Error, Result};

struct Primary {
    endpoint: Endpoint,
    conn: OnceCell<Conn>,
}

struct MultiInner {
    primaries: Vec<Primary>,
    client_id: String,
    next_owner: AtomicU64,
    node_timeout: Duration,
}

impl MultiInner {
    async fn query(&self, i: usize, cmd: &redis::Cmd) -> Result<redis::Value> {
        let p = &self.primaries[i];
        let call = async {
            let conn = p
                .conn
                .get_or_try_init(|| Conn::open(&p.endpoint, self.node_timeout))
                .await?;
            Ok::<_, Error>(conn.query(cmd).await?)
        };
        match tokio::time::timeout(self.node_timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(Error::Redis(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("primary {i} did not answer within {:?}", self.node_timeout),
            )))),
        }
    }

    /// Sends `cmd(i)` to every primary at once.
    async fn each(&self, cmd: impl Fn(usize) -> redis::Cmd) -> Vec<Result<redis::Value>> {
        let cmds: Vec<_> = (0..self.primaries.len()).map(cmd).collect();
        join_all(cmds.iter().enumerate().map(|(i, c)| self.query(i, c))).await
    }

    async fn release_all(&self, key: &Arc<str>, owner: &Arc<str>) -> usize {
        let hold = reentrant(key, owner);
        self.each(|_| command::release(&hold))
            .await
            .into_iter()
            .filter(|r| matches!(r, Ok(redis::Value::Int(_))))
            .count()
    }
}

/// A multi-primary lock's hold on each primary: a reentrant lock.
fn reentrant(key: &Arc<str>, owner: &Arc<str>) -> HoldName {
    HoldName {
        key: key.clone(),
        owner: owner.clone(),
        side: None,
        permit: false,
    }
}

/// One lock over several independent primaries (not replicas of each other), taken when a
/// majority grants it within its lease. Cheap to clone.
///
/// Each acquire sends `RLOCK.ACQUIRE` to all primaries at once: one parallel round trip. The
/// hold is valid for the lease minus the time the acquire took minus a clock-drift margin
/// (1% + 2 ms). If no majority grants it, the primaries that did (and those that did not
/// answer) are released at once.
#[derive(Clone)]
pub struct RedLocks {
    inner: Arc<MultiInner>,
}

debug_fields!(RedLocks |m| { primaries: m.inner.primaries.len(), client_id: m.inner.client_id });

/// Configures a [`RedLocks`].
pub struct RedLocksBuilder {
    clients: Vec<redis::Client>,
    node_timeout: Duration,
}

debug_fields!(RedLocksBuilder |m| { primaries: m.clients.len(), node_timeout: m.node_timeout });

impl RedLocksBuilder {
    /// How long to wait for each primary's answer; a primary that is slower counts as not
    /// granting. Keep it small against the lease. Default 200 ms.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Builds the [`RedLocks`]. It connects on first use.
    pub fn build(self) -> RedLocks {
        RedLocks {
            inner: Arc::new(MultiInner {
                primaries: self
                    .clients
                    .into_iter()
                    .map(|c| Primary {
                        endpoint: Endpoint::Server(c),
                        conn: OnceCell::new(),
                    })
                    .collect(),
                client_id: uuid::Uuid::new_v4().to_string(),
                next_owner: AtomicU64::new(1),
                node_timeout: self.node_timeout,
            }),
        }
    }
}

impl RedLocks {
    /// Locks over these primaries, with default settings. Use an odd number, 3 or 5.
    pub fn new(primaries: impl IntoIterator<Item = redis::Client>) -> RedLocks {
        RedLocks::builder(primaries).build()
    }

    /// A builder, for settings other than the defaults.
    pub fn builder(primaries: impl IntoIterator<Item = redis::Client>) -> RedLocksBuilder {
        RedLocksBuilder {
            clients: primaries.into_iter().collect(),
            node_timeout: Duration::from_millis(200),
        }
    }

    /// How many primaries must grant: a majority.
    pub fn quorum(&self) -> usize {
        command::quorum(self.inner.primaries.len())
    }

    /// A handle on the lock `name` with a new owner id; clones share it and re-enter,
    /// as with [`Locks::lock`](crate::Locks::lock).
    pub fn lock(&self, name: impl Into<String>) -> RedLock {
        let n = self.inner.next_owner.fetch_add(1, Ordering::Relaxed);
        RedLock {
            inner: self.inner.clone(),
            key: Arc::from(name.into()),
            owner: Arc::from(format!("{}:{n}", self.inner.client_id)),
            lease: Duration::from_secs(30),
            wait: Duration::ZERO,
            fenced: false,
        }
    }
}

/// A handle on one multi-primary lock and the builder of its acquires.
#[derive(Clone)]
pub struct RedLock {
    inner: Arc<MultiInner>,
    key: Arc<str>,
    owner: Arc<str>,
    lease: Duration,
    wait: Duration,
    fenced: bool,
}

debug_fields!(RedLock |m| {
    key: m.key,
    owner: m.owner,
    lease: m.lease,
    wait: m.wait,
    fenced: m.fenced,
});

impl RedLock {
    /// The lock's key (the same on every primary).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The owner id, the same on every primary.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The lease on each primary. Default 30 s. It is not renewed by a watchdog: call
    /// [`RedLockGuard::renew`] before [`RedLockGuard::validity`] runs out.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Keeps trying for up to `wait`, with a short random pause between tries, releasing
    /// partial grants each time. (Server-side waits cannot be combined across primaries.)
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Asks each primary for its fencing token; see [`RedLockGuard::tokens`].
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }

    /// Takes the lock on a majority of the primaries.
    ///
    /// `Ok(None)` when no majority granted it within the wait. [`Error::Redis`] when fewer
    /// than a majority of primaries answered at all, so no answer could be had.
    pub async fn acquire(&self) -> Result<Option<RedLockGuard>> {
        let give_up = Instant::now() + self.wait;
        loop {
            match self.try_once().await? {
                Some(g) => return Ok(Some(g)),
                None if Instant::now() >= give_up => return Ok(None),
                None => {
                    let jitter = (uuid::Uuid::new_v4().as_u128() % 50) as u64;
                    let pause = Duration::from_millis(10 + jitter);
                    tokio::time::sleep(pause.min(give_up - Instant::now())).await;
                }
            }
        }
    }

    async fn try_once(&self) -> Result<Option<RedLockGuard>> {
        let opts = AcquireOptions {
            lease: self.lease,
            wait: Wait::No,
            fair: false,
            fenced: self.fenced,
            session: false,
        };
        let cmd = command::acquire(&reentrant(&self.key, &self.owner), &opts);
        let start = Instant::now();
        let replies = self.inner.each(|_| cmd.clone()).await;
        let elapsed = start.elapsed();
        let mut granted = Vec::with_capacity(replies.len());
        let mut answered = 0;
        let mut last_error = None;
        for r in replies {
            match r.and_then(command::parse_acquire) {
                Ok(g) => {
                    answered += 1;
                    granted.push(g);
                }
                Err(e) => {
                    last_error = Some(e);
                    granted.push(None);
                }
            }
        }
        let quorum = command::quorum(granted.len());
        let count = granted.iter().filter(|g| g.is_some()).count();
        if count >= quorum {
            if let Some(valid) = command::validity(self.lease, elapsed) {
                return Ok(Some(RedLockGuard {
                    inner: self.inner.clone(),
                    key: self.key.clone(),
                    owner: self.owner.clone(),
                    lease: self.lease,
                    held: granted.iter().map(Option::is_some).collect(),
                    tokens: if self.fenced {
                        granted
                    } else {
                        vec![None; self.inner.primaries.len()]
                    },
                    valid_until: start + valid,
                    handle: Handle::current(),
                    done: false,
                }));
            }
        }
        // No majority (or it took too long): undo the partial grants, and the unanswered
        // primaries too, since their grant may have been applied without a reply.
        if count > 0 || answered < granted.len() {
            self.inner.release_all(&self.key, &self.owner).await;
        }
        match last_error {
            Some(e) if answered < quorum => Err(e),
            _ => Ok(None),
        }
    }
}

/// A lock held on a majority of primaries. Dropping it releases it on all of them in the
/// background.
pub struct RedLockGuard {
    inner: Arc<MultiInner>,
    key: Arc<str>,
    owner: Arc<str>,
    lease: Duration,
    held: Vec<bool>,
    tokens: Vec<Option<u64>>,
    valid_until: Instant,
    handle: Handle,
    done: bool,
}

debug_fields!(RedLockGuard |m| {
    key: m.key,
    owner: m.owner,
    held: m.held,
    tokens: m.tokens,
    validity: m.validity(),
});

impl RedLockGuard {
    /// The lock's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The owner id.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Which primaries granted the lock, in the order they were given.
    pub fn held_on(&self) -> &[bool] {
        &self.held
    }

    /// Each primary's fencing token, in the order the primaries were given; `None` where it
    /// was not granted, or for an acquire that was not [`fenced`](RedLock::fenced).
    /// Tokens of different primaries are unrelated counters: a resource should remember the
    /// newest token per primary and refuse a request that is older on any of them.
    pub fn tokens(&self) -> &[Option<u64>] {
        &self.tokens
    }

    /// How much longer the hold can be trusted; zero once it has run out.
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// Renews the lease on every primary; valid again for the lease (less elapsed time and
    /// drift) if a majority renewed. [`Error::Lost`] otherwise.
    pub async fn renew(&mut self) -> Result<()> {
        if self.validity().is_zero() {
            return Err(Error::lost(
                &self.key,
                "its validity had run out before renew()",
            ));
        }
        let start = Instant::now();
        let replies = self
            .inner
            .each(|_| command::renew(&reentrant(&self.key, &self.owner), self.lease))
            .await;
        let elapsed = start.elapsed();
        let renewed: Vec<bool> = replies
            .into_iter()
            .map(|r| {
                matches!(
                    r.and_then(|v| command::parse_flag(v, "RLOCK.RENEW")),
                    Ok(true)
                )
            })
            .collect();
        let count = renewed.iter().filter(|r| **r).count();
        match command::validity(self.lease, elapsed) {
            Some(valid) if count >= command::quorum(renewed.len()) => {
                self.held = renewed;
                self.valid_until = start + valid;
                Ok(())
            }
            _ => Err(Error::lost(
                &self.key,
                format!(
                    "only {count} of {} primaries renewed it",
                    self.inner.primaries.len()
                ),
            )),
        }
    }

    /// Releases the lock on every primary (all of them: one that did not answer the acquire
    /// may hold it anyway). Returns how many primaries answered the release.
    pub async fn release(mut self) -> usize {
        self.done = true;
        self.inner.release_all(&self.key, &self.owner).await
    }
}

impl Drop for RedLockGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (inner, key, owner) = (self.inner.clone(), self.key.clone(), self.owner.clone());
        self.handle.spawn(async move {
            inner.release_all(&key, &owner).await;
        });
    }
}
