//! Semaphores (Redisson's `RSemaphore`) and their permit leases
//! (`RPermitExpirableSemaphore`): permits passed to blocked acquires and leases in
//! arrival order, leases taken back when they end, and the semaphore's timer.

use redis_module::{Context, RedisError, RedisString};

use super::Serving;
use crate::config;
use crate::core::args::AcquireOptions;
use crate::core::keyevents::KeyEvent;
use crate::core::requests::{RequestId, RequestKind};
use crate::core::semaphore::{lease_deadline, next_look, PermitId};
use crate::core::waitlist::{BlockedReply, LockId, Wants};
use crate::store::{self, PermitLeases, RequestRecord, Semaphore};
use crate::{ffi, keyevents, slots, state, stats, timers, waiters};

/// Passes a semaphore's permits to its blocked acquires and leases, oldest first, as
/// long as the oldest one's count is there: a large request at the head is not
/// overtaken. Leases that ended are taken back first.
pub(super) fn serve(ctx: &Context, lock: &LockId) {
    let _serving = Serving::begin(lock);
    let key = ffi::string(ctx, &lock.key);
    let mut leases = match PermitLeases::open(ctx, &key) {
        Ok(leases) => leases,
        Err(error) => {
            while let Some((id, Wants::Permits(_))) = waiters::head_wants(lock) {
                waiters::answer(ctx, id, BlockedReply::Failed(error.to_string()));
            }
            return watch_permits(ctx, lock, None);
        }
    };
    reclaim_ended(ctx, &key, lock, &mut leases);
    while let Some((id, Wants::Permits(n))) = waiters::head_wants(lock) {
        let Some(waiter) = waiters::view(id) else {
            break;
        };
        let reply = match waiter.options.lease {
            // Not granted: too few permits, or the slot is migrating (it waits on).
            Some(_) => {
                match lease_permits(ctx, &key, &mut leases, n, &waiter.options, waiter.client) {
                    Ok(Some(ids)) => BlockedReply::Leased {
                        ids,
                        repeated: false,
                    },
                    Ok(None) | Err(_) => break,
                }
            }
            None if leases.semaphore().take(n) => {
                // A `REQ` acquire records its grant with it, as a direct one does.
                if let Some(req) = waiter.options.req {
                    let ttl = config::default_lease().ms();
                    RequestRecord::new(ctx, &key, &req).write(
                        ctx,
                        RequestKind::Acquire,
                        b"",
                        1,
                        ttl,
                    );
                }
                keyevents::key(ctx, KeyEvent::PermitAcquire, &key);
                BlockedReply::Granted(1)
            }
            None => break,
        };
        stats::PERMIT_HANDOFFS.incr();
        waiters::answer(ctx, id, reply);
    }
    watch_permits(ctx, lock, Some(&leases));
}

/// Leases `n` permits of semaphore `key` to connection `client`, as `options` ask (its
/// lease, SESSION, REQ), if that many are available: the new permits' ids. The one
/// way permits are leased, by a call or to a blocked waiter.
pub fn lease_permits(
    ctx: &Context,
    key: &RedisString,
    leases: &mut PermitLeases,
    n: i64,
    options: &AcquireOptions,
    client: u64,
) -> Result<Option<Vec<PermitId>>, RedisError> {
    let Some(lease) = options.lease else {
        return Ok(None);
    };
    if leases.semaphore().available() < n {
        return Ok(None);
    }
    // In a cluster, not while the zset may be on its way to another node.
    leases.check_may_grow()?;
    let ids: Vec<PermitId> = (0..n).map(|_| state::next_permit_id()).collect();
    let deadline = lease_deadline(ffi::now_ms(), lease.ms());
    if !leases.lease(&ids, deadline) {
        return Ok(None);
    }
    stats::PERMIT_LEASES.add(n);
    keyevents::key(ctx, KeyEvent::PermitLease, key);
    let lock = store::lock_id(ctx, key);
    if options.session {
        tie_leases_to(&lock, &ids, client);
    }
    if let Some(req) = options.req {
        let shown: Vec<u8> = ids.iter().flat_map(PermitId::hex).collect();
        RequestRecord::new(ctx, key, &req).write(ctx, RequestKind::Lease, &shown, n, lease.ms());
    }
    lease_ends_at(ctx, &lock, deadline);
    Ok(Some(ids))
}

