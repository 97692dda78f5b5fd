//! The [`Lock`] handle: its builder, and the lock's wait protocol (a single try on the shared
//! connection; a wait or an acknowledged acquire on a pooled one, given up without leaving a
//! grant behind).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::command::{self, AcquireOptions, HoldName, LockInfo, Side, Wait};
use crate::conn::{Cancelled, Dedicated, Redirect};
use crate::error::{Error, Result};
use crate::hold::{release, Guard, Hold};
use crate::locks::Locks;

impl Locks {
    /// A handle on the lock `name` with a new owner id `<client-uuid>:<n>`.
    ///
    /// Each call gives a new owner: two handles from two calls exclude each other, even in
    /// one task. Clones of one handle share its owner and so re-enter. See [`Lock`](crate::Lock).
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        self.handle(name.into(), self.inner.new_owner())
    }

    /// A handle on the lock `name` with the owner id `owner`, chosen by the caller.
    ///
    /// For a service that shares a lock with a Redisson service under Redisson's owner
    /// (`<client-uuid>:<thread-id>`), or that resumes holds it took before a restart: a handle
    /// with the owner of an existing hold re-enters it ([`Lock::acquire`](crate::Lock::acquire)), counts it
    /// ([`Lock::hold_count`](crate::Lock::hold_count)) and releases it ([`Lock::unlock`](crate::Lock::unlock)). Two handles with the same
    /// owner are the same owner, exactly as two clones are; give contenders different owners.
    /// The server takes owners of 1 to 1024 bytes.
    ///
    /// ```no_run
    /// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
    /// // Taken before a restart by this service, under a stable owner id:
    /// let lock = locks.lock_as("jobs:42", "billing-worker-7");
    /// if lock.hold_count().await? > 0 {
    ///     lock.unlock().await?; // release the hold the previous run left
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_as(&self, name: impl Into<String>, owner: impl Into<String>) -> Lock {
        self.handle(name.into(), Arc::from(owner.into()))
    }

    fn handle(&self, key: String, owner: Arc<str>) -> Lock {
        Lock::new(self.clone(), Arc::from(key), owner)
    }

    /// Waits as long as it takes for `name`, runs `f`, and releases the lock.
    ///
    /// Shorthand for `self.lock(name).with_lock(f)`: see [`Lock::with_lock`](crate::Lock::with_lock).
    pub async fn with_lock<F, Fut, T>(&self, name: impl Into<String>, f: F) -> Result<T>
    where
        F: FnOnce(Hold) -> Fut,
        Fut: Future<Output = T>,
    {
        self.lock(name).with_lock(f).await
    }
}

/// A grant read from an acquire's replies (see [`Lock::read_grant`](crate::Lock::read_grant)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// The acquire's reply: the token when fenced, else the hold count.
    pub reply: u64,
    /// The hold count, when known.
    pub count: Option<u64>,
    pub token: Option<u64>,
    /// Replicas that acknowledged the grant, after a `WAIT`.
    pub replicas: Option<u64>,
}

/// A handle on one lock, carrying one owner id, and the builder of its acquires.
///
/// **Owners, threads and tasks.** Redisson names the owner after the thread, so a thread
/// re-enters its own locks. Async tasks move between threads and share them, so here the
/// owner is the handle: [`Locks::lock`](crate::Locks::lock) makes a new owner `<client-uuid>:<n>`, and every clone
/// of that handle is the same owner.
/// - To re-enter (a function that takes the lock calls another that takes it too), pass a clone
///   of the handle down; each acquire returns its own [`Guard`](crate::Guard) and the lock is free once all of
///   them are released.
/// - To contend (workers, tasks, threads), give each its own handle from [`Locks::lock`](crate::Locks::lock).
///
/// Builder methods return a changed copy; the owner stays the same.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
/// let lock = locks.lock("report").lease(Duration::from_secs(10)).fenced();
/// let outer = lock.acquire().await?.expect("free");
/// let inner = lock.acquire().await?.expect("re-entry by the same owner");
/// inner.release().await?; // still held by `outer`
/// outer.release().await?; // now free
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    locks: Locks,
    key: Arc<str>,
    owner: Arc<str>,
    side: Option<Side>,
    lease: Option<Duration>,
    /// `None`: not set; [`acquire`](Lock::acquire) tries once, [`with_lock`](Lock::with_lock)
    /// waits as long as it takes.
    wait: Option<Wait>,
    fair: bool,
    fenced: bool,
    session: bool,
    replicas: Option<(usize, Duration)>,
}

