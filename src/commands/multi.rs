//! All-or-nothing over several locks: RLOCK.MACQUIRE and RLOCK.MRELEASE.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::holds::{earlier_reply, forget_session_hold, request_record};
use crate::core::args::{
    check_owner, key_count, parse_multi_acquire_options, parse_multi_release_options,
    AcquireOptions, MAX_MULTI_KEYS,
};
use crate::core::cluster::key_slot;
use crate::core::fair::queue_deadline;
use crate::core::integer::parse_i64;
use crate::core::keyevents::KeyEvent;
use crate::core::requests::RequestKind;
use crate::core::waitlist::LockId;
use crate::store::{self, RequestRecord, TakeAll, Unlock};
use crate::waiters::WaitFor;
use crate::{config, errors, ffi, guard, handoff, keyevents, state, stats, waiters};

/// The server asks where the keys are (cluster routing, ACL key patterns): the
/// `numkeys` arguments after `owner numkeys`. A bad count names none, and the call
/// itself then fails on it. Nothing is replied.
fn name_the_keys(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let count = args
        .get(2)
        .and_then(|numkeys| parse_i64(numkeys.as_slice()))
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| (1..=MAX_MULTI_KEYS).contains(n) && 3 + n <= args.len())
        .unwrap_or(0);
    for position in 3..3 + count {
        ctx.key_at_pos(position as i32);
    }
    Ok(RedisValue::NoReply)
}

/// A multi-key call's `owner numkeys key [key ...] rest...`, checked.
struct MultiCall<'a> {
    owner: &'a RedisString,
    keys: &'a [RedisString],
    /// What follows the keys: options.
    rest: Vec<&'a [u8]>,
}

fn owner_keys_rest<'a>(
    ctx: &Context,
    args: &'a [RedisString],
) -> Result<MultiCall<'a>, RedisError> {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let owner = &args[1];
    check_owner(owner.as_slice()).map_err(errors::arg_error)?;
    let words: Vec<&[u8]> = args[3..].iter().map(RedisString::as_slice).collect();
    let count = key_count(args[2].as_slice(), &words).map_err(errors::arg_error)?;
    let (keys, rest) = (&args[3..3 + count], words[count..].to_vec());
    // Redis checks this itself in a cluster, from the key spec; this also covers servers
    // that did not take it.
    if ffi::in_cluster(ctx) {
        let slot = key_slot(keys[0].as_slice());
        if keys.iter().any(|key| key_slot(key.as_slice()) != slot) {
            return Err(RedisError::Str(errors::CROSS_SLOT));
        }
    }
    Ok(MultiCall { owner, keys, rest })
}

/// The reply of the same `RLOCK.MACQUIRE` made before with this `REQ id`, while `owner`
/// still holds every one of its locks; `None` when there was none, or a hold was given
/// back since (the call is then new again). A SESSION call replayed moves its holds to
/// this connection, as `RLOCK.ACQUIRE` does.
fn replayed_acquire(
    ctx: &Context,
    keys: &[RedisString],
    owner: &RedisString,
    options: &AcquireOptions,
    record: &Option<RequestRecord>,
) -> Result<Option<i64>, RedisError> {
    let field = owner.as_slice();
    let Some(reply) = earlier_reply(ctx, record, field, RequestKind::MultiAcquire)? else {
        return Ok(None);
    };
    if !store::holds_all(ctx, keys, owner)? {
        return Ok(None);
    }
    if options.session {
        let client = ffi::client_id(ctx);
        let locks: Vec<LockId> = keys.iter().map(|key| store::lock_id(ctx, key)).collect();
        state::with(|s| {
            for lock in locks {
                s.sessions.record(client, lock, field.to_vec());
            }
        });
    }
    Ok(Some(reply))
}

