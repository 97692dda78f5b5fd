//! Clients blocked on a lock: queued first come first served, answered exactly
//! once, forgotten the moment they leave. Which waiter gets the lock, and when,
//! is the hand-off's business; this file keeps the handles and the line's comings and goings,
//! `line` answers what the line looks like.

mod line;

pub use line::{
    blocked_deadline, blocked_on, blocked_total, fair_waiters, find_owner, first_fair, first_plain,
    has_fair, has_waiters, head_is_multi, head_wants, hold_field_of, is_head, is_multi,
    is_read_write, live_keys, locks_of, longest_wait_ms, may_take_kept_lock, multi_head_owner,
    view, WaiterView,
};

use std::os::raw::{c_int, c_void};

use redis_module::{raw, Context, RedisResult, RedisValue};

use crate::core::args::{AcquireOptions, Wait};
use crate::core::deferred::Work;
use crate::core::keyevents::KeyEvent;
use crate::core::requests::RequestId;
use crate::core::semaphore::PermitId;
use crate::core::shrink_map;
use crate::core::wait_stats::Outcome;
use crate::core::waitlist::{BlockedReply, LockId, Waiter, WaiterId, Wants};
use crate::ffi::{self, BlockedClient, RawBlocked, RawCtx};
use crate::state::{self, State, Undelivered};
use crate::{config, deferred, errors, guard, keyevents, stats, timers};

/// What a client blocks for: the lines it joins, and what it waits to get there.
pub struct WaitFor {
    pub lock: LockId,
    /// The other locks of a multi-key acquire: it stands in each of their lines too.
    pub more_locks: Vec<LockId>,
    pub wants: Wants,
    pub owner: Vec<u8>,
    pub options: AcquireOptions,
}

impl WaitFor {
    /// A hold on `lock` for `owner`, as `options` ask.
    pub fn hold(lock: LockId, owner: &[u8], options: AcquireOptions) -> WaitFor {
        WaitFor {
            lock,
            more_locks: Vec::new(),
            wants: Wants::Hold,
            owner: owner.to_vec(),
            options,
        }
    }

    /// Holds on every one of `locks` (at least one) at once.
    pub fn all(mut locks: Vec<LockId>, owner: &[u8], options: AcquireOptions) -> WaitFor {
        let lock = locks.remove(0);
        WaitFor {
            more_locks: locks,
            ..WaitFor::hold(lock, owner, options)
        }
    }

    /// `n` permits of the semaphore `lock`, for the request `req` if one was named.
    pub fn permits(lock: LockId, n: i64, req: Option<RequestId>) -> WaitFor {
        let options = AcquireOptions {
            req,
            ..AcquireOptions::default()
        };
        WaitFor {
            wants: Wants::Permits(n),
            ..WaitFor::hold(lock, b"", options)
        }
    }

    /// `n` leased permits of the semaphore `lock`, as `options` ask (lease, SESSION, REQ).
    pub fn leases(lock: LockId, n: i64, options: AcquireOptions) -> WaitFor {
        WaitFor {
            wants: Wants::Permits(n),
            ..WaitFor::hold(lock, b"", options)
        }
    }

    /// The latch `lock` at zero.
    pub fn latch(lock: LockId) -> WaitFor {
        WaitFor {
            wants: Wants::LatchOpen,
            ..WaitFor::hold(lock, b"", AcquireOptions::default())
        }
    }
}

/// Blocks the calling client at the tail of its lines (see `WaitFor`). The reply comes
/// later.
///
/// The module alone ends a wait: a grant, its own BLOCK timer, or the client
/// leaving. Redis gets no timeout to enforce, so no deadline it handles can race a
/// grant, and the disconnect callback never has to guess whether a client was told.
pub fn block(ctx: &Context, what: WaitFor, wait: Wait, deadline: i64) -> RedisResult {
    let on_unblock = ffi::client_unblock_is_safe().then_some(on_unblock as ffi::CommandCallback);
    let handle = BlockedClient::block(ctx, on_reply, on_unblock, on_disconnect);
    let handle_id = handle.id();
    let timer = match wait {
        Wait::Forever => None,
        Wait::For(ms) => Some(ffi::create_timer(ctx, ms, on_deadline, handle_id as u64)),
    };
    let WaitFor {
        lock,
        more_locks,
        wants,
        owner,
        options,
    } = what;
    let waiter = Waiter {
        lock,
        more_locks,
        wants,
        owner,
        options: AcquireOptions {
            block: Some(wait),
            ..options
        },
        client: ffi::client_id(ctx),
        deadline,
        since_us: stats::now_us(),
        handle,
    };
    state::with(|s| {
        let id = s.waiters.push(waiter);
        s.waiter_by_handle.insert(handle_id, id);
        if let Some(timer) = timer {
            s.wait_timers.insert(handle_id, timer);
        }
    });
    Ok(RedisValue::NoReply)
}

