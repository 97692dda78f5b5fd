//! The watchdog: one background task per [`Locks`](crate::Locks) that renews every held lock
//! that was taken without an explicit lease, and that declares holds lost when their lease runs
//! out. Renewals due at about the same time go out as one pipeline per connection (per slot in
//! a cluster), so a thousand held locks cost one round trip per tick, not a thousand.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use futures_util::future::BoxFuture;

use crate::command::{self, HoldName};
use crate::conn::{slot_of, Conn};
use crate::error::Error;

/// What the watchdog needs from the [`Locks`](crate::Locks) it serves. `lock.rs` implements it,
/// so this module does not depend on that one.
pub(crate) trait Watched: Send + Sync + 'static {
    fn registry(&self) -> &Registry;
    fn conn(&self) -> BoxFuture<'_, Result<Conn, Error>>;
    /// The client to open the keyspace-event subscription with, and the response timeout;
    /// `None` where events are not followed (a cluster).
    fn pubsub(&self) -> Option<(redis::Client, Duration)> {
        None
    }
    /// Starts the keyspace-event listener (`lossevents`), if events are followed. The owner of
    /// the registry starts it, not this module, so that the listener can use the registry
    /// without the two modules importing each other.
    fn listen(&self, _me: Weak<dyn Watched>) -> Option<Listener> {
        None
    }
}

/// A background task that ends when this is dropped: the keyspace-event listener, which
/// lives as long as the watchdog task.
pub(crate) struct Listener(pub(crate) JoinHandle<()>);

