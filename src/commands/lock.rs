//! The reentrant lock: RLOCK.ACQUIRE, RLOCK.RELEASE, RLOCK.RENEW, RLOCK.FORCERELEASE.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::holds::{
    block_or_null, commit, earlier_reply, forget_session_hold, replayed_acquire, request_record,
};
use super::{key_owner_rest, rwlock};
use crate::core::args::{
    parse_acquire_options, parse_release_options, parse_renew_options, AcquireOptions,
};
use crate::core::fair::{blocked_score, decide_fair_acquire, queue_deadline, FairAcquire};
use crate::core::hold::Release;
use crate::core::keyevents::KeyEvent;
use crate::core::requests::RequestKind;
use crate::store::{self, FairQueue, LockKey, RequestRecord, Unlock};
use crate::waiters::WaitFor;
use crate::{config, errors, ffi, guard, handoff, keyevents, state, stats, waiters};

/// `RLOCK.ACQUIRE key owner [LEASE ms] [BLOCK ms] [FAIR] [TOKEN] [SESSION] [REQ id]`
pub fn acquire(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, owner, rest) = key_owner_rest(args, 3)?;
    let options = parse_acquire_options(rest).map_err(errors::arg_error)?;
    if options.session && ffi::in_script(ctx) {
        // A script runs on its own client, which never disconnects.
        return Err(RedisError::Str(errors::SESSION_IN_SCRIPT));
    }
    let record = request_record(ctx, key, options.req);
    if let Some(mode) = options.mode {
        return rwlock::acquire(ctx, key, owner, mode, &options, &record);
    }
    if let Some(reply) = replayed_acquire(ctx, key, owner, &options, &record)? {
        return Ok(RedisValue::Integer(reply));
    }
    if options.fair {
        return acquire_fair(ctx, key, owner, &options, &record);
    }
    // Nothing waits or is watched anywhere: the common, uncontended case skips
    // building the lock's id.
    let watching = !state::all_idle();
    let lock = || store::lock_id(ctx, key);
    // A free lock with waiters goes to them first: the line is first come, first served.
    let mut kept_for_waiters = false;
    if watching {
        let lock = lock();
        if waiters::has_waiters(&lock) {
            handoff::serve(ctx, &lock);
            // Left free a moment for Redisson clients: not for a newcomer here, who
            // would overtake the clients blocked here as well. Free while its longest
            // waiter waits for other locks too (RLOCK.MACQUIRE): kept for that waiter.
            kept_for_waiters = handoff::left_to_redisson(&lock)
                || handoff::kept_for_multi(ctx, &lock, key, owner.as_slice());
        }
    }
    // One attempt: the reply (count or token), or `None` when someone else holds it.
    let taken = match kept_for_waiters {
        true => None,
        false => {
            let lock_key = LockKey::open(ctx, key)?;
            let plan = lock_key.plan_acquire(owner, &options)?;
            plan.map(|plan| commit(ctx, &lock_key, key, owner, &options, &record, plan))
        }
    };
    match taken {
        Some(reply) => {
            keyevents::key(ctx, KeyEvent::Acquire, key);
            if watching {
                let lock = lock();
                handoff::watch(ctx, &lock);
                handoff::settle_new_hold(ctx, owner.as_slice(), &lock);
            }
            Ok(RedisValue::Integer(reply))
        }
        None => block_or_null(ctx, lock(), owner, &options),
    }
}

/// `RLOCK.ACQUIRE ... FAIR`: first come, first served on Redisson's queue.
fn acquire_fair(
    ctx: &Context,
    key: &RedisString,
    owner: &RedisString,
    options: &AcquireOptions,
    record: &Option<RequestRecord>,
) -> RedisResult {
    let lock = store::lock_id(ctx, key);
    // A free lock goes to those blocked on it before any newcomer.
    if waiters::has_waiters(&lock) {
        handoff::serve(ctx, &lock);
    }
    let queue = FairQueue::open(ctx, key.as_slice())?;
    queue.check_may_grow()?;
    let lock_key = LockKey::open(ctx, key)?;
    let state = lock_key.state(owner)?;
    // Every error (counts, the fencing counter) is met before the queue is touched:
    // a failing call changes nothing. The plan is written only if the queue agrees.
    let plan = lock_key.plan_acquire(owner, options)?;
    let now = ffi::now_ms();
    handoff::purge_expired(&queue, &lock, now);
    let mut decision = decide_fair_acquire(state, queue.head().as_deref(), owner.as_slice())
        .map_err(errors::hold_error)?;
    // Left free a moment for Redisson clients: a newcomer here queues, rather than
    // overtake the clients blocked here.
    if matches!(decision, FairAcquire::Take { .. }) && handoff::left_to_redisson(&lock) {
        decision = FairAcquire::Queue;
    }
    match decision {
        FairAcquire::Take { .. } | FairAcquire::Reenter { .. } => {
            let reply = plan.map(|plan| commit(ctx, &lock_key, key, owner, options, record, plan));
            drop(lock_key);
            if reply.is_some() {
                keyevents::key(ctx, KeyEvent::Acquire, key);
            }
            if let FairAcquire::Take { from_head: true } = decision {
                queue.dequeue(owner.as_slice(), true);
                handoff::review_queue(&lock, &queue);
            }
            handoff::watch(ctx, &lock);
            if reply.is_some() {
                handoff::settle_new_hold(ctx, owner.as_slice(), &lock);
            }
            Ok(reply.map_or(RedisValue::Null, RedisValue::Integer))
        }
        FairAcquire::Queue => {
            drop(plan);
            let free = !lock_key.is_held();
            drop(lock_key);
            let blocking = options.block.filter(|_| ffi::may_block(ctx));
            if blocking.is_some() {
                handoff::settle_new_wait(ctx, owner.as_slice(), std::slice::from_ref(&lock))?;
            }
            let deadline = queue_deadline(now, blocking, config::fair_wait_ms());
            let score = blocked_score(now, deadline, config::fair_wait_ms());
            if queue.deadline_of(owner.as_slice()).is_some() {
                queue.set_deadline(owner.as_slice(), score);
            } else {
                queue.enqueue(owner.as_slice(), score);
            }
            // Looked at again by the earliest deadline, this one's or an older entry's.
            let look_at = match state::with(|s| s.fair_queues.contains(&lock)) {
                true => score,
                false => queue.earliest_deadline().map_or(score, |at| at.min(score)),
            };
            state::with(|s| s.fair_queues.look_by(&lock, look_at));
            let reply = match blocking {
                Some(wait) => {
                    let what = WaitFor::hold(lock.clone(), owner.as_slice(), *options);
                    waiters::block(ctx, what, wait, deadline)
                }
                None => Ok(RedisValue::Null),
            };
            // A free lock whose head is waiting elsewhere gets its head woken. The
            // client may be blocked now: a panic past here must not add an error reply.
            guard::callback("RLOCK.ACQUIRE FAIR after queueing", || {
                if free {
                    handoff::serve(ctx, &lock);
                } else {
                    handoff::watch(ctx, &lock);
                }
            });
            reply
        }
    }
}

