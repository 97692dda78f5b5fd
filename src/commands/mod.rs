//! The RLOCK.* commands, one file per family. Each parses its arguments into a
//! typed request, asks `core` what to do, and writes the effects through `store`.

pub mod acquire;
pub mod info;
pub mod release;
pub mod renew;

use std::os::raw::c_int;

use redis_module::{raw, Context, RedisError, RedisResult, RedisString};

use crate::core::args::{check_owner, ArgError};
use crate::core::hold::HoldError;
use crate::ffi;

/// Runs `handler` for a command call from Redis and sends its reply.
pub fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: fn(&Context, &[RedisString]) -> RedisResult,
) -> c_int {
    let context = Context::new(ctx);
    ffi::with_args(ctx, argv, argc, |args| {
        context.reply(handler(&context, args)) as c_int
    })
}

/// `key owner rest...`, with the owner checked. The rest come as byte slices.
pub fn key_owner_rest(
    args: &[RedisString],
    min: usize,
) -> Result<(&RedisString, &RedisString, impl Iterator<Item = &[u8]>), RedisError> {
    if args.len() < min {
        return Err(RedisError::WrongArity);
    }
    check_owner(args[2].as_slice()).map_err(arg_error)?;
    Ok((
        &args[1],
        &args[2],
        args[3..].iter().map(RedisString::as_slice),
    ))
}

pub fn arg_error(error: ArgError) -> RedisError {
    RedisError::String(error.to_string())
}

pub fn hold_error(error: HoldError) -> RedisError {
    RedisError::String(error.to_string())
}
