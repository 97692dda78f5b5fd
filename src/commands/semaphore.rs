//! Redisson's semaphore (`RSemaphore`): RSEM.TRYSETPERMITS, RSEM.ADDPERMITS,
//! RSEM.ACQUIRE, RSEM.RELEASE, RSEM.AVAILABLE; and its permit-expiring semaphore
//! (`RPermitExpirableSemaphore`): RSEM.LEASE, RSEM.RETURN, RSEM.RENEW.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::holds::{earlier_reply, request_record};
use crate::core::args::{
    count_value, parse_permit_options, AcquireOptions, ArgError, PermitGrammar,
};
use crate::core::fair::queue_deadline;
use crate::core::keyevents::KeyEvent;
use crate::core::requests::RequestKind;
use crate::core::semaphore::{lease_deadline, PermitId, MAX_PERMITS};
use crate::store::{self, PermitLeases, Semaphore};
use crate::waiters::WaitFor;
use crate::{config, errors, ffi, guard, handoff, keyevents, state, stats, waiters};

/// `key rest...`: the key, and the rest as byte slices.
fn key_rest(args: &[RedisString], min: usize) -> Result<(&RedisString, Vec<&[u8]>), RedisError> {
    if args.len() < min {
        return Err(RedisError::WrongArity);
    }
    Ok((
        &args[1],
        args[2..].iter().map(RedisString::as_slice).collect(),
    ))
}

/// `RSEM.TRYSETPERMITS key n`: `1` when the semaphore did not exist and now has `n`
/// permits, `0` when it existed (and nothing changes).
pub fn try_set_permits(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, rest) = key_rest(args, 3)?;
    let [n] = rest[..] else {
        return Err(RedisError::WrongArity);
    };
    let n = count_value(n, "permits", 0, MAX_PERMITS).map_err(errors::arg_error)?;
    let set = Semaphore::open(ctx, key)?.try_set(n);
    if set {
        handoff::serve_permits_key(ctx, key);
    }
    Ok(RedisValue::Integer(set as i64))
}

/// `RSEM.ADDPERMITS key n`: adds `n` permits (negative takes them away, below zero if
/// need be). Replies the permits available now.
pub fn add_permits(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, rest) = key_rest(args, 3)?;
    let [n] = rest[..] else {
        return Err(RedisError::WrongArity);
    };
    let n = count_value(n, "permits", -MAX_PERMITS, MAX_PERMITS).map_err(errors::arg_error)?;
    let total = Semaphore::open(ctx, key)?
        .add(n)
        .ok_or(RedisError::Str(errors::PERMITS_OVERFLOW))?;
    if n > 0 {
        stats::PERMIT_RELEASES.incr();
        handoff::serve_permits_key(ctx, key);
    }
    Ok(RedisValue::Integer(total))
}

/// `RSEM.ACQUIRE key [PERMITS n] [BLOCK ms] [REQ id]`: takes `n` permits (default 1).
/// `1`, or null when not enough are available (after the wait, with `BLOCK`). Blocked
/// acquires are served in arrival order; a newcomer waits behind them. With `REQ`, the
/// same call sent again replies `1` without taking more (see `RLOCK.ACQUIRE`).
pub fn acquire(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, rest) = key_rest(args, 2)?;
    let grammar = PermitGrammar::ACQUIRE;
    let options = parse_permit_options(rest, grammar).map_err(errors::arg_error)?;
    let n = options.permits.unwrap_or(1);
    let lock = store::lock_id(ctx, key);
    let waiting = !state::all_idle() && waiters::has_waiters(&lock);
    if waiting {
        handoff::serve(ctx, &lock);
    }
    // A grant to this same call whose reply was lost with its connection, still waiting to
    // be given back: it stands, for this call (its record too).
    if let Some(id) = &options.req {
        if state::with(|s| s.deferred.take_permit_return(&lock, id)).is_some() {
            return Ok(RedisValue::Integer(1));
        }
    }
    // Looked up after serving: the same request, blocked on another connection, may have
    // just been granted.
    let record = request_record(ctx, key, options.req);
    if let Some(reply) = earlier_reply(ctx, &record, b"", RequestKind::Acquire)? {
        return Ok(RedisValue::Integer(reply));
    }
    let mut semaphore = Semaphore::open(ctx, key)?;
    if !(waiting && waiters::has_waiters(&lock)) && semaphore.take(n) {
        stats::PERMIT_ACQUIRES.incr();
        keyevents::key(ctx, KeyEvent::PermitAcquire, key);
        if let Some(record) = &record {
            let ttl = config::default_lease().ms();
            record.write(ctx, RequestKind::Acquire, b"", 1, ttl);
        }
        return Ok(RedisValue::Integer(1));
    }
    match options.block {
        Some(wait) if ffi::may_block(ctx) => {
            let deadline = queue_deadline(ffi::now_ms(), Some(wait), 0);
            let what = WaitFor::permits(lock.clone(), n, options.req);
            let reply = waiters::block(ctx, what, wait, deadline);
            // Blocked now: a panic past here must not add an error reply.
            guard::callback("RSEM.ACQUIRE after blocking", || handoff::watch(ctx, &lock));
            reply
        }
        _ => Ok(RedisValue::Null),
    }
}

