//! [`ReadWriteLock`]: Redisson's `RReadWriteLock`, whose read and write sides are [`Lock`]
//! handles sharing one owner.

use crate::command::{LockInfo, Side};
use crate::error::Result;
use crate::lock::Lock;
use crate::locks::Locks;

/// A read-write lock (`RLOCK.ACQUIRE key owner READ|WRITE`) on Redisson's `RReadWriteLock`
/// layout, so a Java service's `rwLock.readLock()` and `writeLock()` exclude these holds and
/// are excluded by them.
///
/// Readers share the lock; a writer holds it alone. [`read`](Self::read) and
/// [`write`](Self::write) are [`Lock`] handles with this lock's owner: acquire, wait, lease,
/// `session()`, `fenced()`, guards and the watchdog work as for a reentrant lock (`fair()` is
/// refused by the server: waiters on a read-write lock are always served in arrival order).
///
/// - Each side re-enters for its owner, as in Redisson. A writer may also take read holds
///   (Redisson's downgrade); a reader asking to write gets `None` at once rather than waiting
///   on its own read holds.
/// - Blocked waiters are served in arrival order, readers together: a stream of readers does
///   not starve a writer.
/// - Clones share the owner. Give contenders their own [`Locks::read_write`].
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
/// let config = locks.read_write("config");
/// if let Some(read) = config.read().wait(Duration::from_secs(1)).acquire().await? {
///     // ... read the configuration, alongside other readers ...
///     read.release().await?;
/// }
/// let writer = locks.read_write("config");
/// let write = writer.write().wait_forever().acquire().await?.expect("waits until free");
/// // ... change it, alone ...
/// write.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    lock: Lock,
}

impl Locks {
    /// A read-write lock `name` with a new owner id `<client-uuid>:<n>`. See [`ReadWriteLock`].
    pub fn read_write(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock {
            lock: self.lock(name),
        }
    }

    /// A read-write lock `name` with the owner id `owner`, chosen by the caller: for a hold a
    /// Redisson service shares (`<its client uuid>:<thread id>`), or one taken before a restart.
    /// See [`Locks::lock_as`].
    pub fn read_write_as(
        &self,
        name: impl Into<String>,
        owner: impl Into<String>,
    ) -> ReadWriteLock {
        ReadWriteLock {
            lock: self.lock_as(name, owner),
        }
    }
}

impl ReadWriteLock {
    /// The lock's key.
    pub fn key(&self) -> &str {
        self.lock.key()
    }

    /// The owner id of both sides.
    pub fn owner(&self) -> &str {
        self.lock.owner()
    }

    /// The read side (`READ`), Redisson's `readLock()`.
    pub fn read(&self) -> Lock {
        self.lock.clone().on_side(Side::Read)
    }

    /// The write side (`WRITE`), Redisson's `writeLock()`.
    pub fn write(&self) -> Lock {
        self.lock.clone().on_side(Side::Write)
    }

    /// True if anyone holds either side (`EXISTS`).
    pub async fn is_locked(&self) -> Result<bool> {
        self.lock.is_locked().await
    }

    /// `RLOCK.INFO`: the mode (`read` or `write`), readers and writer, lease, blocked waiters.
    /// See [`Locks::info`].
    pub async fn info(&self) -> Result<LockInfo> {
        self.lock.info().await
    }

    /// `RLOCK.FORCERELEASE`: ends every hold on both sides. See [`Locks::force_release`].
    pub async fn force_release(&self) -> Result<bool> {
        self.lock.force_release().await
    }
}
