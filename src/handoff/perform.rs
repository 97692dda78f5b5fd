//! The work the module starts by itself (see `deferred`): lease deadlines, serves asked
//! for by the event sources, holds and permits given back for connections that left,
//! fair queue entries to drop or put back. Each piece goes to its family's file.

use redis_module::Context;

use super::{
    leave_queue, look_at_queue, release_hold, requeue_missing, return_leases, return_permits, serve,
};
use crate::core::deferred::Work;
use crate::{ffi, slots, state, store};

/// Runs one piece of the module's self-started work; installed as the runner of
/// `deferred`. Only a primary writes.
pub fn perform(ctx: &Context, work: Work) {
    if !ffi::is_primary(ctx) {
        return;
    }
    let lock = match &work {
        Work::Leave { lock, .. }
        | Work::Requeue { lock }
        | Work::Release { lock, .. }
        | Work::ReturnPermits { lock, .. }
        | Work::ReturnLeases { lock, .. }
        | Work::LeaseDeadline { lock }
        | Work::Serve { lock }
        | Work::LookAtQueue { lock } => lock.clone(),
    };
    if !ffi::select_db(ctx, lock.db) {
        return;
    }
    if slots::left_this_node(ctx, &lock) {
        state::with(|s| {
            s.leased_semaphores.remove(&lock);
            s.fair_queues.remove(&lock);
        });
        return;
    }
    match work {
        Work::Leave { owners, .. } => leave_queue(ctx, &lock, owners),
        Work::Requeue { .. } => requeue_missing(ctx, &lock),
        Work::Release {
            field, all, req, ..
        } => release_hold(ctx, &lock, &field, all, req),
        Work::ReturnPermits { n, req, .. } => return_permits(ctx, &lock, n, req),
        Work::ReturnLeases { ids, .. } => return_leases(ctx, &lock, &ids),
        Work::LeaseDeadline { .. } => {
            store::expire_if_due(ctx, &lock);
            serve(ctx, &lock);
        }
        Work::Serve { .. } => serve(ctx, &lock),
        Work::LookAtQueue { .. } => look_at_queue(ctx, &lock),
    }
}