/// A blocked call's wait ended as `outcome` at `now_us`: counted, and its time recorded.
/// A grant made while the hand-off serves a freed lock is a hand-off too.
fn record_end<H>(s: &mut State, waiter: &Waiter<H>, outcome: Outcome, now_us: u64) {
    let (now_ms, window_ms) = (now_us / 1000, config::stats_window_ms());
    let waited = now_us.saturating_sub(waiter.since_us);
    let family = waiter.family();
    s.wait_stats
        .record_wait(now_ms, window_ms, family, waiter.locks(), outcome, waited);
    match outcome {
        Outcome::Granted => {
            if let Some(freed) = s.serving_since {
                let handoff = now_us.saturating_sub(freed);
                s.wait_stats.record_handoff(now_ms, window_ms, handoff);
            }
        }
        Outcome::TimedOut => stats::WAIT_TIMEOUTS.incr(),
        Outcome::Cancelled => stats::WAIT_CANCELS.incr(),
    }
}

/// Takes waiter `id` out of line and answers it. A grant is remembered until its
/// reply is delivered, so a client that leaves first gives the hold back. Waiters
/// blocked on the same request (`REQ id` sent again on other connections) get the
/// same reply at once; the hold is then theirs as much as this client's, so it is
/// not given back if this client leaves.
pub fn answer(ctx: &Context, id: WaiterId, reply: BlockedReply) {
    let mut same_request = Vec::new();
    // What the waiter is given, if anything: a count or token, or leased permits.
    let given = match &reply {
        BlockedReply::Granted(granted) => Some((*granted, Vec::new())),
        BlockedReply::Leased {
            ids,
            repeated: false,
        } => Some((ids.len() as i64, ids.clone())),
        _ => None,
    };
    let outcome = match &reply {
        BlockedReply::Granted(_) | BlockedReply::Leased { .. } | BlockedReply::Repeated(_) => {
            Some(Outcome::Granted)
        }
        BlockedReply::TimedOut => Some(Outcome::TimedOut),
        // An error (a redirection, a grant that failed): no outcome of a wait.
        BlockedReply::Failed(_) => None,
    };
    let now_us = stats::now_us();
    let waiter = state::with(|s| {
        let waiter = s.waiters.remove(id)?;
        if let Some(outcome) = outcome {
            record_end(s, &waiter, outcome, now_us);
        }
        s.waiter_by_handle.remove(&waiter.handle.id());
        shrink_map(&mut s.waiter_by_handle);
        // A latch's waiter holds nothing that could need giving back.
        let gives_back = !matches!(waiter.wants, Wants::LatchOpen);
        if let (Some((granted, leased)), true) = (given, gives_back) {
            if let Some(req) = &waiter.options.req {
                same_request = s.waiters.same_request(&waiter, req);
            }
            if same_request.is_empty() {
                let undelivered = Undelivered {
                    lock: waiter.lock.clone(),
                    more_locks: waiter.more_locks.clone(),
                    wants: waiter.wants,
                    field: hold_field_of(&waiter.owner, waiter.options.mode),
                    reply: granted,
                    leased,
                    client: waiter.client,
                    session: waiter.options.session,
                    req: waiter.options.req,
                };
                s.undelivered.insert(waiter.handle.id(), undelivered);
            }
        }
        Some(waiter)
    });
    let repeated = match &reply {
        BlockedReply::Granted(granted) => Some(BlockedReply::Repeated(*granted)),
        BlockedReply::Leased { ids, .. } => Some(BlockedReply::Leased {
            ids: ids.clone(),
            repeated: true,
        }),
        _ => None,
    };
    if let Some(waiter) = waiter {
        stop_deadline(ctx, waiter.handle.id());
        waiter.handle.unblock(reply);
    }
    if let Some(repeated) = repeated {
        for other in same_request {
            answer(ctx, other, repeated.clone());
        }
    }
}

/// Answers every waiter blocked on `lock` with the error `error` (a cluster
/// redirection when the lock left this node), oldest first. Nothing is written.
pub fn redirect_all(ctx: &Context, lock: &LockId, error: &str) {
    while let Some(id) = state::with(|s| s.waiters.head(lock).map(|(id, _)| id)) {
        answer(ctx, id, BlockedReply::Failed(error.to_string()));
    }
}

