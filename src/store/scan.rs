//! What `RLOCK.SCAN` reads: one step of the server's own `SCAN` over hashes, then
//! each hash it returned told apart through the key API (opened read-only): a
//! Redisson reentrant lock, a read-write lock, or neither.
//!
//! The step is an `RedisModule_Call` of `SCAN cursor [MATCH p] [COUNT n] TYPE hash`,
//! so the cursor is the server's and keeps `SCAN`'s guarantees (every key present for
//! the whole iteration is returned, a key may come twice). `RedisModule_Scan` cannot:
//! its cursor is opaque, and no server (7.0 to 8.2, Valkey 9) lets a module start
//! it from a client's cursor.

use redis_module::{Context, RedisError, RedisValue};

use super::reply_bytes;
use crate::core::integer::parse_i64;
use crate::core::keys::READ_WRITE_MODE_FIELD;
use crate::core::scan::{first_look, is_lock, FirstLook, LockKind, ScanArgs};
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// A lock found by the scan.
pub struct ScannedLock {
    pub key: Vec<u8>,
    pub kind: LockKind,
    /// A read-write lock's `mode`.
    pub mode: Option<&'static [u8]>,
    /// Owner -> hold count as `RLOCK.INFO` shows them: every field but a read-write
    /// lock's `mode`; `None` for a value that is not a count.
    pub holders: Vec<(Vec<u8>, Option<i64>)>,
    pub pttl: i64,
}

/// One step of the scan: the next cursor, and the locks among the keys of this step.
pub fn scan_locks(
    ctx: &Context,
    args: &ScanArgs,
) -> Result<(Vec<u8>, Vec<ScannedLock>), RedisError> {
    let mut call: Vec<&[u8]> = vec![&args.cursor];
    if let Some(pattern) = &args.pattern {
        call.extend([&b"MATCH"[..], pattern]);
    }
    if let Some(count) = &args.count {
        call.extend([&b"COUNT"[..], count]);
    }
    call.extend([&b"TYPE"[..], &b"hash"[..]]);
    let reply = ctx.call("SCAN", &call[..])?;
    let RedisValue::Array(mut parts) = reply else {
        return Err(RedisError::Str(errors::UNEXPECTED_REPLY));
    };
    if parts.len() != 2 {
        return Err(RedisError::Str(errors::UNEXPECTED_REPLY));
    }
    let RedisValue::Array(keys) = parts.pop().unwrap_or(RedisValue::Null) else {
        return Err(RedisError::Str(errors::UNEXPECTED_REPLY));
    };
    let cursor = parts
        .pop()
        .and_then(reply_bytes)
        .ok_or(RedisError::Str(errors::UNEXPECTED_REPLY))?;
    // A lock the user may not read is passed over, as if it were not one: `SCAN` shows
    // names to anyone, but holders and leases are the key's value.
    let user = ffi::CallingUser::of(ctx);
    let mut found = Vec::new();
    for key in keys {
        let name = reply_bytes(key).ok_or(RedisError::Str(errors::UNEXPECTED_REPLY))?;
        if user
            .as_ref()
            .is_some_and(|u| !u.may_read(&ffi::string(ctx, &name)))
        {
            continue;
        }
        if let Some(lock) = look_at(ctx, name) {
            if args.kind.is_none_or(|kind| kind == lock.kind) {
                found.push(lock);
            }
        }
    }
    Ok((cursor, found))
}

/// The lock at `name`, if the key is laid out as one.
fn look_at(ctx: &Context, name: Vec<u8>) -> Option<ScannedLock> {
    let key_name = ffi::string(ctx, &name);
    let key = Key::open_readonly(ctx, &key_name);
    if key.kind() != KeyKind::Hash {
        return None;
    }
    let mode = key.hash_get_c(READ_WRITE_MODE_FIELD);
    let look = first_look(mode.as_ref().map(|m| m.as_slice()), key.value_length());
    let (kind, mode) = match look {
        FirstLook::NotALock => return None,
        FirstLook::ReadWrite(mode) => (LockKind::ReadWrite, Some(mode.word())),
        FirstLook::Unknown => (LockKind::Lock, None),
    };
    let fields = key.hash_fields();
    if kind == LockKind::Lock && !is_lock(fields.iter().map(|(_, value)| &value[..])) {
        return None;
    }
    let holders = fields
        .into_iter()
        .filter(|(field, _)| {
            kind == LockKind::Lock || field[..] != *READ_WRITE_MODE_FIELD.to_bytes()
        })
        .map(|(field, value)| (field, parse_i64(&value)))
        .collect();
    Some(ScannedLock {
        key: name,
        kind,
        mode,
        holders,
        pttl: key.pttl(),
    })
}
