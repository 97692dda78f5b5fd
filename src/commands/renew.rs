//! RLOCK.RENEW key owner [LEASE ms]

use redis_module::{Context, RedisResult, RedisString, RedisValue};

use super::{arg_error, guarded, hold_error, key_owner_rest};
use crate::config;
use crate::core::args::parse_renew_options;
use crate::core::hold::LockState;
use crate::ffi::now_ms;
use crate::store::LockKey;

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RLOCK.RENEW", || {
        let (key, owner, rest) = key_owner_rest(&args, 3)?;
        let options = parse_renew_options(&rest).map_err(arg_error)?;
        let lock = LockKey::open(ctx, key)?;
        let held = matches!(
            lock.state(owner).map_err(hold_error)?,
            LockState::Held { own_count: Some(_), .. }
        );
        if !held {
            return Ok(RedisValue::Integer(0));
        }
        let lease = options.lease.unwrap_or_else(config::default_lease);
        lock.set_deadline(lease.deadline_from(now_ms()));
        Ok(RedisValue::Integer(1))
    })
}