/// `RSEM.RELEASE key [PERMITS n] [REQ id]`: gives `n` permits back (default 1), whoever
/// took them, as Redisson's `release`. Replies the permits available now. With `REQ`, the
/// same call sent again replies the same and gives nothing more back.
pub fn release(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, rest) = key_rest(args, 2)?;
    let grammar = PermitGrammar::RELEASE;
    let options = parse_permit_options(rest, grammar).map_err(errors::arg_error)?;
    let n = options.permits.unwrap_or(1);
    let record = request_record(ctx, key, options.req);
    if let Some(reply) = earlier_reply(ctx, &record, b"", RequestKind::Release)? {
        return Ok(RedisValue::Integer(reply));
    }
    let total = Semaphore::open(ctx, key)?
        .give(n)
        .ok_or(RedisError::Str(errors::PERMITS_OVERFLOW))?;
    if let Some(record) = &record {
        let ttl = config::default_lease().ms();
        record.write(ctx, RequestKind::Release, b"", total, ttl);
    }
    stats::PERMIT_RELEASES.incr();
    keyevents::key(ctx, KeyEvent::PermitRelease, key);
    handoff::serve_permits_key(ctx, key);
    Ok(RedisValue::Integer(total))
}

/// `RSEM.AVAILABLE key`: the permits available now (0 when the semaphore does not exist),
/// counting leases that ended but were not taken back yet.
pub fn available(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    Ok(RedisValue::Integer(
        PermitLeases::read(ctx, &args[1])?.available(),
    ))
}

/// `RSEM.LEASE key LEASE ms [PERMITS n] [BLOCK ms] [SESSION] [REQ id]`: leases `n`
/// permits (default 1) of a permit-expiring semaphore, each back by itself when its
/// lease ends (or its connection closes, with `SESSION`). Replies their ids, or null
/// when not enough are available (after the wait, with `BLOCK`). Leases that ended are
/// taken back first. With `REQ`, the same call sent again replies the same ids.
pub fn lease(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, rest) = key_rest(args, 2)?;
    let options = parse_permit_options(rest, PermitGrammar::LEASE).map_err(errors::arg_error)?;
    if options.session && ffi::in_script(ctx) {
        return Err(RedisError::Str(errors::SESSION_IN_SCRIPT));
    }
    let n = options.permits.unwrap_or(1);
    let lease_options = AcquireOptions {
        lease: options.lease,
        session: options.session,
        req: options.req,
        ..AcquireOptions::default()
    };
    let lock = store::lock_id(ctx, key);
    let waiting = waiters::has_waiters(&lock);
    if waiting {
        handoff::serve(ctx, &lock);
    }
    let mut leases = PermitLeases::open(ctx, key)?;
    handoff::reclaim_ended(ctx, key, &lock, &mut leases);
    let client = ffi::client_id(ctx);
    // Looked up after serving (the same request, blocked elsewhere, may have just been
    // granted). Replayed only while every permit it got is still leased; with SESSION,
    // they are tied to this connection now. Otherwise the call is new again.
    let record = request_record(ctx, key, options.req);
    if let Some(record) = &record {
        if let Some(ids) = record.earlier_lease(ctx)? {
            let now = ffi::now_ms();
            if ids.iter().all(|id| leases.is_leased(id, now)) {
                if options.session {
                    handoff::tie_leases_to(&lock, &ids, client);
                }
                return Ok(waiters::permit_ids_reply(&ids));
            }
        }
    }
    let granted = match waiting && waiters::has_waiters(&lock) {
        true => None,
        false => handoff::lease_permits(ctx, key, &mut leases, n, &lease_options, client)?,
    };
    if let Some(ids) = granted {
        return Ok(waiters::permit_ids_reply(&ids));
    }
    match options.block {
        Some(wait) if ffi::may_block(ctx) => {
            let deadline = queue_deadline(ffi::now_ms(), Some(wait), 0);
            let what = WaitFor::leases(lock.clone(), n, lease_options);
            let reply = waiters::block(ctx, what, wait, deadline);
            // Blocked now: a panic past here must not add an error reply.
            guard::callback("RSEM.LEASE after blocking", || handoff::watch(ctx, &lock));
            reply
        }
        _ => {
            // Leases written elsewhere (Redisson's, or before a failover) get a timer too.
            handoff::watch_permits(ctx, &lock, Some(&leases));
            Ok(RedisValue::Null)
        }
    }
}