impl Drop for Listener {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a guard learns about its hold: `None` while held, the reason once lost.
pub(crate) type LostRx = watch::Receiver<Option<Error>>;

/// Resolves once the hold is lost, with the reason; with `None` once it never will be (its
/// entry is gone: released).
pub(crate) async fn lost_reason(rx: &LostRx) -> Option<Error> {
    let mut rx = rx.clone();
    // Bound first: the borrow `wait_for` gives ends before `rx` does.
    let lost = match rx.wait_for(Option::is_some).await {
        Ok(v) => v.clone(),
        Err(_) => None,
    };
    lost
}

/// Resolves with the reason once the hold is lost; never while it is held, nor after a
/// release.
pub(crate) async fn lost(rx: &LostRx) -> Error {
    match lost_reason(rx).await {
        Some(e) => e,
        None => std::future::pending().await,
    }
}

/// One hold (key, owner, side), shared by all guards of its re-entries.
struct Entry {
    id: u64,
    lease: Duration,
    renew: bool,
    valid_until: Instant,
    due: Instant,
    guards: usize,
    lost: watch::Sender<Option<Error>>,
    last_error: Option<String>,
}

/// The holds a [`Locks`](crate::Locks) knows about.
pub(crate) struct Registry {
    entries: Mutex<HashMap<HoldName, Entry>>,
    next_id: AtomicU64,
    pub(crate) wake: Arc<Notify>,
    /// Tells the keyspace-event listener that a hold was registered (its key may be new).
    pub(crate) keys_wake: Arc<Notify>,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// A renewal to send: the hold, its lease, its entry id.
pub(crate) struct Due {
    hold: HoldName,
    lease: Duration,
    id: u64,
    due: Instant,
}

fn valid_until(basis: Instant, lease: Duration) -> Instant {
    basis + lease.saturating_sub(command::drift(lease))
}

fn retry_after(lease: Duration) -> Duration {
    (lease / 10).clamp(Duration::from_millis(20), Duration::from_secs(1))
}

impl Registry {
    pub(crate) fn new() -> Registry {
        Registry {
            entries: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            wake: Arc::new(Notify::new()),
            keys_wake: Arc::new(Notify::new()),
            task: Mutex::new(None),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<HoldName, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a successful acquire whose request was sent at `basis` and set `lease`.
    /// Returns the entry id the guard must quote, and the lost signal.
    pub(crate) fn register(
        &self,
        hold: &HoldName,
        lease: Duration,
        renew: bool,
        basis: Instant,
    ) -> (u64, LostRx) {
        let mut entries = self.entries();
        let e = entries.entry(hold.clone()).or_insert_with(|| Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            lease,
            renew,
            valid_until: basis,
            due: basis,
            guards: 0,
            lost: watch::channel(None).0,
            last_error: None,
        });
        e.guards += 1;
        e.lease = lease;
        e.renew |= renew;
        e.valid_until = valid_until(basis, lease);
        e.due = basis + lease / 3;
        let out = (e.id, e.lost.subscribe());
        drop(entries);
        self.wake.notify_one();
        self.keys_wake.notify_one();
        out
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }

    /// The keys of the holds registered now.
    pub(crate) fn keys(&self) -> std::collections::HashSet<Arc<str>> {
        self.entries().keys().map(|h| h.key.clone()).collect()
    }

    /// The holds on `keys`: name, entry id, lease, and whether the watchdog renews it.
    pub(crate) fn holds_on(
        &self,
        keys: &std::collections::HashSet<Arc<str>>,
    ) -> Vec<(HoldName, u64, Duration, bool)> {
        self.entries()
            .iter()
            .filter(|(h, _)| keys.contains(&h.key))
            .map(|(h, e)| (h.clone(), e.id, e.lease, e.renew))
            .collect()
    }

    /// A guard is gone (released or dropped).
    pub(crate) fn unregister(&self, hold: &HoldName, id: u64) {
        let mut entries = self.entries();
        if let Some(e) = entries.get_mut(hold) {
            if e.id == id {
                e.guards -= 1;
                if e.guards == 0 {
                    entries.remove(hold);
                }
            }
        }
    }

    /// A renewal sent at `basis` succeeded.
    pub(crate) fn renewed(&self, hold: &HoldName, id: u64, basis: Instant) {
        if let Some(e) = self.entries().get_mut(hold) {
            if e.id == id {
                e.valid_until = e.valid_until.max(valid_until(basis, e.lease));
                e.due = basis + e.lease / 3;
                e.last_error = None;
            }
        }
    }

    /// The server refused to renew: every guard of this hold learns it.
    pub(crate) fn mark_lost(&self, hold: &HoldName, id: u64, reason: &str) {
        let mut entries = self.entries();
        if entries.get(hold).is_some_and(|e| e.id == id) {
            let e = entries.remove(hold).expect("checked above");
            e.lost.send_replace(Some(Error::lost(&hold.key, reason)));
        }
    }

    /// Declares lost the holds whose lease has run out, and picks the renewals to send now.
    /// Also returns when the watchdog must look again.
    fn collect(&self, now: Instant) -> (Vec<Due>, Option<Instant>) {
        let mut entries = self.entries();
        Self::expire(&mut entries, now);
        let mut batch = Vec::new();
        let mut next: Option<Instant> = None;
        for (hold, e) in entries.iter() {
            // Renewals due within a sixth of a lease ride along with one that is due now,
            // so ticks coalesce.
            if e.renew && e.due <= now + e.lease / 6 {
                batch.push(Due {
                    hold: hold.clone(),
                    lease: e.lease,
                    id: e.id,
                    due: e.due,
                });
            }
            let mut t = e.valid_until;
            if e.renew {
                t = t.min(e.due);
            }
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        if !batch.iter().any(|d| d.due <= now) {
            batch.clear();
        }
        (batch, next)
    }

    /// Declares lost the holds whose lease has run out by `now`, and returns the earliest
    /// end of a lease left: what the watchdog must not sleep past, even while a renewal is
    /// on its way (a server that stopped answering holds it up to a third of a lease).
    fn expire_due(&self, now: Instant) -> Option<Instant> {
        let mut entries = self.entries();
        Self::expire(&mut entries, now);
        entries.values().map(|e| e.valid_until).min()
    }

    fn expire(entries: &mut HashMap<HoldName, Entry>, now: Instant) {
        let expired: Vec<HoldName> = entries
            .iter()
            .filter(|(_, e)| e.valid_until <= now)
            .map(|(hold, _)| hold.clone())
            .collect();
        for k in expired {
            let e = entries.remove(&k).expect("collected above");
            let reason = match (&e.last_error, e.renew) {
                (Some(err), _) => format!("lease ran out while renewals failed: {err}"),
                (None, true) => "lease ran out before a renewal got through".to_owned(),
                (None, false) => format!(
                    "its lease of {} ms ran out (it was taken with .lease(..), which the watchdog \
                     does not renew; call renew() or leave the lease out)",
                    e.lease.as_millis()
                ),
            };
            e.lost.send_replace(Some(Error::lost(&k.key, reason)));
        }
    }

    fn apply(&self, batch: Vec<Due>, results: Vec<Result<bool, String>>, sent: Instant) {
        let now = Instant::now();
        for (d, r) in batch.into_iter().zip(results) {
            match r {
                Ok(true) => self.renewed(&d.hold, d.id, sent),
                Ok(false) if d.hold.permit => self.mark_lost(
                    &d.hold,
                    d.id,
                    "the server refused the renewal: the lease ended, or the permit was given \
                     back or deleted",
                ),
                Ok(false) => self.mark_lost(
                    &d.hold,
                    d.id,
                    "the server refused the renewal: the lock expired, was deleted or was \
                     force-released",
                ),
                Err(err) => {
                    if let Some(e) = self.entries().get_mut(&d.hold) {
                        if e.id == d.id {
                            e.last_error = Some(err);
                            e.due = now + retry_after(d.lease);
                        }
                    }
                }
            }
        }
    }

    /// Starts the watchdog task on `handle` unless it is running.
    pub(crate) fn ensure_running(&self, handle: &tokio::runtime::Handle, inner: Weak<dyn Watched>) {
        let mut task = self.task.lock().unwrap_or_else(|e| e.into_inner());
        if task.as_ref().is_none_or(|t| t.is_finished()) {
            *task = Some(handle.spawn(run(inner, self.wake.clone())));
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().len()
    }
}

/// Sends one batch: a single pipeline on a plain server; one pipeline per slot, all at once,
/// in a cluster (redis-rs cluster pipelines must be single-slot).
async fn renew_batch(conn: &Conn, batch: &[Due]) -> Vec<Result<bool, String>> {
    let mut groups: HashMap<_, Vec<usize>> = HashMap::new();
    for (i, d) in batch.iter().enumerate() {
        let group = conn.is_cluster().then(|| slot_of(&d.hold.key));
        groups.entry(group).or_default().push(i);
    }
    let limit = batch
        .iter()
        .map(|d| d.lease / 3)
        .min()
        .unwrap_or_default()
        .max(Duration::from_millis(50));
    let sends = groups.into_values().map(|idx| async move {
        let mut pipe = redis::pipe();
        for &i in &idx {
            pipe.add_command(command::renew(&batch[i].hold, batch[i].lease));
        }
        let reply = match tokio::time::timeout(limit, conn.pipeline(&mut pipe)).await {
            Ok(Ok(values)) => Ok(values),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no reply within {limit:?}")),
        };
        (idx, reply)
    });
    let mut out: Vec<Result<bool, String>> = vec![Err(String::new()); batch.len()];
    for (idx, reply) in futures_util::future::join_all(sends).await {
        match reply {
            Ok(values) => {
                for (i, v) in idx.into_iter().zip(values) {
                    out[i] = command::renewal(Ok(v)).into_result();
                }
            }
            Err(e) => {
                for i in idx {
                    out[i] = Err(e.clone());
                }
            }
        }
    }
    out
}

async fn sleep_until_some(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

async fn run(inner: Weak<dyn Watched>, wake: Arc<Notify>) {
    // The keyspace-event listener lives as long as this task.
    let _listener = match inner.upgrade() {
        Some(strong) => strong.listen(inner.clone()),
        None => return,
    };
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let (batch, next) = strong.registry().collect(Instant::now());
        if !batch.is_empty() {
            let sent = Instant::now();
            // A lease that ends while the renewals are on their way is lost at its end, not
            // when the reply (or the pipeline's timeout) comes.
            let results = {
                let send = async {
                    match strong.conn().await {
                        Ok(conn) => renew_batch(&conn, &batch).await,
                        Err(e) => vec![Err(e.to_string()); batch.len()],
                    }
                };
                tokio::pin!(send);
                loop {
                    let end = strong.registry().expire_due(Instant::now());
                    tokio::select! {
                        results = &mut send => break results,
                        _ = sleep_until_some(end) => {}
                    }
                }
            };
            strong.registry().apply(batch, results, sent);
            continue;
        }
        drop(strong);
        match next {
            Some(t) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(t) => {}
                    _ = &mut notified => {}
                }
            }
            None => notified.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> (HoldName, HoldName) {
        let hold = |owner: &str| HoldName {
            key: Arc::from("k"),
            owner: Arc::from(owner),
            side: None,
            permit: false,
        };
        (hold("u:1"), hold("u:2"))
    }

    /// An empty registry, a hold to register and the time now.
    fn fresh() -> (Registry, HoldName, Instant) {
        (Registry::new(), names().0, Instant::now())
    }

    #[tokio::test(start_paused = true)]
    async fn reentries_share_one_entry_until_the_last_guard_goes() {
        let (r, o, now) = fresh();
        let (a, _) = r.register(&o, Duration::from_secs(3), true, now);
        let (b, _) = r.register(&o, Duration::from_secs(3), true, now);
        assert_eq!(a, b);
        r.unregister(&o, a);
        assert_eq!(r.len(), 1);
        r.unregister(&o, a);
        assert_eq!(r.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_come_due_at_a_third_of_the_lease_and_batch() {
        let (r, o, now) = fresh();
        r.register(&o, Duration::from_millis(3000), true, now);
        r.register(
            &names().1,
            Duration::from_millis(3000),
            true,
            now + Duration::from_millis(400),
        );
        let (batch, next) = r.collect(now);
        assert!(batch.is_empty());
        assert_eq!(next, Some(now + Duration::from_millis(1000)));
        let (batch, _) = r.collect(now + Duration::from_millis(1000));
        assert_eq!(batch.len(), 2, "the one due 400 ms later rides along");
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_renewal_is_never_silent() {
        let (r, o, now) = fresh();
        let (_, rx) = r.register(&o, Duration::from_secs(3), true, now);
        let (batch, _) = r.collect(now + Duration::from_secs(1));
        r.apply(batch, vec![Ok(false)], now + Duration::from_secs(1));
        let err = rx.borrow().clone().expect("lost");
        assert!(err.is_lost() && err.to_string().contains("refused"));
        assert_eq!(r.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn failing_renewals_retry_then_lose_the_hold_at_the_lease_end() {
        let (r, o, now) = fresh();
        let lease = Duration::from_millis(1000);
        let (_, rx) = r.register(&o, lease, true, now);
        tokio::time::advance(Duration::from_millis(334)).await;
        let at = Instant::now();
        let (batch, _) = r.collect(at);
        assert_eq!(batch.len(), 1);
        r.apply(batch, vec![Err("connection refused".into())], at);
        let (batch, next) = r.collect(at);
        assert!(batch.is_empty(), "a retry waits for its turn: no hot loop");
        assert_eq!(next, Some(at + retry_after(lease)));
        let (batch, _) = r.collect(at + retry_after(lease));
        assert_eq!(batch.len(), 1, "and then goes out again");
        assert!(rx.borrow().is_none());
        let (_, _) = r.collect(now + lease);
        let err = rx.borrow().clone().expect("lost at the lease end");
        assert!(err.to_string().contains("connection refused"));
    }

    #[tokio::test(start_paused = true)]
    async fn an_explicit_lease_is_lost_when_it_runs_out() {
        let (r, o, now) = fresh();
        let (_, rx) = r.register(&o, Duration::from_millis(500), false, now);
        let (batch, next) = r.collect(now);
        assert!(batch.is_empty(), "not renewed");
        assert_eq!(next, Some(valid_until(now, Duration::from_millis(500))));
        r.collect(now + Duration::from_millis(500));
        assert!(rx
            .borrow()
            .as_ref()
            .unwrap()
            .to_string()
            .contains(".lease("));
    }

    /// A server that never answers: the connection never comes.
    struct Hung(Registry);

    impl Watched for Hung {
        fn registry(&self) -> &Registry {
            &self.0
        }

        fn conn(&self) -> BoxFuture<'_, Result<Conn, Error>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_that_ends_while_a_renewal_hangs_is_lost_at_its_end() {
        let hung = Arc::new(Hung(Registry::new()));
        let (o, _) = names();
        let lease = Duration::from_millis(900);
        let start = Instant::now();
        let (_, mut rx) = hung.0.register(&o, lease, true, start);
        hung.0.ensure_running(
            &tokio::runtime::Handle::current(),
            Arc::downgrade(&hung) as _,
        );
        tokio::time::timeout(lease * 3, rx.wait_for(Option::is_some))
            .await
            .expect("lost within three leases")
            .expect("lost");
        // The renewal went out at a third of the lease and never came back; the hold is lost
        // when its lease ends, not later.
        assert_eq!(Instant::now(), valid_until(start, lease));
        assert_eq!(hung.0.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stale_guard_does_not_touch_a_newer_hold() {
        let (r, o, now) = fresh();
        let (old, _) = r.register(&o, Duration::from_secs(3), true, now);
        r.mark_lost(&o, old, "test");
        let (new, rx) = r.register(&o, Duration::from_secs(3), true, now);
        assert_ne!(old, new);
        r.unregister(&o, old);
        r.mark_lost(&o, old, "stale");
        assert_eq!(r.len(), 1);
        assert!(rx.borrow().is_none());
    }
}
