//! The measured window of a load: warm up, read the clocks and counts, run, read them again,
//! stop the workers. Workers on many keys count into a [`Tally`]; clients on one key keep
//! their own [`Shared`] counts.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use rlock_module_tests::Server;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::wake::{listen, Wakes};
use crate::measure::{connect_many, Snapshot, Window};
use crate::{Plan, OWNER_PREFIX};

/// The stop flag and counts shared by the workers of a load on many keys.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
}

impl Tally {
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed)
    }

    /// `done` operations finished, `bad` of them with an unexpected reply.
    pub fn add(&self, done: u64, bad: u64) {
        if bad > 0 {
            self.errors.fetch_add(bad, Ordering::Relaxed);
        }
        self.done.fetch_add(done, Ordering::Relaxed);
    }

    fn read(&self) -> (u64, u64) {
        (
            self.done.load(Ordering::SeqCst),
            self.errors.load(Ordering::SeqCst),
        )
    }
}

/// What a load did inside its window: operations, unexpected replies, and the clocks.
#[derive(Debug, Clone)]
pub struct LoadRun {
    pub done: u64,
    pub errors: u64,
    pub window: Window,
}

/// Lets `workers` (counting into `tally`) warm up, then measures them for `run`: operations
/// and errors inside the window, and server CPU read on `control` (none without it: the
/// window is then wall time only). Stops and awaits the workers.
pub async fn measure_load(
    control: Option<&mut MultiplexedConnection>,
    plan: &Plan,
    run: Duration,
    tally: &Tally,
    workers: Vec<JoinHandle<()>>,
) -> LoadRun {
    tokio::time::sleep(plan.warmup()).await;
    let mut control = control;
    let ((d0, e0), s0) = (tally.read(), snapshot(control.as_deref_mut()).await);
    tokio::time::sleep(run).await;
    let s1 = snapshot(control).await;
    let (d1, e1) = tally.read();
    tally.stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.expect("a load worker panicked");
    }
    LoadRun {
        done: d1 - d0,
        errors: e1 - e0,
        window: Window::between(&s0, &s1),
    }
}

async fn snapshot(control: Option<&mut MultiplexedConnection>) -> Snapshot {
    match control {
        Some(control) => Snapshot::take(control).await,
        None => Snapshot {
            at: Instant::now(),
            server_cpu: 0.0,
            client_cpu: 0.0,
        },
    }
}

/// Per-client counts and totals, read at one moment.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub per_client: Vec<u64>,
    pub totals: Vec<u64>,
}

impl Counts {
    /// Reads `per_client` and `totals` now.
    pub fn read(per_client: &[AtomicU64], totals: &[&AtomicU64]) -> Counts {
        let load = |a: &AtomicU64| a.load(Ordering::SeqCst);
        Counts {
            per_client: per_client.iter().map(load).collect(),
            totals: totals.iter().map(|a| load(a)).collect(),
        }
    }
}

/// What the clients of one run on one key share: their counts and the stop flag.
pub trait Shared: Send + Sync {
    fn counts(&self) -> Counts;
    /// The flag the clients look at before each turn.
    fn stop_flag(&self) -> &AtomicBool;
    fn stop(&self) {
        self.stop_flag().store(true, Ordering::SeqCst);
    }
    /// The window opens (`true`) or closes: for what only counts inside it.
    fn measuring(&self, _on: bool) {}
    /// The command that clears the run's key once the clients are gone.
    fn cleanup(&self) -> &'static str {
        "RLOCK.FORCERELEASE"
    }
}

/// Counts an unexpected reply in `errors`, and prints the first of a run (`scenario`'s).
pub fn unexpected(errors: &AtomicU64, scenario: &str, what: &str) {
    if errors.fetch_add(1, Ordering::Relaxed) == 0 {
        eprintln!("  {scenario}: unexpected reply: {what}");
    }
}

/// What clients on one key did inside the window.
#[derive(Debug, Clone)]
pub struct Measured {
    pub per_client: Vec<u64>,
    /// The totals' differences, in [`Counts::totals`]' order.
    pub totals: Vec<u64>,
    pub window: Window,
    /// Clients still stuck after the grace period, cut off.
    pub stragglers: u64,
}

/// A client gives up on its own this long after it started: the run's window and a margin.
pub fn give_up(plan: &Plan) -> Instant {
    Instant::now() + plan.warmup() + plan.contended_run + Duration::from_secs(60)
}

