//! [`PermitSemaphore`]: Redisson's `RPermitExpirableSemaphore` on `RSEM.LEASE`,
//! `RSEM.RETURN` and `RSEM.RENEW`, and [`LeasedPermit`], one leased permit, kept alive by the
//! watchdog.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::blocked;
use crate::command::{self, HoldName, Wait};
use crate::error::{check_args, Error, Result};
use crate::locks::{Inner, Locks};
use crate::semaphore::Semaphore;
use crate::watchdog::{self, LostRx};

/// A permit-expiring semaphore on Redisson's layout
/// (`redisson.getPermitExpirableSemaphore(name)` shares it): permits in the key, each
/// leased permit in the zset `{name}:timeout` under its id, coming back by itself when its
/// lease ends. Made by [`Locks::permit_semaphore`].
///
/// Each leased permit is a [`LeasedPermit`] guard. By default its lease is the watchdog's
/// (30 s, see [`LocksBuilder::watchdog_lease`](crate::LocksBuilder::watchdog_lease)) and the
/// watchdog renews it while the guard lives, so a crashed process's permits come back within
/// one lease; with [`lease`](Self::lease) the lease is fixed and not renewed. The server takes
/// an ended lease back at its deadline, by timer, and serves the next waiter at once.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
/// let slots = locks.permit_semaphore("render-slots");
/// slots.try_set_permits(4).await?;
/// if let Some(permit) = slots.wait(Duration::from_secs(5)).acquire().await? {
///     println!("leased {}", permit.id());
///     // ... render; the watchdog keeps the lease alive ...
///     permit.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PermitSemaphore {
    inner: Arc<Inner>,
    key: Arc<str>,
    wait: Wait,
    lease: Option<Duration>,
}

debug_fields!(PermitSemaphore |p| { key: p.key, wait: p.wait, lease: p.lease });

impl Locks {
    /// The permit-expiring semaphore `name`. See [`PermitSemaphore`].
    pub fn permit_semaphore(&self, name: impl Into<String>) -> PermitSemaphore {
        PermitSemaphore {
            inner: self.inner.clone(),
            key: Arc::from(name.into()),
            wait: Wait::No,
            lease: None,
        }
    }
}

impl PermitSemaphore {
    /// The semaphore's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    handle_steps! {
        /// Waits up to `wait` in the server for the permits (`BLOCK ms`), in arrival order.
        /// `Duration::ZERO`: try once.
        fn wait;
        /// Waits as long as it takes (`BLOCK 0`). Drop the future to give up.
        fn wait_forever;
        /// A fixed lease, not renewed by the watchdog: the permit comes back when it ends,
        /// whatever the guard does, and the guard reports it lost then.
        fn lease;
    }

    /// `RSEM.TRYSETPERMITS`: sets `permits` if the semaphore does not exist. True if set.
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool> {
        self.count().try_set_permits(permits).await
    }

    /// `RSEM.ADDPERMITS`: adds `permits` (negative takes them away). The permits available.
    pub async fn add_permits(&self, permits: i32) -> Result<i64> {
        self.count().add_permits(permits).await
    }

    /// `RSEM.AVAILABLE`: the permits available now, counting leases that ended.
    pub async fn available(&self) -> Result<i64> {
        self.count().available().await
    }

    /// The count of permits in the key, which a [`Semaphore`] on the same key keeps too.
    fn count(&self) -> Semaphore {
        Semaphore::on(self.inner.clone(), self.key.clone())
    }

    /// `RSEM.LEASE`: leases one permit, or `None` when none is available (after the wait,
    /// if one was asked for).
    pub async fn acquire(&self) -> Result<Option<LeasedPermit>> {
        Ok(self.acquire_many(1).await?.and_then(|mut p| p.pop()))
    }

    /// `RSEM.LEASE ... PERMITS n`: leases `permits` (1 to 1024) at once, all or none.
    ///
    /// Cancel-safe: dropped while the server holds it waiting, it ends the wait, and
    /// permits granted in the meantime go back.
    pub async fn acquire_many(&self, permits: u32) -> Result<Option<Vec<LeasedPermit>>> {
        let inner = &self.inner;
        let lease = self.lease.unwrap_or(inner.config.watchdog_lease);
        let ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        check_args(&self.key, &[("permits", permits.into()), ("a lease", ms)])?;
        let cmd = command::lease_permits(&self.key, permits, lease, self.wait);
        let sent = Instant::now();
        let key = self.key.clone();
        let orphaned = move |inner: Arc<Inner>, value| async move {
            if let Ok(Some(ids)) = command::parse_leased(value) {
                for id in ids {
                    let _ = give_back(&inner, &key, &id).await;
                }
            }
        };
        let reply = blocked::send(inner, &self.key, cmd, self.wait, orphaned).await?;
        let Some(ids) = command::parse_leased(reply)? else {
            return Ok(None);
        };
        // A blocked lease was granted some time between send and reply.
        let basis = match self.wait {
            Wait::No => sent,
            _ => Instant::now(),
        };
        let renew = self.lease.is_none();
        let handle = Handle::current();
        inner
            .registry
            .ensure_running(&handle, Arc::downgrade(inner) as _);
        let guards = ids
            .into_iter()
            .map(|id| {
                let name = HoldName {
                    key: self.key.clone(),
                    owner: Arc::from(id),
                    side: None,
                    permit: true,
                };
                let (entry, lost) = inner.registry.register(&name, lease, renew, basis);
                LeasedPermit {
                    name,
                    inner: inner.clone(),
                    entry,
                    lease,
                    lost,
                    handle: handle.clone(),
                    done: false,
                }
            })
            .collect();
        Ok(Some(guards))
    }

    /// `RSEM.RETURN`: gives back the leased permit `id`, whoever leased it (a Redisson
    /// client's, or one of this process's guards, which then finds it lost at its next
    /// renewal). True if it was leased; false if unknown or its lease had ended.
    pub async fn release(&self, id: &str) -> Result<bool> {
        check_args(&self.key, &[("a permit id's length", id.len() as u64)])?;
        give_back(&self.inner, &self.key, id).await
    }
}

