//! RLOCK.RELEASE key owner, and RLOCK.FORCERELEASE key.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::{guarded, hold_error, key_owner_rest};
use crate::core::hold::{decide_release, Release};
use crate::stats;
use crate::store::LockKey;

const NOTHELD: &str = "NOTHELD the lock is not held by this owner";

pub fn command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RLOCK.RELEASE", || {
        if args.len() != 3 {
            return Err(RedisError::WrongArity);
        }
        let (key, owner, _) = key_owner_rest(&args, 3)?;
        let lock = LockKey::open(ctx, key)?;
        let reply = match decide_release(lock.state(owner).map_err(hold_error)?) {
            Release::NotHeld => return Err(RedisError::Str(NOTHELD)),
            Release::Undo { remaining } => {
                lock.set_count(owner, remaining);
                0
            }
            Release::Last { lock_freed: true } => {
                lock.delete();
                1
            }
            Release::Last { lock_freed: false } => {
                lock.remove_owner(owner);
                1
            }
        };
        stats::RELEASES.incr();
        Ok(RedisValue::Integer(reply))
    })
}

pub fn force_command(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    guarded(ctx, "RLOCK.FORCERELEASE", || {
        if args.len() != 2 {
            return Err(RedisError::WrongArity);
        }
        let lock = LockKey::open(ctx, &args[1])?;
        if !lock.is_held() {
            return Ok(RedisValue::Integer(0));
        }
        lock.delete();
        stats::FORCE_RELEASES.incr();
        Ok(RedisValue::Integer(1))
    })
}
