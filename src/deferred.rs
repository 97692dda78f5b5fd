//! The one place through which the module writes on its own: the work that
//! timers, keyspace and server events and disconnects ask for. Event and
//! disconnect callbacks may not write (on Redis 7.0 such writes can replicate out
//! of order), so their work waits here for a 0 ms timer; a lease timer, already a
//! safe place to write, performs its work at once. Either way it runs through
//! `perform`, which hands it to the runner `lib.rs` installs (the hand-off).
//!
//! While writes are paused (`CLIENT PAUSE`, `FAILOVER`, a cluster manual
//! failover) nothing runs: a write then would crash the server (a key whose TTL
//! ran out during the pause is re-created, or a propagation asserts) or silently
//! diverge from the replicas. The work waits, checked every `PAUSED_RETRY_MS`,
//! and runs as soon as the pause ends.
//!
//! Each run (the queued batch, or one piece performed at once) is a sample of
//! `rlock-deferred` for the latency monitor, when it takes long enough (`latency`).

use std::cell::Cell;
use std::os::raw::c_void;
use std::time::Instant;

use redis_module::Context;

use crate::core::deferred::Work;
use crate::ffi::{self, RawCtx};
use crate::{guard, latency, state};

/// What performs a piece of work: `handoff::perform`, installed at load. Held as a
/// function so that the sources below the hand-off need not import it.
pub type Runner = fn(&Context, Work);

/// How often held work checks whether the pause is over.
const PAUSED_RETRY_MS: i64 = 10;

thread_local! {
    static RUNNER: Cell<Option<Runner>> = const { Cell::new(None) };
}

pub fn set_runner(runner: Runner) {
    RUNNER.with(|r| r.set(Some(runner)));
}

/// Queues `work` for the next turn of the event loop.
pub fn push(ctx: &Context, work: Work) {
    let arm = state::with(|s| {
        s.deferred.push(work);
        s.deferred_timer.is_none()
    });
    if arm {
        let timer = ffi::create_timer(ctx, 0, on_deferred, 0);
        state::with(|s| s.deferred_timer = Some(timer));
    }
}

/// Performs `work` now, from a callback where writing is safe (a timer); while
/// writes are paused, queues it instead.
pub fn perform(ctx: &Context, work: Work) {
    if ffi::writes_paused() {
        push(ctx, work);
        return;
    }
    if let Some(runner) = RUNNER.with(Cell::get) {
        let started = Instant::now();
        runner(ctx, work);
        latency::sample(latency::DEFERRED, started);
    }
}

extern "C" fn on_deferred(ctx: RawCtx, _data: *mut c_void) {
    guard::callback("deferred work", || {
        let ctx = Context::new(ctx);
        if ffi::writes_paused() {
            let timer = ffi::create_timer(&ctx, PAUSED_RETRY_MS, on_deferred, 0);
            state::with(|s| s.deferred_timer = Some(timer));
            return;
        }
        let work = state::with(|s| {
            s.deferred_timer = None;
            s.deferred.take()
        });
        let runner = RUNNER.with(Cell::get);
        let started = Instant::now();
        for work in work {
            if let Some(runner) = runner {
                runner(&ctx, work);
            }
        }
        latency::sample(latency::DEFERRED, started);
    });
}
