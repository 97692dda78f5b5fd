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

/// Owns the private runtime. On drop it gives spawned work (background releases) a moment to
/// finish, without blocking if it is dropped inside another runtime.
#[derive(Debug)]
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

/// A blocking twin, made from its async value and the runtime its calls run on.
trait Twin {
    type Async;
    fn twin(inner: Self::Async, rt: Arc<Runtime>) -> Self;
}

/// The twin of `inner`, on `rt`.
fn wrap<T: Twin>(rt: &Arc<Runtime>, inner: T::Async) -> T {
    T::twin(inner, rt.clone())
}

/// Declares the twin of a handle: the async handle and the runtime, cloned together.
macro_rules! twin {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            inner: $inner,
            rt: Arc<Runtime>,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.inner.fmt(f)
            }
        }

        impl Twin for $name {
            type Async = $inner;
            fn twin(inner: $inner, rt: Arc<Runtime>) -> Self {
                $name { inner, rt }
            }
        }
    };
}

/// Declares the twin of a guard: the async guard, taken out when it is given back, and the
/// runtime. Dropped, it drops the async guard inside the runtime, whose background release
/// (spawned by that guard's drop) then works even on a thread with no runtime of its own.
macro_rules! guard_twin {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        pub struct $name {
            inner: Option<$inner>,
            rt: Arc<Runtime>,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.inner.fmt(f)
            }
        }

        impl Twin for $name {
            type Async = $inner;
            fn twin(inner: $inner, rt: Arc<Runtime>) -> Self {
                $name { inner: Some(inner), rt }
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                let _enter = self.rt.enter();
                self.inner.take();
            }
        }
    };
}

