//! [`Locks`], the entry point, and its [`LocksBuilder`]: the connections, the pool, the
//! watchdog's registry and the settings every handle made from it shares.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::OnceCell;

use futures_util::future::BoxFuture;
use redis::aio::{ConnectionManager, MultiplexedConnection};

use crate::command::{self, LockInfo};
use crate::conn::{Conn, Dedicated, Endpoint, Pool};
use crate::error::{Error, Result};
use crate::replicas::Replicas;
use crate::watchdog::{Listener, Registry, Watched};

/// How long a release or renewal whose connection broke waits before it is sent again (with
/// the same `REQ` id).
pub(crate) const RESEND_AFTER: Duration = Duration::from_millis(100);

/// Settings of a [`Locks`](crate::Locks); see [`LocksBuilder`](crate::LocksBuilder).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub watchdog_lease: Duration,
    pub response_timeout: Duration,
    pub idle_connections: usize,
    /// A default acquire's acknowledgement: up to `n` replicas (as many as are attached),
    /// within the timeout; `n` 0 sends no `WAIT`.
    pub durable: (usize, Duration),
}

impl Default for Config {
    fn default() -> Self {
        Config {
            watchdog_lease: Duration::from_secs(30),
            response_timeout: Duration::from_secs(2),
            idle_connections: 4,
            durable: (1, Duration::from_secs(1)),
        }
    }
}

pub(crate) struct Inner {
    pub(crate) endpoint: Endpoint,
    conn: OnceCell<Conn>,
    pub(crate) pool: Pool,
    pub(crate) registry: Registry,
    pub(crate) replicas: Arc<Replicas>,
    client_id: String,
    next_owner: AtomicU64,
    pub(crate) config: Config,
}

impl Inner {
    pub(crate) async fn conn(&self) -> Result<Conn> {
        let c = self
            .conn
            .get_or_try_init(|| Conn::open(&self.endpoint, self.config.response_timeout))
            .await?;
        Ok(c.clone())
    }

    /// Whether the locks live in a cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.endpoint, Endpoint::Cluster(_))
    }

    pub(crate) fn new_owner(&self) -> Arc<str> {
        let n = self.next_owner.fetch_add(1, Ordering::Relaxed);
        Arc::from(format!("{}:{n}", self.client_id))
    }

    pub(crate) async fn query(&self, cmd: &redis::Cmd) -> Result<redis::Value> {
        Ok(self.conn().await?.query(cmd).await?)
    }

    /// `cmd` on the shared connection, its reply a flag (`what` names the reply in an error).
    pub(crate) async fn flag(&self, cmd: &redis::Cmd, what: &'static str) -> Result<bool> {
        command::parse_flag(self.query(cmd).await?, what)
    }

    /// `cmd` on the shared connection, its reply an integer (`what` as for `flag`).
    pub(crate) async fn integer(&self, cmd: &redis::Cmd, what: &'static str) -> Result<i64> {
        command::parse_integer(self.query(cmd).await?, what)
    }

    /// `integer` for the command `cmd` makes of `key` (checked first, before anything is
    /// sent): the counters' reads and writes.
    pub(crate) async fn integer_on(
        &self,
        key: &str,
        cmd: impl FnOnce(&str) -> redis::Cmd,
        what: &'static str,
    ) -> Result<i64> {
        crate::error::check_args(key, &[])?;
        self.integer(&cmd(key), what).await
    }

    /// `query`, and once more with the same `REQ` id if the connection broke before the reply
    /// came: for a command the server applies at most once.
    pub(crate) async fn query_resent(&self, cmd: &redis::Cmd) -> Result<redis::Value> {
        let mut reply = self.query(cmd).await;
        if matches!(&reply, Err(Error::Redis(e)) if command::worth_resending(e)) {
            tokio::time::sleep(RESEND_AFTER).await;
            reply = self.query(cmd).await;
        }
        reply
    }

    /// A pooled connection of its own, for a command that waits in the server.
    pub(crate) async fn dedicated(&self) -> Result<Dedicated> {
        let conn = self.pool.take(&self.endpoint, self.config.response_timeout);
        Ok(conn.await?)
    }

    /// `RLOCK.INFO`, read so that it never fails on what the key holds: when the server
    /// refuses the key (`WRONGTYPE`) or sends hash fields that are not hold counts, the keys
    /// are read as they are (one more round trip, only then).
    pub(crate) async fn info(&self, key: &str) -> Result<LockInfo> {
        let conn = self.conn().await?;
        let blocked = match conn.query(&command::info(key)).await {
            Ok(v) => {
                let reply = command::parse_info(v)?;
                if reply.complete {
                    return Ok(reply.info);
                }
                reply.info.blocked
            }
            Err(e) if e.code() == Some("WRONGTYPE") => 0,
            Err(e) => return Err(e.into()),
        };
        let values = conn.pipeline(&mut command::raw_lock(key)).await?;
        command::parse_raw(values, blocked)
    }
}

