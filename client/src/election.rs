//! [`Election`]: leader election on a lock. The leader is the lock's holder, its value the
//! owner, its term the lock's fencing token. [`Leadership`] is the elected candidate's guard,
//! [`LeaderChanges`] the stream of leaders an observer sees.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{FutureExt, Stream, StreamExt};
use redis::aio::PubSubStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::command::{self, LockInfo, LockKind};
use crate::conn::Endpoint;
use crate::error::{Error, Result};
use crate::hold::{Guard, Hold};
use crate::keyspace;
use crate::lock::Lock;
use crate::locks::Locks;

/// The longest value a candidate may have, in bytes: the server's limit on an owner.
pub(crate) const MAX_VALUE_LEN: usize = 1024;

/// How often [`LeaderChanges`] reads the lock when the server sends no keyspace events.
pub(crate) const POLL_EVERY: Duration = Duration::from_millis(50);

/// How often [`LeaderChanges`] reads the lock anyway, and looks again at
/// `notify-keyspace-events`, while it follows keyspace events.
pub(crate) const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// The module's events that can change who holds a lock.
const LOCK_EVENTS: [&str; 5] = [
    "rlock.acquire",
    "rlock.release",
    "rlock.expire",
    "rlock.forcerelease",
    "rlock.sessionend",
];

/// A leader as an observer sees it: the elected candidate's value and its term.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The value the leader campaigned with.
    pub value: String,
    /// Its term: the lock's fencing token when it was elected. Each election gives a greater
    /// one; 0 if the lock has no fencing counter (it was taken by other means than a
    /// campaign).
    pub term: u64,
}

/// A leader election: one lock whose holder is the leader. Made by [`Locks::election`].
///
/// A candidate [`campaign`](Self::campaign)s with a value (its address, its name): it waits in
/// the server (`RLOCK.ACQUIRE name value BLOCK 0 TOKEN`) until the lock is free for it, and is
/// then the leader until it [`resign`](Leadership::resign)s or its lease is lost. The watchdog
/// of the [`Locks`] renews the lease (its [`watchdog_lease`](crate::LocksBuilder::watchdog_lease),
/// 30 s by default: the longest a dead leader keeps the post). The term is the fencing token:
/// pass it to what the leader writes to, and have that refuse older terms.
///
/// **Values are unique.** The lock is reentrant per owner, and the owner is the value, so two
/// candidates with one value would both "win". A campaign that finds its own value already
/// the leader's (the grant comes back as a re-entry) gives its re-entry back and fails with
/// [`Error::DuplicateValue`]; the sitting leader is not disturbed. A process restarted with
/// its previous run's value gets that error until the old hold's lease runs out. Values are
/// 1 to 1024 bytes of UTF-8 ([`Error::InvalidValue`] otherwise).
///
/// ```no_run
/// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
/// let election = locks.election("scheduler");
/// let leadership = election.campaign("node-a:8080").await?;
/// println!("leader for term {}", leadership.term());
/// tokio::select! {
///     _ = async { /* lead, writing with leadership.term() as the fencing token */ } => {}
///     lost = leadership.lost() => return Err(lost),
/// }
/// leadership.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    locks: Locks,
    key: Arc<str>,
    replicas: Option<(usize, Duration)>,
}

debug_fields!(Election |e| { key: e.key, replicas: e.replicas });

impl Locks {
    /// The leader election `name`: the lock `name` (Redisson's layout, so its holder shows in
    /// `HGETALL name`), its fencing counter as the term. See [`Election`].
    pub fn election(&self, name: impl Into<String>) -> Election {
        Election {
            locks: self.clone(),
            key: Arc::from(name.into()),
            replicas: None,
        }
    }
}

impl Election {
    /// The election's name: its lock's key.
    pub fn name(&self) -> &str {
        &self.key
    }

    /// An elected candidate believes it leads only once `n` replicas acknowledged the grant
    /// (`WAIT n timeout`, pipelined with the acquire). With fewer, the grant is released and
    /// the campaign fails with [`Error::NotAcknowledged`]: a failover to a replica that never
    /// saw it would elect someone else while this candidate believed it led.
    pub fn sync_replicas(mut self, n: usize, timeout: Duration) -> Self {
        self.replicas = Some((n, timeout));
        self
    }

