//! What an acquire returns: the [`Hold`] (token, counts, the lost signal) and the [`Guard`]
//! that owns it and releases it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::Instant;

use crate::command::{self, HoldName, Side};
use crate::conn::Dedicated;
use crate::error::{Error, Result};
use crate::locks::{Inner, RESEND_AFTER};
use crate::watchdog::{self, LostRx};

/// What a successful acquire got: which lock, which owner, the token, and a signal that fires
/// if the hold is lost. Cheap to clone; it does not release anything.
#[derive(Clone)]
pub struct Hold {
    pub(crate) name: HoldName,
    pub(crate) token: Option<u64>,
    pub(crate) count: Option<u64>,
    pub(crate) replicas: Option<u64>,
    pub(crate) lost: LostRx,
    /// The connections of the [`Locks`](crate::Locks) it came from, for [`guard`](Self::guard);
    /// weak, so that a hold kept around keeps nothing open.
    pub(crate) locks: Weak<Inner>,
}

debug_fields!(Hold |h| {
    key: h.name.key,
    owner: h.name.owner,
    side: h.name.side,
    token: h.token,
    count: h.count,
    replicas: h.replicas,
    lost: h.is_lost(),
});

impl Hold {
    /// The lock's key.
    pub fn key(&self) -> &str {
        &self.name.key
    }

    /// The owner id that holds it.
    pub fn owner(&self) -> &str {
        &self.name.owner
    }

    /// The side of a read-write lock held; `None` for a reentrant lock.
    pub fn side(&self) -> Option<Side> {
        self.name.side
    }

    /// The fencing token, for a [`fenced`](crate::Lock::fenced) acquire.
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// The owner's hold count after this acquire (1, or more for a re-entry).
    ///
    /// For a [`fenced`](crate::Lock::fenced) acquire, whose reply is the token, the count is read
    /// with an `HGET` pipelined right after the acquire (same round trip). It is `None` only if
    /// the hold was already gone by then (a lease shorter than the round trip, a force-release).
    ///
    /// ```no_run
    /// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
    /// let lock = locks.lock("orders").fenced();
    /// let outer = lock.acquire().await?.expect("free");
    /// let inner = lock.acquire().await?.expect("re-entry");
    /// assert_eq!((outer.hold_count(), inner.hold_count()), (Some(1), Some(2)));
    /// assert_eq!(outer.token(), inner.token());
    /// # Ok(()) }
    /// ```
    pub fn hold_count(&self) -> Option<u64> {
        self.count
    }

    /// How many replicas acknowledged, with [`sync_replicas`](crate::Lock::sync_replicas).
    pub fn replicas_acked(&self) -> Option<u64> {
        self.replicas
    }

    /// True once the hold is lost (see [`lost`](Self::lost)).
    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some()
    }

    /// Resolves with [`Error::Lost`] when the hold is lost: a renewal was refused (the key was
    /// deleted, expired or force-released), the lease ran out while renewals failed (server
    /// unreachable), or a fixed lease ran out. Never resolves while the hold is good, nor after
    /// a release. Use it in `tokio::select!` to stop work that needs the lock.
    ///
    /// A refused renewal is seen a third of the lease later at most. When the server publishes
    /// the module's keyspace events (`notify-keyspace-events` with `d`, or `A`, and `K` or
    /// `E`, e.g. `Kd`), the watchdog follows the held keys on one pub/sub connection per
    /// [`Locks`](crate::Locks) and checks a hold at once on an event that may end it: a force release is
    /// told within 100 ms (a plain `DEL` or expiry too when classes `g` and `x` are on). Not
    /// in a cluster, where renewals alone tell it.
    pub async fn lost(&self) -> Error {
        watchdog::lost(&self.lost).await
    }

    /// Runs `command` in the server only while this hold stands (`RLOCK.GUARD`), checked in the
    /// same server turn as the command runs, and returns the command's reply as `T` (a
    /// [`redis::Value`], or any [`redis::FromRedisValue`] type).
    ///
    /// The check is the server's, not this process's view of the hold: the owner must hold the
    /// lock now (on this side of a read-write lock), its lease counted to the moment of the
    /// call, and for a [`fenced`](crate::Lock::fenced) hold the lock's fencing token must still
    /// be this hold's (`TOKEN n`). Otherwise nothing runs and nothing changes:
    /// [`Error::NotHeld`] once the lease ran out or the lock was force-released (or another
    /// owner took it), [`Error::StaleToken`] once the same owner took it again as a newer hold.
    /// So a holder that paused past its lease, while another took the lock and wrote, cannot
    /// write over that. The inner command's own error (`WRONGTYPE`, say) is
    /// [`Error::Redis`]; so is the server's refusal of a command a guard cannot run
    /// (blocking ones, `MULTI`, pub/sub, the module's own).
    ///
    /// Sent once: if the connection breaks or the reply times out, the error is returned and
    /// the command is not sent again, since it may have run. A command with no name is
    /// [`Error::InvalidArgument`], before anything is sent. In a cluster every key of the
    /// command must be in the lock's slot (a hash tag: lock `orders`, key `{orders}:total`), or
    /// the server refuses it with `CROSSSLOT`.
    ///
    /// ```no_run
    /// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
    /// use rlock_client::redis;
    ///
    /// let guard = locks.lock("orders").fenced().acquire().await?.expect("free");
    /// let mut set = redis::cmd("HSET");
    /// set.arg("{orders}:42").arg("state").arg("paid");
    /// let added: i64 = guard.guard(&set).await?; // only while the hold stands
    /// # let _ = added; Ok(()) }
    /// ```
    pub async fn guard<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T> {
        let cmd = command::guard(&self.name, self.token, command)?;
        // Every guard, and the release task of a dropped one, keeps the Locks alive: once it
        // is gone, so is this hold.
        let Some(inner) = self.locks.upgrade() else {
            return Err(Error::NotHeld {
                key: self.name.key.to_string(),
                owner: self.name.owner.to_string(),
            });
        };
        let reply = inner
            .conn()
            .await?
            .query_for_key(&self.name.key, &cmd)
            .await;
        let value = command::parse_guard(reply, &self.name, self.token)?;
        T::from_redis_value(value).map_err(|e| Error::Redis(e.into()))
    }

    fn lost_error(&self) -> Option<Error> {
        self.lost.borrow().clone()
    }
}