debug_fields!(Lock |l| {
    key: l.key,
    owner: l.owner,
    side: l.side,
    lease: l.lease,
    wait: l.wait,
    fair: l.fair,
    fenced: l.fenced,
    session: l.session,
    replicas: l.replicas,
});

impl Lock {
    /// A handle on `key` for `owner`, with no option set.
    pub(crate) fn new(locks: Locks, key: Arc<str>, owner: Arc<str>) -> Lock {
        Lock {
            locks,
            key,
            owner,
            side: None,
            lease: None,
            wait: None,
            fair: false,
            fenced: false,
            session: false,
            replicas: None,
        }
    }

    /// The lock's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The owner id every acquire through this handle (and its clones) uses.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The side of a read-write lock this handle takes (see [`Locks::read_write`](crate::Locks::read_write)); `None`
    /// for a reentrant lock.
    pub fn side(&self) -> Option<Side> {
        self.side
    }

    /// This handle, taking `side` of a read-write lock.
    pub(crate) fn on_side(mut self, side: Side) -> Self {
        self.side = Some(side);
        self
    }

    pub(crate) fn hold_name(&self) -> HoldName {
        HoldName {
            key: self.key.clone(),
            owner: self.owner.clone(),
            side: self.side,
            permit: false,
        }
    }

    handle_steps! {
        /// A fixed lease (`LEASE ms`). The watchdog does not renew it: the hold ends when it runs
        /// out unless [`Guard::renew`](crate::Guard::renew) is called, and then [`Hold::lost`](crate::Hold::lost) fires.
        /// Without it the lease is the watchdog lease (30 s) and the watchdog renews it.
        fn lease;
        /// Waits in the server up to `wait` for a busy lock (`BLOCK ms`), first come first served.
        /// `Duration::ZERO` means try once. The wait runs on a pooled connection of its own.
        fn wait;
        /// Waits in the server as long as it takes (`BLOCK 0`). Drop the future to give up.
        fn wait_forever;
    }

    /// First come, first served across all fair acquirers, Redisson's and rlock's (`FAIR`).
    /// Without a wait, a caller that did not get the lock keeps its place in the queue by
    /// trying again within the server's `fair-wait-ms`.
    pub fn fair(mut self) -> Self {
        self.fair = true;
        self
    }