    /// Campaigns with `value` and waits, in the server, as long as it takes to be elected.
    /// Drop the future to give up (cancel-safe: a grant that races the drop is released).
    ///
    /// Errors: [`Error::InvalidValue`], [`Error::DuplicateValue`], [`Error::NotAcknowledged`]
    /// (with [`sync_replicas`](Self::sync_replicas)), or the server's.
    pub async fn campaign(&self, value: impl Into<String>) -> Result<Leadership> {
        let value = self.checked(value.into())?;
        loop {
            let lock = self.lock(&value).wait_forever();
            // `BLOCK 0` answers null only when the wait was ended from outside (`CLIENT
            // UNBLOCK`, a failover): nothing was granted, so a new campaign is safe.
            if let Some(leadership) = self.elect(lock, &value).await? {
                return Ok(leadership);
            }
            tokio::time::sleep(POLL_EVERY).await;
        }
    }

    /// Campaigns with `value`, waiting in the server up to `wait`; `None` if someone else
    /// still leads by then. `Duration::ZERO` tries once.
    pub async fn campaign_for(
        &self,
        value: impl Into<String>,
        wait: Duration,
    ) -> Result<Option<Leadership>> {
        let value = self.checked(value.into())?;
        self.elect(self.lock(&value).wait(wait), &value).await
    }

    /// The current leader's value and term, or `None` when there is none (`RLOCK.INFO`: the
    /// holder and the fencing counter, read together). One round trip.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        Ok(leader_of(&self.locks.info(&self.key).await?))
    }

    /// A stream of the leaders: the current one (or `None`) first, then each change, in
    /// order, each within 100 ms of it. See [`LeaderChanges`] for how it learns of them.
    ///
    /// ```no_run
    /// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
    /// let mut changes = locks.election("scheduler").observe().await?;
    /// loop {
    ///     match changes.next().await? {
    ///         Some(leader) => println!("{} leads (term {})", leader.value, leader.term),
    ///         None => println!("no leader"),
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn observe(&self) -> Result<LeaderChanges> {
        let source = Subscription::wanted(&self.locks).await;
        let sub = Subscription::open(&self.locks, &self.key, source).await;
        let (tx, rx) = mpsc::channel(64);
        let events = Arc::new(AtomicBool::new(sub.is_events()));
        let mut watcher = Watcher {
            locks: self.locks.clone(),
            key: self.key.clone(),
            tx,
            last: None,
            failing: false,
            events: events.clone(),
            lease_end: None,
        };
        // Read after subscribing: a change after this read comes with an event or message.
        let info = self.locks.info(&self.key).await?;
        watcher.record(&info).await;
        let task = tokio::spawn(watcher.run(sub));
        Ok(LeaderChanges { rx, events, task })
    }

    fn checked(&self, value: String) -> Result<Arc<str>> {
        if value.is_empty() || value.len() > MAX_VALUE_LEN {
            return Err(Error::InvalidValue {
                key: self.key.to_string(),
                len: value.len(),
            });
        }
        Ok(Arc::from(value))
    }

    pub(crate) fn lock(&self, value: &str) -> Lock {
        let lock = self.locks.lock_as(&*self.key, value).fenced();
        match self.replicas {
            Some((n, timeout)) => lock.sync_replicas(n, timeout),
            None => lock,
        }
    }

    /// Acquires `lock` and makes the grant a [`Leadership`], or gives it back when it cannot
    /// be believed (a re-entry: the value leads already; too few replicas acknowledged).
    async fn elect(&self, lock: Lock, value: &Arc<str>) -> Result<Option<Leadership>> {
        let Some(guard) = lock.acquire().await? else {
            return Ok(None);
        };
        if guard.hold_count().is_some_and(|n| n > 1) {
            // Only our re-entry is undone: the hold count goes back to the other's 1.
            let _ = guard.release().await;
            return Err(Error::DuplicateValue {
                key: self.key.to_string(),
                value: value.to_string(),
            });
        }
        if let Some((n, _)) = self.replicas {
            let acked = guard.replicas_acked().unwrap_or(0);
            if acked < n as u64 {
                // If this release fails too, the lease ends the grant: nobody renews it.
                let _ = guard.release().await;
                return Err(Error::NotAcknowledged {
                    key: self.key.to_string(),
                    acked,
                    wanted: n,
                });
            }
        }
        let term = guard.token().unwrap_or_default();
        Ok(Some(Leadership {
            guard,
            value: value.clone(),
            term,
        }))
    }
}

/// The leader of `info`'s lock, if it is a held reentrant lock.
pub(crate) fn leader_of(info: &LockInfo) -> Option<Leader> {
    if !matches!(info.kind, LockKind::Reentrant) {
        return None;
    }
    let (value, _) = info.holders.first()?;
    Some(Leader {
        value: value.clone(),
        term: info.token.unwrap_or(0),
    })
}

