//! The blocking (synchronous) API: the same shapes as the async one, for code without an
//! async runtime. Each [`Locks`] runs a small private tokio runtime (one worker thread) for
//! its connection, its watchdog and background releases.
//!
//! Meant for plain threads. Called from inside an async runtime (a `#[tokio::main]`, a task,
//! `spawn_blocking`) it works too, and never panics: the call then runs on a helper thread of
//! its own while the calling thread waits. It still blocks the calling thread, which inside a
//! runtime is one of its workers (on a current-thread runtime, the whole runtime) for as long
//! as the call takes, waits included; async code should prefer the crate's async API.
//!
//! ```no_run
//! # fn f() -> rlock_client::Result<()> {
//! use rlock_client::blocking::Locks;
//! let locks = Locks::from_url("redis://127.0.0.1/")?;
//! if let Some(guard) = locks.lock("orders").acquire()? {
//!     // ... the critical section ...
//!     guard.release()?;
//! }
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, MultiplexedConnection};

use crate::command::{LockInfo, Side};
use crate::conn::Endpoint;
use crate::election::{Leader, ObserveMode};
use crate::error::{Error, Result};
use crate::lock::Hold;

/// Owns the private runtime. On drop it gives spawned work (background releases) a moment to
/// finish, without blocking if it is dropped inside another runtime.
struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    fn new() -> Result<Arc<Runtime>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rlock-client")
            .enable_all()
            .build()
            .map_err(|e| Error::Redis(e.into()))?;
        Ok(Arc::new(Runtime(Some(rt))))
    }

    /// Runs `f` to completion on this runtime and returns its output. Inside another runtime's
    /// context, where tokio refuses to block (it panics), `f` runs on a scoped helper thread.
    fn block_on<F>(&self, f: F) -> F::Output
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        let rt = self.0.as_ref().expect("runtime lives until drop");
        if tokio::runtime::Handle::try_current().is_err() {
            return rt.block_on(f);
        }
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("rlock-client-call".into())
                .spawn_scoped(s, || rt.block_on(f))
                .expect("spawn a helper thread")
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.0.as_ref().expect("runtime lives until drop").enter()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(2));
            }
        }
    }
}

/// Blocking twin of [`crate::Locks`].
#[derive(Clone)]
pub struct Locks {
    inner: crate::Locks,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Locks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

/// Blocking twin of [`crate::LocksBuilder`].
#[derive(Debug, Clone)]
pub struct LocksBuilder(crate::LocksBuilder);

impl LocksBuilder {
    /// See [`crate::LocksBuilder::watchdog_lease`].
    pub fn watchdog_lease(self, lease: Duration) -> Self {
        LocksBuilder(self.0.watchdog_lease(lease))
    }

    /// See [`crate::LocksBuilder::response_timeout`].
    pub fn response_timeout(self, timeout: Duration) -> Self {
        LocksBuilder(self.0.response_timeout(timeout))
    }

    /// See [`crate::LocksBuilder::sync_replicas`]: the default acknowledgement by replicas.
    pub fn sync_replicas(self, n: usize, timeout: Duration) -> Self {
        LocksBuilder(self.0.sync_replicas(n, timeout))
    }

    /// See [`crate::LocksBuilder::idle_connections`].
    pub fn idle_connections(self, n: usize) -> Self {
        LocksBuilder(self.0.idle_connections(n))
    }

    /// See [`crate::LocksBuilder::connection_manager`]. The manager keeps running on the
    /// runtime that made it, which must outlive these locks.
    pub fn connection_manager(self, conn: ConnectionManager) -> Self {
        LocksBuilder(self.0.connection_manager(conn))
    }

    /// See [`crate::LocksBuilder::multiplexed_connection`]. The connection keeps running on the
    /// runtime that made it, which must outlive these locks.
    pub fn multiplexed_connection(self, conn: MultiplexedConnection) -> Self {
        LocksBuilder(self.0.multiplexed_connection(conn))
    }

