//! The RLOCK.* commands, one file per family. Each parses its arguments into a
//! typed request, asks `core` what to do, and writes the effects through `store`.

pub mod acquire;
pub mod info;
pub mod release;
pub mod renew;

use redis_module::{RedisError, RedisString};

use crate::core::args::{check_owner, ArgError};
use crate::core::hold::HoldError;

/// `key owner rest...`, with the owner checked.
pub fn key_owner_rest(
    args: &[RedisString],
    min: usize,
) -> Result<(&RedisString, &RedisString, Vec<&[u8]>), RedisError> {
    if args.len() < min {
        return Err(RedisError::WrongArity);
    }
    check_owner(args[2].as_slice()).map_err(arg_error)?;
    let rest = args[3..].iter().map(RedisString::as_slice).collect();
    Ok((&args[1], &args[2], rest))
}

pub fn arg_error(error: ArgError) -> RedisError {
    RedisError::String(error.to_string())
}

pub fn hold_error(error: HoldError) -> RedisError {
    RedisError::String(error.to_string())
}
