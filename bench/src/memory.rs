//! Scenario 6: server memory per blocked waiter.
//! R = N connections blocked in `RLOCK.ACQUIRE <lock> <owner-i> BLOCK 0` on held locks;
//! L = N connections blocked in `BLPOP <empty list> 0`.
//!
//! Each round starts a fresh server and measures BLPOP, then R, on it: a module-blocked
//! client comes with two helper clients (`RedisModuleBlockedClient.reply_client` and
//! `.thread_safe_ctx_client`, ~17 KB each with their reply buffers) which, once the waiter is
//! gone, go back to a pool that the server frees at 50 clients per 100 ms (`modulesCron`):
//! 40 s for 10,000 waiters, during which any other reading on that server would be skewed.
//!
//! Per round and path: open N plain connections and let the server settle (it trims each
//! new client's query and reply buffers once the client has been idle for 2 s), read
//! `used_memory`; send every blocking command, wait until the server counts N blocked
//! clients, settle again, read `used_memory`. Bytes per waiter = (blocked − idle) ÷ N: what
//! being blocked costs on top of an idle connection. Then the connections close and the
//! server is given time to free them before the next path.

use std::thread::sleep;
use std::time::{Duration, Instant};

use redis::Connection;
use rlock_module_tests::{Flavor, Server};

use crate::harness::cells::errors_note;
use crate::harness::{Cell, Cells, Grid, Path};
use crate::measure::ratio;
use crate::paths;
use crate::pin::Pinning;
use crate::waiters::{self, Block};
use crate::Plan;

/// Locks (lists) the waiters are spread over, waiter i on number i % LOCKS.
pub const LOCKS: usize = 8;
const HOLDER: &str = "bench-memory-holder";
const LEASE_MS: u64 = 600_000;

paths! {
    pub enum MemPath {
        R => "R", "RLOCK.ACQUIRE lock:{i % 8} owner-i BLOCK 0, the 8 locks held";
        L => "BLPOP", "BLPOP list:{i % 8} 0, the 8 lists empty";
    }
}

impl MemPath {
    fn block(self) -> Block {
        match self {
            MemPath::R => Block::Rlock,
            MemPath::L => Block::Blpop,
        }
    }

    fn key(self, j: usize) -> String {
        match self {
            MemPath::R => format!("bench:mem:lock:{j}"),
            MemPath::L => format!("bench:mem:list:{j}"),
        }
    }
}

/// `used_memory` and `mem_clients_normal` at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mem {
    pub used: i64,
    pub clients: i64,
}

/// One round of one path.
#[derive(Debug, Clone)]
pub struct MemRun {
    pub waiters: usize,
    /// Before the connections opened.
    pub empty: Mem,
    /// N idle connections, settled.
    pub idle: Mem,
    /// N blocked connections, settled.
    pub blocked: Mem,
    /// 1 s after the N connections closed.
    pub after: Mem,
    pub errors: u64,
    /// How long the run took, s.
    pub took_secs: f64,
}

crate::progress!(MemRun, |r| {
    format!(
            "N={}, {:.0} B/waiter blocked ({:.0} B in client memory), idle connection {:.0} B, 1 s after leaving {:.0} B, {:.1} s{}",
            r.waiters,
            r.bytes_per_waiter(),
            r.client_bytes_per_waiter(),
            r.connection_bytes(),
            r.left_bytes(),
            r.took_secs,
            errors_note(r.errors)
    )
});

impl MemRun {
    fn per(&self, bytes: i64) -> f64 {
        if self.errors > 0 || self.waiters == 0 {
            f64::NAN
        } else {
            bytes as f64 / self.waiters as f64
        }
    }
    /// What being blocked adds, per waiter.
    pub fn bytes_per_waiter(&self) -> f64 {
        self.per(self.blocked.used - self.idle.used)
    }
    /// The part of it the server counts as client memory (`mem_clients_normal`).
    pub fn client_bytes_per_waiter(&self) -> f64 {
        self.per(self.blocked.clients - self.idle.clients)
    }
    /// An idle connection, per connection.
    pub fn connection_bytes(&self) -> f64 {
        self.per(self.idle.used - self.empty.used)
    }
    /// What the server still holds 1 s after the waiters are gone, per waiter.
    pub fn left_bytes(&self) -> f64 {
        self.per(self.after.used - self.empty.used)
    }
}

/// Scenario 6's runs, by path.
pub type MemCell = Cell<MemPath, (), MemRun>;

#[derive(Debug, Clone)]
pub struct Memory {
    pub waiters: usize,
    pub cells: Cells<MemPath, (), MemRun>,
}

