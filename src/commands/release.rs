//! RLOCK.RELEASE key owner, and RLOCK.FORCERELEASE key.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::{hold_error, key_owner_rest};
use crate::core::hold::{decide_release, Release};
use crate::store::LockKey;
use crate::{guard, sessions, stats, waiters};

const NOTHELD: &str = "NOTHELD the lock is not held by this owner";

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    guard::command(ctx, "RLOCK.RELEASE", || {
        if args.len() != 3 {
            return Err(RedisError::WrongArity);
        }
        let (key, owner, _) = key_owner_rest(args, 3)?;
        let release = {
            let lock_key = LockKey::open(ctx, key)?;
            let release = decide_release(lock_key.state(owner).map_err(hold_error)?);
            if release == Release::NotHeld {
                return Err(RedisError::Str(NOTHELD));
            }
            lock_key.apply_release(owner, release);
            release
        };
        match release {
            Release::Undo { .. } => Ok(RedisValue::Integer(0)),
            Release::Last { lock_freed } => {
                stats::RELEASES.incr();
                sessions::forget_hold(ctx, key, owner.as_slice());
                if lock_freed {
                    waiters::serve_key(ctx, key);
                }
                Ok(RedisValue::Integer(1))
            }
            Release::NotHeld => unreachable!("answered above"),
        }
    })
}

pub fn force_command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    guard::command(ctx, "RLOCK.FORCERELEASE", || {
        if args.len() != 2 {
            return Err(RedisError::WrongArity);
        }
        {
            let lock_key = LockKey::open(ctx, &args[1])?;
            if !lock_key.is_held() {
                return Ok(RedisValue::Integer(0));
            }
            lock_key.delete();
        }
        stats::FORCE_RELEASES.incr();
        sessions::forget_lock(&waiters::lock_id(ctx, &args[1]));
        waiters::serve_key(ctx, &args[1]);
        Ok(RedisValue::Integer(1))
    })
}