    /// Builds the [`Locks`] and starts its runtime thread.
    pub fn build(self) -> Result<Locks> {
        Ok(Locks {
            inner: self.0.build(),
            rt: Runtime::new()?,
        })
    }
}

impl Locks {
    /// See [`crate::Locks::new`]. Fails only if the runtime thread cannot start.
    pub fn new(endpoint: impl Into<Endpoint>) -> Result<Locks> {
        Locks::builder(endpoint).build()
    }

    /// See [`crate::Locks::builder`].
    pub fn builder(endpoint: impl Into<Endpoint>) -> LocksBuilder {
        LocksBuilder(crate::Locks::builder(endpoint))
    }

    /// See [`crate::Locks::from_url`]: locks on the server at `url`, default settings.
    ///
    /// ```no_run
    /// # fn f() -> rlock_client::Result<()> {
    /// let locks = rlock_client::blocking::Locks::from_url("redis://127.0.0.1:6379/")?;
    /// # let _ = locks; Ok(()) }
    /// ```
    pub fn from_url(url: &str) -> Result<Locks> {
        Locks::new(Endpoint::url(url)?)
    }

    /// See [`crate::Locks::client_id`].
    pub fn client_id(&self) -> &str {
        self.inner.client_id()
    }

    /// See [`crate::Locks::lock`]: a new owner id; clones of the handle re-enter.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock {
            inner: self.inner.lock(name),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::lock_as`]: a handle whose owner id is `owner`.
    ///
    /// ```no_run
    /// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
    /// // The owner a Redisson service uses for this lock: `<its client uuid>:<thread id>`.
    /// let shared = locks.lock_as("orders", "6f0c9c1e-4a51-4c1c-9d3e-2b8d7c1d0a11:57");
    /// assert!(shared.is_held_by(shared.owner())? || !shared.is_locked()?);
    /// # Ok(()) }
    /// ```
    pub fn lock_as(&self, name: impl Into<String>, owner: impl Into<String>) -> Lock {
        Lock {
            inner: self.inner.lock_as(name, owner),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::election`].
    pub fn election(&self, name: impl Into<String>) -> Election {
        Election {
            inner: self.inner.election(name),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::semaphore`].
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore {
            inner: self.inner.semaphore(name),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::permit_semaphore`].
    pub fn permit_semaphore(&self, name: impl Into<String>) -> PermitSemaphore {
        PermitSemaphore {
            inner: self.inner.permit_semaphore(name),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::latch`].
    pub fn latch(&self, name: impl Into<String>) -> Latch {
        Latch {
            inner: self.inner.latch(name),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::multi`]: several locks taken together, all or none.
    ///
    /// ```no_run
    /// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
    /// let order = locks.multi(["{order:7}:stock", "{order:7}:payment"]);
    /// if let Some(both) = order.acquire()? {
    ///     both.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn multi<I, S>(&self, names: I) -> MultiKeyLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiKeyLock {
            inner: self.inner.multi(names),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::multi_as`].
    pub fn multi_as<I, S>(&self, names: I, owner: impl Into<String>) -> MultiKeyLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MultiKeyLock {
            inner: self.inner.multi_as(names, owner),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::read_write`]: a read-write lock with a new owner id.
    ///
    /// ```no_run
    /// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
    /// let config = locks.read_write("config");
    /// if let Some(read) = config.read().acquire()? {
    ///     // ... read, alongside other readers ...
    ///     read.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn read_write(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock {
            inner: self.inner.read_write(name),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::Locks::read_write_as`]: a read-write lock whose owner id is `owner`.
    pub fn read_write_as(
        &self,
        name: impl Into<String>,
        owner: impl Into<String>,
    ) -> ReadWriteLock {
        ReadWriteLock {
            inner: self.inner.read_write_as(name, owner),
            rt: self.rt.clone(),
        }
    }

    /// Waits as long as it takes for `name`, runs `f`, and releases the lock.
    /// See [`Lock::with_lock`].
    pub fn with_lock<T>(&self, name: impl Into<String>, f: impl FnOnce(Hold) -> T) -> Result<T> {
        self.lock(name).wait_forever().with_lock(f)
    }

    /// See [`crate::Locks::force_release`].
    pub fn force_release(&self, name: &str) -> Result<bool> {
        self.rt.block_on(self.inner.force_release(name))
    }

    /// See [`crate::Locks::info`].
    pub fn info(&self, name: &str) -> Result<LockInfo> {
        self.rt.block_on(self.inner.info(name))
    }
}

/// Blocking twin of [`crate::Semaphore`].
#[derive(Clone)]
pub struct Semaphore {
    inner: crate::Semaphore,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Semaphore {
    /// See [`crate::Semaphore::wait`].
    pub fn wait(self, wait: Duration) -> Self {
        Semaphore {
            inner: self.inner.wait(wait),
            rt: self.rt,
        }
    }

    /// See [`crate::Semaphore::wait_forever`].
    pub fn wait_forever(self) -> Self {
        Semaphore {
            inner: self.inner.wait_forever(),
            rt: self.rt,
        }
    }

    /// See [`crate::Semaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))
    }

