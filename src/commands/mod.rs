//! The RLOCK.* commands, one file per family. Each parses its arguments into a
//! typed request, asks `core` what to do, and writes the effects through `store`.

pub mod acquire;
pub mod info;
pub mod release;
pub mod renew;

use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisError, RedisResult, RedisString};

use crate::core::args::{check_owner, ArgError};
use crate::core::hold::HoldError;
use crate::ffi;

/// Runs a command body so that a panic becomes an error reply, never a crash of
/// the server.
pub fn guarded(ctx: &Context, name: &str, body: impl FnOnce() -> RedisResult) -> RedisResult {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        ffi::log_warning(
            ctx.get_raw(),
            &format!("rlock: {name} panicked: {}", panic_message(&panic)),
        );
        Err(RedisError::String(format!(
            "ERR rlock internal error in {name}; see the server log"
        )))
    })
}

pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// `key owner rest...`, with the owner checked.
pub fn key_owner_rest(args: &[RedisString], min: usize) -> Result<(&RedisString, &RedisString, Vec<&[u8]>), RedisError> {
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
