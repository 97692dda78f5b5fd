//! RLOCK.ACQUIRE key owner [LEASE ms] [BLOCK ms] [FAIR] [TOKEN] [SESSION]

use redis_module::{raw, Context, RedisError, RedisResult, RedisString, RedisValue};

use super::{arg_error, hold_error, key_owner_rest};
use crate::core::args::{parse_acquire_options, AcquireOptions};
use crate::core::fair::queue_deadline;
use crate::core::hold::{decide_acquire, Acquire};
use crate::stats;
use crate::store::{Fence, LockKey};
use crate::{config, fair, ffi, guard, sessions, timers, waiters};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    guard::command(ctx, "RLOCK.ACQUIRE", || {
        let (key, owner, rest) = key_owner_rest(args, 3)?;
        let options = parse_acquire_options(rest).map_err(arg_error)?;
        if options.session && ffi::context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_LUA != 0 {
            // A script runs on its own client, which never disconnects.
            return Err(RedisError::Str(
                "ERR SESSION cannot be used inside a script or function: the hold would outlive the caller",
            ));
        }
        if options.fair {
            return fair::acquire(ctx, key, owner, &options);
        }
        // Nothing waits or is watched anywhere: the common, uncontended case skips
        // building the lock's id.
        let watching = !waiters::all_idle();
        let lock = || waiters::lock_id(ctx, key);
        // A free lock with waiters goes to them first: the line is first come, first served.
        if watching {
            let lock = lock();
            if waiters::has_waiters(&lock) {
                waiters::serve(ctx, &lock);
            }
        }
        let reply = try_acquire(ctx, key, owner, &options)?;
        match (&reply, options.block) {
            (RedisValue::Integer(_), _) => {
                if options.session {
                    sessions::record(ffi::client_id(ctx), lock(), owner.as_slice().to_vec());
                }
                if watching {
                    timers::watch(ctx, &lock());
                }
                Ok(reply)
            }
            (RedisValue::Null, Some(wait)) if waiters::may_block(ctx) => {
                let deadline = queue_deadline(ffi::now_ms(), Some(wait), 0);
                waiters::block(ctx, lock(), owner, options, wait, deadline)
            }
            _ => Ok(reply),
        }
    })
}

/// One attempt: the acquire reply (count or token), or null when someone else holds the lock.
pub fn try_acquire(
    ctx: &Context,
    key: &RedisString,
    owner: &RedisString,
    options: &AcquireOptions,
) -> RedisResult {
    let lock = LockKey::open(ctx, key)?;
    let decision = decide_acquire(lock.state(owner).map_err(hold_error)?).map_err(hold_error)?;
    let lease = options.lease.unwrap_or_else(config::default_lease);
    let (count, token) = match decision {
        Acquire::Busy => return Ok(RedisValue::Null),
        Acquire::Take => {
            // Once fencing is in use on a lock, every free-to-held transition bumps
            // the counter, so the counter always names the current hold.
            let token = if options.token || Fence::in_use(ctx, key) {
                let mut fence = Fence::open(ctx, key)?;
                // A counter remembered but since deleted is not recreated unasked.
                if options.token || fence.exists() {
                    let next = fence.next()?;
                    fence.store(next);
                    Some(next)
                } else {
                    None
                }
            } else {
                None
            };
            stats::ACQUIRES.incr();
            (1, token)
        }
        Acquire::Reenter { count } => {
            let token = if options.token {
                let mut fence = Fence::open(ctx, key)?;
                Some(match fence.current() {
                    Some(current) => current,
                    // Taken before fencing was in use: fence the hold now.
                    None => {
                        let next = fence.next()?;
                        fence.store(next);
                        next
                    }
                })
            } else {
                None
            };
            stats::REENTRIES.incr();
            (count, token)
        }
    };
    lock.set_count(owner, count);
    lock.set_deadline(lease.deadline_from(ffi::now_ms()));
    Ok(RedisValue::Integer(match (options.token, token) {
        (true, Some(token)) => token,
        _ => count,
    }))
}