    /// See [`crate::Semaphore::add_permits`].
    pub fn add_permits(&self, permits: i32) -> Result<i64> {
        self.rt.block_on(self.inner.add_permits(permits))
    }

    /// See [`crate::Semaphore::available`].
    pub fn available(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available())
    }

    /// See [`crate::Semaphore::acquire`].
    pub fn acquire(&self, permits: u32) -> Result<Option<Permits>> {
        let permits = self.rt.block_on(self.inner.acquire(permits))?;
        Ok(permits.map(|permits| Permits {
            inner: Some(permits),
            rt: self.rt.clone(),
        }))
    }

    /// See [`crate::Semaphore::release`].
    pub fn release(&self, permits: u32) -> Result<i64> {
        self.rt.block_on(self.inner.release(permits))
    }
}

/// Blocking twin of [`crate::Permits`]. Dropping it gives the permits back in the background.
pub struct Permits {
    inner: Option<crate::Permits>,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Permits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Permits {
    /// See [`crate::Permits::count`].
    pub fn count(&self) -> u32 {
        self.inner.as_ref().map_or(0, |p| p.count())
    }

    /// See [`crate::Permits::release`].
    pub fn release(mut self) -> Result<i64> {
        match self.inner.take() {
            Some(permits) => self.rt.block_on(permits.release()),
            None => Ok(0),
        }
    }

    /// See [`crate::Permits::forget`].
    pub fn forget(mut self) {
        if let Some(permits) = self.inner.take() {
            permits.forget();
        }
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        if let Some(permits) = self.inner.take() {
            let _enter = self.rt.enter();
            drop(permits);
        }
    }
}

/// Blocking twin of [`crate::PermitSemaphore`].
#[derive(Clone)]
pub struct PermitSemaphore {
    inner: crate::PermitSemaphore,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for PermitSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl PermitSemaphore {
    fn with(self, inner: crate::PermitSemaphore) -> Self {
        PermitSemaphore { inner, ..self }
    }

    /// See [`crate::PermitSemaphore::wait`].
    pub fn wait(self, wait: Duration) -> Self {
        let inner = self.inner.clone().wait(wait);
        self.with(inner)
    }

    /// See [`crate::PermitSemaphore::wait_forever`].
    pub fn wait_forever(self) -> Self {
        let inner = self.inner.clone().wait_forever();
        self.with(inner)
    }

    /// See [`crate::PermitSemaphore::lease`].
    pub fn lease(self, lease: Duration) -> Self {
        let inner = self.inner.clone().lease(lease);
        self.with(inner)
    }

    /// See [`crate::PermitSemaphore::try_set_permits`].
    pub fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))
    }

    /// See [`crate::PermitSemaphore::add_permits`].
    pub fn add_permits(&self, permits: i32) -> Result<i64> {
        self.rt.block_on(self.inner.add_permits(permits))
    }

    /// See [`crate::PermitSemaphore::available`].
    pub fn available(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available())
    }

    /// See [`crate::PermitSemaphore::acquire`].
    pub fn acquire(&self) -> Result<Option<LeasedPermit>> {
        let permit = self.rt.block_on(self.inner.acquire())?;
        Ok(permit.map(|permit| self.guard(permit)))
    }

    /// See [`crate::PermitSemaphore::acquire_many`].
    pub fn acquire_many(&self, permits: u32) -> Result<Option<Vec<LeasedPermit>>> {
        let leased = self.rt.block_on(self.inner.acquire_many(permits))?;
        Ok(leased.map(|leased| leased.into_iter().map(|p| self.guard(p)).collect()))
    }

    /// See [`crate::PermitSemaphore::release`].
    pub fn release(&self, id: &str) -> Result<bool> {
        self.rt.block_on(self.inner.release(id))
    }

    fn guard(&self, permit: crate::LeasedPermit) -> LeasedPermit {
        LeasedPermit {
            inner: Some(permit),
            rt: self.rt.clone(),
        }
    }
}