/// An elected candidate's post. The watchdog renews it; [`lost`](Self::lost) fires when it
/// ends otherwise. [`resign`](Self::resign) steps down; dropping it steps down in the
/// background, as dropping a [`Guard`] releases.
pub struct Leadership {
    guard: Guard,
    value: Arc<str>,
    term: u64,
}

debug_fields!(Leadership |l| {
    election: l.guard.key(),
    value: l.value,
    term: l.term,
    replicas_acked: l.guard.replicas_acked(),
    lost: l.guard.is_lost(),
});

impl Leadership {
    /// The election's name.
    pub fn name(&self) -> &str {
        self.guard.key()
    }

    /// The value this candidate campaigned with.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The term: the lock's fencing token for this election, greater than every earlier
    /// term's. Pass it with every write the leader makes and have the resource refuse older
    /// terms: that, not [`lost`](Self::lost), is what stops a leader that was paused or cut
    /// off past its lease.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// How many replicas acknowledged the grant, with [`Election::sync_replicas`].
    pub fn replicas_acked(&self) -> Option<u64> {
        self.guard.replicas_acked()
    }

    /// The lock hold behind the post: its token (the term) and lost signal, to hand to code
    /// that takes a [`Hold`].
    pub fn hold(&self) -> Hold {
        self.guard.hold()
    }

    /// True once the post is lost (see [`lost`](Self::lost)).
    pub fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    /// Resolves with [`Error::Lost`] when the post ends without a resignation: a renewal was
    /// refused (the lease ran out, the lock was force-released or deleted: seen at the next
    /// renewal, a third of the lease, or within 100 ms when the server publishes the module's
    /// keyspace events, see [`Hold::lost`](crate::Hold::lost)), or the lease ran out while renewals failed (the server
    /// is unreachable, or became a replica). Never resolves while it holds.
    pub async fn lost(&self) -> Error {
        self.guard.lost().await
    }

    /// Runs `command` only while this post stands, in this term: "write only while leader".
    /// It is [`Hold::guard`] with the value as owner and the term as token, so a deposed
    /// leader (its lease ran out, another won a later term) is refused with
    /// [`Error::NotHeld`] or [`Error::StaleToken`] and its command never runs.
    ///
    /// ```no_run
    /// # async fn f(locks: rlock_client::Locks) -> rlock_client::Result<()> {
    /// use rlock_client::redis;
    ///
    /// let leadership = locks.election("scheduler").campaign("node-a").await?;
    /// let mut publish = redis::cmd("SET");
    /// publish.arg("{scheduler}:plan").arg("v2");
    /// let _: () = leadership.guard(&publish).await?;
    /// # Ok(()) }
    /// ```
    pub async fn guard<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> Result<T> {
        self.guard.guard(command).await
    }

    /// Steps down: releases the lock (`RLOCK.RELEASE`), and the next candidate waiting in the
    /// server is elected at once. [`Error::Lost`] if the post had been lost already,
    /// [`Error::NotHeld`] if the server no longer had it.
    pub async fn resign(self) -> Result<()> {
        self.guard.release().await.map(|_| ())
    }
}

/// How a [`LeaderChanges`] learns of changes at the moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObserveMode {
    /// From the module's keyspace events (`notify-keyspace-events` holds `d`, or `A`, and
    /// `K` or `E`): it reads the lock on each event, when the holder's lease runs out, and
    /// every second.
    Events,
    /// It reads the lock every 50 ms, and at once when the lock's unlock channel
    /// (`redisson_lock__channel:{name}`) says it was freed.
    Polling,
}

