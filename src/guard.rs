//! Every entry point from Redis runs inside one of these, so that a panic becomes
//! an error reply or a log line instead of killing the server with its data.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{Context, RedisResult};

use crate::{errors, ffi};

/// A command body: a panic becomes an error reply.
pub fn command(ctx: &Context, name: &str, body: impl FnOnce() -> RedisResult) -> RedisResult {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        ffi::log_warning(
            ctx.get_raw(),
            &format!("rlock: {name} panicked: {}", message(&panic)),
        );
        Err(errors::internal(name))
    })
}

/// A callback body (timer, event, blocked client): a panic becomes a log line.
pub fn callback(name: &str, body: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(body)) {
        ffi::log_warning(
            std::ptr::null_mut(),
            &format!("rlock: {name} panicked: {}", message(&panic)),
        );
    }
}

fn message(panic: &Box<dyn Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}