/// Blocking twin of [`crate::LeasedPermit`]. Dropping it gives the permit back in the
/// background.
pub struct LeasedPermit {
    inner: Option<crate::LeasedPermit>,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for LeasedPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl LeasedPermit {
    /// See [`crate::LeasedPermit::id`].
    pub fn id(&self) -> &str {
        self.inner.as_ref().map_or("", |p| p.id())
    }

    /// See [`crate::LeasedPermit::is_lost`].
    pub fn is_lost(&self) -> bool {
        self.inner.as_ref().is_none_or(|p| p.is_lost())
    }

    /// See [`crate::LeasedPermit::renew`].
    pub fn renew(&self) -> Result<()> {
        match &self.inner {
            Some(permit) => self.rt.block_on(permit.renew()),
            None => Ok(()),
        }
    }

    /// See [`crate::LeasedPermit::release`].
    pub fn release(mut self) -> Result<bool> {
        match self.inner.take() {
            Some(permit) => self.rt.block_on(permit.release()),
            None => Ok(false),
        }
    }

    /// See [`crate::LeasedPermit::forget`].
    pub fn forget(mut self) -> String {
        self.inner.take().map(|p| p.forget()).unwrap_or_default()
    }
}

impl Drop for LeasedPermit {
    fn drop(&mut self) {
        if let Some(permit) = self.inner.take() {
            let _enter = self.rt.enter();
            drop(permit);
        }
    }
}

/// Blocking twin of [`crate::Latch`].
#[derive(Clone)]
pub struct Latch {
    inner: crate::Latch,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Latch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Latch {
    /// See [`crate::Latch::wait`].
    pub fn wait(self, wait: Duration) -> Self {
        Latch {
            inner: self.inner.wait(wait),
            rt: self.rt,
        }
    }

    /// See [`crate::Latch::wait_forever`].
    pub fn wait_forever(self) -> Self {
        Latch {
            inner: self.inner.wait_forever(),
            rt: self.rt,
        }
    }

    /// See [`crate::Latch::try_set_count`].
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_count(count))
    }

    /// See [`crate::Latch::count_down`].
    pub fn count_down(&self) -> Result<i64> {
        self.rt.block_on(self.inner.count_down())
    }

    /// See [`crate::Latch::count`].
    pub fn count(&self) -> Result<i64> {
        self.rt.block_on(self.inner.count())
    }

    /// See [`crate::Latch::await_zero`].
    pub fn await_zero(&self) -> Result<bool> {
        self.rt.block_on(self.inner.await_zero())
    }
}

/// Blocking twin of [`crate::MultiKeyLock`]: several locks, all or none.
#[derive(Clone)]
pub struct MultiKeyLock {
    inner: crate::MultiKeyLock,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for MultiKeyLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl MultiKeyLock {
    fn map(self, f: impl FnOnce(crate::MultiKeyLock) -> crate::MultiKeyLock) -> Self {
        MultiKeyLock {
            inner: f(self.inner),
            rt: self.rt,
        }
    }

    /// Every key.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.inner.keys()
    }

    /// The owner id of every lock of the set.
    pub fn owner(&self) -> &str {
        self.inner.owner()
    }

    /// See [`crate::MultiKeyLock::lease`].
    pub fn lease(self, lease: Duration) -> Self {
        self.map(|l| l.lease(lease))
    }

    /// See [`crate::MultiKeyLock::wait`].
    pub fn wait(self, wait: Duration) -> Self {
        self.map(|l| l.wait(wait))
    }

