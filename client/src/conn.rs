//! Connections: one shared multiplexed connection for short commands, and a small pool of
//! dedicated connections for commands that may block in the server (`BLOCK`, `WAIT`).
//!
//! **No silent re-sends.** A lock command sent twice is not harmless: a repeated
//! `RLOCK.ACQUIRE` re-enters (hold count 2, so one release leaves the lock held), a repeated
//! `RLOCK.RELEASE` undoes a second re-entry, a repeated `RLOCK.FORCERELEASE` may delete the next
//! holder's lock. What redis-rs 1.8 does on its own, per path this crate uses:
//! - `MultiplexedConnection` (plain-server dedicated connections, and a connection the
//!   application hands in): sends each request once; a timeout or a dropped connection comes
//!   back as an error.
//! - `ConnectionManager` (the shared connection on a plain server): on an I/O error it
//!   reconnects in the background and returns the error; it never re-sends the request.
//!   `set_number_of_retries` counts reconnection attempts, not command re-sends.
//! - The async cluster client re-sends a request after an I/O error (a response timeout
//!   included, up to `retries` times, 16 by default) as well as after `MOVED`/`ASK`/`TRYAGAIN`.
//!   So lock traffic needs a `ClusterClient` built with `.retries(0)`: [`Endpoint::cluster`]
//!   builds one, and a `ClusterClient` with retries left is refused on first use.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisResult, Value};

/// Where the locks live: one Redis/Valkey server (a standalone primary) or a Redis Cluster.
///
/// Built from a [`redis::Client`] or a [`redis::cluster::ClusterClient`] with `.into()`, so
/// [`Locks::new`](crate::Locks::new) takes either.
///
/// A `ClusterClient` must be built with `.retries(0)`: redis-rs's cluster client otherwise
/// re-sends a command after a timeout or a dropped connection, and a re-sent `RLOCK.ACQUIRE`
/// re-enters the lock. [`Endpoint::cluster`] builds such a client; one with retries left is
/// refused (an `InvalidClientConfig` error) on first use.
///
/// ```
/// use rlock_client::{redis, Endpoint, Locks};
///
/// # fn f() -> rlock_client::Result<()> {
/// let server = Endpoint::url("redis://127.0.0.1:6379/")?;
/// let cluster = Endpoint::cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"])?;
/// // The same by hand: retries(0) is what makes a ClusterClient acceptable.
/// let by_hand: Endpoint = redis::cluster::ClusterClientBuilder::new(["redis://127.0.0.1:7000/"])
///     .retries(0)
///     .build()?
///     .into();
/// let locks = Locks::new(cluster);
/// # let _ = (server, by_hand, locks);
/// # Ok(()) }
/// ```
// Built once per `Locks`: a TLS-capable `redis::Client` is large, and boxing it would make every
// caller unwrap a box to match on it for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Endpoint {
    /// A single server, reached through a [`redis::Client`].
    Server(redis::Client),
    /// A Redis Cluster, reached through redis-rs's cluster client. Keys are routed by slot;
    /// the helper keys of one lock share its slot, so every command is single-slot.
    Cluster(Box<ClusterClient>),
}

impl Endpoint {
    /// A single server from a URL such as `redis://127.0.0.1:6379/` (see [`redis::Client::open`]).
    pub fn url(url: &str) -> RedisResult<Endpoint> {
        Ok(Endpoint::Server(redis::Client::open(url)?))
    }

    /// A single server over TLS: `url` is `rediss://host:port/db`, and `certs` give the CA
    /// that signed the server's certificate (`root_cert`, PEM; `None`: the system's roots)
    /// and, for a server that asks clients for one (`tls-auth-clients yes`), the client's
    /// certificate and key (`client_tls`, PEM). A `rediss://` URL alone
    /// ([`Endpoint::url`]) checks the server against the system's roots;
    /// `rediss://host:port/#insecure` checks nothing (tests only).
    ///
    /// ```no_run
    /// use rlock_client::{redis, Endpoint, Locks};
    ///
    /// # fn f() -> rlock_client::Result<()> {
    /// let certs = redis::TlsCertificates {
    ///     client_tls: Some(redis::ClientTlsConfig {
    ///         client_cert: std::fs::read("client.crt").unwrap(),
    ///         client_key: std::fs::read("client.key").unwrap(),
    ///     }),
    ///     root_cert: Some(std::fs::read("ca.crt").unwrap()),
    /// };
    /// let locks = Locks::new(Endpoint::tls("rediss://redis.internal:6380/", certs)?);
    /// # let _ = locks; Ok(()) }
    /// ```
    pub fn tls(url: &str, certs: redis::TlsCertificates) -> RedisResult<Endpoint> {
        Ok(Endpoint::Server(redis::Client::build_with_tls(url, certs)?))
    }

