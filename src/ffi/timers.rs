//! Module timers.

use std::os::raw::{c_int, c_void};
use std::ptr;

use redis_module::{raw, Context};

use super::{RawTimerFn, TimerCallback};

pub type TimerId = raw::RedisModuleTimerID;

/// A one-shot module timer that calls `callback` with `tag` after `delay_ms`.
pub fn create_timer(ctx: &Context, delay_ms: i64, callback: TimerCallback, tag: u64) -> TimerId {
    // SAFETY: the tag travels as a pointer-sized integer and is never dereferenced.
    unsafe {
        raw::RedisModule_CreateTimer.unwrap()(
            ctx.get_raw(),
            delay_ms,
            Some(callback as RawTimerFn),
            tag as usize as *mut c_void,
        )
    }
}

/// Stops a pending timer. Never call it for the timer whose callback is running.
pub fn stop_timer(ctx: &Context, id: TimerId) -> bool {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: data receives the tag, which needs no freeing.
    unsafe {
        raw::RedisModule_StopTimer.unwrap()(ctx.get_raw(), id, &mut data)
            == raw::REDISMODULE_OK as c_int
    }
}

/// The tag a timer was created with.
pub fn timer_tag(data: *mut c_void) -> u64 {
    data as usize as u64
}