/// Leased permits `ids` of semaphore `lock` come back when connection `client` closes
/// (`SESSION`), and no longer with the connection that had them before.
pub fn tie_leases_to(lock: &LockId, ids: &[PermitId], client: u64) {
    state::with(|s| {
        for id in ids {
            s.session_permits
                .record(client, lock.clone(), id.0.to_vec());
        }
    });
}

/// A lease of semaphore `lock` ends at `deadline`: its timer is set for then, unless it
/// is set for sooner already (it then finds the next end itself, see `watch_permits`).
pub fn lease_ends_at(ctx: &Context, lock: &LockId, deadline: i64) {
    let armed = state::with(|s| {
        s.leased_semaphores.insert(lock.clone());
        s.lease_timers.deadline_of(lock)
    });
    if armed.is_none_or(|armed| armed > deadline) {
        timers::arm(ctx, lock, deadline);
    }
}

/// Takes back the leases of semaphore `lock` (named `key`, in the database selected) that
/// ended, by the server's clock; how many.
pub fn reclaim_ended(
    ctx: &Context,
    key: &RedisString,
    lock: &LockId,
    leases: &mut PermitLeases,
) -> usize {
    let ended = leases.reclaim_ended(ffi::now_ms());
    if ended.is_empty() {
        return 0;
    }
    stats::PERMIT_RECLAIMS.add(ended.len() as i64);
    keyevents::key(ctx, KeyEvent::PermitReclaim, key);
    state::with(|s| {
        for id in &ended {
            s.session_permits.forget_hold(lock, id);
        }
    });
    ended.len()
}

/// Keeps semaphore `lock`'s timer at the end of its earliest lease, and every few ms
/// while acquires wait here (see `core::semaphore::next_look`). `leases`: the semaphore
/// as just served, if it could be read.
pub fn watch_permits(ctx: &Context, lock: &LockId, leases: Option<&PermitLeases>) {
    let earliest = leases.and_then(PermitLeases::earliest_end);
    let has_waiters = waiters::has_waiters(lock);
    state::with(|s| match earliest {
        Some(_) => s.leased_semaphores.insert(lock.clone()),
        None => s.leased_semaphores.remove(lock),
    });
    if has_waiters {
        slots::watch(ctx);
    }
    match next_look(ffi::now_ms(), earliest, has_waiters) {
        Some(at) => timers::arm(ctx, lock, at),
        None => timers::cancel(ctx, lock),
    }
}

/// Keeps semaphore `lock`'s timer (see `watch_permits`), reading its leases first.
/// Permits a Redisson client gives back (`INCRBY`, `SET`) raise no event the module
/// hears: while acquires wait here, the semaphore is looked at every few ms.
pub(super) fn watch(ctx: &Context, lock: &LockId) {
    let key = ffi::string(ctx, &lock.key);
    let leases = PermitLeases::open(ctx, &key).ok();
    watch_permits(ctx, lock, leases.as_ref());
}

/// `n` permits granted to a client that left before hearing it go back to the semaphore.
pub(super) fn return_permits(ctx: &Context, lock: &LockId, n: i64, req: Option<RequestId>) {
    let key = ffi::string(ctx, &lock.key);
    if let Ok(mut semaphore) = Semaphore::open(ctx, &key) {
        if semaphore.give(n).is_some() {
            keyevents::key(ctx, KeyEvent::PermitRelease, &key);
        }
    }
    // The grant is undone: a retry with its id must not be told it holds the permits.
    if let Some(id) = req {
        RequestRecord::new(ctx, &key, &id).forget(ctx);
    }
    super::serve_as(ctx, lock, Some(super::Family::Permits));
}

/// Leased permits whose SESSION connection closed, or whose grant never reached its
/// client, go back to semaphore `lock` if they are still leased.
pub(super) fn return_leases(ctx: &Context, lock: &LockId, ids: &[PermitId]) {
    let key = ffi::string(ctx, &lock.key);
    let Ok(mut leases) = PermitLeases::open(ctx, &key) else {
        return;
    };
    let now = ffi::now_ms();
    let mut returned = false;
    for id in ids {
        if leases.give_back(id, now).is_some() {
            stats::PERMIT_RETURNS.incr();
            returned = true;
        }
        state::with(|s| s.session_permits.forget_hold(lock, &id.0));
    }
    if returned {
        keyevents::key(ctx, KeyEvent::PermitReturn, &key);
    }
    serve(ctx, lock);
}
