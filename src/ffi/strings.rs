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

/// The constant arguments the module sends again and again (messages, hold counts,
/// option words, field names), made once as `RedisModuleString`s: passed to
/// `Replicate` with the `s`/`v` format, to `HashSet` and `PublishMessage`, they cost a
/// reference count, not an allocation. Made without a context, they live as long as
/// the thread.
const CONSTANTS: [&[u8]; 6] = [b"0", b"1", b"PXAT", b"mode", b"read", b"write"];

thread_local! {
    static CONSTANT_STRINGS: Vec<RedisString> = CONSTANTS
        .iter()
        .map(|bytes| RedisString::create_from_slice(std::ptr::null_mut(), bytes))
        .collect();
}

/// Runs `f` with `bytes` as a shared `RedisModuleString`: one of `CONSTANTS`, or, for
/// any other bytes, one made for the call.
pub fn with_constant<T>(bytes: &[u8], f: impl FnOnce(&RedisString) -> T) -> T {
    match CONSTANTS.iter().position(|c| *c == bytes) {
        Some(i) => CONSTANT_STRINGS.with(|strings| f(&strings[i])),
        None => f(&RedisString::create_from_slice(std::ptr::null_mut(), bytes)),
    }
}
