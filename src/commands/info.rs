//! RLOCK.INFO key: holders, pttl, fair queue, blocked waiters and fencing token.

use std::collections::BTreeMap;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::core::args::parse_i64;
use crate::core::keys::{helper_key, QUEUE_PREFIX, TOKEN_PREFIX};
use crate::store::reply_bytes;
use crate::{guard, waiters};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    guard::command(ctx, "RLOCK.INFO", || {
        if args.len() != 2 {
            return Err(RedisError::WrongArity);
        }
        let key = args[1].as_slice();
        let holders = pairs(ctx.call("HGETALL", &[key])?)?;
        let pttl = ctx.call("PTTL", &[key])?;
        let queue_key = helper_key(QUEUE_PREFIX, key);
        // Only a list is a queue; anything else at that name is not ours to show.
        let queue = match ctx.call("LRANGE", &[&queue_key[..], b"0", b"-1"]) {
            Ok(RedisValue::Array(owners)) => {
                owners.into_iter().map(bulk).collect::<Result<_, _>>()?
            }
            _ => Vec::new(),
        };
        let token = match ctx.call("GET", &[&helper_key(TOKEN_PREFIX, key)[..]])? {
            RedisValue::Null => RedisValue::Null,
            value => {
                let stored = bytes(value)?;
                parse_i64(&stored).map_or(RedisValue::StringBuffer(stored), RedisValue::Integer)
            }
        };

        let mut holders_map = BTreeMap::new();
        for (owner, count) in holders {
            let count = std::str::from_utf8(&count)
                .ok()
                .and_then(|c| c.parse().ok());
            holders_map.insert(
                RedisValueKey::BulkString(owner),
                count.map_or(RedisValue::Null, RedisValue::Integer),
            );
        }
        let mut reply = BTreeMap::new();
        reply.insert(field("holders"), RedisValue::OrderedMap(holders_map));
        reply.insert(field("pttl"), pttl);
        reply.insert(field("queue"), RedisValue::Array(queue));
        reply.insert(
            field("blocked"),
            RedisValue::Integer(waiters::blocked_on(ctx, &args[1]) as i64),
        );
        reply.insert(field("token"), token);
        Ok(RedisValue::OrderedMap(reply))
    })
}

fn field(name: &str) -> RedisValueKey {
    RedisValueKey::String(name.to_string())
}

/// A string reply as bytes.
fn bytes(value: RedisValue) -> Result<Vec<u8>, RedisError> {
    reply_bytes(value).ok_or(RedisError::Str(
        "ERR unexpected reply while reading the lock",
    ))
}

/// A string reply as a binary-safe bulk string reply.
fn bulk(value: RedisValue) -> Result<RedisValue, RedisError> {
    bytes(value).map(RedisValue::StringBuffer)
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
