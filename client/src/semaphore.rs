//! [`Semaphore`]: Redisson's `RSemaphore` on `RSEM.*`, and [`Permits`], the permits one
//! acquire took.

use std::sync::Arc;

use tokio::runtime::Handle;

use crate::blocked;
use crate::command::{self, Wait};
use crate::error::{check_args, Result};
use crate::locks::{Inner, Locks};

/// A semaphore on Redisson's layout (`redisson.getSemaphore(name)` shares it): a count of
/// permits that any client takes and gives back. Made by [`Locks::semaphore`].
///
/// Waits run in the server, in arrival order: a large request at the head of the line is
/// not overtaken by smaller ones. Permits have no owner: [`Permits`] gives back what one
/// acquire took when released or dropped, and [`release`](Self::release) gives permits
/// back from anywhere, as Redisson's `release` does.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
/// let pool = locks.semaphore("db-connections");
/// pool.try_set_permits(10).await?;
/// if let Some(permits) = pool.wait(Duration::from_secs(1)).acquire(2).await? {
///     // ... use two connections ...
///     permits.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    inner: Arc<Inner>,
    key: Arc<str>,
    wait: Wait,
}

debug_fields!(Semaphore |s| { key: s.key, wait: s.wait });

impl Locks {
    /// The semaphore `name`. See [`Semaphore`].
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore::on(self.inner.clone(), Arc::from(name.into()))
    }
}

impl Semaphore {
    /// The semaphore on `key`, without a wait.
    pub(crate) fn on(inner: Arc<Inner>, key: Arc<str>) -> Semaphore {
        Semaphore {
            inner,
            key,
            wait: Wait::No,
        }
    }

    /// The semaphore's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    handle_steps! {
        /// Waits up to `wait` in the server for the permits (`BLOCK ms`). `Duration::ZERO`: try
        /// once.
        fn wait;
        /// Waits as long as it takes (`BLOCK 0`). Drop the future to give up.
        fn wait_forever;
    }

    /// `RSEM.TRYSETPERMITS`: sets `permits` if the semaphore does not exist. True if set.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        // 0 is a semaphore that starts empty (`add_permits` fills it).
        check_args(&self.key, &[])?;
        let cmd = command::try_set_permits(&self.key, permits);
        self.inner.flag(&cmd, "RSEM.TRYSETPERMITS replied").await
    }

    /// `RSEM.ADDPERMITS`: adds `permits` (negative takes them away). The permits available.
    pub async fn add_permits(&self, permits: i32) -> Result<i64> {
        let cmd = |key: &str| command::add_permits(key, permits);
        self.inner
            .integer_on(&self.key, cmd, "RSEM.ADDPERMITS replied")
            .await
    }

    /// `RSEM.AVAILABLE`: the permits available now.
    pub async fn available(&self) -> Result<i64> {
        self.inner
            .integer_on(
                &self.key,
                command::available_permits,
                "RSEM.AVAILABLE replied",
            )
            .await
    }

    /// `RSEM.ACQUIRE`: takes `permits` (at least 1: 0 is [`Error::InvalidArgument`](crate::Error::InvalidArgument)), or `None` when not enough are
    /// available (after the wait, if one was asked for). One round trip; with a wait, on a
    /// pooled connection.
    ///
    /// Cancel-safe: dropped while the server holds it waiting, it ends the wait, and
    /// permits granted in the meantime go back.
    pub async fn acquire(&self, permits: u32) -> Result<Option<Permits>> {
        check_args(&self.key, &[("permits", permits.into())])?;
        let cmd = command::acquire_permits(&self.key, permits, self.wait);
        let key = self.key.clone();
        let orphaned = move |inner: Arc<Inner>, value| async move {
            if matches!(command::parse_acquire(value), Ok(Some(_))) {
                let _ = inner.query(&command::release_permits(&key, permits)).await;
            }
        };
        let reply = blocked::send(&self.inner, &self.key, cmd, self.wait, orphaned).await?;
        Ok(command::parse_acquire(reply)?.map(|_| Permits {
            inner: self.inner.clone(),
            key: self.key.clone(),
            permits,
            handle: Handle::current(),
            done: false,
        }))
    }

    /// `RSEM.RELEASE`: gives `permits` back, whoever took them. The permits available.
    pub async fn release(&self, permits: u32) -> Result<i64> {
        check_args(&self.key, &[("permits", permits.into())])?;
        release(&self.inner, &self.key, permits).await
    }
}

/// Sends `RSEM.RELEASE`, and once more with the same `REQ` id if the connection broke
/// before the reply came: the server gives the permits back at most once.
async fn release(inner: &Inner, key: &str, permits: u32) -> Result<i64> {
    let cmd = command::release_permits(key, permits.max(1));
    command::parse_integer(inner.query_resent(&cmd).await?, "RSEM.RELEASE replied")
}

/// Permits one [`Semaphore::acquire`] took. [`release`](Self::release) gives them back;
/// dropping gives them back in the background; [`forget`](Self::forget) keeps them taken
/// (someone else releases them, as with Redisson's semaphore).
pub struct Permits {
    inner: Arc<Inner>,
    key: Arc<str>,
    permits: u32,
    handle: Handle,
    done: bool,
}

debug_fields!(Permits |p| { key: p.key, permits: p.permits });

impl Permits {
    /// How many permits were taken.
    pub fn count(&self) -> u32 {
        self.permits
    }

    /// Gives the permits back (`RSEM.RELEASE`). The permits available now.
    pub async fn release(mut self) -> Result<i64> {
        self.done = true;
        release(&self.inner, &self.key, self.permits).await
    }

    /// Keeps the permits taken: nothing is given back when this is dropped.
    pub fn forget(mut self) {
        self.done = true;
    }
}

impl Drop for Permits {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (inner, key, permits) = (self.inner.clone(), self.key.clone(), self.permits);
        // Never block here: the release runs as a task.
        self.handle.spawn(async move {
            let _ = release(&inner, &key, permits).await;
        });
    }
}
