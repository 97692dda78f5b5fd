//! Redisson's count-down latch (`RCountDownLatch`): RLATCH.TRYSETCOUNT,
//! RLATCH.COUNTDOWN, RLATCH.AWAIT, RLATCH.COUNT.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::core::args::{count_value, parse_permit_options, PermitGrammar};
use crate::core::fair::queue_deadline;
use crate::core::keyevents::KeyEvent;
use crate::store::{self, Latch};
use crate::waiters::WaitFor;
use crate::{errors, ffi, guard, handoff, keyevents, stats, waiters};

/// `RLATCH.TRYSETCOUNT key n`: `1` when the latch had no count and now has `n`, `0`
/// otherwise (nothing changes).
pub fn try_set_count(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let [_, key, n] = args else {
        return Err(RedisError::WrongArity);
    };
    let n = count_value(n.as_slice(), "count", 1, i64::MAX).map_err(errors::arg_error)?;
    Ok(RedisValue::Integer(Latch::open(ctx, key)?.try_set(n) as i64))
}

/// `RLATCH.COUNTDOWN key`: one less; at zero the latch opens (its key goes) and every
/// client waiting in `RLATCH.AWAIT` passes. Replies the count now.
pub fn count_down(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let [_, key] = args else {
        return Err(RedisError::WrongArity);
    };
    let mut latch = Latch::open(ctx, key)?;
    let counting = !latch.is_open();
    let count = latch.count_down();
    stats::LATCH_COUNTDOWNS.incr();
    if counting {
        keyevents::key(ctx, KeyEvent::LatchCountdown, key);
        if count == 0 {
            keyevents::key(ctx, KeyEvent::LatchOpen, key);
        }
    }
    if count == 0 {
        handoff::serve_latch_key(ctx, key);
    }
    Ok(RedisValue::Integer(count))
}

/// `RLATCH.AWAIT key [BLOCK ms]`: `1` once the count is zero (or the latch does not
/// exist), null if the wait runs out first.
pub fn await_zero(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    let key = &args[1];
    let words = args[2..].iter().map(RedisString::as_slice);
    let grammar = PermitGrammar::AWAIT;
    let options = parse_permit_options(words, grammar).map_err(errors::arg_error)?;
    if Latch::open(ctx, key)?.is_open() {
        return Ok(RedisValue::Integer(1));
    }
    match options.block {
        Some(wait) if ffi::may_block(ctx) => {
            let lock = store::lock_id(ctx, key);
            let deadline = queue_deadline(ffi::now_ms(), Some(wait), 0);
            let reply = waiters::block(ctx, WaitFor::latch(lock.clone()), wait, deadline);
            guard::callback("RLATCH.AWAIT after blocking", || handoff::watch(ctx, &lock));
            reply
        }
        _ => Ok(RedisValue::Null),
    }
}

/// `RLATCH.COUNT key`: the count now (0 when the latch does not exist).
pub fn count(ctx: &Context, args: &[RedisString]) -> RedisResult {
    let [_, key] = args else {
        return Err(RedisError::WrongArity);
    };
    Ok(RedisValue::Integer(Latch::open(ctx, key)?.count()))
}
