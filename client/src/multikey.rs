//! [`MultiKeyLock`]: several locks taken together, all or none, as Redisson's
//! `RedissonMultiLock`; one `RLOCK.MACQUIRE` per cluster slot.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::blocked::send_unless_left;
use crate::command::{self, AcquireOptions, HoldName, Wait};
use crate::conn::{slot_of, Dedicated};
use crate::error::{Error, Result};
use crate::lock::{Inner, Locks};
use crate::watchdog::{self, LostRx};

/// Several locks taken together, all or none: Redisson's `RedissonMultiLock` on the server's
/// `RLOCK.MACQUIRE`. Made by [`Locks::multi`].
///
/// The keys are grouped by cluster slot (one group on a plain server). Each group is taken in
/// one step by the server, all or nothing, and the groups are taken one after another in an
/// order every client shares, so two callers naming the same keys in any order never deadlock.
/// If a later group cannot be taken (held, or its wait ran out), the groups already taken are
/// given back and the acquire returns `None`. Keys that share a hash tag (`{order:7}:stock`,
/// `{order:7}:payment`) share a slot, and so are taken in one step even in a cluster.
///
/// Each lock is an ordinary reentrant lock with this handle's owner: [`Locks::lock_as`] with
/// that owner reaches any one of them, and a Redisson `RLock` excludes it. The watchdog
/// renews every one of them; [`MultiKeyGuard::lost`] fires when any is lost.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
/// let order = locks.multi(["{order:7}:stock", "{order:7}:payment"]);
/// if let Some(guard) = order.wait(Duration::from_secs(2)).acquire().await? {
///     // ... both are held ...
///     guard.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiKeyLock {
    locks: Locks,
    /// The keys by slot, each group sorted, the groups in the order they are taken.
    groups: Vec<Vec<Arc<str>>>,
    owner: Arc<str>,
    lease: Option<Duration>,
    wait: Wait,
    session: bool,
}

debug_fields!(MultiKeyLock |m| {
    groups: m.groups,
    owner: m.owner,
    lease: m.lease,
    wait: m.wait,
    session: m.session,
});

impl Locks {
    /// The locks `names`, taken together, all or none, with a new owner id. See
    /// [`MultiKeyLock`]. A name given twice counts once.
    pub fn multi<I, S>(&self, names: I) -> MultiKeyLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let owner = self.inner.new_owner().to_string();
        self.multi_as(names, owner)
    }

    /// [`Locks::multi`] with the owner id `owner`, chosen by the caller.
    pub fn multi_as<I, S>(&self, names: I, owner: impl Into<String>) -> MultiKeyLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut by_slot: HashMap<_, Vec<Arc<str>>> = HashMap::new();
        for name in names {
            let name: String = name.into();
            let slot = self.inner.is_cluster().then(|| slot_of(&name));
            by_slot.entry(slot).or_default().push(Arc::from(name));
        }
        let mut groups: Vec<Vec<Arc<str>>> = by_slot
            .into_values()
            .map(|mut keys| {
                keys.sort();
                keys.dedup();
                keys
            })
            .collect();
        groups.sort();
        MultiKeyLock {
            locks: self.clone(),
            groups,
            owner: Arc::from(owner.into()),
            lease: None,
            wait: Wait::No,
            session: false,
        }
    }
}