    /// A Redis Cluster over TLS (`rediss://` node URLs), with `certs` as in
    /// [`Endpoint::tls`] and re-sends off as in [`Endpoint::cluster`].
    pub fn cluster_tls<T: redis::IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = T>,
        certs: redis::TlsCertificates,
    ) -> RedisResult<Endpoint> {
        let client = redis::cluster::ClusterClientBuilder::new(nodes)
            .retries(0)
            .certs(certs)
            .build()?;
        Ok(Endpoint::Cluster(Box::new(client)))
    }

    /// A Redis Cluster from the URLs of some of its nodes, with redis-rs's command re-sends
    /// turned off (`retries(0)`), as lock traffic needs.
    ///
    /// Without re-sends, a `MOVED` or `ASK` reply during resharding comes back as an error
    /// (the client refreshes its slot map meanwhile); such a command was not applied, so
    /// calling again is safe.
    pub fn cluster<T: redis::IntoConnectionInfo>(
        nodes: impl IntoIterator<Item = T>,
    ) -> RedisResult<Endpoint> {
        let client = redis::cluster::ClusterClientBuilder::new(nodes)
            .retries(0)
            .build()?;
        Ok(Endpoint::Cluster(Box::new(client)))
    }
}

/// How many times a cluster client re-sends a failed command, read from its `Debug` output
/// (redis-rs has no getter). `None` if that output no longer shows it.
pub(crate) fn cluster_retries(client: &ClusterClient) -> Option<u32> {
    let text = format!("{client:?}");
    let rest = &text[text.find("number_of_retries: ")? + "number_of_retries: ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Refuses a cluster client that would re-send lock commands on its own.
fn check_no_retries(client: &ClusterClient) -> RedisResult<()> {
    match cluster_retries(client) {
        Some(n) if n > 0 => Err(redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "rlock-client needs a ClusterClient that does not re-send commands",
            format!(
                "this one re-sends a command up to {n} times after a timeout or a dropped \
                 connection, which can take a lock twice or release it twice; build it with \
                 ClusterClientBuilder::new(nodes).retries(0), or use Endpoint::cluster(nodes)"
            ),
        ))),
        _ => Ok(()),
    }
}

impl From<redis::Client> for Endpoint {
    fn from(c: redis::Client) -> Self {
        Endpoint::Server(c)
    }
}

impl From<ClusterClient> for Endpoint {
    fn from(c: ClusterClient) -> Self {
        Endpoint::Cluster(Box::new(c))
    }
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Server(c) => write!(f, "Server({:?})", c.get_connection_info().addr()),
            Endpoint::Cluster(_) => write!(f, "Cluster"),
        }
    }
}

fn route(key: &str) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(
        key,
        SlotAddr::Master,
    )))
}

