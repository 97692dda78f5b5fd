//! Redisson's permit-expiring semaphore (`RPermitExpirableSemaphore`) on its keys: the
//! string `K` of available permits, as for `RSemaphore`, and the zset `{K}:timeout` of
//! leased permits, permit id (16 raw bytes) -> deadline in unix ms, or 922337203685477
//! for a permit without lease. A lease that has ended is taken back (its permit added
//! to `K`) by whoever looks first: Redisson's scripts with their caller's clock, the
//! module with the server's.

use redis_module::{Context, RedisError, RedisString, RedisValue};

use super::{replicated_write, reply_bytes, Semaphore};
use crate::core::keys::permit_leases_key;
use crate::core::semaphore::{earliest_lease_end, PermitId};
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// A permit-expiring semaphore: its permits string and its leases zset, read once.
pub struct PermitLeases<'a> {
    ctx: &'a Context,
    semaphore: Semaphore<'a>,
    zset: Vec<u8>,
    /// The zset existed when opened, or leases were written since.
    has_leases: bool,
}

impl<'a> PermitLeases<'a> {
    /// Opens the semaphore `name` and its leases: `WRONGTYPE` unless `K` is a string or
    /// missing and `{K}:timeout` a zset or missing.
    pub fn open(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let semaphore = Semaphore::open(ctx, name)?;
        let zset = permit_leases_key(name.as_slice());
        let has_leases = match Key::open_readonly(ctx, &ffi::string(ctx, &zset)).kind() {
            KeyKind::Empty => false,
            KeyKind::Zset => true,
            _ => return Err(errors::wrong_type()),
        };
        Ok(PermitLeases {
            ctx,
            semaphore,
            zset,
            has_leases,
        })
    }

    pub fn semaphore(&mut self) -> &mut Semaphore<'a> {
        &mut self.semaphore
    }

    /// Permits available now, counting leases that ended but were not taken back yet.
    pub fn available(&self) -> i64 {
        let ended = match self.has_leases {
            true => self.count_ended(ffi::now_ms()),
            false => 0,
        };
        self.semaphore.available().saturating_add(ended)
    }

    /// Takes back every lease that ended at or before `now`, as Redisson's scripts do
    /// (the new total published when above zero). The permit ids taken back.
    pub fn reclaim_ended(&mut self, now: i64) -> Vec<Vec<u8>> {
        if !self.has_leases {
            return Vec::new();
        }
        let until = now.to_string();
        let ended = match self
            .ctx
            .call("ZRANGEBYSCORE", &[&self.zset[..], b"0", until.as_bytes()])
        {
            Ok(RedisValue::Array(ids)) => ids.into_iter().filter_map(reply_bytes).collect(),
            _ => Vec::new(),
        };
        if ended.is_empty() {
            return ended;
        }
        let mut args: Vec<&[u8]> = vec![&self.zset];
        args.extend(ended.iter().map(Vec::as_slice));
        replicated_write(self.ctx, "ZREM", &args);
        self.semaphore.add_reclaimed(ended.len() as i64);
        ended
    }

    /// Leases `ids.len()` permits until `deadline` if that many are available: takes
    /// them from `K` and writes their ids. The zset gets `K`'s TTL, if `K` has one, as
    /// Redisson's acquire does.
    pub fn lease(&mut self, ids: &[PermitId], deadline: i64) -> bool {
        if !self.semaphore.take(ids.len() as i64) {
            return false;
        }
        let score = deadline.to_string();
        let mut args: Vec<&[u8]> = vec![&self.zset];
        for id in ids {
            args.push(score.as_bytes());
            args.push(&id.0);
        }
        replicated_write(self.ctx, "ZADD", &args);
        self.has_leases = true;
        if let Some(ttl) = self.semaphore.pttl() {
            let ttl = ttl.to_string();
            replicated_write(self.ctx, "PEXPIRE", &[&self.zset, ttl.as_bytes()]);
        }
        true
    }

    /// Gives permit `id` back if it is leased (ended or not, as Redisson's release does),
    /// publishing the new total. `None` when it is not leased; else whether its lease
    /// was still running at `now`.
    pub fn give_back(&mut self, id: &PermitId, now: i64) -> Option<bool> {
        let deadline = self.deadline_of(id)?;
        replicated_write(self.ctx, "ZREM", &[&self.zset, &id.0]);
        self.semaphore.give(1);
        Some(deadline > now)
    }

    /// Moves the end of permit `id`'s lease to `deadline`, if it is leased. Ended leases
    /// are taken back first (see `reclaim_ended`), so an ended one is not renewed.
    pub fn renew(&mut self, id: &PermitId, deadline: i64) -> bool {
        if self.deadline_of(id).is_none() {
            return false;
        }
        let score = deadline.to_string();
        replicated_write(
            self.ctx,
            "ZADD",
            &[&self.zset, b"XX", score.as_bytes(), &id.0],
        );
        true
    }

    /// When the earliest lease ends (unix ms), if any lease can end.
    pub fn earliest_end(&self) -> Option<i64> {
        if !self.has_leases {
            return None;
        }
        let reply = self
            .ctx
            .call("ZRANGE", &[&self.zset[..], b"0", b"0", b"WITHSCORES"]);
        let lowest = match reply {
            Ok(RedisValue::Array(pair)) => pair.into_iter().nth(1).and_then(reply_bytes),
            _ => None,
        };
        earliest_lease_end(lowest.and_then(|score| parse_score(&score)))
    }

    fn deadline_of(&self, id: &PermitId) -> Option<i64> {
        if !self.has_leases {
            return None;
        }
        let reply = self.ctx.call("ZSCORE", &[&self.zset[..], &id.0]).ok()?;
        parse_score(&reply_bytes(reply)?).map(|score| score as i64)
    }

    fn count_ended(&self, now: i64) -> i64 {
        let until = now.to_string();
        match self
            .ctx
            .call("ZCOUNT", &[&self.zset[..], b"0", until.as_bytes()])
        {
            Ok(RedisValue::Integer(n)) => n,
            _ => 0,
        }
    }
}

fn parse_score(text: &[u8]) -> Option<f64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}