/// Refuses waiter `id` with `error` (a deadlock): it leaves its lines, and a fair
/// queue on the next turn, with nothing granted.
pub fn refuse(ctx: &Context, id: WaiterId, error: String) {
    let waiter = state::with(|s| {
        let waiter = s.waiters.remove(id)?;
        s.waiter_by_handle.remove(&waiter.handle.id());
        shrink_map(&mut s.waiter_by_handle);
        Some(waiter)
    });
    if let Some(waiter) = waiter {
        forget(ctx, waiter, Ending::Refused(error));
    }
}

/// Whether `owner` has a call blocked here for a hold, on any lock.
pub fn owner_waits(owner: &[u8]) -> bool {
    state::with(|s| s.waiters.owner_waits(owner))
}

/// Whether an owner other than `owner` has a call blocked here for a hold.
pub fn others_wait(owner: &[u8]) -> bool {
    state::with(|s| s.waiters.others_wait(owner))
}

/// The calls of `owner` blocked here for holds: each call's id and its locks.
pub fn hold_calls_of(owner: &[u8]) -> Vec<(WaiterId, Vec<LockId>)> {
    state::with(|s| s.waiters.hold_calls_of(owner))
}

/// Takes a waiter out of line by its handle, if it is still waiting.
fn leave(handle_id: usize) -> Option<Waiter<BlockedClient<BlockedReply>>> {
    state::with(|s| {
        let id = s.waiter_by_handle.remove(&handle_id)?;
        shrink_map(&mut s.waiter_by_handle);
        s.waiters.remove(id)
    })
}

/// Stops the BLOCK timer of handle `handle_id`, if it has one still pending.
fn stop_deadline(ctx: &Context, handle_id: usize) {
    let timer = state::with(|s| {
        let timer = s.wait_timers.remove(&handle_id);
        shrink_map(&mut s.wait_timers);
        timer
    });
    if let Some(timer) = timer {
        ffi::stop_timer(ctx, timer);
    }
}

/// How a wait ended without a grant.
enum Ending {
    /// The client left, or was unblocked: the server has answered it.
    Left,
    /// Its BLOCK ran out: a null reply.
    TimedOut,
    /// Refused with this error (a deadlock a grant closed).
    Refused(String),
}

/// A waiter that left without an answer from the module, whose BLOCK ran out, or that
/// is refused. A fair one also leaves the queue, on the next turn. The lock's timer
/// goes with its last waiter.
fn forget(ctx: &Context, waiter: Waiter<BlockedClient<BlockedReply>>, ending: Ending) {
    let (outcome, reply) = match ending {
        Ending::Left => (Some(Outcome::Cancelled), None),
        Ending::TimedOut => (Some(Outcome::TimedOut), Some(BlockedReply::TimedOut)),
        Ending::Refused(error) => (None, Some(BlockedReply::Failed(error))),
    };
    let now_us = stats::now_us();
    state::with(|s| {
        if let Some(outcome) = outcome {
            record_end(s, &waiter, outcome, now_us);
        }
        for lock in waiter.locks() {
            if !s.waiters.has_waiters(lock) {
                s.freed_at.remove(lock);
            }
        }
    });
    stop_deadline(ctx, waiter.handle.id());
    let lock = waiter.lock.clone();
    let locks: Vec<LockId> = waiter.locks().cloned().collect();
    if waiter.options.fair {
        deferred::push(
            ctx,
            Work::Leave {
                lock: lock.clone(),
                owners: vec![waiter.owner.clone()],
            },
        );
    }
    match reply {
        Some(reply) => waiter.handle.unblock(reply),
        // Dropping the handle unblocks it with no reply: Redis has answered the client.
        None => drop(waiter),
    }
    // A multi-key waiter kept free locks for itself: the waiters behind it are served.
    if locks.len() > 1 {
        for lock in &locks {
            deferred::push(ctx, Work::Serve { lock: lock.clone() });
        }
    }
    // Timers are only for waiters blocked here (see `handoff::watch`), and for the
    // leases of a semaphore: its timer is set again for them. A lock with a round of
    // hand-offs is looked at again too: left free (for Redisson clients, or under a
    // name now another kind's), no event will come to end its round, `watch` does.
    for lock in locks.iter().filter(|lock| !has_waiters(lock)) {
        if state::with(|s| s.leased_semaphores.contains(lock) || s.sharing.contains(lock)) {
            deferred::push(ctx, Work::Serve { lock: lock.clone() });
        } else {
            timers::cancel(ctx, lock);
        }
    }
}

/// Leased permits as `RSEM.LEASE` replies them: their ids, 32 hex characters each.
pub fn permit_ids_reply(ids: &[PermitId]) -> RedisValue {
    RedisValue::Array(
        ids.iter()
            .map(|id| RedisValue::StringBuffer(id.hex().to_vec()))
            .collect(),
    )
}

