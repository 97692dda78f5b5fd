//! RLOCK.TOP [COUNT n]: the most contended keys on this server. RLOCK.RESETSTAT: zeroes
//! what `INFO rlock` counts and the contention history.

use std::collections::BTreeMap;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisResult, RedisString, RedisValue};

use crate::core::args::parse_top_count;
use crate::core::wait_stats::TopEntry;
use crate::{config, errors, state, stats, waiters};

pub fn top(_ctx: &Context, args: &[RedisString]) -> RedisResult {
    let count =
        parse_top_count(args[1..].iter().map(RedisString::as_slice)).map_err(errors::arg_error)?;
    let live = waiters::live_keys();
    let now_ms = stats::now_us() / 1000;
    let window_ms = config::stats_window_ms();
    let entries = state::with(|s| s.wait_stats.top(live, count, now_ms, window_ms));
    Ok(RedisValue::Array(entries.into_iter().map(entry).collect()))
}

fn entry(entry: TopEntry) -> RedisValue {
    let mut reply = BTreeMap::new();
    let mut put = |name: &str, value| reply.insert(RedisValueKey::String(name.into()), value);
    put("key", RedisValue::StringBuffer(entry.lock.key));
    put("db", RedisValue::Integer(entry.lock.db.into()));
    put("kind", RedisValue::BulkString(entry.kind.name().into()));
    put("waiters", integer(entry.waiters));
    put("longest-wait-ms", integer(entry.longest_wait_ms));
    put("waits", integer(entry.waits));
    put("timeouts", integer(entry.timeouts));
    put(
        "wait-p99-usec",
        entry.wait_p99_usec.map_or(RedisValue::Null, integer),
    );
    RedisValue::OrderedMap(reply)
}

fn integer(n: u64) -> RedisValue {
    RedisValue::Integer(n.min(i64::MAX as u64) as i64)
}

pub fn reset_stat(_ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 1 {
        return Err(redis_module::RedisError::WrongArity);
    }
    stats::zero_counters();
    state::with(|s| s.wait_stats.reset());
    Ok(RedisValue::SimpleStringStatic("OK"))
}