/// The shared connection. Cheap to clone; requests are multiplexed.
#[derive(Clone)]
pub(crate) enum Conn {
    Single(ConnectionManager),
    /// A connection the application handed in (it does not reconnect by itself).
    Plain(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl From<ConnectionManager> for Conn {
    fn from(c: ConnectionManager) -> Self {
        Conn::Single(c)
    }
}

impl From<MultiplexedConnection> for Conn {
    fn from(c: MultiplexedConnection) -> Self {
        Conn::Plain(c)
    }
}

impl Conn {
    pub(crate) async fn open(endpoint: &Endpoint, response_timeout: Duration) -> RedisResult<Conn> {
        match endpoint {
            Endpoint::Server(client) => {
                // Few, short retries: a watchdog must notice a dead server within a lease.
                let config = ConnectionManagerConfig::new()
                    .set_response_timeout(Some(response_timeout))
                    .set_connection_timeout(Some(response_timeout))
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_millis(500));
                let m = ConnectionManager::new_lazy_with_config(client.clone(), config)?;
                Ok(Conn::Single(m))
            }
            Endpoint::Cluster(client) => {
                check_no_retries(client)?;
                Ok(Conn::Cluster(client.get_async_connection().await?))
            }
        }
    }

    /// True for a cluster connection, whose pipelines must be single-slot.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// In a cluster, a command answered `-MOVED` or `-ASK` (its slot moved; the server ran
    /// nothing) goes again to the node named, up to `MAX_REDIRECTS` times.
    pub(crate) async fn query(&self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Conn::Single(c) => cmd.query_async(&mut c.clone()).await,
            Conn::Plain(c) => cmd.query_async(&mut c.clone()).await,
            Conn::Cluster(c) => {
                let mut reply = cmd.query_async(&mut c.clone()).await.map(|v| vec![v]);
                let mut pipe = redis::pipe();
                pipe.add_command(cmd.clone());
                for _ in 0..MAX_REDIRECTS {
                    reply = match redirect_of(&reply) {
                        None => break,
                        Some(Redirect::To { host, port, ask }) => {
                            pipeline_at(&mut c.clone(), &host, port, ask, &pipe).await
                        }
                        Some(Redirect::Later) => {
                            tokio::time::sleep(TRY_AGAIN_AFTER).await;
                            cmd.query_async(&mut c.clone()).await.map(|v| vec![v])
                        }
                    };
                }
                match reply?.into_iter().next() {
                    Some(Value::ServerError(e)) => Err(e.into()),
                    Some(v) => Ok(v),
                    None => Ok(Value::Nil),
                }
            }
        }
    }

    /// Runs `pipe` and returns one value per command; server errors come back as
    /// `Value::ServerError` items. In a cluster the pipeline must be single-slot.
    pub(crate) async fn pipeline(&self, pipe: &mut Pipeline) -> RedisResult<Vec<Value>> {
        pipe.ignore_errors();
        let v: Value = match self {
            Conn::Single(c) => pipe.query_async(&mut c.clone()).await?,
            Conn::Plain(c) => pipe.query_async(&mut c.clone()).await?,
            Conn::Cluster(c) => {
                let mut reply = pipe
                    .query_async(&mut c.clone())
                    .await
                    .and_then(|v| flatten(v, pipe.len()));
                for _ in 0..MAX_REDIRECTS {
                    reply = match redirect_of(&reply) {
                        None => break,
                        Some(Redirect::To { host, port, ask }) => {
                            pipeline_at(&mut c.clone(), &host, port, ask, pipe).await
                        }
                        Some(Redirect::Later) => {
                            tokio::time::sleep(TRY_AGAIN_AFTER).await;
                            pipe.query_async(&mut c.clone())
                                .await
                                .and_then(|v| flatten(v, pipe.len()))
                        }
                    };
                }
                return reply;
            }
        };
        flatten(v, pipe.len())
    }

    /// Sends `cmd`, whose keys are not where the cluster client looks for them (after
    /// `owner numkeys`), to the primary that serves `key`; a redirection is followed.
    pub(crate) async fn query_for_key(&self, key: &str, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Conn::Cluster(c) => {
                let first = c.clone().route_command(cmd.clone(), route(key)).await;
                match first {
                    Err(e) if e.is_cluster_error() => self.query(cmd).await,
                    r => r,
                }
            }
            _ => self.query(cmd).await,
        }
    }

    /// Sends a keyless command to the primary that serves `key` (plain servers: the server).
    pub(crate) async fn query_on_node_of(&self, key: &str, cmd: Cmd) -> RedisResult<Value> {
        match self {
            Conn::Single(_) | Conn::Plain(_) => self.query(&cmd).await,
            Conn::Cluster(c) => c.clone().route_command(cmd, route(key)).await,
        }
    }
}

fn flatten(v: Value, n: usize) -> RedisResult<Vec<Value>> {
    match v {
        Value::Array(items) if items.len() == n => Ok(items),
        other => Err(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "pipeline reply",
            format!("{other:?}"),
        ))),
    }
}

