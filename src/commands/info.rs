//! RLOCK.INFO key: holders, pttl, fair queue, blocked waiters, fencing token, and a
//! read-write lock's mode.

use std::collections::BTreeMap;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::{store, waiters};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let report = store::read_report(ctx, args[1].as_slice())?;
    let holders = holders_reply(report.holders);
    let token = match report.token {
        None => RedisValue::Null,
        Some(Ok(token)) => RedisValue::Integer(token),
        Some(Err(raw)) => RedisValue::StringBuffer(raw),
    };
    let queue = report
        .queue
        .into_iter()
        .map(RedisValue::StringBuffer)
        .collect();
    let mut reply = BTreeMap::new();
    reply.insert(field("holders"), holders);
    reply.insert(field("pttl"), report.pttl);
    reply.insert(field("queue"), RedisValue::Array(queue));
    reply.insert(
        field("blocked"),
        RedisValue::Integer(waiters::blocked_on(ctx, &args[1]) as i64),
    );
    reply.insert(field("token"), token);
    // A read-write lock says which side holds it.
    if let Some(mode) = report.mode {
        reply.insert(field("mode"), RedisValue::StringBuffer(mode));
    }
    Ok(RedisValue::OrderedMap(reply))
}

fn field(name: &str) -> RedisValueKey {
    RedisValueKey::String(name.to_string())
}

/// Owner -> hold count as a map reply; a count that is not an integer shows as null.
/// `RLOCK.INFO` and `RLOCK.SCAN` show holders alike.
pub(super) fn holders_reply(holders: Vec<(Vec<u8>, Option<i64>)>) -> RedisValue {
    RedisValue::OrderedMap(
        holders
            .into_iter()
            .map(|(owner, count)| {
                (
                    RedisValueKey::BulkString(owner),
                    count.map_or(RedisValue::Null, RedisValue::Integer),
                )
            })
            .collect(),
    )
}