/// Builder steps: this twin with the async handle's step of the same name applied.
macro_rules! steps {
    ($($(#[$doc:meta])* fn $f:ident($($a:ident: $t:ty),*);)*) => {$(
        $(#[$doc])*
        pub fn $f(self, $($a: $t),*) -> Self {
            Self { inner: self.inner.$f($($a),*), rt: self.rt }
        }
    )*};
}

/// Calls that block the calling thread on the async call of the same name.
macro_rules! calls {
    ($($(#[$doc:meta])* fn $f:ident(&self $(, $a:ident: $t:ty)*) -> $r:ty;)*) => {$(
        $(#[$doc])*
        pub fn $f(&self $(, $a: $t)*) -> $r {
            self.rt.block_on(self.inner.$f($($a),*))
        }
    )*};
}

/// Calls that make another twin on this runtime (a handle from a factory).
macro_rules! makes {
    ($($(#[$doc:meta])* fn $f:ident(&self $(, $a:ident: $t:ty)*) -> $r:ident;)*) => {$(
        $(#[$doc])*
        pub fn $f(&self $(, $a: $t)*) -> $r {
            wrap(&self.rt, self.inner.$f($($a),*))
        }
    )*};
}

/// Acquires that block the calling thread, and give the twin of what they got.
macro_rules! acquires {
    ($($(#[$doc:meta])* fn $f:ident(&self $(, $a:ident: $t:ty)*) -> $r:ident;)*) => {$(
        $(#[$doc])*
        pub fn $f(&self $(, $a: $t)*) -> Result<Option<$r>> {
            let got = self.rt.block_on(self.inner.$f($($a),*))?;
            Ok(got.map(|g| wrap(&self.rt, g)))
        }
    )*};
}

twin! {
    /// Blocking twin of [`crate::Locks`].
    Locks(crate::Locks)
}

/// Blocking twin of [`crate::LocksBuilder`].
#[derive(Debug, Clone)]
pub struct LocksBuilder {
    inner: crate::LocksBuilder,
}

impl LocksBuilder {
    fn map(self, f: impl FnOnce(crate::LocksBuilder) -> crate::LocksBuilder) -> Self {
        LocksBuilder {
            inner: f(self.inner),
        }
    }

    /// See [`crate::LocksBuilder::watchdog_lease`].
    pub fn watchdog_lease(self, lease: Duration) -> Self {
        self.map(|b| b.watchdog_lease(lease))
    }

    /// See [`crate::LocksBuilder::response_timeout`].
    pub fn response_timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.response_timeout(timeout))
    }

    /// See [`crate::LocksBuilder::sync_replicas`]: the default acknowledgement by replicas.
    pub fn sync_replicas(self, n: usize, timeout: Duration) -> Self {
        self.map(|b| b.sync_replicas(n, timeout))
    }

    /// See [`crate::LocksBuilder::idle_connections`].
    pub fn idle_connections(self, n: usize) -> Self {
        self.map(|b| b.idle_connections(n))
    }

    /// See [`crate::LocksBuilder::connection_manager`]. The manager keeps running on the
    /// runtime that made it, which must outlive these locks.
    pub fn connection_manager(self, conn: ConnectionManager) -> Self {
        self.map(|b| b.connection_manager(conn))
    }

    /// See [`crate::LocksBuilder::multiplexed_connection`]. The connection keeps running on the
    /// runtime that made it, which must outlive these locks.
    pub fn multiplexed_connection(self, conn: MultiplexedConnection) -> Self {
        self.map(|b| b.multiplexed_connection(conn))
    }

    /// Builds the [`Locks`] and starts its runtime thread.
    pub fn build(self) -> Result<Locks> {
        Ok(Locks::twin(self.inner.build(), Runtime::new()?))
    }
}

impl Locks {
    /// See [`crate::Locks::new`]. Fails only if the runtime thread cannot start.
    pub fn new(endpoint: impl Into<Endpoint>) -> Result<Locks> {
        Locks::builder(endpoint).build()
    }

    /// See [`crate::Locks::builder`].
    pub fn builder(endpoint: impl Into<Endpoint>) -> LocksBuilder {
        LocksBuilder {
            inner: crate::Locks::builder(endpoint),
        }
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

    makes! {
        /// See [`crate::Locks::lock`]: a new owner id; clones of the handle re-enter.
        fn lock(&self, name: impl Into<String>) -> Lock;
        /// See [`crate::Locks::lock_as`]: a handle whose owner id is `owner`.
        ///
        /// ```no_run
        /// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
        /// // The owner a Redisson service uses for this lock: `<its client uuid>:<thread id>`.
        /// let shared = locks.lock_as("orders", "6f0c9c1e-4a51-4c1c-9d3e-2b8d7c1d0a11:57");
        /// assert!(shared.is_held_by(shared.owner())? || !shared.is_locked()?);
        /// # Ok(()) }
        /// ```
        fn lock_as(&self, name: impl Into<String>, owner: impl Into<String>) -> Lock;
        /// See [`crate::Locks::election`].
        fn election(&self, name: impl Into<String>) -> Election;
        /// See [`crate::Locks::semaphore`].
        fn semaphore(&self, name: impl Into<String>) -> Semaphore;
        /// See [`crate::Locks::permit_semaphore`].
        fn permit_semaphore(&self, name: impl Into<String>) -> PermitSemaphore;
        /// See [`crate::Locks::latch`].
        fn latch(&self, name: impl Into<String>) -> Latch;
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
        fn read_write(&self, name: impl Into<String>) -> ReadWriteLock;
        /// See [`crate::Locks::read_write_as`]: a read-write lock whose owner id is `owner`.
        fn read_write_as(&self, name: impl Into<String>, owner: impl Into<String>) -> ReadWriteLock;
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
    pub fn multi<I, S>(&self, names: I) -> MultiLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        wrap(&self.rt, self.inner.multi(names))
    }

    /// See [`crate::Locks::multi_as`].
    pub fn multi_as<I, S>(&self, names: I, owner: impl Into<String>) -> MultiLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        wrap(&self.rt, self.inner.multi_as(names, owner))
    }

    /// Waits as long as it takes for `name`, runs `f`, and releases the lock.
    /// See [`Lock::with_lock`].
    pub fn with_lock<T>(&self, name: impl Into<String>, f: impl FnOnce(Hold) -> T) -> Result<T> {
        self.lock(name).with_lock(f)
    }

    calls! {
        /// See [`crate::Locks::force_release`].
        fn force_release(&self, name: &str) -> Result<bool>;
        /// See [`crate::Locks::info`].
        fn info(&self, name: &str) -> Result<LockInfo>;
    }
}

twin! {
    /// Blocking twin of [`crate::Semaphore`].
    Semaphore(crate::Semaphore)
}

impl Semaphore {
    steps! {
        /// See [`crate::Semaphore::wait`].
        fn wait(wait: Duration);
        /// See [`crate::Semaphore::wait_forever`].
        fn wait_forever();
    }

    calls! {
        /// See [`crate::Semaphore::try_set_permits`].
        fn try_set_permits(&self, permits: u32) -> Result<bool>;
        /// See [`crate::Semaphore::add_permits`].
        fn add_permits(&self, permits: i32) -> Result<i64>;
        /// See [`crate::Semaphore::available`].
        fn available(&self) -> Result<i64>;
        /// See [`crate::Semaphore::release`].
        fn release(&self, permits: u32) -> Result<i64>;
    }

    acquires! {
        /// See [`crate::Semaphore::acquire`].
        fn acquire(&self, permits: u32) -> Permits;
    }
}

guard_twin! {
    /// Blocking twin of [`crate::Permits`]. Dropping it gives the permits back in the background.
    Permits(crate::Permits)
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

twin! {
    /// Blocking twin of [`crate::PermitSemaphore`].
    PermitSemaphore(crate::PermitSemaphore)
}

impl PermitSemaphore {
    steps! {
        /// See [`crate::PermitSemaphore::wait`].
        fn wait(wait: Duration);
        /// See [`crate::PermitSemaphore::wait_forever`].
        fn wait_forever();
        /// See [`crate::PermitSemaphore::lease`].
        fn lease(lease: Duration);
    }

    calls! {
        /// See [`crate::PermitSemaphore::try_set_permits`].
        fn try_set_permits(&self, permits: u32) -> Result<bool>;
        /// See [`crate::PermitSemaphore::add_permits`].
        fn add_permits(&self, permits: i32) -> Result<i64>;
        /// See [`crate::PermitSemaphore::available`].
        fn available(&self) -> Result<i64>;
        /// See [`crate::PermitSemaphore::release`].
        fn release(&self, id: &str) -> Result<bool>;
    }

    acquires! {
        /// See [`crate::PermitSemaphore::acquire`].
        fn acquire(&self) -> LeasedPermit;
    }

    /// See [`crate::PermitSemaphore::acquire_many`].
    pub fn acquire_many(&self, permits: u32) -> Result<Option<Vec<LeasedPermit>>> {
        let leased = self.rt.block_on(self.inner.acquire_many(permits))?;
        Ok(leased.map(|leased| leased.into_iter().map(|p| wrap(&self.rt, p)).collect()))
    }
}

guard_twin! {
    /// Blocking twin of [`crate::LeasedPermit`]. Dropping it gives the permit back in the
    /// background.
    LeasedPermit(crate::LeasedPermit)
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

twin! {
    /// Blocking twin of [`crate::Latch`].
    Latch(crate::Latch)
}

impl Latch {
    steps! {
        /// See [`crate::Latch::wait`].
        fn wait(wait: Duration);
        /// See [`crate::Latch::wait_forever`].
        fn wait_forever();
    }

    calls! {
        /// See [`crate::Latch::try_set_count`].
        fn try_set_count(&self, count: u64) -> Result<bool>;
        /// See [`crate::Latch::count_down`].
        fn count_down(&self) -> Result<i64>;
        /// See [`crate::Latch::count`].
        fn count(&self) -> Result<i64>;
        /// See [`crate::Latch::await_zero`].
        fn await_zero(&self) -> Result<bool>;
    }
}

twin! {
    /// Blocking twin of [`crate::MultiLock`]: several locks, all or none.
    MultiLock(crate::MultiLock)
}

impl MultiLock {
    /// Every key.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.inner.keys()
    }

    /// The owner id of every lock of the set.
    pub fn owner(&self) -> &str {
        self.inner.owner()
    }

    steps! {
        /// See [`crate::MultiLock::lease`].
        fn lease(lease: Duration);
        /// See [`crate::MultiLock::wait`].
        fn wait(wait: Duration);
        /// See [`crate::MultiLock::wait_forever`].
        fn wait_forever();
        /// See [`crate::MultiLock::session`].
        fn session();
    }

    acquires! {
        /// See [`crate::MultiLock::acquire`].
        fn acquire(&self) -> MultiGuard;
    }

    /// Takes every lock (waiting as long as it takes unless the handle sets a wait), runs `f`
    /// on this thread, and releases them: see [`crate::MultiLock::with_lock`].
    /// [`Error::NotAcquired`] if a wait set ended first; [`Error::Lost`] if a lock was lost
    /// while `f` ran (which cannot be interrupted).
    pub fn with_lock<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        let scoped = MultiLock {
            inner: self.inner.scoped(),
            rt: self.rt.clone(),
        };
        let guard = scoped
            .acquire()?
            .ok_or_else(|| scoped.inner.not_acquired())?;
        let out = f();
        guard.release()?;
        Ok(out)
    }
}

/// The name of [`MultiLock`] before 4.1.
#[deprecated(since = "4.1.0", note = "renamed MultiLock, Redisson's name for it")]
pub type MultiKeyLock = MultiLock;
/// The name of [`MultiGuard`] before 4.1.
#[deprecated(since = "4.1.0", note = "renamed MultiGuard")]
pub type MultiKeyGuard = MultiGuard;

guard_twin! {
    /// Blocking twin of [`crate::MultiGuard`]. Dropping it releases the locks in the
    /// background.
    MultiGuard(crate::MultiGuard)
}

impl MultiGuard {
    /// True once any of the locks is lost.
    pub fn is_lost(&self) -> bool {
        self.inner.as_ref().is_some_and(|g| g.is_lost())
    }

    /// See [`crate::MultiGuard::release`].
    pub fn release(mut self) -> Result<()> {
        match self.inner.take() {
            Some(guard) => self.rt.block_on(guard.release()),
            None => Ok(()),
        }
    }
}

twin! {
    /// Blocking twin of [`crate::ReadWriteLock`]: read and write sides with one owner id.
    ReadWriteLock(crate::ReadWriteLock)
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

    makes! {
        /// See [`crate::ReadWriteLock::read`].
        fn read(&self) -> Lock;
        /// See [`crate::ReadWriteLock::write`].
        fn write(&self) -> Lock;
    }

    calls! {
        /// See [`crate::ReadWriteLock::is_locked`].
        fn is_locked(&self) -> Result<bool>;
        /// See [`crate::ReadWriteLock::info`].
        fn info(&self) -> Result<LockInfo>;
        /// See [`crate::ReadWriteLock::force_release`].
        fn force_release(&self) -> Result<bool>;
    }
}

twin! {
    /// Blocking twin of [`crate::Lock`]: a handle with one owner id, and the builder of acquires.
    Lock(crate::Lock)
}

impl Lock {
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

    steps! {
        /// See [`crate::Lock::lease`].
        fn lease(lease: Duration);
        /// See [`crate::Lock::wait`].
        fn wait(wait: Duration);
        /// See [`crate::Lock::wait_forever`].
        fn wait_forever();
        /// See [`crate::Lock::fair`].
        fn fair();
        /// See [`crate::Lock::fenced`].
        fn fenced();
        /// See [`crate::Lock::session`].
        fn session();
        /// See [`crate::Lock::sync_replicas`].
        fn sync_replicas(n: usize, timeout: Duration);
    }

    acquires! {
        /// See [`crate::Lock::acquire`]; blocks the calling thread for the wait.
        fn acquire(&self) -> Guard;
    }

    /// Acquires, runs `f` on this thread, and releases: the same shape as the async
    /// [`crate::Lock::with_lock`]. `f` gets the [`Hold`] (whose `guard` blocks) by value and
    /// its output is returned as
    /// `Ok(output)` (an `f` that returns a `Result` gives `Ok(Err(..))` for its own errors).
    /// Waits as long as it takes unless the handle sets a wait; [`Error::NotAcquired`] if that
    /// wait ended first. Unlike the async twin, `f` cannot be
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
        let scoped = Lock {
            inner: self.inner.scoped(),
            rt: self.rt.clone(),
        };
        let guard = scoped.acquire()?.ok_or_else(|| Error::NotAcquired {
            key: self.key().to_owned(),
            waited: scoped.inner.waited(),
        })?;
        let out = f(Hold {
            inner: guard.held().hold(),
            rt: self.rt.clone(),
        });
        guard.release()?;
        Ok(out)
    }

    calls! {
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
        fn is_locked(&self) -> Result<bool>;
        /// See [`crate::Lock::is_held_by`].
        fn is_held_by(&self, owner: &str) -> Result<bool>;
        /// See [`crate::Lock::hold_count`].
        fn hold_count(&self) -> Result<u64>;
        /// See [`crate::Lock::remaining_lease`].
        fn remaining_lease(&self) -> Result<Option<Duration>>;
        /// See [`crate::Lock::force_release`].
        fn force_release(&self) -> Result<bool>;
        /// See [`crate::Lock::info`].
        fn info(&self) -> Result<LockInfo>;
        /// See [`crate::Lock::unlock`].
        fn unlock(&self) -> Result<bool>;
    }
}

guard_twin! {
    /// Blocking twin of [`crate::Guard`]. Dropping it releases the lock in the background.
    Guard(crate::Guard)
}

impl std::ops::Deref for Guard {
    type Target = crate::Hold;
    fn deref(&self) -> &crate::Hold {
        self.held()
    }
}

impl Guard {
    fn held(&self) -> &crate::Guard {
        self.inner.as_ref().expect("present until release")
    }

    /// A clone of the [`crate::Hold`].
    pub fn hold(&self) -> crate::Hold {
        self.held().hold()
    }

    /// See [`crate::Hold::guard`]: runs `command` only while this hold stands, and blocks
    /// the calling thread for its reply.
    ///
    /// ```no_run
    /// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
    /// use rlock_client::redis;
    ///
    /// let guard = locks.lock("orders").fenced().acquire()?.expect("free");
    /// let mut set = redis::cmd("SET");
    /// set.arg("{orders}:total").arg(42);
    /// let _: () = guard.guard(&set)?;
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn guard<T: redis::FromRedisValue + Send>(&self, command: &redis::Cmd) -> Result<T> {
        self.rt.block_on(self.held().guard(command))
    }

    /// See [`crate::Guard::renew`].
    pub fn renew(&self) -> Result<()> {
        self.rt.block_on(self.held().renew())
    }

    /// See [`crate::Guard::release`].
    pub fn release(mut self) -> Result<bool> {
        let g = self.inner.take().expect("present until release");
        self.rt.block_on(g.release())
    }

    /// Blocks up to `timeout` for the hold to be lost; `Some(Error::Lost)` if it was.
    /// `wait_lost(Duration::ZERO)` just checks.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Error> {
        wait_lost(&self.rt, self.hold(), timeout)
    }
}

/// The hold a blocking [`Lock::with_lock`] gives its closure: [`crate::Hold`]'s reads (through
/// `Deref`), and a [`guard`](Hold::guard) that blocks the calling thread.
#[derive(Debug, Clone)]
pub struct Hold {
    inner: crate::Hold,
    rt: Arc<Runtime>,
}

impl std::ops::Deref for Hold {
    type Target = crate::Hold;
    fn deref(&self) -> &crate::Hold {
        &self.inner
    }
}

impl Hold {
    /// See [`crate::Hold::guard`]: runs `command` only while this hold stands, and blocks
    /// the calling thread for its reply.
    ///
    /// ```no_run
    /// # fn f(locks: rlock_client::blocking::Locks) -> rlock_client::Result<()> {
    /// use rlock_client::redis;
    ///
    /// let mut set = redis::cmd("SET");
    /// set.arg("{orders}:total").arg(42);
    /// locks.lock("orders").fenced().with_lock(|hold| hold.guard::<()>(&set))??;
    /// # Ok(()) }
    /// ```
    pub fn guard<T: redis::FromRedisValue + Send>(&self, command: &redis::Cmd) -> Result<T> {
        self.rt.block_on(self.inner.guard(command))
    }

    /// Blocks up to `timeout` for the hold to be lost; `Some(Error::Lost)` if it was.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Error> {
        wait_lost(&self.rt, self.inner.clone(), timeout)
    }
}

/// Blocks up to `timeout` for `hold` to be lost.
fn wait_lost(rt: &Runtime, hold: crate::Hold, timeout: Duration) -> Option<Error> {
    rt.block_on(async { tokio::time::timeout(timeout, hold.lost()).await.ok() })
}

twin! {
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
    Election(crate::Election)
}

impl Election {
    /// See [`crate::Election::name`].
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    steps! {
        /// See [`crate::Election::sync_replicas`].
        fn sync_replicas(n: usize, timeout: Duration);
    }

    /// See [`crate::Election::campaign`]; blocks the calling thread until elected.
    pub fn campaign(&self, value: impl Into<String>) -> Result<Leadership> {
        let value: String = value.into();
        Ok(wrap(
            &self.rt,
            self.rt.block_on(self.inner.campaign(value))?,
        ))
    }

    /// See [`crate::Election::campaign_for`]; blocks the calling thread up to `wait`.
    pub fn campaign_for(
        &self,
        value: impl Into<String>,
        wait: Duration,
    ) -> Result<Option<Leadership>> {
        let value: String = value.into();
        let l = self.rt.block_on(self.inner.campaign_for(value, wait))?;
        Ok(l.map(|l| wrap(&self.rt, l)))
    }

    calls! {
        /// See [`crate::Election::leader`].
        fn leader(&self) -> Result<Option<Leader>>;
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

guard_twin! {
    /// Blocking twin of [`crate::Leadership`]. Dropping it steps down in the background.
    Leadership(crate::Leadership)
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
    pub fn hold(&self) -> crate::Hold {
        self.leadership().hold()
    }

    /// See [`crate::Leadership::is_lost`].
    pub fn is_lost(&self) -> bool {
        self.leadership().is_lost()
    }

    /// Blocks up to `timeout` for the post to be lost; `Some(Error::Lost)` if it was (the
    /// blocking [`crate::Leadership::lost`]). `wait_lost(Duration::ZERO)` just checks.
    pub fn wait_lost(&self, timeout: Duration) -> Option<Error> {
        wait_lost(&self.rt, self.hold(), timeout)
    }

    /// See [`crate::Leadership::guard`]: "write only while leader", blocking for the reply.
    pub fn guard<T: redis::FromRedisValue + Send>(&self, command: &redis::Cmd) -> Result<T> {
        self.rt.block_on(self.leadership().guard(command))
    }

    /// See [`crate::Leadership::resign`].
    pub fn resign(mut self) -> Result<()> {
        let l = self.inner.take().expect("present until resign");
        self.rt.block_on(l.resign())
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

twin! {
    /// Blocking twin of [`crate::RedLocks`].
    RedLocks(crate::RedLocks)
}

/// The name of [`RedLocks`] before 4.1 (the quorum is Redisson's `RedLock`).
#[deprecated(since = "4.1.0", note = "renamed RedLocks")]
pub type MultiLocks = RedLocks;

impl RedLocks {
    /// See [`crate::RedLocks::new`]. Fails only if the runtime thread cannot start.
    pub fn new(primaries: impl IntoIterator<Item = redis::Client>) -> Result<RedLocks> {
        RedLocks::from_async(crate::RedLocks::new(primaries))
    }

    /// Wraps an async [`crate::RedLocks`] built with its builder.
    pub fn from_async(inner: crate::RedLocks) -> Result<RedLocks> {
        Ok(RedLocks::twin(inner, Runtime::new()?))
    }

    makes! {
        /// See [`crate::RedLocks::lock`].
        fn lock(&self, name: impl Into<String>) -> RedLock;
    }
}

twin! {
    /// Blocking twin of [`crate::RedLock`].
    RedLock(crate::RedLock)
}

impl RedLock {
    steps! {
        /// See [`crate::RedLock::lease`].
        fn lease(lease: Duration);
        /// See [`crate::RedLock::wait`].
        fn wait(wait: Duration);
        /// See [`crate::RedLock::fenced`].
        fn fenced();
    }

    acquires! {
        /// See [`crate::RedLock::acquire`].
        fn acquire(&self) -> RedLockGuard;
    }
}

guard_twin! {
    /// Blocking twin of [`crate::RedLockGuard`].
    RedLockGuard(crate::RedLockGuard)
}

impl std::ops::Deref for RedLockGuard {
    type Target = crate::RedLockGuard;
    fn deref(&self) -> &crate::RedLockGuard {
        self.inner.as_ref().expect("present until release")
    }
}

impl RedLockGuard {
    /// See [`crate::RedLockGuard::renew`].
    pub fn renew(&mut self) -> Result<()> {
        let g = self.inner.as_mut().expect("present until release");
        self.rt.block_on(g.renew())
    }

    /// See [`crate::RedLockGuard::release`].
    pub fn release(mut self) -> usize {
        let g = self.inner.take().expect("present until release");
        self.rt.block_on(g.release())
    }
}