    /// See [`crate::MultiKeyLock::wait_forever`].
    pub fn wait_forever(self) -> Self {
        self.map(|l| l.wait_forever())
    }

    /// See [`crate::MultiKeyLock::session`].
    pub fn session(self) -> Self {
        self.map(|l| l.session())
    }

    /// See [`crate::MultiKeyLock::acquire`].
    pub fn acquire(&self) -> Result<Option<MultiKeyGuard>> {
        let guard = self.rt.block_on(self.inner.acquire())?;
        Ok(guard.map(|guard| MultiKeyGuard {
            inner: Some(guard),
            rt: self.rt.clone(),
        }))
    }
}

/// Blocking twin of [`crate::MultiKeyGuard`]. Dropping it releases the locks in the
/// background.
pub struct MultiKeyGuard {
    inner: Option<crate::MultiKeyGuard>,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for MultiKeyGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl MultiKeyGuard {
    /// True once any of the locks is lost.
    pub fn is_lost(&self) -> bool {
        self.inner.as_ref().is_some_and(|g| g.is_lost())
    }

    /// See [`crate::MultiKeyGuard::release`].
    pub fn release(mut self) -> Result<()> {
        match self.inner.take() {
            Some(guard) => self.rt.block_on(guard.release()),
            None => Ok(()),
        }
    }
}

impl Drop for MultiKeyGuard {
    fn drop(&mut self) {
        // The async guard's drop spawns its release on the private runtime.
        if let Some(guard) = self.inner.take() {
            let _enter = self.rt.enter();
            drop(guard);
        }
    }
}

/// Blocking twin of [`crate::ReadWriteLock`]: read and write sides with one owner id.
#[derive(Clone)]
pub struct ReadWriteLock {
    inner: crate::ReadWriteLock,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl ReadWriteLock {
    /// The lock's key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The owner id of both sides.
    pub fn owner(&self) -> &str {
        self.inner.owner()
    }

    /// See [`crate::ReadWriteLock::read`].
    pub fn read(&self) -> Lock {
        Lock {
            inner: self.inner.read(),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::ReadWriteLock::write`].
    pub fn write(&self) -> Lock {
        Lock {
            inner: self.inner.write(),
            rt: self.rt.clone(),
        }
    }

    /// See [`crate::ReadWriteLock::is_locked`].
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())
    }

    /// See [`crate::ReadWriteLock::info`].
    pub fn info(&self) -> Result<LockInfo> {
        self.rt.block_on(self.inner.info())
    }

    /// See [`crate::ReadWriteLock::force_release`].
    pub fn force_release(&self) -> Result<bool> {
        self.rt.block_on(self.inner.force_release())
    }
}

/// Blocking twin of [`crate::Lock`]: a handle with one owner id, and the builder of acquires.
#[derive(Clone)]
pub struct Lock {
    inner: crate::Lock,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Lock {
    fn map(self, f: impl FnOnce(crate::Lock) -> crate::Lock) -> Lock {
        Lock {
            inner: f(self.inner),
            rt: self.rt,
        }
    }

    /// The lock's key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The owner id of this handle and its clones.
    pub fn owner(&self) -> &str {
        self.inner.owner()
    }

    /// See [`crate::Lock::side`].
    pub fn side(&self) -> Option<Side> {
        self.inner.side()
    }

    /// See [`crate::Lock::lease`].
    pub fn lease(self, lease: Duration) -> Self {
        self.map(|l| l.lease(lease))
    }

    /// See [`crate::Lock::wait`].
    pub fn wait(self, wait: Duration) -> Self {
        self.map(|l| l.wait(wait))
    }

    /// See [`crate::Lock::wait_forever`].
    pub fn wait_forever(self) -> Self {
        self.map(|l| l.wait_forever())
    }

    /// See [`crate::Lock::fair`].
    pub fn fair(self) -> Self {
        self.map(|l| l.fair())
    }

    /// See [`crate::Lock::fenced`].
    pub fn fenced(self) -> Self {
        self.map(|l| l.fenced())
    }

    /// See [`crate::Lock::session`].
    pub fn session(self) -> Self {
        self.map(|l| l.session())
    }

    /// See [`crate::Lock::sync_replicas`].
    pub fn sync_replicas(self, n: usize, timeout: Duration) -> Self {
        self.map(|l| l.sync_replicas(n, timeout))
    }

    /// See [`crate::Lock::acquire`]; blocks the calling thread for the wait.
    pub fn acquire(&self) -> Result<Option<Guard>> {
        let g = self.rt.block_on(self.inner.acquire())?;
        Ok(g.map(|g| Guard {
            inner: Some(g),
            rt: self.rt.clone(),
        }))
    }

    /// Acquires, runs `f` on this thread, and releases: the same shape as the async
    /// [`crate::Lock::with_lock`]. `f` gets the [`Hold`] by value and its output is returned as
    /// `Ok(output)` (an `f` that returns a `Result` gives `Ok(Err(..))` for its own errors).
    /// [`Error::Timeout`] if the lock was not acquired. Unlike the async twin, `f` cannot be
    /// interrupted: if the hold was lost while it ran, the result is [`Error::Lost`], since
    /// `f`'s work may have overlapped another holder.
    ///
    /// ```no_run
    /// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
    /// let lock = locks.lock("report").fenced();
    /// let token = lock.with_lock(|hold| hold.token())?;
    /// // async twin: lock.with_lock(|hold| async move { hold.token() }).await?
    /// # let _ = token; Ok(()) }
    /// ```
    pub fn with_lock<T>(&self, f: impl FnOnce(Hold) -> T) -> Result<T> {
        let guard = self.acquire()?.ok_or_else(|| Error::Timeout {
            key: self.key().to_owned(),
            waited: self.inner.waited(),
        })?;
        let out = f(guard.hold());
        guard.release()?;
        Ok(out)
    }

    /// See [`crate::Lock::is_locked`].
    ///
    /// ```no_run
    /// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
    /// let lock = locks.lock("orders");
    /// println!(
    ///     "locked: {}, ours: {}, lease left: {:?}",
    ///     lock.is_locked()?,
    ///     lock.hold_count()?,
    ///     lock.remaining_lease()?
    /// );
    /// # Ok(()) }
    /// ```
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())
    }

    /// See [`crate::Lock::is_held_by`].
    pub fn is_held_by(&self, owner: &str) -> Result<bool> {
        self.rt.block_on(self.inner.is_held_by(owner))
    }

    /// See [`crate::Lock::hold_count`].
    pub fn hold_count(&self) -> Result<u64> {
        self.rt.block_on(self.inner.hold_count())
    }

    /// See [`crate::Lock::remaining_lease`].
    pub fn remaining_lease(&self) -> Result<Option<Duration>> {
        self.rt.block_on(self.inner.remaining_lease())
    }

    /// See [`crate::Lock::force_release`].
    pub fn force_release(&self) -> Result<bool> {
        self.rt.block_on(self.inner.force_release())
    }

    /// See [`crate::Lock::info`].
    pub fn info(&self) -> Result<LockInfo> {
        self.rt.block_on(self.inner.info())
    }

    /// See [`crate::Lock::unlock`].
    pub fn unlock(&self) -> Result<bool> {
        self.rt.block_on(self.inner.unlock())
    }
}

/// Blocking twin of [`crate::Guard`]. Dropping it releases the lock in the background.
pub struct Guard {
    inner: Option<crate::Guard>,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl std::ops::Deref for Guard {
    type Target = Hold;
    fn deref(&self) -> &Hold {
        self.inner.as_ref().expect("present until release")
    }
}

impl Guard {
    fn guard(&self) -> &crate::Guard {
        self.inner.as_ref().expect("present until release")
    }