/// How a wait the caller gave up on ended (see `cancel_wait`).
pub(crate) enum Cancelled<T> {
    /// Still blocked, and nothing read from it is needed: the caller closes the connection,
    /// and the server forgets a closed connection's waiter and gives back a grant it never
    /// delivered.
    Close,
    /// Its reply came; the connection is as good as before.
    Replied(T),
    /// The server closed the connection at the caller's word (`CLIENT KILL`): the reply it
    /// had sent before, or the error of the closed connection. The connection is dead.
    Killed(T),
}

/// Returns once the server has dropped the connection `id` on the node of `key` (`CLIENT LIST
/// ID` empty; 3 s at most), or 200 ms later where `CLIENT LIST` is refused: after this, a wait
/// on that connection can no longer be granted, and its `REQ` id tells whether it was.
pub(crate) async fn until_gone(conn: &Conn, key: &str, id: i64) {
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let mut list = redis::cmd("CLIENT");
        list.arg("LIST").arg("ID").arg(id);
        match conn.query_on_node_of(key, list).await {
            Ok(v) if crate::command::text(&v).is_some_and(|t| t.trim().is_empty()) => return,
            Ok(_) if tokio::time::Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            Ok(_) => return,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                return;
            }
        }
    }
}

/// The caller gave up while a request on a dedicated connection (client `client_id` on
/// the node of `key`) may be blocked in the server, in one of `commands` (their names: the
/// wait itself, and for an acquire the `WAIT` pipelined after its grant).
///
/// If the server shows it blocked in one of `commands` (`CLIENT LIST` flag `b`, `cmd=`),
/// the server ends it: `CLIENT KILL ID` on the shared connection, while this connection
/// still reads. A grant the server wrote before the kill is read (and the caller gives it
/// back); one made in the kill's turn, not yet written, the server gives back itself when
/// the connection goes. Closing the connection from this side instead would lose the first
/// kind: the server can grant, and write the reply, between its `CLIENT LIST` answer and
/// the moment it reads the close (even in the very turn of `CLIENT LIST`, whose flag `b`
/// stays set until the server runs the module's reply callback, before it sleeps), and a
/// reply written to a socket nobody reads leaves the hold orphaned for its lease.
///
/// With `keep_reading` false (a `SESSION` wait: its holds end with its connection, a
/// delivered grant too) the connection is closed at once instead: `Close`. So it is too
/// when `CLIENT KILL` is refused (an ACL user allowed `CLIENT LIST` only): a grant the
/// server wrote just before the close is then not read here, and stays held; the caller
/// learns it after the close from the request's `REQ` id (see `Lock::recover`).
///
/// Otherwise the request has not reached the server yet, or its reply is on its way, or it
/// is blocked after that reply (a `WAIT` pipelined after a grant): the reply is awaited,
/// and looked for again every 50 ms, up to 3 s.
///
/// `CLIENT UNBLOCK` is never sent. Before Redis 7.4 it does not unblock rlock waits, and
/// Redis (7.0 to 7.4 at least) also "unblocks" a request that a `CLIENT PAUSE WRITE` or a
/// `FAILOVER` holds back: `TIMEOUT` then kills the server, and `ERROR` replies
/// `-UNBLOCKED` and runs the command anyway once the pause ends, a grant nobody awaits.
/// `CLIENT KILL` is safe there: a request held back goes with its connection.
pub(crate) async fn cancel_wait<F: std::future::Future>(
    conn: Option<Conn>,
    key: &str,
    client_id: i64,
    commands: &[&str],
    keep_reading: bool,
    mut request: std::pin::Pin<&mut F>,
) -> Cancelled<F::Output> {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < give_up {
        if let Some(conn) = &conn {
            let mut list = redis::cmd("CLIENT");
            list.arg("LIST").arg("ID").arg(client_id);
            let listed = conn.query_on_node_of(key, list).await;
            let line = listed
                .ok()
                .and_then(|v| redis::from_redis_value::<String>(v).ok());
            let line = line.as_deref().unwrap_or_default();
            if crate::command::client_is_blocked_in(line, commands) {
                if !keep_reading {
                    return Cancelled::Close;
                }
                let mut kill = redis::cmd("CLIENT");
                kill.arg("KILL").arg("ID").arg(client_id);
                return match conn.query_on_node_of(key, kill).await {
                    Err(e) if e.code() == Some("NOPERM") => Cancelled::Close,
                    // Killed, or gone already ("No such client"): either way the
                    // connection ends now, after what the server wrote to it.
                    _ => match tokio::time::timeout(KILLED_WITHIN, request.as_mut()).await {
                        Ok(r) => Cancelled::Killed(r),
                        Err(_) => Cancelled::Close,
                    },
                };
            }
        }
        tokio::select! {
            r = request.as_mut() => return Cancelled::Replied(r),
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    Cancelled::Close
}

/// How long a connection the server was told to close may take to end, reply included.
const KILLED_WITHIN: Duration = Duration::from_secs(3);

/// Groups keys by cluster slot, so a cluster pipeline stays single-slot.
pub(crate) fn slot_of(key: &str) -> Slot {
    Slot::for_key(key)
}

/// A connection used by one blocking request at a time. It has no response timeout, so a
/// `BLOCK` or `WAIT` can take as long as it asked for.
pub(crate) struct Dedicated {
    conn: DedicatedConn,
    /// `CLIENT ID` on a plain server, used to see in `CLIENT LIST` whether a request the
    /// caller gave up on is blocked.
    id: Option<i64>,
}

enum DedicatedConn {
    Single(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Dedicated {
    async fn open(endpoint: &Endpoint, connect_timeout: Duration) -> RedisResult<Dedicated> {
        match endpoint {
            Endpoint::Server(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_response_timeout(None)
                    .set_connection_timeout(Some(connect_timeout));
                let mut c = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?;
                let id: i64 = redis::cmd("CLIENT").arg("ID").query_async(&mut c).await?;
                Ok(Dedicated {
                    conn: DedicatedConn::Single(c),
                    id: Some(id),
                })
            }
            Endpoint::Cluster(client) => {
                check_no_retries(client)?;
                let config = ClusterConfig::new().set_connection_timeout(connect_timeout);
                let c = client.get_async_connection_with_config(config).await?;
                Ok(Dedicated {
                    conn: DedicatedConn::Cluster(c),
                    id: None,
                })
            }
        }
    }

    /// The id of this connection's client on the node that serves `key`.
    /// In a cluster it costs a round trip, since the node depends on the key.
    pub(crate) async fn client_id(&mut self, key: &str) -> RedisResult<i64> {
        match (&mut self.conn, self.id) {
            (_, Some(id)) => Ok(id),
            (DedicatedConn::Cluster(c), None) => {
                let v = c
                    .route_command(redis::cmd("CLIENT").arg("ID").clone(), route(key))
                    .await?;
                redis::from_redis_value(v).map_err(Into::into)
            }
            (DedicatedConn::Single(_), None) => unreachable!("plain connections know their id"),
        }
    }

    /// `pipe` on the cluster node at `host:port` (see `pipeline_at`); refused on a plain
    /// server, where nothing redirects.
    pub(crate) async fn pipeline_at(
        &mut self,
        host: &str,
        port: u16,
        ask: bool,
        pipe: &Pipeline,
    ) -> RedisResult<Vec<Value>> {
        match &mut self.conn {
            DedicatedConn::Cluster(c) => pipeline_at(c, host, port, ask, pipe).await,
            DedicatedConn::Single(_) => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "a redirection from a server that is not in a cluster",
            ))),
        }
    }

    /// `pipe` on the primary that serves `key`, for commands whose keys the cluster client
    /// does not find by itself; on a plain server, `pipeline`.
    pub(crate) async fn pipeline_for_key(
        &mut self,
        key: &str,
        pipe: &mut Pipeline,
    ) -> RedisResult<Vec<Value>> {
        match &mut self.conn {
            DedicatedConn::Cluster(c) => {
                pipe.ignore_errors();
                let node =
                    SingleNodeRoutingInfo::SpecificNode(Route::with_key(key, SlotAddr::Master));
                c.route_pipeline(pipe.clone(), 0, pipe.len(), node).await
            }
            DedicatedConn::Single(_) => self.pipeline(pipe).await,
        }
    }

    pub(crate) async fn pipeline(&mut self, pipe: &mut Pipeline) -> RedisResult<Vec<Value>> {
        pipe.ignore_errors();
        let v: Value = match &mut self.conn {
            DedicatedConn::Single(c) => pipe.query_async(c).await?,
            DedicatedConn::Cluster(c) => pipe.query_async(c).await?,
        };
        flatten(v, pipe.len())
    }
}

/// How many redirections (or `-TRYAGAIN`s) one request follows: a slot moves once per
/// resharding step, and a migration of a lock's few keys takes milliseconds.
const MAX_REDIRECTS: usize = 8;

/// `pipe` on the cluster node at `host:port`, after `ASKING` when `ask` (a slot being
/// migrated there): one value per command of `pipe`, errors as `Value::ServerError`.
async fn pipeline_at(
    c: &mut ClusterConnection,
    host: &str,
    port: u16,
    ask: bool,
    pipe: &Pipeline,
) -> RedisResult<Vec<Value>> {
    let mut full = redis::pipe();
    if ask {
        full.cmd("ASKING");
    }
    for cmd in pipe.cmd_iter() {
        full.add_command(cmd.clone());
    }
    full.ignore_errors();
    let route = SingleNodeRoutingInfo::ByAddress {
        host: host.to_string(),
        port,
    };
    c.route_pipeline(full, ask as usize, pipe.len(), route)
        .await
}

/// What a cluster reply asks of the request: go to another node (`-MOVED`, or `-ASK`
/// with `ASKING` first), or come back shortly (`-TRYAGAIN`: the lock's slot is being
/// migrated). Read from the whole reply or from its first command's. Either way the
/// server ran nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Redirect {
    To { host: String, port: u16, ask: bool },
    Later,
}