fn reply(ctx: &Context, reply: &BlockedReply) {
    match reply {
        BlockedReply::Granted(value) | BlockedReply::Repeated(value) => {
            ctx.reply(Ok(RedisValue::Integer(*value)))
        }
        BlockedReply::Leased { ids, .. } => ctx.reply(Ok(permit_ids_reply(ids))),
        BlockedReply::Failed(error) => ctx.reply_error_string(&errors::replyable_line(error)),
        BlockedReply::TimedOut => ctx.reply(Ok(RedisValue::Null)),
    };
}

/// A blocked client's `extern "C"` callback: `body` runs in the panic guard with the
/// client's context and its blocked-client handle id.
macro_rules! blocked_callback {
    ($(#[$doc:meta])* $name:ident, $what:literal, |$ctx:ident, $handle_id:ident| $body:block) => {
        $(#[$doc])*
        extern "C" fn $name(
            ctx: RawCtx,
            _argv: *mut *mut raw::RedisModuleString,
            _argc: c_int,
        ) -> c_int {
            guard::callback($what, || {
                let $ctx = Context::new(ctx);
                let $handle_id = ffi::handle_id_of(&$ctx);
                $body
            });
            raw::REDISMODULE_OK as c_int
        }
    };
}

blocked_callback!(on_reply, "blocked reply", |ctx, handle_id| {
    state::with(|s| {
        s.undelivered.remove(&handle_id);
        shrink_map(&mut s.undelivered);
    });
    match ffi::blocked_outcome::<BlockedReply>(&ctx) {
        Some(answer) => reply(&ctx, answer),
        None => {
            ctx.reply(Ok(RedisValue::Null));
        }
    }
});

blocked_callback!(
    /// `CLIENT UNBLOCK <id> [TIMEOUT]` on a waiter (servers where that is safe): it
    /// leaves with a null reply, as if its BLOCK ran out. A client already answered
    /// never gets here on those servers; its answer is delivered instead.
    on_unblock,
    "blocked unblock",
    |ctx, handle_id| {
        if let Some(waiter) = leave(handle_id) {
            forget(&ctx, waiter, Ending::Left);
        }
        ctx.reply(Ok(RedisValue::Null));
    }
);

/// A finite BLOCK ran out while the client still waited: a null reply.
extern "C" fn on_deadline(ctx: RawCtx, data: *mut c_void) {
    guard::callback("block deadline", || {
        let ctx = Context::new(ctx);
        let handle_id = ffi::timer_tag(data) as usize;
        // The timer has fired: forget it before `forget` would stop it.
        state::with(|s| s.wait_timers.remove(&handle_id));
        if let Some(waiter) = leave(handle_id) {
            for lock in waiter.locks().filter(|_| keyevents::on()) {
                keyevents::lock(&ctx, KeyEvent::Timeout, lock);
            }
            forget(&ctx, waiter, Ending::TimedOut);
        }
    });
}

/// The client left while blocked (its connection closed), or the server unblocked it
/// with an error of its own (`CLIENT UNBLOCK ... ERROR`, a primary turning replica).
/// Either way the server has answered it or nobody can be answered: never reply
/// here. A grant it was never told of is given back, on the next turn.
extern "C" fn on_disconnect(ctx: RawCtx, handle: RawBlocked) {
    guard::callback("blocked disconnect", || {
        let handle_id = handle as usize;
        let ctx = Context::new(ctx);
        if let Some(waiter) = leave(handle_id) {
            forget(&ctx, waiter, Ending::Left);
            return;
        }
        let Some(grant) = state::with(|s| s.undelivered.remove(&handle_id)) else {
            return;
        };
        let gone = state::with(|s| s.disconnecting == Some(grant.client));
        // A SESSION hold of a client that is gone went with its session's other holds.
        if !grant.leased.is_empty() {
            deferred::push(
                &ctx,
                Work::ReturnLeases {
                    lock: grant.lock,
                    ids: grant.leased,
                },
            );
        } else if let Wants::Permits(n) = grant.wants {
            deferred::push(
                &ctx,
                Work::ReturnPermits {
                    lock: grant.lock,
                    n,
                    req: grant.req,
                },
            );
        } else if !(gone && grant.session) {
            // The record of its `REQ` id is on the first lock (a multi-key call's first key).
            let mut req = grant.req;
            for lock in std::iter::once(grant.lock).chain(grant.more_locks) {
                let field = grant.field.clone();
                deferred::push(
                    &ctx,
                    Work::Release {
                        lock,
                        field,
                        all: false,
                        req: req.take(),
                    },
                );
            }
        }
    });
}