/// `RLOCK.RELEASE key owner [READ|WRITE] [REQ id]`
pub fn release(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, owner, rest) = key_owner_rest(args, 3)?;
    let options = parse_release_options(rest).map_err(errors::arg_error)?;
    let record = request_record(ctx, key, options.req);
    if let Some(mode) = options.mode {
        return rwlock::release(ctx, key, owner, mode, &record);
    }
    if let Some(reply) = earlier_reply(ctx, &record, owner.as_slice(), RequestKind::Release)? {
        return Ok(RedisValue::Integer(reply));
    }
    let release = LockKey::open(ctx, key)?
        .release(owner, false)
        .map_err(|error| rwlock::name_the_side(ctx, key, owner, error))?;
    let reply = match release {
        Release::NotHeld => return Err(errors::not_held()),
        Release::Undo { .. } => 0,
        Release::Last { lock_freed } => {
            stats::RELEASES.incr();
            keyevents::key(ctx, KeyEvent::Release, key);
            forget_session_hold(ctx, key, owner.as_slice());
            if lock_freed {
                handoff::freed_key(ctx, key, Unlock::Lock);
            }
            1
        }
    };
    if let Some(record) = &record {
        let (kind, ttl) = (RequestKind::Release, config::default_lease().ms());
        record.write(ctx, kind, owner.as_slice(), reply, ttl);
    }
    Ok(RedisValue::Integer(reply))
}

/// `RLOCK.RENEW key owner [READ|WRITE] [LEASE ms] [REQ id]`
pub fn renew(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, owner, rest) = key_owner_rest(args, 3)?;
    let options = parse_renew_options(rest).map_err(errors::arg_error)?;
    let record = request_record(ctx, key, options.req);
    if let Some(mode) = options.mode {
        return rwlock::renew(ctx, key, owner, mode, options.lease, &record);
    }
    if let Some(reply) = earlier_reply(ctx, &record, owner.as_slice(), RequestKind::Renew)? {
        return Ok(RedisValue::Integer(reply));
    }
    let lease = options.lease.unwrap_or_else(config::default_lease);
    let renewed = LockKey::open(ctx, key)?
        .renew(owner, lease)
        .map_err(|error| rwlock::name_the_side(ctx, key, owner, error))?;
    if !renewed {
        return Ok(RedisValue::Integer(0));
    }
    if let Some(record) = &record {
        record.write(ctx, RequestKind::Renew, owner.as_slice(), 1, lease.ms());
    }
    if !state::all_idle() {
        handoff::watch(ctx, &store::lock_id(ctx, key));
    }
    Ok(RedisValue::Integer(1))
}

/// `RLOCK.FORCERELEASE key`
pub fn force_release(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let key = &args[1];
    let lock_key = LockKey::open(ctx, key)?;
    // A read-write lock's waiters hear its side's message on its own channel.
    let unlock = match lock_key.rw_mode() {
        Ok(Some(mode)) => Unlock::ReadWrite(mode),
        _ => Unlock::Lock,
    };
    if !lock_key.force_release() {
        return Ok(RedisValue::Integer(0));
    }
    drop(lock_key);
    keyevents::key(ctx, KeyEvent::ForceRelease, key);
    let lock = store::lock_id(ctx, key);
    state::with(|s| s.sessions.forget_lock(&lock));
    handoff::freed_key(ctx, key, unlock);
    Ok(RedisValue::Integer(1))
}