impl MultiKeyLock {
    /// Every key, group after group.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.groups.iter().flatten().map(|key| &**key)
    }

    /// The owner id of every lock of the set.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    handle_steps! {
        /// A fixed lease for every lock (`LEASE ms`), not renewed by the watchdog. See
        /// [`Lock::lease`](crate::Lock::lease).
        fn lease;
        /// Waits up to `wait`, in all, until every lock can be taken (`BLOCK ms` on each group,
        /// with the time left). `Duration::ZERO`: try once.
        fn wait;
        /// Waits as long as it takes (`BLOCK 0`). Drop the future to give up.
        fn wait_forever;
    }

    /// Ties every hold to the connection that took it (`SESSION`): see
    /// [`Lock::session`](crate::Lock::session).
    pub fn session(mut self) -> Self {
        self.session = true;
        self
    }

    fn options(&self, wait: Wait) -> AcquireOptions {
        AcquireOptions {
            lease: self.lease.unwrap_or(self.locks.inner.config.watchdog_lease),
            wait,
            fair: false,
            fenced: false,
            session: self.session,
        }
    }

    /// Takes every lock, or none: `Ok(None)` when one of them stayed held by someone else
    /// (after the wait, if one was asked for). One round trip per slot.
    ///
    /// Cancel-safe, as [`Lock::acquire`](crate::Lock::acquire): dropped while the server holds
    /// it waiting, it ends the wait, and gives back whatever it had taken.
    pub async fn acquire(&self) -> Result<Option<MultiKeyGuard>> {
        let (tx, rx) = oneshot::channel();
        let set = self.clone();
        // The groups are taken in a task of their own, so that dropping this future never
        // loses a grant: the task gives back what it took if nobody is left to take it.
        tokio::spawn(async move {
            let mut tx = tx;
            let result = set.take_all(&mut tx).await;
            if let Err(Ok(Some(guard))) = tx.send(result) {
                let _ = guard.release().await;
            }
        });
        rx.await.unwrap_or_else(|_| {
            Err(Error::lost(
                self.groups
                    .first()
                    .and_then(|g| g.first())
                    .map_or("", |k| k),
                "the acquire task stopped: is the runtime shutting down?",
            ))
        })
    }

    async fn take_all(
        &self,
        caller: &mut oneshot::Sender<Result<Option<MultiKeyGuard>>>,
    ) -> Result<Option<MultiKeyGuard>> {
        let started = Instant::now();
        let sent = Instant::now();
        let mut taken: Vec<Vec<Arc<str>>> = Vec::new();
        let mut pinned = Vec::new();
        for group in &self.groups {
            if caller.is_closed() {
                break; // Nobody waits for the rest: what was taken goes back below.
            }
            let wait = self.wait.left(started.elapsed()).unwrap_or(Wait::No);
            let outcome = self.take_group(group, wait, caller).await;
            match outcome {
                Ok(Some(dedicated)) => {
                    taken.push(group.clone());
                    pinned.extend(dedicated);
                }
                other => {
                    // Not all: what was taken goes back, at once.
                    let other = other.map(|_| None);
                    let partial = self.guard(taken, sent, pinned);
                    let _ = partial.release().await;
                    return other;
                }
            }
        }
        if taken.len() < self.groups.len() {
            let _ = self.guard(taken, sent, pinned).release().await;
            return Ok(None);
        }
        Ok(Some(self.guard(taken, sent, pinned)))
    }

    /// `RLOCK.MACQUIRE` for one group. `Ok(Some(connection))` when taken: with a wait and
    /// `SESSION`, the pooled connection that holds the session, else `None` inside.
    async fn take_group(
        &self,
        keys: &[Arc<str>],
        wait: Wait,
        caller: &mut oneshot::Sender<Result<Option<MultiKeyGuard>>>,
    ) -> Result<Option<Option<Dedicated>>> {
        let inner = &self.locks.inner;
        let cmd = command::macquire(&self.owner, keys, &self.options(wait));
        if wait == Wait::No {
            let v = inner.conn().await?.query_for_key(&keys[0], &cmd).await?;
            return Ok(command::parse_acquire(v)?.map(|_| None));
        }
        let mut conn = inner.dedicated().await?;
        let client_id = conn.client_id(&keys[0]).await?;
        let left = caller.closed();
        let sent = send_unless_left(
            inner,
            &mut conn,
            &keys[0],
            &cmd,
            wait,
            client_id,
            !self.session,
            left,
        );
        // Still blocked when the caller left: the connection closes here, and the server
        // forgets the waiter.
        let Some((reply, usable)) = sent.await else {
            return Ok(None);
        };
        let granted = command::parse_acquire(reply?)?;
        match granted {
            Some(_) if self.session && usable => Ok(Some(Some(conn))),
            Some(_) => {
                if usable {
                    inner.pool.give_back(conn);
                }
                Ok(Some(None))
            }
            None => {
                if usable {
                    inner.pool.give_back(conn);
                }
                Ok(None)
            }
        }
    }

    /// A guard for the groups `taken`; each lock is watched as a hold of its own.
    fn guard(
        &self,
        taken: Vec<Vec<Arc<str>>>,
        basis: Instant,
        pinned: Vec<Dedicated>,
    ) -> MultiKeyGuard {
        let inner = &self.locks.inner;
        let lease = self.options(Wait::No).lease;
        let renew = self.lease.is_none();
        let mut holds = Vec::new();
        for key in taken.iter().flatten() {
            let name = HoldName {
                key: key.clone(),
                owner: self.owner.clone(),
                side: None,
                permit: false,
            };
            let (entry, lost) = inner.registry.register(&name, lease, renew, basis);
            holds.push((name, entry, lost));
        }
        let handle = Handle::current();
        if !holds.is_empty() {
            inner
                .registry
                .ensure_running(&handle, Arc::downgrade(&self.locks.inner) as _);
        }
        MultiKeyGuard {
            inner: inner.clone(),
            owner: self.owner.clone(),
            groups: taken,
            holds,
            pinned,
            handle,
            done: false,
        }
    }
}