impl Watched for Inner {
    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn conn(&self) -> BoxFuture<'_, Result<Conn>> {
        Box::pin(Inner::conn(self))
    }

    fn pubsub(&self) -> Option<(redis::Client, Duration)> {
        match &self.endpoint {
            Endpoint::Server(client) => Some((client.clone(), self.config.response_timeout)),
            Endpoint::Cluster(_) => None,
        }
    }

    fn listen(&self, me: Weak<dyn Watched>) -> Option<Listener> {
        crate::lossevents::spawn(me, self.registry.keys_wake.clone())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Lets the watchdog see that nothing is left to watch, and end.
        self.registry.wake.notify_one();
    }
}

/// Entry point: the locks on one server or cluster.
///
/// Cheap to clone; clones share the connection, the watchdog and the connection pool.
///
/// ```no_run
/// # async fn f() -> rlock_client::Result<()> {
/// let locks = rlock_client::Locks::from_url("redis://127.0.0.1/")?;
/// if let Some(guard) = locks.lock("orders").acquire().await? {
///     // ... the critical section ...
///     guard.release().await?;
/// }
/// # Ok(()) }
/// ```
///
/// **Which `redis` crate.** The constructors take types of the `redis` crate this crate is
/// built with, re-exported as [`rlock_client::redis`](crate::redis). An application on another
/// `redis` version builds them through that path, or passes a URL to [`Locks::from_url`](crate::Locks::from_url).
#[derive(Clone)]
pub struct Locks {
    pub(crate) inner: Arc<Inner>,
}

debug_fields!(Locks |l| { endpoint: l.inner.endpoint, client_id: l.inner.client_id });

/// Configures a [`Locks`](crate::Locks) before its first use.
#[derive(Debug, Clone)]
pub struct LocksBuilder {
    endpoint: Endpoint,
    config: Config,
    conn: Option<Conn>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Conn::Single(_) => "ConnectionManager",
            Conn::Plain(_) => "MultiplexedConnection",
            Conn::Cluster(_) => "ClusterConnection",
        })
    }
}

impl LocksBuilder {
    /// The lease given to locks taken without [`Lock::lease`](crate::Lock::lease); the watchdog renews them every
    /// third of it. Default 30 s, as in Redisson.
    pub fn watchdog_lease(mut self, lease: Duration) -> Self {
        self.config.watchdog_lease = lease;
        self
    }

    /// How long a non-blocking command may take on the shared connection before it fails.
    /// Default 2 s.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.config.response_timeout = timeout;
        self
    }

    /// How many idle connections for blocking acquires to keep. Default 4.
    pub fn idle_connections(mut self, n: usize) -> Self {
        self.config.idle_connections = n;
        self
    }

    /// How a lock acquired without [`Lock::sync_replicas`](crate::Lock::sync_replicas) is made durable: when the lock's
    /// primary has replicas, the acquire returns only once `n` of them (at most as many as
    /// are attached) acknowledged the grant (`WAIT`), within `timeout`; a grant not
    /// acknowledged in time is released and the acquire fails with
    /// [`Error::NotAcknowledged`]. With no replica attached no `WAIT` is sent. `n` = 0 turns
    /// this off: no acquire sends `WAIT` unless it asks with [`Lock::sync_replicas`](crate::Lock::sync_replicas).
    /// Default: 1 replica within 1 s, as Redisson's `checkLockSyncedSlaves`. The replica count
    /// is read from the server and kept for 1 s (see the README's "Durable by default").
    pub fn sync_replicas(mut self, n: usize, timeout: Duration) -> Self {
        self.config.durable = (n, timeout.max(Duration::from_millis(1)));
        self
    }

    /// Sends the short lock commands (acquires without a wait, releases, renewals, queries)
    /// over the application's own [`ConnectionManager`] instead of a new one.
    ///
    /// The endpoint given to [`Locks::builder`](crate::Locks::builder) is still used, for the connections that waits
    /// and [`Lock::sync_replicas`](crate::Lock::sync_replicas) need: a `BLOCK` or `WAIT` stalls every later request on its
    /// connection (the server answers a connection's requests in order), so it must never run
    /// on a shared one. [`response_timeout`](Self::response_timeout) does not apply to a
    /// connection handed in: its own settings do. [`Lock::session`](crate::Lock::session) holds taken without a wait
    /// end when this connection drops and reconnects.
    ///
    /// ```no_run
    /// use rlock_client::{redis, Locks};
    ///
    /// # async fn f() -> rlock_client::Result<()> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let manager = client.get_connection_manager().await?; // the app's, used elsewhere too
    /// let locks = Locks::builder(client).connection_manager(manager).build();
    /// # let _ = locks; Ok(()) }
    /// ```
    pub fn connection_manager(mut self, conn: ConnectionManager) -> Self {
        self.conn = Some(conn.into());
        self
    }

    /// Like [`connection_manager`](Self::connection_manager), with a [`MultiplexedConnection`].
    /// It does not reconnect by itself: once it breaks, commands on it fail (and held locks are
    /// reported lost when their lease runs out) until the [`Locks`](crate::Locks) is rebuilt.
    pub fn multiplexed_connection(mut self, conn: MultiplexedConnection) -> Self {
        self.conn = Some(conn.into());
        self
    }

    /// Builds the [`Locks`](crate::Locks). It connects on first use.
    pub fn build(self) -> Locks {
        Locks {
            inner: Arc::new(Inner {
                endpoint: self.endpoint,
                conn: OnceCell::new_with(self.conn),
                pool: Pool::new(self.config.idle_connections),
                registry: Registry::new(),
                replicas: Arc::default(),
                client_id: uuid::Uuid::new_v4().to_string(),
                next_owner: AtomicU64::new(1),
                config: self.config,
            }),
        }
    }
}

