//! [`MultiLock`]: several locks taken together, all or none, as Redisson's
//! `RedissonMultiLock`; one `RLOCK.MACQUIRE` per cluster slot.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::blocked::send_unless_left;
use crate::command::{self, AcquireOptions, HoldName, Wait};
use crate::conn::{slot_of, Conn, Dedicated};
use crate::error::{Error, Result};
use crate::locks::{Inner, Locks};
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
/// renews every one of them; [`MultiGuard::lost`] fires when any is lost.
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
pub struct MultiLock {
    locks: Locks,
    /// The keys by slot, each group sorted, the groups in the order they are taken.
    groups: Vec<Vec<Arc<str>>>,
    owner: Arc<str>,
    lease: Option<Duration>,
    /// `None`: not set; [`acquire`](MultiLock::acquire) tries once,
    /// [`with_lock`](MultiLock::with_lock) waits as long as it takes.
    wait: Option<Wait>,
    session: bool,
}

debug_fields!(MultiLock |m| {
    groups: m.groups,
    owner: m.owner,
    lease: m.lease,
    wait: m.wait,
    session: m.session,
});

impl Locks {
    /// The locks `names`, taken together, all or none, with a new owner id. See
    /// [`MultiLock`]. A name given twice counts once.
    pub fn multi<I, S>(&self, names: I) -> MultiLock
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let owner = self.inner.new_owner().to_string();
        self.multi_as(names, owner)
    }

    /// [`Locks::multi`] with the owner id `owner`, chosen by the caller.
    pub fn multi_as<I, S>(&self, names: I, owner: impl Into<String>) -> MultiLock
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
        MultiLock {
            locks: self.clone(),
            groups,
            owner: Arc::from(owner.into()),
            lease: None,
            wait: None,
            session: false,
        }
    }
}

impl MultiLock {
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

    /// Refuses, before anything is sent, no keys, an empty name or owner, a zero lease.
    fn check(&self) -> Result<()> {
        let first = self.keys().next().unwrap_or("");
        if self.groups.is_empty() {
            return Err(Error::invalid(
                first,
                "a multi-key lock needs at least one name",
            ));
        }
        if self.keys().any(str::is_empty) {
            return Err(Error::invalid(first, "a lock name must not be empty"));
        }
        if self.owner.is_empty() {
            return Err(Error::invalid(first, "an owner id must not be empty"));
        }
        if self.lease.is_some_and(|l| l.is_zero()) {
            return Err(Error::invalid(first, "a lease must be longer than zero"));
        }
        Ok(())
    }

    /// This handle as the scoped call ([`with_lock`](Self::with_lock)) uses it: waiting as
    /// long as it takes unless a wait was set.
    pub(crate) fn scoped(&self) -> MultiLock {
        MultiLock {
            wait: Some(self.wait.unwrap_or(Wait::Forever)),
            ..self.clone()
        }
    }