    /// A clone of the [`Hold`].
    pub fn hold(&self) -> Hold {
        self.guard().hold()
    }

    /// See [`crate::Guard::renew`].
    pub fn renew(&self) -> Result<()> {
        self.rt.block_on(self.guard().renew())
    }

    /// See [`crate::Guard::release`].
    pub fn release(mut self) -> Result<bool> {
        let g = self.inner.take().expect("present until release");
        self.rt.block_on(g.release())
    }

    /// Blocks up to `timeout` for the hold to be lost; `Some(Error::Lost)` if it was.
    /// `wait_lost(Duration::ZERO)` just checks.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Error> {
        let hold = self.hold();
        self.rt
            .block_on(async { tokio::time::timeout(timeout, hold.lost()).await.ok() })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // The async guard spawns its release on the private runtime; entering it makes that
        // work even when this thread has no runtime of its own.
        let _enter = self.rt.enter();
        self.inner.take();
    }
}

/// Blocking twin of [`crate::Election`]: a leader election.
///
/// ```no_run
/// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
/// let election = locks.election("scheduler");
/// let leadership = election.campaign("node-a:8080")?; // blocks until elected
/// while leadership.wait_lost(std::time::Duration::from_secs(1)).is_none() {
///     // ... one step of the leader's work, fenced with leadership.term() ...
/// #   break;
/// }
/// leadership.resign()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    inner: crate::Election,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Election {
    /// See [`crate::Election::name`].
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// See [`crate::Election::sync_replicas`].
    pub fn sync_replicas(self, n: usize, timeout: Duration) -> Self {
        Election {
            inner: self.inner.sync_replicas(n, timeout),
            rt: self.rt,
        }
    }

