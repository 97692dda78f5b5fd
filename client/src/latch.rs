//! [`Latch`]: Redisson's `RCountDownLatch` on `RLATCH.*`.

use std::sync::Arc;

use crate::blocked;
use crate::command::{self, Wait};
use crate::error::{check_args, Result};
use crate::locks::{Inner, Locks};

/// A count-down latch on Redisson's layout (`redisson.getCountDownLatch(name)` shares it):
/// a count that clients count down; waiters pass together once it reaches zero. Made by
/// [`Locks::latch`].
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
/// let batch = locks.latch("batch-7");
/// batch.try_set_count(3).await?;
/// // ... three workers each call batch.count_down() when done ...
/// let done = batch.wait(Duration::from_secs(30)).await_zero().await?;
/// # let _ = done; Ok(()) }
/// ```
#[derive(Clone)]
pub struct Latch {
    inner: Arc<Inner>,
    key: Arc<str>,
    wait: Wait,
}

debug_fields!(Latch |l| { key: l.key, wait: l.wait });

impl Locks {
    /// The count-down latch `name`. See [`Latch`].
    pub fn latch(&self, name: impl Into<String>) -> Latch {
        Latch {
            inner: self.inner.clone(),
            key: Arc::from(name.into()),
            wait: Wait::No,
        }
    }
}

impl Latch {
    /// The latch's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    handle_steps! {
        /// [`await_zero`](Self::await_zero) waits up to `wait` in the server (`BLOCK ms`).
        fn wait;
        /// [`await_zero`](Self::await_zero) waits as long as it takes. Drop the future to give up.
        fn wait_forever;
    }

    /// `RLATCH.TRYSETCOUNT`: sets `count` (at least 1: 0 is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument)) if the latch has none. True if set.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        check_args(&self.key, &[("count", count)])?;
        let cmd = command::try_set_count(&self.key, count);
        self.inner.flag(&cmd, "RLATCH.TRYSETCOUNT replied").await
    }

    /// `RLATCH.COUNTDOWN`: one less; at zero every waiter passes. The count now.
    pub async fn count_down(&self) -> Result<i64> {
        self.inner
            .integer_on(&self.key, command::count_down, "RLATCH.COUNTDOWN replied")
            .await
    }

    /// `RLATCH.COUNT`: the count now (0 when the latch has none).
    pub async fn count(&self) -> Result<i64> {
        self.inner
            .integer_on(&self.key, command::latch_count, "RLATCH.COUNT replied")
            .await
    }

    /// `RLATCH.AWAIT`: true once the count is zero (or the latch does not exist); false if
    /// the wait ran out first (at once without a wait).
    pub async fn await_zero(&self) -> Result<bool> {
        check_args(&self.key, &[])?;
        let cmd = command::await_latch(&self.key, self.wait);
        // A latch grants nothing that would need giving back.
        let orphaned = |_, _| async {};
        let reply = blocked::send(&self.inner, &self.key, cmd, self.wait, orphaned).await?;
        Ok(command::parse_acquire(reply)?.is_some())
    }
}