/// Starts a `client` on each seat, lets them warm up, measures them for the plan's contended
/// run, then stops them: everyone leaves at its next turn; a client still stuck after 10 s is
/// cut off and counted. The listeners (pub/sub) are stopped last, then the key is cleared
/// ([`Shared::cleanup`]).
pub async fn measure_clients<F>(
    control: &mut MultiplexedConnection,
    plan: &Plan,
    shared: &dyn Shared,
    Seats {
        seats,
        listeners,
        key,
    }: Seats,
    client: impl Fn(Seat) -> F,
) -> Measured
where
    F: Future<Output = ()> + Send + 'static,
{
    let tasks: Vec<JoinHandle<()>> = seats
        .into_iter()
        .map(|seat| tokio::spawn(client(seat)))
        .collect();
    tokio::time::sleep(plan.warmup()).await;
    let c0 = shared.counts();
    shared.measuring(true);
    let s0 = Snapshot::take(control).await;
    tokio::time::sleep(plan.contended_run).await;
    let s1 = Snapshot::take(control).await;
    shared.measuring(false);
    let c1 = shared.counts();
    shared.stop();
    let grace = Instant::now() + Duration::from_secs(10);
    let mut stragglers = 0;
    for task in tasks {
        let left = grace.saturating_duration_since(Instant::now());
        let abort = task.abort_handle();
        if tokio::time::timeout(left, task).await.is_err() {
            abort.abort();
            stragglers += 1;
        }
    }
    for listener in listeners {
        listener.abort();
    }
    let _: redis::Value = redis::cmd(shared.cleanup())
        .arg(key)
        .query_async(control)
        .await
        .expect("clean-up");
    let diff = |b: &[u64], a: &[u64]| b.iter().zip(a).map(|(b, a)| b - a).collect();
    Measured {
        per_client: diff(&c1.per_client, &c0.per_client),
        totals: diff(&c1.totals, &c0.totals),
        window: Window::between(&s0, &s1),
        stragglers,
    }
}

/// Holds for `hold`: a blocking thread's sleep, since tokio's timer wheel rounds up to whole
/// ms (a 1 ms sleep takes ~2 ms).
pub async fn hold_for(hold: Duration) {
    if !hold.is_zero() {
        tokio::task::spawn_blocking(move || std::thread::sleep(hold))
            .await
            .expect("hold");
    }
}

/// One client's place in a run on one key: its connection, owner, hold time, and the latch
/// its messages wake (Redisson-style clients only).
pub struct Seat {
    pub me: usize,
    pub con: MultiplexedConnection,
    pub key: Vec<u8>,
    pub owner: Vec<u8>,
    pub hold: Duration,
    pub latch: Arc<Semaphore>,
    /// The wait bound (Redisson's remaining `waitTime`), and when the client leaves anyway.
    pub give_up: Instant,
}

/// The seats of a run on one key, and the subscriptions that wake them.
pub struct Seats {
    pub seats: Vec<Seat>,
    pub listeners: Vec<JoinHandle<()>>,
    pub key: String,
}

/// `clients` seats on `key`, a connection each; a client for which `listens` names a
/// channel gets a subscription of its own for the run (it stands for a JVM of its own),
/// whose messages that wake it add permits to its latch.
pub async fn seats(
    server: &Server,
    plan: &Plan,
    clients: usize,
    (key, hold_ms): (&str, u64),
    listens: impl Fn(usize) -> Option<(Vec<u8>, Wakes)>,
) -> Seats {
    let conns = connect_many(server, clients).await;
    let give_up = give_up(plan);
    let mut listeners = Vec::new();
    let mut seats = Vec::new();
    for (me, con) in conns.into_iter().enumerate() {
        let latch = Arc::new(Semaphore::new(0));
        if let Some((channel, wakes)) = listens(me) {
            listeners.push(listen(server, channel, wakes, latch.clone()).await);
        }
        seats.push(Seat {
            me,
            con,
            key: key.as_bytes().to_vec(),
            owner: format!("{OWNER_PREFIX}:{me}").into_bytes(),
            hold: Duration::from_millis(hold_ms),
            latch,
            give_up,
        });
    }
    Seats {
        seats,
        listeners,
        key: key.to_owned(),
    }
}

/// What went wrong in a run of clients on one key: two holders where there may be one (or
/// more than the permits), unexpected replies, clients cut off after the grace period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trouble {
    pub violations: u64,
    pub errors: u64,
    pub stragglers: u64,
}

impl Trouble {
    /// `violations` and `errors` from a run's totals at those indices, and its stragglers.
    pub fn of(m: &Measured, violations: usize, errors: usize) -> Trouble {
        Trouble {
            violations: m.totals[violations],
            errors: m.totals[errors],
            stragglers: m.stragglers,
        }
    }

    pub fn total(&self) -> u64 {
        self.violations + self.errors + self.stragglers
    }

    /// `", V VIOLATIONS E ERRORS S STRAGGLERS"` when there were any.
    pub fn note(&self) -> String {
        super::cells::problems_note(self.violations, self.errors, self.stragglers)
    }
}