/// Sends `RSEM.RETURN`, and once more with the same `REQ` id if the connection broke
/// before the reply came: the server gives the permit back at most once.
async fn give_back(inner: &Inner, key: &str, id: &str) -> Result<bool> {
    let reply = inner.query_resent(&command::return_permit(key, id)).await?;
    command::parse_flag(reply, "RSEM.RETURN replied")
}

/// One leased permit. [`release`](Self::release) gives it back; dropping it gives it back
/// in the background (a task on the runtime that leased it). While it lives, the watchdog
/// renews its lease (unless the lease was fixed with [`PermitSemaphore::lease`]); if a
/// renewal is refused (the lease ended, the permit was given back by someone else, the key
/// was deleted) or the lease runs out while renewals fail, [`lost`](Self::lost) resolves.
///
/// The server's `SESSION` option (the permit comes back when the connection closes) is not
/// offered here: this client pools its connections. A crashed process's permits come back
/// when their lease ends, within one watchdog lease.
pub struct LeasedPermit {
    name: HoldName,
    inner: Arc<Inner>,
    entry: u64,
    lease: Duration,
    lost: LostRx,
    handle: Handle,
    done: bool,
}

debug_fields!(LeasedPermit |l| {
    key: l.name.key,
    id: l.name.owner,
    lease: l.lease,
    lost: l.is_lost(),
});

impl LeasedPermit {
    /// The permit's id: 32 hex characters, as Redisson shows it.
    pub fn id(&self) -> &str {
        &self.name.owner
    }

    /// The semaphore's key.
    pub fn key(&self) -> &str {
        &self.name.key
    }

    /// True once the permit is lost (see [`lost`](Self::lost)).
    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some()
    }

    /// Resolves with [`Error::Lost`] when the permit is lost. Never resolves while it is
    /// good, nor after a release.
    pub async fn lost(&self) -> Error {
        watchdog::lost(&self.lost).await
    }

    /// Resets the lease to its full length now (`RSEM.RENEW`). [`Error::Lost`] if the
    /// permit was lost or is no longer leased.
    pub async fn renew(&self) -> Result<()> {
        if let Some(e) = self.lost.borrow().clone() {
            return Err(e);
        }
        let sent = Instant::now();
        let cmd = command::renew(&self.name, self.lease);
        let reply = self.inner.conn().await?.query(&cmd).await;
        match command::renewal(reply.clone()) {
            command::Renewal::Renewed => {
                self.inner.registry.renewed(&self.name, self.entry, sent);
                return Ok(());
            }
            command::Renewal::Retry(_) => {
                return Err(match reply {
                    Err(e) => e.into(),
                    Ok(v) => Error::unexpected("RSEM.RENEW replied", &v),
                })
            }
            command::Renewal::Lost => {}
        }
        let reason = "the server refused the renewal: the lease ended, or the permit was \
                      given back or deleted";
        self.inner
            .registry
            .mark_lost(&self.name, self.entry, reason);
        Err(self
            .lost
            .borrow()
            .clone()
            .unwrap_or_else(|| Error::lost(&self.name.key, reason)))
    }

    /// Gives the permit back (`RSEM.RETURN`). True if it was still leased; false if its
    /// lease had ended (it is back already) or someone else gave it back.
    pub async fn release(mut self) -> Result<bool> {
        self.done = true;
        self.inner.registry.unregister(&self.name, self.entry);
        give_back(&self.inner, &self.name.key, &self.name.owner).await
    }

    /// Stops watching the permit without giving it back: it comes back when its lease
    /// ends, or when someone gives it back by id (Redisson's `release(id)`,
    /// [`PermitSemaphore::release`]).
    pub fn forget(mut self) -> String {
        self.done = true;
        self.inner.registry.unregister(&self.name, self.entry);
        self.name.owner.to_string()
    }
}

impl Drop for LeasedPermit {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.inner.registry.unregister(&self.name, self.entry);
        let (inner, key, id) = (
            self.inner.clone(),
            self.name.key.clone(),
            self.name.owner.clone(),
        );
        // Never block here: the return runs as a task. If the runtime is gone, the lease ends it.
        self.handle.spawn(async move {
            let _ = give_back(&inner, &key, &id).await;
        });
    }
}