/// A held lock. Release it with [`release`](Self::release); dropping it releases it in the
/// background (a task on the runtime that acquired it), without blocking.
///
/// Derefs to its [`Hold`](crate::Hold) for `token()`, `lost()` and the rest.
pub struct Guard {
    pub(crate) hold: Hold,
    pub(crate) inner: Arc<Inner>,
    pub(crate) entry: u64,
    pub(crate) lease: Duration,
    pub(crate) pinned: Option<Dedicated>,
    pub(crate) handle: Handle,
    pub(crate) done: bool,
}

debug_fields!(Guard |g| { hold: g.hold, lease: g.lease });

impl std::ops::Deref for Guard {
    type Target = Hold;
    fn deref(&self) -> &Hold {
        &self.hold
    }
}

impl Guard {
    /// A clone of the [`Hold`](crate::Hold), to hand to code that needs the token or the lost signal.
    pub fn hold(&self) -> Hold {
        self.hold.clone()
    }

    /// Resets the lease to its full length now (`RLOCK.RENEW`). One round trip.
    /// [`Error::Lost`] if the hold was lost or the server no longer has it.
    pub async fn renew(&self) -> Result<()> {
        if let Some(e) = self.hold.lost_error() {
            return Err(e);
        }
        let cmd = command::renew(&self.hold.name, self.lease);
        let sent = Instant::now();
        // Sent again, with the same REQ id, if the connection broke: applied at most once.
        let mut reply = self.inner.conn().await?.query(&cmd).await;
        if matches!(&reply, Err(e) if command::worth_resending(e)) {
            tokio::time::sleep(RESEND_AFTER).await;
            reply = self.inner.conn().await?.query(&cmd).await;
        }
        let hold = &self.hold.name;
        match command::renewal(reply.clone()) {
            command::Renewal::Renewed => {
                self.inner.registry.renewed(hold, self.entry, sent);
                Ok(())
            }
            command::Renewal::Retry(_) => Err(match reply {
                Err(e) => e.into(),
                Ok(v) => Error::unexpected("RLOCK.RENEW replied", &v),
            }),
            command::Renewal::Lost => {
                let reason = "the server refused the renewal: the lock expired, was deleted, \
                              written over or force-released";
                self.inner.registry.mark_lost(hold, self.entry, reason);
                Err(self
                    .hold
                    .lost_error()
                    .unwrap_or_else(|| Error::lost(&hold.key, reason)))
            }
        }
    }

    /// Releases this hold (`RLOCK.RELEASE`). One round trip.
    ///
    /// `Ok(true)` when the lock is now free, `Ok(false)` when other re-entries of the same
    /// owner still hold it. [`Error::Lost`] if the hold had been lost (the release is still
    /// sent), [`Error::NotHeld`] if the server no longer had it.
    pub async fn release(mut self) -> Result<bool> {
        self.done = true;
        self.inner.registry.unregister(&self.hold.name, self.entry);
        let lost = self.hold.lost_error();
        let result = release(&self.inner, &self.hold.name).await;
        if let Some(d) = self.pinned.take() {
            self.inner.pool.give_back(d);
        }
        match (lost, result) {
            (Some(e), _) => Err(e),
            (None, r) => r,
        }
    }
}

/// Sends `RLOCK.RELEASE`, and once more, with the same `REQ` id, if the connection broke
/// before the reply came: the server applies it at most once, so a release that did reach
/// it is not applied twice, and one that did not is not lost.
pub(crate) async fn release(inner: &Inner, hold: &HoldName) -> Result<bool> {
    let cmd = command::release(hold);
    let (key, owner) = (&hold.key, &hold.field());
    let mut reply = inner.conn().await?.query(&cmd).await;
    if matches!(&reply, Err(e) if command::worth_resending(e)) {
        tokio::time::sleep(RESEND_AFTER).await;
        reply = inner.conn().await?.query(&cmd).await;
    }
    match reply {
        Ok(v) => command::parse_release(v, key, owner),
        Err(e) => Err(command::release_error(e, key, owner)),
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let hold = self.hold.name.clone();
        self.inner.registry.unregister(&hold, self.entry);
        let inner = self.inner.clone();
        let pinned = self.pinned.take();
        // Never block here: the release runs as a task. If the runtime is gone, the lease ends it.
        self.handle.spawn(async move {
            let _ = release(&inner, &hold).await;
            if let Some(d) = pinned {
                inner.pool.give_back(d);
            }
        });
    }
}