/// `RSEM.RETURN key id [REQ id]`: gives leased permit `id` back. `1`, or `0` when it is
/// not leased: unknown, given back already, or its lease ended (a lease that ended but
/// was not taken back yet is taken back now, as Redisson's release does).
pub fn give_back(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, rest) = key_rest(args, 3)?;
    let id = permit_id(rest[0])?;
    let options = parse_permit_options(rest[1..].iter().copied(), PermitGrammar::RETURN)
        .map_err(errors::arg_error)?;
    let record = request_record(ctx, key, options.req);
    if let Some(reply) = earlier_reply(ctx, &record, b"", RequestKind::Return)? {
        return Ok(RedisValue::Integer(reply));
    }
    let mut leases = PermitLeases::open(ctx, key)?;
    let lock = store::lock_id(ctx, key);
    let returned = leases.give_back(&id, ffi::now_ms());
    state::with(|s| s.session_permits.forget_hold(&lock, &id.0));
    // Leases written elsewhere (Redisson's, or before a failover) get a timer too.
    if !state::with(|s| s.leased_semaphores.contains(&lock)) {
        if let Some(end) = leases.earliest_end() {
            handoff::lease_ends_at(ctx, &lock, end);
        }
    }
    let reply = i64::from(returned == Some(true));
    if let Some(record) = &record {
        let ttl = config::default_lease().ms();
        record.write(ctx, RequestKind::Return, b"", reply, ttl);
    }
    drop(leases);
    match returned {
        Some(true) => keyevents::key(ctx, KeyEvent::PermitReturn, key),
        // Its lease had ended: taken back, as at the end of a lease.
        Some(false) => keyevents::key(ctx, KeyEvent::PermitReclaim, key),
        None => {}
    }
    if returned.is_some() {
        stats::PERMIT_RETURNS.incr();
        // The timer finds the next lease end by itself: only waiters need serving now.
        if waiters::has_waiters(&lock) {
            handoff::serve(ctx, &lock);
        }
    }
    Ok(RedisValue::Integer(reply))
}

/// `RSEM.RENEW key id LEASE ms`: the lease of permit `id` now ends `ms` from now. `1`, or
/// `0` when it is not leased (unknown, given back, or ended: ended leases are taken back
/// first, as Redisson's `updateLeaseTime` does).
pub fn renew(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, rest) = key_rest(args, 3)?;
    let id = permit_id(rest[0])?;
    let options = parse_permit_options(rest[1..].iter().copied(), PermitGrammar::RENEW)
        .map_err(errors::arg_error)?;
    let Some(lease) = options.lease else {
        return Err(errors::arg_error(ArgError::MissingLease));
    };
    let mut leases = PermitLeases::open(ctx, key)?;
    let lock = store::lock_id(ctx, key);
    let now = ffi::now_ms();
    let ended = handoff::reclaim_ended(ctx, key, &lock, &mut leases);
    let deadline = lease_deadline(now, lease.ms());
    let renewed = leases.renew(&id, deadline);
    drop(leases);
    if ended > 0 && waiters::has_waiters(&lock) {
        handoff::serve(ctx, &lock);
    }
    if renewed {
        handoff::lease_ends_at(ctx, &lock, deadline);
    }
    Ok(RedisValue::Integer(i64::from(renewed)))
}

/// A permit id as users see it: 32 hex characters.
fn permit_id(text: &[u8]) -> Result<PermitId, RedisError> {
    PermitId::parse_hex(text).ok_or(RedisError::Str(errors::BAD_PERMIT_ID))
}