/// Every lock of a [`MultiKeyLock`], held. Release it with [`release`](Self::release);
/// dropping it releases it in the background.
pub struct MultiKeyGuard {
    inner: Arc<Inner>,
    owner: Arc<str>,
    groups: Vec<Vec<Arc<str>>>,
    holds: Vec<(HoldName, u64, LostRx)>,
    pinned: Vec<Dedicated>,
    handle: Handle,
    done: bool,
}

debug_fields!(MultiKeyGuard |m| { groups: m.groups, owner: m.owner, lost: m.is_lost() });

impl MultiKeyGuard {
    /// Every key held.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.groups.iter().flatten().map(|key| &**key)
    }

    /// True once any of the locks is lost.
    pub fn is_lost(&self) -> bool {
        self.holds
            .iter()
            .any(|(_, _, lost)| lost.borrow().is_some())
    }

    /// Resolves with [`Error::Lost`] when any of the locks is lost (see
    /// [`Hold::lost`](crate::Hold::lost)); never while all are held.
    pub async fn lost(&self) -> Error {
        let waits = self
            .holds
            .iter()
            .map(|(_, _, lost)| watchdog::lost_reason(lost));
        let waits: Vec<_> = waits.map(Box::pin).collect();
        if waits.is_empty() {
            return std::future::pending().await;
        }
        let mut waits = waits;
        loop {
            let (found, _, rest) = futures_util::future::select_all(waits).await;
            if let Some(error) = found {
                return error;
            }
            if rest.is_empty() {
                return std::future::pending().await;
            }
            waits = rest;
        }
    }

    /// Releases every lock (`RLOCK.MRELEASE`, one per slot). [`Error::Lost`] if one had been
    /// lost (the rest are still released), [`Error::NotHeld`] if the server no longer had
    /// one of a group (that group is then left as it is: its other locks run out with their
    /// lease, or are given back by [`Locks::force_release`]).
    pub async fn release(mut self) -> Result<()> {
        self.done = true;
        let lost = self
            .holds
            .iter()
            .find_map(|(_, _, lost)| lost.borrow().clone());
        for (name, entry, _) in &self.holds {
            self.inner.registry.unregister(name, *entry);
        }
        let result = release_groups(&self.inner, &self.owner, &self.groups).await;
        for conn in self.pinned.drain(..) {
            self.inner.pool.give_back(conn);
        }
        match (lost, result) {
            (Some(e), _) => Err(e),
            (None, r) => r,
        }
    }
}

async fn release_groups(inner: &Inner, owner: &Arc<str>, groups: &[Vec<Arc<str>>]) -> Result<()> {
    let conn = inner.conn().await?;
    let mut first_error = None;
    for keys in groups {
        let reply = conn
            .query_for_key(&keys[0], &command::mrelease(owner, keys))
            .await;
        let outcome = match reply {
            Ok(v) => command::parse_count(v, "RLOCK.MRELEASE replied").map(|_| ()),
            Err(e) => Err(command::release_error(e, &keys[0], owner)),
        };
        if let Err(e) = outcome {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

impl Drop for MultiKeyGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for (name, entry, _) in &self.holds {
            self.inner.registry.unregister(name, *entry);
        }
        let inner = self.inner.clone();
        let (owner, groups) = (self.owner.clone(), std::mem::take(&mut self.groups));
        let pinned = std::mem::take(&mut self.pinned);
        // Never block here: the release runs as a task. If the runtime is gone, the lease ends it.
        self.handle.spawn(async move {
            let _ = release_groups(&inner, &owner, &groups).await;
            for conn in pinned {
                inner.pool.give_back(conn);
            }
        });
    }
}
