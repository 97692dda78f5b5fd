//! RLOCK.RENEW key owner [LEASE ms]

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use super::{arg_error, hold_error, key_owner_rest};
use crate::core::args::parse_renew_options;
use crate::core::hold::LockState;
use crate::store::LockKey;
use crate::{config, ffi, guard, timers, waiters};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    guard::command(ctx, "RLOCK.RENEW", || {
        let (key, owner, rest) = key_owner_rest(args, 3)?;
        let options = parse_renew_options(rest).map_err(arg_error)?;
        let lock = LockKey::open(ctx, key)?;
        let held = matches!(
            lock.state(owner).map_err(hold_error)?,
            LockState::Held {
                own_count: Some(_),
                ..
            }
        );
        if !held {
            return Ok(RedisValue::Integer(0));
        }
        let lease = options.lease.unwrap_or_else(config::default_lease);
        lock.set_deadline(lease.deadline_from(ffi::now_ms()));
        drop(lock);
        if !waiters::all_idle() {
            timers::watch(ctx, &waiters::lock_id(ctx, key));
        }
        Ok(RedisValue::Integer(1))
    })
}