impl Locks {
    /// Locks on a server (`redis::Client`) or a cluster (`redis::cluster::ClusterClient`),
    /// with default settings. It connects on first use.
    pub fn new(endpoint: impl Into<Endpoint>) -> Locks {
        Locks::builder(endpoint).build()
    }

    /// A builder, for settings other than the defaults.
    pub fn builder(endpoint: impl Into<Endpoint>) -> LocksBuilder {
        LocksBuilder {
            endpoint: endpoint.into(),
            config: Config::default(),
            conn: None,
        }
    }

    /// Locks on the server at `url` (`redis://host:port/db`, `rediss://…`, `unix://…`), with
    /// default settings. Fails only on a malformed URL; it connects on first use.
    ///
    /// ```no_run
    /// # async fn f() -> rlock_client::Result<()> {
    /// let locks = rlock_client::Locks::from_url("redis://127.0.0.1:6379/")?;
    /// # let _ = locks; Ok(()) }
    /// ```
    pub fn from_url(url: &str) -> Result<Locks> {
        Ok(Locks::new(Endpoint::url(url)?))
    }

    /// Locks that send their short commands over the application's [`ConnectionManager`];
    /// `client` (the one it was made from) opens the dedicated connections that waits need.
    /// See [`LocksBuilder::connection_manager`](crate::LocksBuilder::connection_manager) for the trade-offs.
    ///
    /// ```no_run
    /// use rlock_client::{redis, Locks};
    ///
    /// # async fn f() -> rlock_client::Result<()> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let manager = client.get_connection_manager().await?;
    /// let locks = Locks::with_connection_manager(manager.clone(), client);
    /// # let _ = locks; Ok(()) }
    /// ```
    pub fn with_connection_manager(conn: ConnectionManager, client: redis::Client) -> Locks {
        Locks::builder(client).connection_manager(conn).build()
    }

    /// Locks that send their short commands over the application's [`MultiplexedConnection`];
    /// `client` opens the dedicated connections that waits need.
    /// See [`LocksBuilder::multiplexed_connection`](crate::LocksBuilder::multiplexed_connection).
    ///
    /// ```no_run
    /// use rlock_client::{redis, Locks};
    ///
    /// # async fn f() -> rlock_client::Result<()> {
    /// let client = redis::Client::open("redis://127.0.0.1/")?;
    /// let conn = client.get_multiplexed_async_connection().await?;
    /// let locks = Locks::with_multiplexed_connection(conn.clone(), client);
    /// # let _ = locks; Ok(()) }
    /// ```
    pub fn with_multiplexed_connection(
        conn: MultiplexedConnection,
        client: redis::Client,
    ) -> Locks {
        Locks::builder(client).multiplexed_connection(conn).build()
    }

    /// This client's uuid: the first half of every owner id it makes.
    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    /// `RLOCK.FORCERELEASE`: deletes the lock whoever holds it. True if there was one.
    /// Its holders find out at their next renewal ([`Error::Lost`]), or within 100 ms when
    /// the server publishes the module's keyspace events (see [`Hold::lost`](crate::Hold::lost)).
    pub async fn force_release(&self, name: &str) -> Result<bool> {
        let v = self.inner.query(&command::force_release(name)).await?;
        command::parse_flag(v, "RLOCK.FORCERELEASE replied")
    }

    /// `RLOCK.INFO`: what the key holds, holders, lease left, fair queue, blocked waiters and
    /// fencing counter.
    ///
    /// It does not fail on what the key holds: a Redisson read-write lock (a hash with a `mode`
    /// field) comes back as [`LockKind::ReadWrite`](crate::LockKind::ReadWrite), a hash of other
    /// fields as [`LockKind::OtherHash`](crate::LockKind::OtherHash), any other type as
    /// [`LockKind::NotALock`](crate::LockKind::NotALock), with the raw fields in
    /// [`LockInfo::other_fields`]. One round trip; two for such keys.
    ///
    /// ```no_run
    /// use rlock_client::LockKind;
    ///
    /// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
    /// let info = locks.info("orders").await?;
    /// match &info.kind {
    ///     LockKind::Free => println!("free"),
    ///     LockKind::Reentrant => println!("held by {:?}, {} ms left", info.holders, info.pttl),
    ///     LockKind::ReadWrite { mode } => println!("a Redisson read-write lock in {mode} mode"),
    ///     other => println!("not a lock: {other:?} {:?}", info.other_fields),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn info(&self, name: &str) -> Result<LockInfo> {
        self.inner.info(name).await
    }
}