    /// See [`crate::Election::campaign`]; blocks the calling thread until elected.
    pub fn campaign(&self, value: impl Into<String>) -> Result<Leadership> {
        let value: String = value.into();
        let l = self.rt.block_on(self.inner.campaign(value))?;
        Ok(Leadership {
            inner: Some(l),
            rt: self.rt.clone(),
        })
    }

    /// See [`crate::Election::campaign_for`]; blocks the calling thread up to `wait`.
    pub fn campaign_for(
        &self,
        value: impl Into<String>,
        wait: Duration,
    ) -> Result<Option<Leadership>> {
        let value: String = value.into();
        let l = self.rt.block_on(self.inner.campaign_for(value, wait))?;
        Ok(l.map(|l| Leadership {
            inner: Some(l),
            rt: self.rt.clone(),
        }))
    }

    /// See [`crate::Election::leader`].
    pub fn leader(&self) -> Result<Option<Leader>> {
        self.rt.block_on(self.inner.leader())
    }

    /// See [`crate::Election::observe`]. The observer runs on this [`Locks`]'s runtime; the
    /// returned [`LeaderChanges`] is also an [`Iterator`] that blocks for each item.
    pub fn observe(&self) -> Result<LeaderChanges> {
        let inner = self.rt.block_on(self.inner.observe())?;
        Ok(LeaderChanges {
            inner,
            rt: self.rt.clone(),
        })
    }
}

/// Blocking twin of [`crate::Leadership`]. Dropping it steps down in the background.
pub struct Leadership {
    inner: Option<crate::Leadership>,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl Leadership {
    fn leadership(&self) -> &crate::Leadership {
        self.inner.as_ref().expect("present until resign")
    }

    /// See [`crate::Leadership::name`].
    pub fn name(&self) -> &str {
        self.leadership().name()
    }

    /// See [`crate::Leadership::value`].
    pub fn value(&self) -> &str {
        self.leadership().value()
    }

    /// See [`crate::Leadership::term`].
    pub fn term(&self) -> u64 {
        self.leadership().term()
    }

    /// See [`crate::Leadership::replicas_acked`].
    pub fn replicas_acked(&self) -> Option<u64> {
        self.leadership().replicas_acked()
    }

    /// See [`crate::Leadership::hold`].
    pub fn hold(&self) -> Hold {
        self.leadership().hold()
    }

    /// See [`crate::Leadership::is_lost`].
    pub fn is_lost(&self) -> bool {
        self.leadership().is_lost()
    }

    /// Blocks up to `timeout` for the post to be lost; `Some(Error::Lost)` if it was (the
    /// blocking [`crate::Leadership::lost`]). `wait_lost(Duration::ZERO)` just checks.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Error> {
        let hold = self.hold();
        self.rt
            .block_on(async { tokio::time::timeout(timeout, hold.lost()).await.ok() })
    }