/// `RLOCK.MACQUIRE owner numkeys key [key ...] [LEASE ms] [BLOCK ms] [SESSION] [REQ id]`:
/// every lock or none. Replies the number of locks taken, or null.
///
/// A lock the owner does not hold yet is not taken while clients wait for it: with
/// `BLOCK` the caller joins the tail of every lock's line, and is served once it is
/// first in each and all are free (see `handoff::grant_all`).
pub fn acquire(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if ctx.is_keys_position_request() {
        return name_the_keys(ctx, args);
    }
    let MultiCall { owner, keys, rest } = owner_keys_rest(ctx, args)?;
    let options = parse_multi_acquire_options(rest).map_err(errors::arg_error)?;
    if options.session && ffi::in_script(ctx) {
        return Err(RedisError::Str(errors::SESSION_IN_SCRIPT));
    }
    // A multi-key call's record is on the first key it names, in the slot of every other.
    let record = request_record(ctx, &keys[0], options.req);
    if let Some(reply) = replayed_acquire(ctx, keys, owner, &options, &record)? {
        return Ok(RedisValue::Integer(reply));
    }
    let locks: Vec<LockId> = keys.iter().map(|key| store::lock_id(ctx, key)).collect();
    let watching = !state::all_idle();
    if watching {
        for lock in locks.iter().filter(|lock| waiters::has_waiters(lock)) {
            handoff::serve(ctx, lock);
        }
    }
    // A lock others wait for is not taken, unless it is kept for a multi-key call that
    // waits for this owner (see `handoff::kept_lock_goes_to`).
    let may_take = |i: usize| {
        !(watching && waiters::has_waiters(&locks[i]))
            || handoff::kept_lock_goes_to(ctx, &locks[i], &keys[i], owner.as_slice())
    };
    match store::take_all(ctx, keys, owner, &options, may_take)? {
        TakeAll::Taken => {
            let reply = locks.len() as i64;
            if let Some(record) = &record {
                let lease = options.lease.unwrap_or_else(config::default_lease);
                let kind = RequestKind::MultiAcquire;
                record.write(ctx, kind, owner.as_slice(), reply, lease.ms());
            }
            stats::MULTI_ACQUIRES.incr();
            for key in keys {
                keyevents::key(ctx, KeyEvent::Acquire, key);
            }
            if options.session {
                let client = ffi::client_id(ctx);
                let field = owner.as_slice();
                state::with(|s| {
                    for lock in &locks {
                        s.sessions.record(client, lock.clone(), field.to_vec());
                    }
                });
            }
            if watching {
                for lock in &locks {
                    handoff::watch(ctx, lock);
                    handoff::settle_new_hold(ctx, owner.as_slice(), lock);
                }
            }
            Ok(RedisValue::Integer(reply))
        }
        TakeAll::Busy => match options.block {
            Some(wait) if ffi::may_block(ctx) => {
                handoff::settle_new_wait(ctx, owner.as_slice(), &locks)?;
                let deadline = queue_deadline(ffi::now_ms(), Some(wait), 0);
                let what = WaitFor::all(locks.clone(), owner.as_slice(), options);
                let reply = waiters::block(ctx, what, wait, deadline);
                // Blocked now: a panic past here must not add an error reply.
                guard::callback("RLOCK.MACQUIRE after blocking", || {
                    for lock in &locks {
                        handoff::watch(ctx, lock);
                    }
                });
                reply
            }
            _ => Ok(RedisValue::Null),
        },
    }
}

/// `RLOCK.MRELEASE owner numkeys key [key ...] [REQ id]`: one hold of the owner on every
/// lock, or none (`NOTHELD` when it does not hold one of them). Replies how many of the
/// locks are free now; the others are still held by the owner's re-entries.
pub fn release(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if ctx.is_keys_position_request() {
        return name_the_keys(ctx, args);
    }
    let MultiCall { owner, keys, rest } = owner_keys_rest(ctx, args)?;
    let req = parse_multi_release_options(rest).map_err(errors::arg_error)?;
    let record = request_record(ctx, &keys[0], req);
    let kind = RequestKind::MultiRelease;
    if let Some(reply) = earlier_reply(ctx, &record, owner.as_slice(), kind)? {
        return Ok(RedisValue::Integer(reply));
    }
    let freed = store::release_all(ctx, keys, owner)?;
    stats::MULTI_RELEASES.incr();
    for (key, freed) in keys.iter().zip(&freed) {
        if *freed {
            stats::RELEASES.incr();
            keyevents::key(ctx, KeyEvent::Release, key);
            forget_session_hold(ctx, key, owner.as_slice());
            handoff::freed_key(ctx, key, Unlock::Lock);
        }
    }
    let reply = freed.iter().filter(|f| **f).count() as i64;
    if let Some(record) = &record {
        let (kind, ttl) = (RequestKind::MultiRelease, config::default_lease().ms());
        record.write(ctx, kind, owner.as_slice(), reply, ttl);
    }
    Ok(RedisValue::Integer(reply))
}
