//! Every error reply the module sends, in one voice. Argument and hold errors are
//! worded in `core` (which has no Redis types); this file turns them into replies.

use std::fmt::Write;

use redis_module::RedisError;

use crate::core::args::ArgError;
use crate::core::hold::HoldError;
use crate::core::scan::ScanArgError;

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const READ_WRITE_LOCK: &str =
    "WRONGTYPE the key holds a read-write lock (Redisson's RReadWriteLock): add READ or WRITE";
pub const READ_WRITE_ADD_READ: &str =
    "WRONGTYPE the key holds a read-write lock (Redisson's RReadWriteLock): add READ, this owner holds read holds";
pub const READ_WRITE_ADD_WRITE: &str =
    "WRONGTYPE the key holds a read-write lock (Redisson's RReadWriteLock): add WRITE, this owner holds the write lock";
pub const REENTRANT_LOCK: &str =
    "WRONGTYPE the key holds a reentrant lock, not a read-write lock: call without READ or WRITE";
pub const SEMAPHORE_NOT_INTEGER: &str =
    "ERR the semaphore key holds a value that is not an integer number of permits";
pub const LATCH_NOT_INTEGER: &str = "ERR the latch key holds a value that is not an integer count";
pub const BAD_PERMIT_ID: &str = "ERR permit id must be 32 hex characters";
pub const PERMITS_OVERFLOW: &str = "ERR the number of permits would overflow";
pub const CROSS_SLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
pub const NOTHELD: &str = "NOTHELD the lock is not held by this owner";
pub const SESSION_IN_SCRIPT: &str =
    "ERR SESSION cannot be used inside a script or function: the hold would outlive the caller";
pub const FENCE_NOT_INTEGER: &str =
    "ERR the fencing counter key holds a value that is not a non-negative integer";
pub const FENCE_OVERFLOW: &str = "ERR the fencing counter would overflow";
pub const REQUEST_CONFLICT: &str =
    "ERR REQ id already used by another owner or command on this lock";
pub const UNEXPECTED_REPLY: &str = "ERR unexpected reply while reading the lock";
/// Sent to every blocked client when the server stops being a primary, in the
/// words Redis uses for its own blocked clients.
pub const SLOT_MIGRATING: &str =
    "TRYAGAIN the lock's slot is being migrated and its helper keys may have moved: retry";
pub const DEMOTED: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

pub fn wrong_type() -> RedisError {
    RedisError::Str(WRONGTYPE)
}

pub fn not_held() -> RedisError {
    RedisError::Str(NOTHELD)
}

pub fn arg_error(error: ArgError) -> RedisError {
    RedisError::String(error.to_string())
}

/// A bad `RLOCK.SCAN` call, in the words `SCAN` uses for the same mistake.
pub fn scan_arg_error(error: ScanArgError) -> RedisError {
    RedisError::String(error.to_string())
}

pub fn hold_error(error: HoldError) -> RedisError {
    RedisError::String(error.to_string())
}

/// `error` as a reply can carry it. The reply path of `redis-module` (outside every
/// guard) turns each char of an error line into one byte and unwraps a C string, so a
/// char past ASCII whose code is a multiple of 256 (U+0100, from a user's bytes) became
/// a NUL and aborted the server. Bytes outside printable ASCII are sent as `\xNN`.
pub fn replyable(error: RedisError) -> RedisError {
    match error {
        RedisError::String(line) if !is_printable(&line) => RedisError::String(escaped(&line)),
        other => other,
    }
}

/// An error line for `reply_error_string`, as `replyable` makes it.
pub fn replyable_line(line: &str) -> std::borrow::Cow<'_, str> {
    if is_printable(line) {
        std::borrow::Cow::Borrowed(line)
    } else {
        std::borrow::Cow::Owned(escaped(line))
    }
}

fn is_printable(line: &str) -> bool {
    line.bytes().all(|b| (0x20..0x7f).contains(&b))
}

fn escaped(line: &str) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    for b in line.bytes() {
        if (0x20..0x7f).contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// An inner command of `RLOCK.GUARD` the server refused before running it, on a server
/// that reports such refusals only by `errno` (Linux numbers).
pub fn guard_call_refused(refused: crate::ffi::CallRefused) -> RedisError {
    RedisError::String(match refused.0 {
        13 => "NOPERM this user has no permissions to run the command inside RLOCK.GUARD, or to access one of its keys".into(),
        2 => "ERR unknown command inside RLOCK.GUARD".into(),
        22 => "ERR wrong number of arguments inside RLOCK.GUARD".into(),
        1 | 100 => "ERR the keys of the command inside RLOCK.GUARD are not served by this node".into(),
        28 => "OOM command not allowed when used memory > 'maxmemory'.".into(),
        30 | 29 => "READONLY You can't write against a read only replica.".into(),
        errno => format!("ERR the server refused the command inside RLOCK.GUARD (errno {errno})"),
    })
}

/// A panic caught in `name`; its message goes to the server log.
pub fn internal(name: &str) -> RedisError {
    RedisError::String(format!(
        "ERR rlock internal error in {name}; see the server log"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_carry_printable_ascii_only() {
        let line = "ERR unknown TYPE '\u{100}\0\r\n' (x)";
        let RedisError::String(safe) = replyable(RedisError::String(line.into())) else {
            panic!("not a string error");
        };
        assert_eq!(safe, "ERR unknown TYPE '\\xc4\\x80\\x00\\x0d\\x0a' (x)");
        assert_eq!(replyable_line(&safe), safe.as_str());
        assert!(matches!(replyable(not_held()), RedisError::Str(NOTHELD)));
    }
}
