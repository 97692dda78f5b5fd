//! Strings handed to callbacks, and binary-safe strings made for Redis.

use std::ffi::CStr;
use std::os::raw::c_char;

use redis_module::{raw, Context, RedisString};

/// A C string handed to a callback, as bytes.
pub fn c_str_bytes<'a>(s: *const c_char) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    // SAFETY: Redis passes NUL-terminated event names that outlive the callback.
    unsafe { CStr::from_ptr(s).to_bytes() }
}

/// The bytes of a RedisModuleString handed to a callback.
pub fn string_bytes<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    RedisString::string_as_slice(s)
}

/// A binary-safe RedisModuleString (the crate's `create_string` refuses NUL bytes).
pub fn string(ctx: &Context, bytes: &[u8]) -> RedisString {
    RedisString::create_from_slice(ctx.get_raw(), bytes)
}
