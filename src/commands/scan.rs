//! RLOCK.SCAN cursor [MATCH pattern] [COUNT n] [TYPE lock|rwlock]: `SCAN` over the
//! current database that shows only Redisson locks and read-write locks, each with its
//! holders, lease and the calls blocked on it here. Reads only.

use std::collections::BTreeMap;
use std::time::Instant;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::info;
use crate::core::scan::parse_scan_args;
use crate::{errors, ffi, latency, store, waiters};

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() < 2 {
        return Err(RedisError::WrongArity);
    }
    let words: Vec<&[u8]> = args[1..].iter().map(RedisString::as_slice).collect();
    let scan = parse_scan_args(&words).map_err(errors::scan_arg_error)?;
    let started = Instant::now();
    let (cursor, locks) = store::scan_locks(ctx, &scan)?;
    let entries = locks
        .into_iter()
        .map(|lock| {
            let waiting = waiters::blocked_on(ctx, &ffi::string(ctx, &lock.key));
            let mut entry = BTreeMap::new();
            entry.insert(field("key"), RedisValue::StringBuffer(lock.key));
            entry.insert(
                field("type"),
                RedisValue::StringBuffer(lock.kind.word().as_bytes().to_vec()),
            );
            // Nil for a reentrant lock: every entry has the same fields.
            entry.insert(
                field("mode"),
                lock.mode.map_or(RedisValue::Null, |mode| {
                    RedisValue::StringBuffer(mode.to_vec())
                }),
            );
            entry.insert(field("holders"), info::holders_reply(lock.holders));
            entry.insert(field("pttl"), RedisValue::Integer(lock.pttl));
            entry.insert(field("waiters"), RedisValue::Integer(waiting as i64));
            RedisValue::OrderedMap(entry)
        })
        .collect();
    latency::sample(latency::SCAN, started);
    Ok(RedisValue::Array(vec![
        RedisValue::StringBuffer(cursor),
        RedisValue::Array(entries),
    ]))
}

fn field(name: &'static str) -> RedisValueKey {
    RedisValueKey::String(name.to_string())
}