    /// See [`crate::Leadership::resign`].
    pub fn resign(mut self) -> Result<()> {
        let l = self.inner.take().expect("present until resign");
        self.rt.block_on(l.resign())
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let _enter = self.rt.enter();
        self.inner.take();
    }
}

/// Blocking twin of [`crate::LeaderChanges`]; an [`Iterator`] whose `next` blocks for the next
/// item (it never returns `None` while the [`Locks`] lives).
pub struct LeaderChanges {
    inner: crate::LeaderChanges,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for LeaderChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl LeaderChanges {
    /// Blocks up to `timeout` for the next item; `None` if none came.
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<Result<Option<Leader>>> {
        let inner = &mut self.inner;
        self.rt
            .block_on(async { tokio::time::timeout(timeout, inner.next()).await.ok() })
    }

    /// See [`crate::LeaderChanges::mode`].
    pub fn mode(&self) -> ObserveMode {
        self.inner.mode()
    }
}

impl Iterator for LeaderChanges {
    type Item = Result<Option<Leader>>;

    fn next(&mut self) -> Option<Self::Item> {
        let inner = &mut self.inner;
        Some(self.rt.block_on(inner.next()))
    }
}

/// Blocking twin of [`crate::MultiLocks`].
#[derive(Clone)]
pub struct MultiLocks {
    inner: crate::MultiLocks,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for MultiLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl MultiLocks {
    /// See [`crate::MultiLocks::new`]. Fails only if the runtime thread cannot start.
    pub fn new(primaries: impl IntoIterator<Item = redis::Client>) -> Result<MultiLocks> {
        MultiLocks::from_async(crate::MultiLocks::new(primaries))
    }

    /// Wraps an async [`crate::MultiLocks`] built with its builder.
    pub fn from_async(inner: crate::MultiLocks) -> Result<MultiLocks> {
        Ok(MultiLocks {
            inner,
            rt: Runtime::new()?,
        })
    }

    /// See [`crate::MultiLocks::lock`].
    pub fn lock(&self, name: impl Into<String>) -> MultiLock {
        MultiLock {
            inner: self.inner.lock(name),
            rt: self.rt.clone(),
        }
    }
}

/// Blocking twin of [`crate::MultiLock`].
#[derive(Clone, Debug)]
pub struct MultiLock {
    inner: crate::MultiLock,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runtime")
    }
}

impl MultiLock {
    /// See [`crate::MultiLock::lease`].
    pub fn lease(self, lease: Duration) -> Self {
        MultiLock {
            inner: self.inner.lease(lease),
            rt: self.rt,
        }
    }

    /// See [`crate::MultiLock::wait`].
    pub fn wait(self, wait: Duration) -> Self {
        MultiLock {
            inner: self.inner.wait(wait),
            rt: self.rt,
        }
    }

    /// See [`crate::MultiLock::fenced`].
    pub fn fenced(self) -> Self {
        MultiLock {
            inner: self.inner.fenced(),
            rt: self.rt,
        }
    }

    /// See [`crate::MultiLock::acquire`].
    pub fn acquire(&self) -> Result<Option<MultiGuard>> {
        let g = self.rt.block_on(self.inner.acquire())?;
        Ok(g.map(|g| MultiGuard {
            inner: Some(g),
            rt: self.rt.clone(),
        }))
    }
}

/// Blocking twin of [`crate::MultiGuard`].
#[derive(Debug)]
pub struct MultiGuard {
    inner: Option<crate::MultiGuard>,
    rt: Arc<Runtime>,
}

impl std::ops::Deref for MultiGuard {
    type Target = crate::MultiGuard;
    fn deref(&self) -> &crate::MultiGuard {
        self.inner.as_ref().expect("present until release")
    }
}

impl MultiGuard {
    /// See [`crate::MultiGuard::renew`].
    pub fn renew(&mut self) -> Result<()> {
        let g = self.inner.as_mut().expect("present until release");
        self.rt.block_on(g.renew())
    }

    /// See [`crate::MultiGuard::release`].
    pub fn release(mut self) -> usize {
        let g = self.inner.take().expect("present until release");
        self.rt.block_on(g.release())
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        let _enter = self.rt.enter();
        self.inner.take();
    }
}