impl Memory {
    /// Bytes per blocked waiter, R ÷ BLPOP.
    pub fn ratio(&self) -> f64 {
        match (
            self.cells.cell(MemPath::R, ()),
            self.cells.cell(MemPath::L, ()),
        ) {
            (Some(r), Some(l)) => ratio(
                r.med(MemRun::bytes_per_waiter),
                l.med(MemRun::bytes_per_waiter),
            ),
            _ => f64::NAN,
        }
    }
}

pub fn run(flavor: Flavor, plan: &Plan, pinning: &Pinning) -> Memory {
    let n = plan.waiters;
    // BLPOP first: R's helper clients linger after it. A fresh server each round.
    let paths = [MemPath::L, MemPath::R];
    let mut grid = Grid::new(&[()], &paths, plan)
        .by_round()
        .rounds(plan.waiter_rounds);
    let turns = grid.turns();
    for round in turns.chunks(paths.len()) {
        let (mut server, _) = crate::start_server(flavor, plan, pinning);
        let mut control = waiters::plain(&server).expect("control connection");
        let errors = hold(&mut control);
        for &turn in round {
            let (path, ()) = grid.at(turn);
            let started = Instant::now();
            let mut run = if errors == 0 {
                run_once(&server, &mut control, path, n, plan)
            } else {
                failed(n, errors)
            };
            run.took_secs = started.elapsed().as_secs_f64();
            grid.record(turn, "memory", run);
        }
        release(&mut control);
        drop(control);
        server.stop();
    }
    Memory {
        waiters: n,
        cells: grid.done(),
    }
}

fn failed(n: usize, errors: u64) -> MemRun {
    MemRun {
        waiters: n,
        empty: Mem::default(),
        idle: Mem::default(),
        blocked: Mem::default(),
        after: Mem::default(),
        errors: errors.max(1),
        took_secs: 0.0,
    }
}

/// The holder takes every lock; the lists are emptied.
fn hold(control: &mut Connection) -> u64 {
    let mut errors = 0;
    for j in 0..LOCKS {
        let mut del = redis::cmd("DEL");
        del.arg(MemPath::L.key(j));
        let _ = waiters::run(control, &del);
        if let Err(e) = waiters::take(control, &MemPath::R.key(j), HOLDER, LEASE_MS) {
            eprintln!("  memory: the holder could not take lock {j}: {e}");
            errors += 1;
        }
    }
    errors
}

fn release(control: &mut Connection) {
    for j in 0..LOCKS {
        let mut rel = redis::cmd("RLOCK.RELEASE");
        rel.arg(MemPath::R.key(j)).arg(HOLDER);
        let _ = waiters::run(control, &rel);
        let mut del = redis::cmd("DEL");
        del.arg(MemPath::R.key(j)).arg(MemPath::L.key(j));
        let _ = waiters::run(control, &del);
    }
}

fn mem(con: &mut Connection) -> Mem {
    let info = waiters::info(con, "memory");
    let get = |name: &str| {
        info.get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("INFO memory has no {name}"))
    };
    Mem {
        used: get("used_memory"),
        clients: get("mem_clients_normal"),
    }
}

/// Waits at least `min` (the server trims a client's buffers after 2 s idle, in its once-a-
/// second client sweep), then until `used_memory` stops moving (≤ 4 bytes per waiter between
/// two readings 250 ms apart), at most 10 s more.
fn settle(con: &mut Connection, min: Duration, n: usize) -> Mem {
    sleep(min);
    let tolerance = (4 * n as i64).max(16 * 1024);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = mem(con);
    loop {
        sleep(Duration::from_millis(250));
        let now = mem(con);
        if (now.used - last.used).abs() <= tolerance || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

fn run_once(
    server: &Server,
    control: &mut Connection,
    path: MemPath,
    n: usize,
    plan: &Plan,
) -> MemRun {
    let connected = waiters::info_int(control, "clients", "connected_clients").unwrap_or(1);
    let empty = mem(control);
    let mut conns = match waiters::open(server, n) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("  memory {}: {e}", path.letter());
            return failed(n, 1);
        }
    };
    let idle = settle(control, plan.waiter_settle, n);
    let sent = waiters::send_all(&mut conns, path.block(), |i| path.key(i % LOCKS))
        .and_then(|()| waiters::wait_blocked(control, n, path.block()));
    let blocked = settle(control, plan.waiter_settle, n);
    drop(conns);
    let gone = waiters::wait_gone(control, connected);
    sleep(Duration::from_secs(1));
    let after = mem(control);
    let mut errors = 0;
    for e in [sent.err(), gone.err()].into_iter().flatten() {
        eprintln!("  memory {}: {e}", path.letter());
        errors += 1;
    }
    MemRun {
        waiters: n,
        empty,
        idle,
        blocked,
        after,
        errors,
        took_secs: 0.0,
    }
}
