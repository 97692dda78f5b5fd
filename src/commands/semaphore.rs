//! Redisson's semaphore (`RSemaphore`): RSEM.TRYSETPERMITS, RSEM.ADDPERMITS,
//! RSEM.ACQUIRE, RSEM.RELEASE, RSEM.AVAILABLE.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::holds::{earlier_reply, request_record};
use crate::core::args::{count_value, parse_permit_options, PermitGrammar};
use crate::core::fair::queue_deadline;
use crate::core::requests::RequestKind;
use crate::core::semaphore::MAX_PERMITS;
use crate::store::{self, Semaphore};
use crate::waiters::WaitFor;
use crate::{config, errors, ffi, guard, handoff, state, stats, waiters};

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
        handoff::serve_key(ctx, key);
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
        handoff::serve_key(ctx, key);
    }
    Ok(RedisValue::Integer(total))
}

/// `RSEM.ACQUIRE key [PERMITS n] [BLOCK ms] [REQ id]`: takes `n` permits (default 1).
/// `1`, or null when not enough are available (after the wait, with `BLOCK`). Blocked
/// acquires are served in arrival order; a newcomer waits behind them. With `REQ`, the
/// same call sent again replies `1` without taking more (see `RLOCK.ACQUIRE`).
pub fn acquire(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let (key, rest) = key_rest(args, 2)?;
    let grammar = PermitGrammar {
        permits: true,
        block: true,
        req: true,
    };
    let options = parse_permit_options(rest, grammar).map_err(errors::arg_error)?;
    let n = options.permits.unwrap_or(1);
    let record = request_record(ctx, key, options.req);
    if let Some(reply) = earlier_reply(ctx, &record, b"", RequestKind::Acquire)? {
        return Ok(RedisValue::Integer(reply));
    }
    let lock = store::lock_id(ctx, key);
    let waiting = !state::all_idle() && waiters::has_waiters(&lock);
    if waiting {
        handoff::serve(ctx, &lock);
    }
    let mut semaphore = Semaphore::open(ctx, key)?;
    if !(waiting && waiters::has_waiters(&lock)) && semaphore.take(n) {
        stats::PERMIT_ACQUIRES.incr();
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
    let grammar = PermitGrammar {
        permits: true,
        block: false,
        req: true,
    };
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
    handoff::serve_key(ctx, key);
    Ok(RedisValue::Integer(total))
}

/// `RSEM.AVAILABLE key`: the permits available now (0 when the semaphore does not exist).
pub fn available(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    Ok(RedisValue::Integer(
        Semaphore::open(ctx, &args[1])?.available(),
    ))
}