    /// Takes every lock (waiting as long as it takes unless the handle sets a
    /// [`wait`](Self::wait)), runs `f`, and releases them, as
    /// [`Lock::with_lock`](crate::Lock::with_lock) does for one lock: [`Error::NotAcquired`]
    /// if the wait set ended first (`f` never runs), [`Error::Lost`] if one of the locks is
    /// lost while `f` runs (`f` is dropped at its next await point).
    pub async fn with_lock<F, Fut, T>(&self, f: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = T>,
    {
        let scoped = self.scoped();
        let guard = scoped
            .acquire()
            .await?
            .ok_or_else(|| scoped.not_acquired())?;
        let out = tokio::select! {
            out = f() => out,
            lost = guard.lost() => return Err(lost),
        };
        guard.release().await?;
        Ok(out)
    }

    /// The error of a scoped call whose wait ended without a grant.
    pub(crate) fn not_acquired(&self) -> Error {
        Error::NotAcquired {
            key: self.keys().next().unwrap_or("").to_owned(),
            waited: match self.wait {
                Some(Wait::For(d)) => Some(d),
                Some(Wait::Forever) => Some(Duration::MAX),
                _ => None,
            },
        }
    }

    /// What an acquire sends for each group, with the `REQ` id `req` (one id per group in
    /// [`acquire`](Self::acquire)).
    #[cfg(test)]
    pub(crate) fn plan(&self, req: &str) -> Vec<redis::Cmd> {
        let wait = self.wait.unwrap_or(Wait::No);
        self.groups
            .iter()
            .map(|keys| command::macquire(&self.owner, keys, &self.options(wait), req))
            .collect()
    }

    /// The groups of keys, each sorted, in the order they are taken.
    #[cfg(test)]
    pub(crate) fn groups(&self) -> &[Vec<Arc<str>>] {
        &self.groups
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
    pub async fn acquire(&self) -> Result<Option<MultiGuard>> {
        self.check()?;
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
        caller: &mut oneshot::Sender<Result<Option<MultiGuard>>>,
    ) -> Result<Option<MultiGuard>> {
        let started = Instant::now();
        let sent = Instant::now();
        let mut taken: Vec<Vec<Arc<str>>> = Vec::new();
        let mut pinned = Vec::new();
        for group in &self.groups {
            if caller.is_closed() {
                break; // Nobody waits for the rest: what was taken goes back below.
            }
            let wait = self
                .wait
                .unwrap_or(Wait::No)
                .left(started.elapsed())
                .unwrap_or(Wait::No);
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
        caller: &mut oneshot::Sender<Result<Option<MultiGuard>>>,
    ) -> Result<Option<Option<Dedicated>>> {
        let inner = &self.locks.inner;
        // One REQ id for every send of this group's acquire, and for `recover`.
        let req = command::request_id();
        let cmd = command::macquire(&self.owner, keys, &self.options(wait), &req);
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
        let (reply, usable) = match sent.await {
            Some((Ok(reply), usable)) => (reply, usable),
            // Still blocked when the caller left: the connection closes here (also when
            // `CLIENT KILL` is refused), and the server forgets the waiter; a grant it wrote
            // before the close is found by the REQ id.
            None => {
                drop(conn);
                self.recover(keys, Some(client_id), &req).await;
                return Ok(None);
            }
            // Killed, its reply lost with the connection: a grant is found the same way.
            Some((Err(_), false)) => {
                drop(conn);
                self.recover(keys, None, &req).await;
                return Ok(None);
            }
            Some((Err(e), true)) => return Err(e.into()),
        };
        let granted = command::parse_acquire(reply)?;
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

    /// After a group's wait was given up without its reply read, finds whether it was
    /// granted, as [`Lock`](crate::Lock)'s wait does: once the server has dropped the
    /// connection `closed` (if this side closed it), the same `RLOCK.MACQUIRE` goes again with
    /// the same `REQ` id and no `BLOCK`. While the grant stands the server replies `numkeys`
    /// and takes nothing more; what it replies granted is given back (`RLOCK.MRELEASE`). A
    /// `SESSION` grant ends with its connection: nothing to do.
    async fn recover(&self, keys: &[Arc<str>], closed: Option<i64>, req: &str) {
        if self.session {
            return;
        }
        let inner = &self.locks.inner;
        let Ok(conn) = inner.conn().await else {
            return; // unreachable server: the lease ends the holds, if any
        };
        if let Some(id) = closed {
            crate::conn::until_gone(&conn, &keys[0], id).await;
        }
        let once = command::macquire(&self.owner, keys, &self.options(Wait::No), req);
        if let Ok(v) = conn.query_for_key(&keys[0], &once).await {
            if let Ok(Some(_)) = command::parse_acquire(v) {
                let _ = release_group(&conn, &self.owner, keys).await;
            }
        }
    }

    /// A guard for the groups `taken`; each lock is watched as a hold of its own.
    fn guard(
        &self,
        taken: Vec<Vec<Arc<str>>>,
        basis: Instant,
        pinned: Vec<Dedicated>,
    ) -> MultiGuard {
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
        MultiGuard {
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

/// Every lock of a [`MultiLock`], held. Release it with [`release`](Self::release);
/// dropping it releases it in the background.
pub struct MultiGuard {
    inner: Arc<Inner>,
    owner: Arc<str>,
    groups: Vec<Vec<Arc<str>>>,
    holds: Vec<(HoldName, u64, LostRx)>,
    pinned: Vec<Dedicated>,
    handle: Handle,
    done: bool,
}

debug_fields!(MultiGuard |m| { groups: m.groups, owner: m.owner, lost: m.is_lost() });

impl MultiGuard {
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
        if let Err(e) = release_group(&conn, owner, keys).await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `RLOCK.MRELEASE` of one group: how many of its locks are free now.
async fn release_group(conn: &Conn, owner: &Arc<str>, keys: &[Arc<str>]) -> Result<u64> {
    match conn
        .query_for_key(&keys[0], &command::mrelease(owner, keys))
        .await
    {
        Ok(v) => command::parse_mrelease(v, keys, owner),
        Err(e) => Err(command::release_error(e, &keys[0], owner)),
    }
}

impl Drop for MultiGuard {
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

#[cfg(test)]
mod tests {
    use super::*;
    use rlock_module_tests::{flavors, Server};

    fn holders(server: &Server, key: &str) -> Vec<(String, i64)> {
        let map: std::collections::BTreeMap<String, i64> = redis::cmd("HGETALL")
            .arg(key)
            .query(&mut server.conn())
            .expect("HGETALL");
        map.into_iter().collect()
    }

    fn macquire(server: &Server, owner: &str, req: &str) -> redis::Value {
        redis::cmd("RLOCK.MACQUIRE")
            .arg(owner)
            .arg(2)
            .arg("{o}:a")
            .arg("{o}:b")
            .arg("LEASE")
            .arg(30_000)
            .arg("REQ")
            .arg(req)
            .query(&mut server.conn())
            .expect("RLOCK.MACQUIRE")
    }

    /// A grant whose reply was lost (taken here by a raw `RLOCK.MACQUIRE` with the REQ id of
    /// the wait) is found by that id and given back; where nothing was granted and the locks
    /// are still held by someone else, the recovery takes nothing.
    #[tokio::test]
    async fn a_lost_multi_key_grant_is_found_by_its_req_id_and_given_back() {
        for flavor in flavors() {
            let server = Server::start(flavor);
            let locks = Locks::new(server.client());
            let set = locks.multi_as(["{o}:b", "{o}:a"], "waiter");
            let keys = set.groups()[0].clone();
            assert_eq!(macquire(&server, "waiter", "r1"), redis::Value::Int(2));
            set.recover(&keys, None, "r1").await;
            assert!(holders(&server, "{o}:a").is_empty(), "{flavor:?}");
            assert!(holders(&server, "{o}:b").is_empty(), "{flavor:?}");

            assert_eq!(macquire(&server, "someone", "r2"), redis::Value::Int(2));
            set.recover(&keys, None, "r3").await;
            assert_eq!(
                holders(&server, "{o}:a"),
                [("someone".into(), 1)],
                "{flavor:?}"
            );
            assert_eq!(
                holders(&server, "{o}:b"),
                [("someone".into(), 1)],
                "{flavor:?}"
            );
        }
    }
}
