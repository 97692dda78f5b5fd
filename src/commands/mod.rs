//! The RLOCK.* commands, one file per family, declared in `table`. Each parses its
//! arguments into a typed request and calls the domain verbs of `store`,
//! `handoff` and `waiters`.

mod guarded;
mod holds;
pub mod info;
mod latch;
pub mod lock;
mod multi;
mod rwlock;
mod scan;
mod semaphore;
mod stats;
pub mod table;
mod waiters;

use std::os::raw::c_int;

use redis_module::{raw, Context, RedisError, RedisResult, RedisString};

use crate::core::args::check_owner;
use crate::{errors, ffi, guard};

/// Runs `handler` for a call of command `name` and sends its reply; a panic
/// becomes an error reply.
pub fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    name: &str,
    handler: fn(&Context, &[RedisString]) -> RedisResult,
) -> c_int {
    let context = Context::new(ctx);
    ffi::with_args(ctx, argv, argc, |args| {
        let reply = guard::command(&context, name, || handler(&context, args));
        context.reply(reply.map_err(errors::replyable)) as c_int
    })
}

/// `key owner rest...`, with the owner checked. The rest come as byte slices.
fn key_owner_rest(
    args: &[RedisString],
    min: usize,
) -> Result<(&RedisString, &RedisString, impl Iterator<Item = &[u8]>), RedisError> {
    if args.len() < min {
        return Err(RedisError::WrongArity);
    }
    check_owner(args[2].as_slice()).map_err(errors::arg_error)?;
    Ok((
        &args[1],
        &args[2],
        args[3..].iter().map(RedisString::as_slice),
    ))
}
