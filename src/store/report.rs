//! What `RLOCK.INFO` shows of a lock's keys.

use redis_module::{Context, RedisError, RedisValue};

use super::reply_bytes;
use crate::core::integer::parse_i64;
use crate::core::keys::{helper_key, QUEUE_PREFIX, READ_WRITE_MODE_FIELD, TOKEN_PREFIX};
use crate::core::rwlock::RwMode;
use crate::errors;

pub struct LockReport {
    /// Owner -> hold count; `None` for a field that is not a count (a hash written
    /// by something else). A read-write lock's writer shows as `owner:write`.
    pub holders: Vec<(Vec<u8>, Option<i64>)>,
    /// A read-write lock's `mode` (`read` or `write`); `None` for a reentrant lock.
    pub mode: Option<Vec<u8>>,
    pub pttl: RedisValue,
    pub queue: Vec<Vec<u8>>,
    /// The fencing counter: a number, or the raw value if it holds something else.
    pub token: Option<Result<i64, Vec<u8>>>,
}

/// Reads the lock `key` and its helper keys.
pub fn read_report(ctx: &Context, key: &[u8]) -> Result<LockReport, RedisError> {
    let mut mode = None;
    let mut holders = Vec::new();
    for (owner, value) in pairs(ctx.call("HGETALL", &[key])?)? {
        if owner == READ_WRITE_MODE_FIELD.to_bytes() && RwMode::of_word(&value).is_some() {
            mode = Some(value);
        } else {
            holders.push((owner, parse_i64(&value)));
        }
    }
    let pttl = ctx.call("PTTL", &[key])?;
    // Only a list is a queue; anything else at that name is not ours to show.
    let queue = match ctx.call("LRANGE", &[&helper_key(QUEUE_PREFIX, key)[..], b"0", b"-1"]) {
        Ok(RedisValue::Array(owners)) => owners.into_iter().map(bytes).collect::<Result<_, _>>()?,
        _ => Vec::new(),
    };
    let token = match ctx.call("GET", &[&helper_key(TOKEN_PREFIX, key)[..]])? {
        RedisValue::Null => None,
        value => {
            let stored = bytes(value)?;
            Some(parse_i64(&stored).ok_or(stored))
        }
    };
    Ok(LockReport {
        holders,
        mode,
        pttl,
        queue,
        token,
    })
}

/// A string reply as bytes.
fn bytes(value: RedisValue) -> Result<Vec<u8>, RedisError> {
    reply_bytes(value).ok_or(RedisError::Str(errors::UNEXPECTED_REPLY))
}

type FieldValue = (Vec<u8>, Vec<u8>);

/// The flat field/value array of HGETALL as pairs.
fn pairs(value: RedisValue) -> Result<Vec<FieldValue>, RedisError> {
    let RedisValue::Array(flat) = value else {
        return Ok(Vec::new());
    };
    let mut flat = flat.into_iter();
    let mut out = Vec::new();
    while let (Some(name), Some(value)) = (flat.next(), flat.next()) {
        out.push((bytes(name)?, bytes(value)?));
    }
    Ok(out)
}