/// How long a request waits before it is sent again after `-TRYAGAIN`.
pub(crate) const TRY_AGAIN_AFTER: Duration = Duration::from_millis(25);

pub(crate) fn redirect_of(reply: &RedisResult<Vec<Value>>) -> Option<Redirect> {
    let error: redis::RedisError = match reply {
        Err(e) => e.clone(),
        Ok(values) => match values.first() {
            Some(Value::ServerError(e)) => e.clone().into(),
            _ => return None,
        },
    };
    if matches!(
        error.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain)
    ) {
        return Some(Redirect::Later);
    }
    let (addr, _slot) = error.redirect_node()?;
    let ask = matches!(
        error.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::Ask)
    );
    let (host, port) = addr.rsplit_once(':')?;
    Some(Redirect::To {
        host: host.to_string(),
        port: port.parse().ok()?,
        ask,
    })
}

/// Idle dedicated connections, at most `max_idle` of them.
pub(crate) struct Pool {
    idle: Mutex<Vec<Dedicated>>,
    max_idle: usize,
}

impl Pool {
    pub(crate) fn new(max_idle: usize) -> Pool {
        Pool {
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    pub(crate) async fn take(
        &self,
        endpoint: &Endpoint,
        connect_timeout: Duration,
    ) -> RedisResult<Dedicated> {
        let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match pooled {
            Some(d) => Ok(d),
            None => Dedicated::open(endpoint, connect_timeout).await,
        }
    }

    /// Returns a healthy connection; past `max_idle` it is closed instead.
    pub(crate) fn give_back(&self, d: Dedicated) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_retries_are_read_and_a_retrying_client_is_refused() {
        // Pins redis-rs's Debug format: if an upgrade changes it, this fails instead of the
        // check silently passing every client.
        let default = ClusterClient::new(["redis://127.0.0.1:7000/"]).unwrap();
        assert_eq!(cluster_retries(&default), Some(16));
        let err = check_no_retries(&default).unwrap_err();
        assert_eq!(err.kind(), redis::ErrorKind::InvalidClientConfig);
        assert!(err.to_string().contains("retries(0)"), "{err}");
        let Endpoint::Cluster(ours) = Endpoint::cluster(["redis://127.0.0.1:7000/"]).unwrap()
        else {
            panic!("a cluster endpoint")
        };
        assert_eq!(cluster_retries(&ours), Some(0));
        assert!(check_no_retries(&ours).is_ok());
    }
}
