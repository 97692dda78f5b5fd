//! Scenario 7: how long the server stalls when N blocked waiters disconnect at once.
//! F = N connections in `RLOCK.ACQUIRE <one lock> <owner-i> FAIR BLOCK 0` behind a holder
//! (each is in the fair queue `redisson_lock_queue:{lock}` too);
//! B = the same without FAIR; L = N connections in `BLPOP <one empty list> 0`.
//!
//! Per round and path: the waiters block (the server counts N blocked clients, and for F the
//! queue holds N owners); a probe thread starts sending PING in a tight loop on its own
//! connection, recording every round trip; then all N sockets are closed together. The stall
//! is the longest PING round trip that ended after the close began and started before the
//! server had forgotten every waiter (no blocked client, `rlock_blocked` 0, for F the queue
//! empty), as polled by a third connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant};

use redis::{Connection, Value};
use rlock_module_tests::{helper_key, Server};

use crate::harness::cells::errors_note;
use crate::harness::{Cell, Cells, Grid, Path};
use crate::measure::{median, ratio};
use crate::paths;
use crate::waiters::{self, Block};
use crate::Plan;

const HOLDER: &str = "bench-stall-holder";
const LEASE_MS: u64 = 600_000;
/// PINGs before the close, for the quiet round trip.
const QUIET: Duration = Duration::from_millis(100);
/// How long the server may take to forget the waiters before the run counts as an error.
const FORGET_LIMIT: Duration = Duration::from_secs(10);

paths! {
    pub enum StallPath {
        F => "F", "RLOCK.ACQUIRE lock owner-i FAIR BLOCK 0 behind a holder";
        B => "B", "RLOCK.ACQUIRE lock owner-i BLOCK 0 behind a holder";
        L => "BLPOP", "BLPOP list 0 on an empty list";
    }
}

impl StallPath {
    fn block(self) -> Block {
        match self {
            StallPath::F => Block::RlockFair,
            StallPath::B => Block::Rlock,
            StallPath::L => Block::Blpop,
        }
    }

    fn key(self) -> String {
        match self {
            StallPath::F => "bench:stall:fair".into(),
            StallPath::B => "bench:stall:plain".into(),
            StallPath::L => "bench:stall:list".into(),
        }
    }

    fn queue(self) -> Option<Vec<u8>> {
        (self == StallPath::F).then(|| helper_key("redisson_lock_queue", self.key().as_bytes()))
    }
}

/// One round of one path.
#[derive(Debug, Clone)]
pub struct StallRun {
    pub waiters: usize,
    /// Longest PING round trip from the close until the waiters were forgotten, ms.
    pub stall_ms: f64,
    /// Longest PING round trip in the 100 ms before the close, ms.
    pub quiet_ms: f64,
    /// From the start of the close until the poller saw every waiter forgotten, ms.
    pub forget_ms: f64,
    /// How long closing the N sockets took this process, ms.
    pub close_ms: f64,
    /// PINGs answered in the stall window.
    pub pings: usize,
    pub errors: u64,
}

crate::progress!(StallRun, |r| {
    format!(
            "N={}, longest PING {:.1} ms (quiet {:.2} ms), forgotten after {:.1} ms, close took {:.1} ms, {} PINGs{}",
            r.waiters,
            r.stall_ms,
            r.quiet_ms,
            r.forget_ms,
            r.close_ms,
            r.pings,
            errors_note(r.errors)
    )
});

/// Scenario 7's runs, by path.
pub type StallCell = Cell<StallPath, (), StallRun>;

impl StallCell {
    /// The median over the runs without errors.
    pub fn clean(&self, f: impl Fn(&StallRun) -> f64) -> f64 {
        median(self.runs.iter().filter(|r| r.errors == 0).map(f))
    }
}

#[derive(Debug, Clone)]
pub struct Stall {
    pub waiters: usize,
    pub cells: Cells<StallPath, (), StallRun>,
}

impl Stall {
    /// Median stall of `a` over that of `b`.
    pub fn ratio(&self, a: StallPath, b: StallPath) -> f64 {
        match (self.cells.cell(a, ()), self.cells.cell(b, ())) {
            (Some(a), Some(b)) => ratio(a.clean(|r| r.stall_ms), b.clean(|r| r.stall_ms)),
            _ => f64::NAN,
        }
    }
}

pub fn run(server: &Server, plan: &Plan) -> Stall {
    let n = plan.waiters;
    let mut control = waiters::plain(server).expect("control connection");
    let mut grid = Grid::new(&[()], &StallPath::ALL, plan)
        .by_round()
        .rounds(plan.waiter_rounds);
    for turn in grid.turns() {
        let (path, ()) = grid.at(turn);
        let run = run_once(server, &mut control, path, n);
        grid.record(turn, "stall", run);
    }
    Stall {
        waiters: n,
        cells: grid.done(),
    }
}

fn clear(control: &mut Connection, path: StallPath) {
    let key = path.key();
    if path != StallPath::L {
        let mut force = redis::cmd("RLOCK.FORCERELEASE");
        force.arg(&key);
        let _ = waiters::run(control, &force);
    }
    let mut del = redis::cmd("DEL");
    del.arg(&key)
        .arg(helper_key("redisson_lock_queue", key.as_bytes()))
        .arg(helper_key("redisson_lock_timeout", key.as_bytes()));
    let _ = waiters::run(control, &del);
}

fn llen(control: &mut Connection, key: &[u8]) -> i64 {
    let mut cmd = redis::cmd("LLEN");
    cmd.arg(key);
    match waiters::run(control, &cmd) {
        Ok(Value::Int(n)) => n,
        _ => -1,
    }
}

