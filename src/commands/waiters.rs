//! RLOCK.WAITERS key: the calls blocked on a key on this server, in the order they
//! will be served, each with its client, owner, kind, permits and times. Reads only.

use std::collections::BTreeMap;

use redis_module::redisvalue::RedisValueKey;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use crate::core::args::Wait;
use crate::core::waitlist::{Waiter, Wants};
use crate::{ffi, state, stats, store};

/// One blocked call, read out of the wait list.
struct Row {
    client: u64,
    /// `None` for permits and latches, which have no owner.
    owner: Option<Vec<u8>>,
    kind: &'static str,
    permits: Option<i64>,
    /// When it began to wait, on `stats::now_us`'s clock.
    since_us: u64,
    /// `None` for `BLOCK 0`.
    deadline: Option<i64>,
    session: bool,
}

impl Row {
    fn of<H>(waiter: &Waiter<H>) -> Row {
        let (owner, permits) = match waiter.wants {
            Wants::Hold => (Some(waiter.owner.clone()), None),
            Wants::Permits(n) => (None, Some(n)),
            Wants::LatchOpen => (None, None),
        };
        Row {
            client: waiter.client,
            owner,
            kind: waiter.kind(),
            permits,
            since_us: waiter.since_us,
            deadline: match waiter.options.block {
                Some(Wait::Forever) => None,
                _ => Some(waiter.deadline),
            },
            session: waiter.options.session,
        }
    }
}

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() != 2 {
        return Err(RedisError::WrongArity);
    }
    let lock = store::lock_id(ctx, &args[1]);
    let rows: Vec<Row> = state::with(|s| s.waiters.line(&lock).map(Row::of).collect());
    let now = ffi::now_ms();
    let now_us = stats::now_us();
    let entries = rows
        .into_iter()
        .map(|row| {
            let bytes = |b: Vec<u8>| RedisValue::StringBuffer(b);
            let int = |n: i64| RedisValue::Integer(n);
            let mut entry = BTreeMap::new();
            entry.insert(field("client-id"), int(row.client as i64));
            entry.insert(
                field("client-name"),
                bytes(ffi::client_name(ctx, row.client)),
            );
            entry.insert(field("owner"), row.owner.map_or(RedisValue::Null, bytes));
            entry.insert(field("kind"), bytes(row.kind.as_bytes().to_vec()));
            entry.insert(field("permits"), row.permits.map_or(RedisValue::Null, int));
            entry.insert(
                field("waited-ms"),
                int((now_us.saturating_sub(row.since_us) / 1000) as i64),
            );
            let left = row.deadline.map_or(-1, |deadline| (deadline - now).max(0));
            entry.insert(field("timeout-ms"), int(left));
            entry.insert(field("session"), int(i64::from(row.session)));
            RedisValue::OrderedMap(entry)
        })
        .collect();
    Ok(RedisValue::Array(entries))
}

fn field(name: &'static str) -> RedisValueKey {
    RedisValueKey::String(name.to_string())
}