/// The leaders of an [`Election`], from [`Election::observe`]: `Ok(None)` for no leader,
/// `Ok(Some(leader))` for a leader; the current state first, then every change.
///
/// Items come in order and never repeat the item before them; each is read by `RLOCK.INFO`
/// (holder and term in one reply), so a leader and its term always belong together.
///
/// **How it learns of changes.** With the module's keyspace events on (`CONFIG SET
/// notify-keyspace-events Kd`; `Ed` works too, with more traffic), it listens on the lock's
/// key channel and reads the lock on every event (`rlock.acquire`, `rlock.release`,
/// `rlock.expire`, `rlock.forcerelease`, `rlock.sessionend`), when the holder's lease runs out
/// (a lapse nobody waits on raises no module event), and once a second as a safety net. Without
/// them ([`ObserveMode::Polling`]) it reads the lock every 50 ms and listens on the unlock
/// channel, which the module publishes on when a release leaves the lock free (a lock handed
/// straight to a waiting candidate is not announced there). It looks at
/// `notify-keyspace-events` again every second and switches; [`mode`](Self::mode) says which
/// it uses. If `CONFIG GET` is refused, or the subscription fails, it polls. In a Redis
/// Cluster it always polls (keyspace events are per node; `SSUBSCRIBE` is not used).
///
/// **What it cannot see.** A leader that lasts less than one read (a round trip with events,
/// 50 ms when polling) can be missed: the next item then skips a term. A lock freed and taken
/// again within a read shows no `None` between. While its connection is down it reports the
/// error once, then the state as soon as a read works again. A key deleted or overwritten by
/// plain commands (not module events) is seen at the next read: within a second, or at the
/// lease's end. In polling mode its subscription to the unlock channel counts, for the module,
/// as a Redisson client waiting: once per round of hand-offs between blocked candidates the
/// module leaves the freed lock free for 5 ms first.
///
/// Also a [`Stream`]. Dropping it stops its background task and closes its connection.
pub struct LeaderChanges {
    rx: mpsc::Receiver<Result<Option<Leader>>>,
    events: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

debug_fields!(LeaderChanges |l| { mode: l.mode() });

impl LeaderChanges {
    /// The next item: the current state the first time, then the next change. Waits for it.
    pub async fn next(&mut self) -> Result<Option<Leader>> {
        match self.rx.recv().await {
            Some(item) => item,
            None => Err(stopped()),
        }
    }

    /// How it learns of changes at the moment: [`ObserveMode`].
    pub fn mode(&self) -> ObserveMode {
        if self.events.load(Ordering::Relaxed) {
            ObserveMode::Events
        } else {
            ObserveMode::Polling
        }
    }
}

fn stopped() -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::Io,
        "the election observer's task stopped",
        "is the runtime shutting down?".to_owned(),
    )))
}

impl Stream for LeaderChanges {
    type Item = Result<Option<Leader>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for LeaderChanges {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the observer listens to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Nothing: it polls (a cluster).
    Nothing,
    /// The unlock channel; it polls as well.
    Unlock,
    /// The key's keyspace channel (`K`).
    Keyspace,
    /// The module's keyevent channels (`E`), whose messages name the key.
    Keyevent,
}

struct Subscription {
    source: Source,
    stream: Option<PubSubStream>,
}

impl Subscription {
    fn is_events(&self) -> bool {
        self.stream.is_some() && matches!(self.source, Source::Keyspace | Source::Keyevent)
    }

    /// What the server's `notify-keyspace-events` lets the observer listen to.
    async fn wanted(locks: &Locks) -> Source {
        if !matches!(locks.inner.endpoint, Endpoint::Server(_)) {
            return Source::Nothing;
        }
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg("notify-keyspace-events");
        let flags = match locks.inner.query(&cmd).await {
            Ok(v) => keyspace::config_value(v).unwrap_or_default(),
            Err(_) => String::new(),
        };
        source_for(&flags)
    }

    /// Subscribes to what the server sends; on any failure, to nothing (the observer polls).
    async fn open(locks: &Locks, key: &str, source: Source) -> Subscription {
        let Endpoint::Server(client) = &locks.inner.endpoint else {
            return Subscription {
                source,
                stream: None,
            };
        };
        let db = client.get_connection_info().redis_settings().db();
        let channels: Vec<String> = match source {
            Source::Nothing => Vec::new(),
            Source::Unlock => vec![command::helper_key("redisson_lock__channel", key)],
            Source::Keyspace => vec![keyspace::keyspace_channel(db, key)],
            Source::Keyevent => LOCK_EVENTS
                .iter()
                .map(|e| keyspace::keyevent_channel(db, e))
                .collect(),
        };
        let connect = async {
            let mut pubsub = client.get_async_pubsub().await?;
            for c in &channels {
                pubsub.subscribe(c).await?;
            }
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        let timeout = locks.inner.config.response_timeout;
        let stream = match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(stream)) if !channels.is_empty() => Some(stream),
            _ => None,
        };
        Subscription { source, stream }
    }

    /// Whether `msg` may announce a change of holder.
    fn matters(&self, msg: &redis::Msg, key: &str) -> bool {
        let payload = msg.get_payload_bytes();
        match self.source {
            Source::Nothing | Source::Unlock => true,
            Source::Keyspace => payload != b"rlock.timeout",
            Source::Keyevent => payload == key.as_bytes(),
        }
    }
}