/// Every waiter gone: no blocked client, `rlock_blocked` 0, the fair queue empty.
fn forgotten(control: &mut Connection, path: StallPath) -> bool {
    let (clients, rlock) = waiters::blocked(control);
    clients == 0 && rlock.unwrap_or(0) == 0 && path.queue().map_or(true, |q| llen(control, &q) == 0)
}

fn run_once(server: &Server, control: &mut Connection, path: StallPath, n: usize) -> StallRun {
    let mut run = StallRun {
        waiters: n,
        stall_ms: f64::NAN,
        quiet_ms: f64::NAN,
        forget_ms: f64::NAN,
        close_ms: f64::NAN,
        pings: 0,
        errors: 0,
    };
    let fail = |run: &mut StallRun, e: String| {
        eprintln!("  stall {}: {e}", path.letter());
        run.errors += 1;
    };
    clear(control, path);
    let connected = waiters::info_int(control, "clients", "connected_clients").unwrap_or(1);
    if path != StallPath::L {
        if let Err(e) = waiters::take(control, &path.key(), HOLDER, LEASE_MS) {
            fail(&mut run, format!("the holder got {e}"));
            clear(control, path);
            return run;
        }
    }
    let mut conns = match waiters::open(server, n) {
        Ok(c) => c,
        Err(e) => {
            fail(&mut run, e);
            clear(control, path);
            return run;
        }
    };
    let key = path.key();
    let mut ready = waiters::send_all(&mut conns, path.block(), |_| key.clone())
        .and_then(|()| waiters::wait_blocked(control, n, path.block()));
    if let (Ok(()), Some(q)) = (&ready, path.queue()) {
        let len = llen(control, &q);
        if len != n as i64 {
            ready = Err(format!("the fair queue holds {len} owners, not {n}"));
        }
    }
    if let Err(e) = ready {
        fail(&mut run, e);
        drop(conns);
        clear(control, path);
        let _ = waiters::wait_gone(control, connected);
        return run;
    }

    let probe = match Probe::start(server) {
        Ok(p) => p,
        Err(e) => {
            fail(&mut run, e);
            drop(conns);
            clear(control, path);
            let _ = waiters::wait_gone(control, connected);
            return run;
        }
    };
    sleep(QUIET);
    // The closing thread runs as SCHED_IDLE, so that on the bench's CPU the probe (and the
    // poller) run as soon as a reply arrives: the probe measures the server, not this process.
    let closing = Instant::now();
    let closer = std::thread::Builder::new()
        .name("stall-closer".into())
        .spawn(move || {
            idle_priority();
            drop(conns);
            Instant::now()
        })
        .expect("spawn the closing thread");
    let deadline = closing + FORGET_LIMIT;
    let done = loop {
        if forgotten(control, path) {
            break Instant::now();
        }
        if Instant::now() > deadline {
            let (clients, rlock) = waiters::blocked(control);
            let queued = path.queue().map(|q| llen(control, &q));
            fail(
                &mut run,
                format!(
                    "not forgotten after {FORGET_LIMIT:?}: {clients} blocked clients, rlock_blocked {rlock:?}, queue {queued:?}"
                ),
            );
            break Instant::now();
        }
        sleep(Duration::from_millis(1));
    };
    let closed = closer.join().unwrap_or(done);
    sleep(Duration::from_millis(20));
    let (pings, probe_error) = probe.stop();
    if let Some(e) = probe_error {
        fail(&mut run, e);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let in_window: Vec<f64> = pings
        .iter()
        .filter(|(start, end)| *end >= closing && *start <= done)
        .map(|(start, end)| ms(*end - *start))
        .collect();
    run.stall_ms = in_window.iter().copied().fold(f64::NAN, f64::max);
    run.pings = in_window.len();
    run.quiet_ms = pings
        .iter()
        .filter(|(_, end)| *end < closing)
        .map(|(start, end)| ms(*end - *start))
        .fold(f64::NAN, f64::max);
    run.forget_ms = ms(done - closing);
    run.close_ms = ms(closed - closing);
    clear(control, path);
    if let Err(e) = waiters::wait_gone(control, connected) {
        fail(&mut run, e);
    }
    run
}

/// Puts the calling thread in SCHED_IDLE (or, failing that, at nice 19).
fn idle_priority() {
    // SAFETY: sched_setscheduler reads one plain struct that we own; setpriority takes ids.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        }
    }
}

/// Every PING's (sent, answered), and what stopped the probe early if anything did.
type ProbeResult = (Vec<(Instant, Instant)>, Option<String>);

/// A thread sending PING in a tight loop on its own connection.
struct Probe {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<ProbeResult>,
}

impl Probe {
    fn start(server: &Server) -> Result<Probe, String> {
        let mut con = waiters::plain(server)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("stall-probe".into())
            .spawn(move || {
                let ping = redis::cmd("PING").get_packed_command();
                let mut out = Vec::with_capacity(1 << 16);
                while !flag.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    let reply = con
                        .send_packed_command(&ping)
                        .and_then(|()| con.recv_response());
                    let end = Instant::now();
                    match reply {
                        Ok(Value::SimpleString(s)) if s == "PONG" => out.push((start, end)),
                        other => return (out, Some(format!("probe PING got {other:?}"))),
                    }
                }
                (out, None)
            })
            .map_err(|e| format!("spawn the probe: {e}"))?;
        Ok(Probe { stop, handle })
    }

    fn stop(self) -> ProbeResult {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .unwrap_or_else(|_| (Vec::new(), Some("the probe panicked".into())))
    }
}
