//! In a cluster: locks whose slot left this node. The module must never create a lock
//! here once its slot is migrating away and the key has gone (`MIGRATE` moved it), or
//! is served by another node: the key would exist twice, with two holders. The
//! waiters blocked here are told where the lock went, as the server words its own
//! redirections (`-ASK slot host:port`, `-MOVED slot host:port`).
//!
//! Two ways lead here. The self-started work on a lock whose key is gone checks first
//! (`left_this_node`, from the hand-off). And a slot can leave with no event the module
//! hears (Redis 7.0 drops a lost slot's keys silently; Valkey's atomic slot migration
//! trims them after it hands the slot over), so while clients wait here in a cluster a
//! timer looks every `SWEEP_MS` at each waited lock's slot (`watch`).

use std::os::raw::c_void;
use std::time::Instant;

use redis_module::Context;

use crate::core::cluster::{key_slot, route, ClusterView, SlotRoute};
use crate::core::waitlist::LockId;
use crate::ffi::{self, RawCtx};
use crate::{guard, latency, state, store, waiters};

/// How often waited locks' slots are checked, while clients wait in a cluster.
const SWEEP_MS: i64 = 250;

/// Whether `lock` (in the selected database) is gone from this node into a slot this
/// node does not serve alone; if so its waiters have been redirected, and nothing may
/// be written for it here. A lock whose key is still here is this node's to serve.
pub fn left_this_node(ctx: &Context, lock: &LockId) -> bool {
    if !ffi::in_cluster(ctx) || ffi::key_exists(ctx, &ffi::string(ctx, &lock.key)) {
        return false;
    }
    // The key is missing: the server routes it here only while the slot is this node's,
    // stable (no `CLUSTER NODES` in the common case).
    if store::lock_slot_stable_here(ctx, &lock.key) {
        return false;
    }
    let Some(nodes) = store::cluster_nodes(ctx) else {
        return false;
    };
    let slot = key_slot(&lock.key);
    match route(&nodes, slot).redirect_error(slot) {
        None => false,
        Some(error) => {
            waiters::redirect_all(ctx, lock, &error);
            true
        }
    }
}

/// Arms the sweep, in a cluster, if it is not armed.
pub fn watch(ctx: &Context) {
    if !ffi::in_cluster(ctx) || state::with(|s| s.slot_sweep.is_some()) {
        return;
    }
    let timer = ffi::create_timer(ctx, SWEEP_MS, on_sweep, 0);
    state::with(|s| s.slot_sweep = Some(timer));
}

extern "C" fn on_sweep(ctx: RawCtx, _data: *mut c_void) {
    guard::callback("slot sweep", || {
        let ctx = Context::new(ctx);
        state::with(|s| s.slot_sweep = None);
        let started = Instant::now();
        sweep(&ctx);
        latency::sample(latency::DEFERRED, started);
        if state::with(|s| !s.waiters.is_empty()) {
            watch(&ctx);
        }
    });
}

/// Brings the sweep forward to the next turn of the event loop: slots were just handed
/// over (see `events`, atomic slot migration).
pub fn sweep_soon(ctx: &Context) {
    if let Some(timer) = state::with(|s| s.slot_sweep.take()) {
        ffi::stop_timer(ctx, timer);
    }
    let timer = ffi::create_timer(ctx, 0, on_sweep, 0);
    state::with(|s| s.slot_sweep = Some(timer));
}

/// Redirects the waiters of every lock whose slot another node serves now, or that is
/// migrating away with its key already gone. Writes nothing.
fn sweep(ctx: &Context) {
    let locks: Vec<LockId> = state::with(|s| s.waiters.lock_ids().cloned().collect());
    if locks.is_empty() || !ffi::is_primary(ctx) {
        return;
    }
    let Some(nodes) = store::cluster_nodes(ctx) else {
        return;
    };
    // Read once for every lock.
    let view = ClusterView::parse(&nodes);
    for lock in locks {
        let slot = key_slot(&lock.key);
        let route = view.route(slot);
        let gone = match route {
            SlotRoute::Served => false,
            SlotRoute::Migrating { .. } => {
                ffi::select_db(ctx, lock.db) && !ffi::key_exists(ctx, &ffi::string(ctx, &lock.key))
            }
            SlotRoute::Moved { .. } | SlotRoute::Unknown => true,
        };
        if let (true, Some(error)) = (gone, route.redirect_error(slot)) {
            waiters::redirect_all(ctx, &lock, &error);
        }
    }
}