/// What to listen to, for `notify-keyspace-events` = `flags` (see [`keyspace::mode`]); the
/// unlock channel when the module's events are not published.
pub(crate) fn source_for(flags: &str) -> Source {
    match keyspace::mode(flags) {
        Some(keyspace::Mode::Keyspace) => Source::Keyspace,
        Some(keyspace::Mode::Keyevent) => Source::Keyevent,
        None => Source::Unlock,
    }
}

/// The observer's background task.
struct Watcher {
    locks: Locks,
    key: Arc<str>,
    tx: mpsc::Sender<Result<Option<Leader>>>,
    /// The last item sent.
    last: Option<Option<Leader>>,
    /// The last read failed (its error was sent; later ones are not).
    failing: bool,
    events: Arc<AtomicBool>,
    /// When the holder's lease runs out, as of the last read.
    lease_end: Option<Instant>,
}

async fn recv(stream: &mut Option<PubSubStream>) -> Option<redis::Msg> {
    match stream {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

impl Watcher {
    async fn run(mut self, mut sub: Subscription) {
        let mut last_read = Instant::now();
        let mut next_check = last_read + RECHECK_EVERY;
        loop {
            let events = sub.is_events();
            self.events.store(events, Ordering::Relaxed);
            let next_read = if events {
                let safety = last_read + RECHECK_EVERY;
                self.lease_end.map_or(safety, |t| t.min(safety))
            } else {
                last_read + POLL_EVERY
            };
            let mut check = false;
            tokio::select! {
                biased;
                _ = self.tx.closed() => return,
                msg = recv(&mut sub.stream), if sub.stream.is_some() => match msg {
                    Some(msg) => {
                        let mut matters = sub.matters(&msg, &self.key);
                        // Messages that came together need one read.
                        while let Some(Some(msg)) = sub.stream.as_mut().and_then(|s| s.next().now_or_never()) {
                            matters |= sub.matters(&msg, &self.key);
                        }
                        if !matters {
                            continue;
                        }
                    }
                    // The connection is gone: poll until the next check subscribes again.
                    None => sub.stream = None,
                },
                _ = tokio::time::sleep_until(next_read.min(next_check)) => {
                    check = Instant::now() >= next_check;
                }
            }
            if check {
                next_check = Instant::now() + RECHECK_EVERY;
                let wanted = Subscription::wanted(&self.locks).await;
                let current = if sub.stream.is_some() {
                    sub.source
                } else {
                    Source::Nothing
                };
                if wanted != current {
                    sub = Subscription::open(&self.locks, &self.key, wanted).await;
                    self.events.store(sub.is_events(), Ordering::Relaxed);
                }
            }
            last_read = Instant::now();
            match self.locks.info(&self.key).await {
                Ok(info) => self.record(&info).await,
                Err(e) => {
                    if !self.failing {
                        self.failing = true;
                        let _ = self.tx.send(Err(e)).await;
                    }
                }
            }
        }
    }

    /// Sends the leader `info` shows, unless it is the last item sent.
    async fn record(&mut self, info: &LockInfo) {
        self.failing = false;
        let leader = leader_of(info);
        self.lease_end = match (&leader, info.pttl) {
            // The lease's end, and a little after, so that the read finds it over.
            (Some(_), ms) if ms >= 0 => Some(Instant::now() + Duration::from_millis(ms as u64 + 2)),
            _ => None,
        };
        if self.last.as_ref() != Some(&leader) {
            self.last = Some(leader.clone());
            let _ = self.tx.send(Ok(leader)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_events_are_followed_only_with_module_events_on_a_channel() {
        assert_eq!(source_for(""), Source::Unlock);
        assert_eq!(source_for("d"), Source::Unlock, "no channel class");
        assert_eq!(source_for("Kx"), Source::Unlock, "no module class");
        assert_eq!(source_for("dK"), Source::Keyspace);
        assert_eq!(source_for("AKE"), Source::Keyspace);
        assert_eq!(source_for("dE"), Source::Keyevent);
        assert_eq!(source_for("AE"), Source::Keyevent);
    }

    #[test]
    fn the_leader_is_the_holder_with_the_counter_as_term() {
        let held = LockInfo {
            kind: LockKind::Reentrant,
            holders: vec![("node-a".into(), 1)],
            pttl: 900,
            token: Some(7),
            ..LockInfo::default()
        };
        assert_eq!(
            leader_of(&held),
            Some(Leader {
                value: "node-a".into(),
                term: 7
            })
        );
        assert_eq!(leader_of(&LockInfo::default()), None);
        let rw = LockInfo {
            kind: LockKind::ReadWrite {
                mode: "read".into(),
            },
            ..held
        };
        assert_eq!(leader_of(&rw), None, "not an election's lock");
    }
}