    /// Asks for a fencing token (`TOKEN`): [`Hold::token`](crate::Hold::token) (via the guard) strictly increases each time the
    /// lock goes from free to held. Pass it to the resource you protect and have it refuse
    /// anything older than the newest token it has seen.
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }

    /// Ties the hold to the connection that acquired it (`SESSION`): if that connection
    /// closes, as when this process dies, the server releases the hold at once. A session
    /// hold taken with a wait keeps its pooled connection until the guard goes.
    pub fn session(mut self) -> Self {
        self.session = true;
        self
    }

    /// After acquiring, waits up to `timeout` for `n` replicas to acknowledge the grant
    /// (`WAIT n ms`, pipelined with the acquire) and reports the count in
    /// [`Hold::replicas_acked`](crate::Hold::replicas_acked). Fewer acknowledgements in time: the grant is released and
    /// the acquire fails with [`Error::NotAcknowledged`]. `n` = 0 sends no `WAIT`.
    ///
    /// Without this call the [`Locks`](crate::Locks)' default applies ([`LocksBuilder::sync_replicas`](crate::LocksBuilder::sync_replicas)): one
    /// replica's acknowledgement within 1 s when the primary has replicas, no `WAIT` when it
    /// has none.
    pub fn sync_replicas(mut self, n: usize, timeout: Duration) -> Self {
        self.replicas = Some((n, timeout.max(Duration::from_millis(1))));
        self
    }

    /// Refuses, before anything is sent, what the server would refuse or misread: an empty
    /// name, a zero lease (`LEASE 0` is an error there, and rounding it up to 1 ms would
    /// hand out a lock that is gone before its reply arrives).
    fn check(&self) -> Result<()> {
        let refuse = |reason: &str| {
            Err(Error::InvalidArgument {
                key: self.key.to_string(),
                reason: reason.to_string(),
            })
        };
        if self.key.is_empty() {
            return refuse("a lock name must not be empty");
        }
        if self.owner.is_empty() {
            return refuse("an owner id must not be empty");
        }
        if self.lease.is_some_and(|l| l.is_zero()) {
            return refuse("a lease must be longer than zero");
        }
        Ok(())
    }

    fn options(&self) -> AcquireOptions {
        AcquireOptions {
            lease: self.lease.unwrap_or(self.locks.inner.config.watchdog_lease),
            wait: self.wait.unwrap_or(Wait::No),
            fair: self.fair,
            fenced: self.fenced,
            session: self.session,
        }
    }

    pub(crate) fn waited(&self) -> Option<Duration> {
        match self.wait.unwrap_or(Wait::No) {
            Wait::No => None,
            Wait::For(d) => Some(d),
            Wait::Forever => Some(Duration::MAX),
        }
    }

    /// This handle as the scoped call ([`with_lock`](Self::with_lock)) uses it: waiting as
    /// long as it takes unless a wait was set, as `threading.Lock` and Redisson's `lock()` do.
    pub(crate) fn scoped(&self) -> Lock {
        Lock {
            wait: Some(self.wait.unwrap_or(Wait::Forever)),
            ..self.clone()
        }
    }

    /// Takes the lock, or re-enters it if this owner holds it already.
    ///
    /// `Ok(None)` when it is held by someone else (after the wait, if one was asked for).
    ///
    /// Cost: one round trip on the shared connection. With a wait or
    /// [`sync_replicas`](Self::sync_replicas): one round trip (acquire and `WAIT` pipelined) on
    /// a pooled connection; in a cluster a wait adds one for `CLIENT ID`.
    ///
    /// Cancel-safe: if this future is dropped while the server holds it waiting, its pooled
    /// connection is closed, which ends the wait, and a lock granted in the meantime is
    /// released, never left orphaned.
    pub async fn acquire(&self) -> Result<Option<Guard>> {
        self.check()?;
        let durable = self.durable().await?;
        if durable.replicas.is_some() {
            return durable.acquire_checked().await;
        }
        let opts = self.options();
        if opts.wait == Wait::No {
            let conn = self.locks.inner.conn().await?;
            let sent = Instant::now();
            if !self.fenced {
                let v = conn
                    .query(&command::acquire(&self.hold_name(), &opts))
                    .await?;
                return Ok(command::parse_acquire(v)?.map(|n| self.guard(n, None, sent, None)));
            }
            let mut pipe = self.acquire_pipeline(&opts, &command::request_id());
            let grant = self.read_grant(conn.pipeline(&mut pipe).await?)?;
            Ok(grant.map(|g| self.guard(g.reply, g.count, sent, None)))
        } else {
            self.acquire_dedicated(opts).await
        }
    }

    /// `RLOCK.ACQUIRE`, then for a fenced acquire (whose reply is the token) `HGET key owner`
    /// for the hold count, then `WAIT` if asked: one pipeline, so one round trip. The `HGET`
    /// runs right after the acquire on the same connection (after its wait, for a `BLOCK`).
    fn acquire_pipeline(&self, opts: &AcquireOptions, req: &str) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        let hold = self.hold_name();
        pipe.add_command(command::acquire_as(&hold, opts, req));
        if self.fenced {
            pipe.add_command(command::hold_count(&self.key, &hold.field()));
        }
        if let Some((n, t)) = self.replicas.filter(|(n, _)| *n > 0) {
            pipe.add_command(command::wait_replicas(n, t));
        }
        pipe
    }

    /// This handle with its acknowledgement settled: `replicas` is `Some((n, t))` with
    /// `n` ≥ 1 when a `WAIT` is to be sent, `None` when not. The default asks the
    /// replica count of the lock's primary (kept, see `replicas.rs`).
    async fn durable(&self) -> Result<Lock> {
        let inner = &self.locks.inner;
        let attached = if self.replicas.is_none() && inner.config.durable.0 > 0 {
            let conn = inner.conn().await?;
            inner.replicas.of(&conn, &self.key).await.unwrap_or(0)
        } else {
            0
        };
        Ok(self.settled(attached))
    }

    /// This handle with its acknowledgement settled, given the replicas `attached` to the
    /// lock's primary: `sync_replicas(n, t)` if set, else the default's `n` capped at
    /// `attached`; none (no `WAIT`) when that is 0.
    pub(crate) fn settled(&self, attached: u64) -> Lock {
        let wanted = match self.replicas {
            Some((n, t)) => (n > 0).then_some((n, t)),
            None => {
                let (n, t) = self.locks.inner.config.durable;
                let n = n.min(usize::try_from(attached).unwrap_or(usize::MAX));
                (n > 0).then_some((n, t))
            }
        };
        Lock {
            replicas: wanted,
            ..self.clone()
        }
    }

    /// What an acquire of this handle sends, the replicas `attached` known, with the
    /// `REQ` id `req`: the same pipeline [`acquire`](Self::acquire) sends (its single-try,
    /// unfenced, unacknowledged case sends the pipeline's one command alone).
    #[cfg(test)]
    pub(crate) fn plan(&self, attached: u64, req: &str) -> redis::Pipeline {
        let settled = self.settled(attached);
        settled.acquire_pipeline(&settled.options(), req)
    }

    /// The grant in the replies of [`acquire_pipeline`](Self::acquire_pipeline): the
    /// acquire's reply (the token when fenced, else the hold count), the hold count read
    /// beside a fenced grant, the replicas that acknowledged it (after a `WAIT`).
    pub(crate) fn read_grant(&self, values: Vec<redis::Value>) -> Result<Option<Grant>> {
        let mut values = values.into_iter();
        let granted = command::parse_acquire(values.next().unwrap_or_default())?;
        let count = if self.fenced {
            hold_count_after(values.next())
        } else {
            None
        };
        let replicas = match values.next() {
            Some(v) if self.replicas.is_some() => Some(command::parse_count(v, "WAIT replied")?),
            _ => None,
        };
        Ok(granted.map(|reply| Grant {
            reply,
            count: if self.fenced { count } else { Some(reply) },
            token: self.fenced.then_some(reply),
            replicas,
        }))
    }

    /// Whether `acked` replicas are as many as this (settled) handle asks.
    pub(crate) fn acknowledged(&self, acked: u64) -> bool {
        acked >= self.replicas.map_or(0, |(n, _)| n) as u64
    }

    /// The acquire, on a pooled connection with its `WAIT`; a grant acknowledged by fewer
    /// replicas than asked is released and refused.
    async fn acquire_checked(&self) -> Result<Option<Guard>> {
        let Some(guard) = self.acquire_dedicated(self.options()).await? else {
            return Ok(None);
        };
        let wanted = self.replicas.map_or(0, |(n, _)| n);
        let acked = guard.replicas_acked().unwrap_or(0);
        if self.acknowledged(acked) {
            return Ok(Some(guard));
        }
        self.locks.inner.replicas.stale();
        // If this release fails too, the lease ends the grant: nobody renews it.
        let _ = guard.release().await;
        Err(Error::NotAcknowledged {
            key: self.key.to_string(),
            acked,
            wanted,
        })
    }

    async fn acquire_dedicated(&self, opts: AcquireOptions) -> Result<Option<Guard>> {
        let inner = &self.locks.inner;
        let mut conn = inner.dedicated().await?;
        let blocks = opts.wait != Wait::No;
        let client_id = if blocks {
            Some(conn.client_id(&self.key).await?)
        } else {
            None
        };
        let (mut tx, rx) = oneshot::channel::<Result<Option<Guard>>>();
        let lock = self.clone();
        // The request runs in its own task so that dropping this future cannot lose a grant:
        // the task cancels the wait, and a grant that arrives anyway becomes a Guard whose
        // drop releases it.
        tokio::spawn(async move {
            let sent = Instant::now();
            // One REQ id for every send of this acquire, and for `recover`.
            let req = command::request_id();
            let outcome = {
                let request = lock.send_following_redirects(&mut conn, opts, &req);
                tokio::pin!(request);
                tokio::select! {
                    biased;
                    r = &mut request => Ok((r, true)),
                    _ = tx.closed(), if client_id.is_some() => {
                        let id = client_id.unwrap_or_default();
                        match lock.cancel_wait(id, request).await {
                            // Still blocked: `conn` closes, and the server forgets it; a
                            // grant it wrote before the close is found by its REQ id.
                            Cancelled::Close => Err(Some(id)),
                            Cancelled::Replied(r) => Ok((r, true)),
                            // redis-rs fails a whole pipeline whose connection closed before
                            // its last reply: a grant read before a pipelined WAIT or HGET is
                            // lost with it, so it is found again by its REQ id.
                            Cancelled::Killed(Err(_)) => Err(None),
                            Cancelled::Killed(r) => Ok((r, false)),
                        }
                    }
                }
            };
            let (reply, usable) = match outcome {
                Ok(r) => r,
                Err(closed) => {
                    drop(conn);
                    // A session hold ends with its connection, a delivered grant too.
                    if !lock.session {
                        lock.recover(closed, &req).await;
                    }
                    return;
                }
            };
            let result = lock.grant(reply, sent, blocks, &mut conn);
            let pin = lock.session && matches!(result, Ok(Some(_)));
            let result = match result {
                Ok(Some(mut g)) if pin && usable => {
                    g.pinned = Some(conn);
                    Ok(Some(g))
                }
                Ok(r) => {
                    if usable {
                        lock.locks.inner.pool.give_back(conn);
                    }
                    Ok(r)
                }
                Err(e) => Err(e), // the connection may be broken: close it
            };
            let _ = tx.send(result); // if the caller is gone, the Guard in it drops and releases
        });
        rx.await.unwrap_or_else(|_| {
            Err(Error::lost(
                &self.key,
                "the acquire task stopped: is the runtime shutting down?",
            ))
        })
    }

    /// Sends the acquire pipeline. In a cluster, a wait whose lock's slot moved meanwhile
    /// is answered `-ASK` or `-MOVED` (the server never grants a lock that left it): the
    /// request goes again to the node named, after `ASKING` for `-ASK`, for the wait time
    /// left; once that has run out the reply is null, as for a wait that ran out. A
    /// `-TRYAGAIN` (the slot is being migrated) is sent again 25 ms later, the same way.
    async fn send_following_redirects(
        &self,
        conn: &mut Dedicated,
        opts: AcquireOptions,
        req: &str,
    ) -> redis::RedisResult<Vec<redis::Value>> {
        let started = Instant::now();
        let mut reply = conn.pipeline(&mut self.acquire_pipeline(&opts, req)).await;
        while let Some(redirect) = crate::conn::redirect_of(&reply) {
            if opts.wait == Wait::No {
                return reply;
            }
            let Some(wait) = opts.wait.left(started.elapsed()) else {
                return Ok(vec![redis::Value::Nil]);
            };
            let mut pipe = self.acquire_pipeline(&AcquireOptions { wait, ..opts }, req);
            reply = match redirect {
                Redirect::To { host, port, ask } => conn.pipeline_at(&host, port, ask, &pipe).await,
                Redirect::Later => {
                    tokio::time::sleep(crate::conn::TRY_AGAIN_AFTER).await;
                    conn.pipeline(&mut pipe).await
                }
            };
        }
        reply
    }

    /// The caller gave up while the request may be blocked: see `conn::cancel_wait`.
    async fn cancel_wait<F>(
        &self,
        client_id: i64,
        request: std::pin::Pin<&mut F>,
    ) -> Cancelled<F::Output>
    where
        F: Future,
    {
        let conn = self.locks.inner.conn().await.ok();
        let keep_reading = !self.session;
        crate::conn::cancel_wait(
            conn,
            &self.key,
            client_id,
            &["rlock.acquire", "wait"],
            keep_reading,
            request,
        )
        .await
    }

    /// After a wait given up without its reply read (its connection closed by us, or killed
    /// with a pipeline redis-rs failed whole), finds whether it was granted: the same acquire,
    /// with the same `REQ` id and no `BLOCK`, is sent again. While the grant stands the server
    /// replies the first reply and grants nothing more; the hold is then released. If it was
    /// never made (or was given back), the call runs as a single try, and a lock it takes is
    /// released at once. With `closed`, the connection this side closed (client id), it is
    /// sent only once the server has dropped that connection (`CLIENT LIST ID` empty, or 200
    /// ms where `CLIENT LIST` is refused), so the wait cannot be granted after it.
    async fn recover(&self, closed: Option<i64>, req: &str) {
        let inner = &self.locks.inner;
        let Ok(conn) = inner.conn().await else {
            return; // unreachable server: the lease ends the hold, if any
        };
        if let Some(id) = closed {
            crate::conn::until_gone(&conn, &self.key, id).await;
        }
        let once = AcquireOptions {
            wait: Wait::No,
            fair: false,
            session: false,
            ..self.options()
        };
        let cmd = command::acquire_as(&self.hold_name(), &once, req);
        if let Ok(v) = conn.query(&cmd).await {
            if let Ok(Some(_)) = command::parse_acquire(v) {
                let _ = release(inner, &self.hold_name()).await;
            }
        }
    }

    fn grant(
        &self,
        reply: redis::RedisResult<Vec<redis::Value>>,
        sent: Instant,
        blocked: bool,
        _conn: &mut Dedicated,
    ) -> Result<Option<Guard>> {
        let Some(grant) = self.read_grant(reply?)? else {
            return Ok(None);
        };
        // A blocked acquire was granted some time between send and reply; the reply is the
        // best lower bound we have once a WAIT's duration is set aside.
        let basis = if blocked {
            let now = Instant::now();
            let wait = self.replicas.map(|(_, t)| t).unwrap_or_default();
            now.checked_sub(wait).unwrap_or(sent).max(sent)
        } else {
            sent
        };
        let mut guard = self.guard(grant.reply, grant.count, basis, None);
        guard.hold.replicas = grant.replicas;
        Ok(Some(guard))
    }

    /// A guard for a grant whose reply was `n` (the token when fenced, else the hold count);
    /// `count` is the hold count read beside a fenced grant.
    fn guard(
        &self,
        n: u64,
        count: Option<u64>,
        basis: Instant,
        pinned: Option<Dedicated>,
    ) -> Guard {
        let inner = &self.locks.inner;
        let lease = self.options().lease;
        let renew = self.lease.is_none();
        let name = self.hold_name();
        let (entry, lost) = inner.registry.register(&name, lease, renew, basis);
        let handle = Handle::current();
        inner
            .registry
            .ensure_running(&handle, Arc::downgrade(&self.locks.inner) as _);
        Guard {
            hold: Hold {
                name,
                token: self.fenced.then_some(n),
                count: if self.fenced { count } else { Some(n) },
                replicas: None,
                lost,
                locks: Arc::downgrade(&self.locks.inner),
            },
            inner: self.locks.inner.clone(),
            entry,
            lease,
            pinned,
            handle,
            done: false,
        }
    }

    /// Acquires (with this handle's options), runs `f`, and releases the lock.
    ///
    /// `f` gets the [`Hold`](crate::Hold) by value (token, lost signal) and its output is returned as
    /// `Ok(output)`; an `f` that returns a `Result` gives `Ok(Err(..))` for its own errors.
    /// If the lock is lost while `f` runs, `f` is dropped at its next await point and
    /// [`Error::Lost`] is returned.
    ///
    /// It waits as long as it takes unless the handle sets a [`wait`](Self::wait) (as
    /// `threading.Lock` and Redisson's `lock()` do), while [`acquire`](Self::acquire) without
    /// one tries once. If the wait set ends first (or `wait(Duration::ZERO)` found the lock
    /// held), [`Error::NotAcquired`] is returned and `f` never runs.
    /// The blocking twin, [`blocking::Lock::with_lock`](crate::blocking::Lock::with_lock), has
    /// the same shape with a plain closure: `|hold| ..` instead of `|hold| async move { .. }`.
    ///
    /// ```no_run
    /// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
    /// let lock = locks.lock("report").fenced();
    /// let token = lock.with_lock(|hold| async move { hold.token() }).await?;
    /// # let _ = token; Ok(()) }
    /// ```
    pub async fn with_lock<F, Fut, T>(&self, f: F) -> Result<T>
    where
        F: FnOnce(Hold) -> Fut,
        Fut: Future<Output = T>,
    {
        let scoped = self.scoped();
        let guard = scoped.acquire().await?.ok_or_else(|| Error::NotAcquired {
            key: self.key.to_string(),
            waited: scoped.waited(),
        })?;
        let hold = guard.hold();
        let out = tokio::select! {
            out = f(hold.clone()) => out,
            lost = hold.lost() => return Err(lost),
        };
        guard.release().await?;
        Ok(out)
    }

    /// True if anyone holds the lock: its key exists (`EXISTS`, Redisson's `isLocked`).
    /// One round trip; no guard needed.
    ///
    /// ```no_run
    /// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
    /// let lock = locks.lock("orders");
    /// if lock.is_locked().await? {
    ///     let left = lock.remaining_lease().await?;
    ///     println!("busy for another {left:?}; held by us: {}", lock.hold_count().await? > 0);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn is_locked(&self) -> Result<bool> {
        let v = self.locks.inner.query(&command::exists(&self.key)).await?;
        command::parse_flag(v, "EXISTS replied")
    }

    /// True if `owner` holds the lock (`HEXISTS key owner`, Redisson's `isHeldByThread`), on
    /// this handle's side of a read-write lock (`HEXISTS key owner:write` for the write side).
    /// Pass [`owner()`](Self::owner) to ask about this handle.
    pub async fn is_held_by(&self, owner: &str) -> Result<bool> {
        let hold = HoldName {
            owner: Arc::from(owner),
            ..self.hold_name()
        };
        let v = self
            .locks
            .inner
            .query(&command::hexists(&self.key, &hold.field()))
            .await?;
        command::parse_flag(v, "HEXISTS replied")
    }

    /// How many holds this handle's owner has on the lock (`HGET key owner`; `owner:write` for
    /// the write side of a read-write lock); 0 when none.
    pub async fn hold_count(&self) -> Result<u64> {
        let field = self.hold_name().field();
        let v = self
            .locks
            .inner
            .query(&command::hold_count(&self.key, &field))
            .await?;
        command::parse_hold_count(v)
    }

    /// The lease left on the lock, whoever holds it (`PTTL`); `None` when it is free (or, for
    /// a key set by other means, when it never expires).
    pub async fn remaining_lease(&self) -> Result<Option<Duration>> {
        let v = self.locks.inner.query(&command::pttl(&self.key)).await?;
        command::parse_pttl(v)
    }

    /// `RLOCK.FORCERELEASE`: deletes the lock whoever holds it. See [`Locks::force_release`](crate::Locks::force_release).
    pub async fn force_release(&self) -> Result<bool> {
        self.locks.force_release(&self.key).await
    }

    /// `RLOCK.INFO` on this lock. See [`Locks::info`](crate::Locks::info).
    pub async fn info(&self) -> Result<LockInfo> {
        self.locks.inner.info(&self.key).await
    }

    /// Releases one hold of this handle's owner without a guard (`RLOCK.RELEASE`, Redisson's
    /// `unlock()`): for a hold taken before a restart, or by a Redisson service under the same
    /// owner (see [`Locks::lock_as`](crate::Locks::lock_as)). `Ok(true)` when the lock is now free, `Ok(false)` when
    /// the owner still holds it, [`Error::NotHeld`] when it held nothing.
    ///
    /// A hold that has a [`Guard`](crate::Guard) in this process is released by that guard; releasing it here
    /// as well would undo someone else's re-entry.
    pub async fn unlock(&self) -> Result<bool> {
        release(&self.locks.inner, &self.hold_name()).await
    }
}

/// The hold count from the `HGET` pipelined after a fenced acquire.
fn hold_count_after(v: Option<redis::Value>) -> Option<u64> {
    command::parse_hold_count(v?).ok().filter(|&n| n > 0)
}
