//! The fair queue on Redisson's keys: `redisson_lock_queue:{K}` (owners in arrival
//! order) and `redisson_lock_timeout:{K}` (owner -> absolute deadline). Queue
//! writes go through `RedisModule_Call` with replication, so they reach replicas
//! and the AOF as the plain list and zset commands Redisson itself sends.

use std::cell::Cell;
use std::collections::HashSet;

use redis_module::{Context, RedisError, RedisValue};

use super::{replicated_write, reply_bytes};
use crate::config;
use crate::core::keys::{helper_key, lock_keys_of, wake_channel, QUEUE_PREFIX, TIMEOUT_PREFIX};
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// The two queue keys of one lock, checked to be a list and a zset (or absent).
pub struct FairQueue<'a> {
    ctx: &'a Context,
    lock_key: Vec<u8>,
    list: Vec<u8>,
    zset: Vec<u8>,
    /// Both keys were found missing and nothing was queued since: the common case
    /// of an uncontended fair lock reads nothing more.
    known_empty: Cell<bool>,
    /// Either key was missing when opened: queueing would create it.
    partly_missing: bool,
}

impl<'a> FairQueue<'a> {
    pub fn open(ctx: &'a Context, lock_key: &[u8]) -> Result<Self, RedisError> {
        let list = helper_key(QUEUE_PREFIX, lock_key);
        let zset = helper_key(TIMEOUT_PREFIX, lock_key);
        let list_kind = Key::open_readonly(ctx, &ffi::string(ctx, &list)).kind();
        let zset_kind = Key::open_readonly(ctx, &ffi::string(ctx, &zset)).kind();
        if !matches!(list_kind, KeyKind::Empty | KeyKind::List)
            || !matches!(zset_kind, KeyKind::Empty | KeyKind::Zset)
        {
            return Err(errors::wrong_type());
        }
        Ok(FairQueue {
            ctx,
            lock_key: lock_key.to_vec(),
            list,
            zset,
            known_empty: Cell::new(list_kind == KeyKind::Empty && zset_kind == KeyKind::Empty),
            partly_missing: list_kind == KeyKind::Empty || zset_kind == KeyKind::Empty,
        })
    }

    /// Whether an owner may be queued: a missing key is created only where the lock's
    /// slot allows it (see `store::check_slot_may_grow`).
    pub fn check_may_grow(&self) -> Result<(), RedisError> {
        if self.partly_missing {
            super::check_slot_may_grow(self.ctx, &self.lock_key, &[&self.list, &self.zset])?;
        }
        Ok(())
    }

    /// The owner whose turn it is.
    pub fn head(&self) -> Option<Vec<u8>> {
        if self.known_empty.get() {
            return None;
        }
        let reply = self.ctx.call("LINDEX", &[&self.list[..], b"0"]).ok()?;
        reply_bytes(reply)
    }

    /// Every queued owner, in order.
    pub fn owners(&self) -> Vec<Vec<u8>> {
        if self.known_empty.get() {
            return Vec::new();
        }
        match self.ctx.call("LRANGE", &[&self.list[..], b"0", b"-1"]) {
            Ok(RedisValue::Array(owners)) => owners.into_iter().filter_map(reply_bytes).collect(),
            _ => Vec::new(),
        }
    }

    /// When `owner`'s place runs out (unix ms), if it is queued.
    pub fn deadline_of(&self, owner: &[u8]) -> Option<i64> {
        if self.known_empty.get() {
            return None;
        }
        let reply = self.ctx.call("ZSCORE", &[&self.zset[..], owner]).ok()?;
        let score = reply_bytes(reply)?;
        std::str::from_utf8(&score)
            .ok()?
            .parse::<f64>()
            .ok()
            .map(|s| s as i64)
    }

    /// The earliest deadline of any entry (unix ms); `None` when the zset is empty.
    pub fn earliest_deadline(&self) -> Option<i64> {
        if self.known_empty.get() {
            return None;
        }
        match self
            .ctx
            .call("ZRANGE", &[&self.zset[..], b"0", b"0", b"WITHSCORES"])
        {
            Ok(RedisValue::Array(pair)) => {
                let score = pair.into_iter().nth(1).and_then(reply_bytes)?;
                let score = std::str::from_utf8(&score).ok()?.parse::<f64>().ok()?;
                Some(score as i64)
            }
            _ => None,
        }
    }

    /// With no deadline left, what remains of the list goes too: an entry without a
    /// deadline is no one's place (Redisson's scripts fail on it), and would stand at
    /// the head forever. True if the list was there.
    pub fn drop_if_no_deadlines(&self) -> bool {
        if self.known_empty.get() || self.earliest_deadline().is_some() {
            return false;
        }
        let list = ffi::string(self.ctx, &self.list);
        if Key::open_readonly(self.ctx, &list).kind() != KeyKind::List {
            return false;
        }
        self.write("DEL", &[&self.list[..]]) > 0
    }

    /// Entries whose deadline is at or before `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<Vec<u8>> {
        if self.known_empty.get() {
            return Vec::new();
        }
        let now = now_ms.to_string();
        match self
            .ctx
            .call("ZRANGEBYSCORE", &[&self.zset[..], b"-inf", now.as_bytes()])
        {
            Ok(RedisValue::Array(owners)) => owners.into_iter().filter_map(reply_bytes).collect(),
            _ => Vec::new(),
        }
    }

    /// Puts `owner` at the tail, keeping its place until `deadline` (unix ms).
    pub fn enqueue(&self, owner: &[u8], deadline: i64) {
        let score = deadline.to_string();
        self.write("ZADD", &[&self.zset[..], score.as_bytes(), owner]);
        self.write("RPUSH", &[&self.list[..], owner]);
    }

    /// Moves the deadline of a queued `owner`.
    pub fn set_deadline(&self, owner: &[u8], deadline: i64) {
        let score = deadline.to_string();
        self.write("ZADD", &[&self.zset[..], b"XX", score.as_bytes(), owner]);
    }

    /// Takes `owner` out of the queue: O(1) at the head, O(n) from mid-queue.
    pub fn dequeue(&self, owner: &[u8], at_head: bool) {
        self.write("ZREM", &[&self.zset[..], owner]);
        self.unlist(owner, at_head);
    }

    /// Takes `owner` out of the list only. The number of entries removed.
    fn unlist(&self, owner: &[u8], at_head: bool) -> i64 {
        if at_head {
            self.write("LPOP", &[&self.list[..]]);
            1
        } else {
            self.write("LREM", &[&self.list[..], b"1", owner])
        }
    }

    /// Takes every owner of `owners` out of the queue, list and deadline zset alike.
    /// True if any was there. Many leaving at once (clients that died together)
    /// cost one pass over the list, not one `LREM` each.
    pub fn dequeue_all(&self, owners: &[Vec<u8>]) -> bool {
        /// Up to this many leave by `LREM`; more, by one rewrite of the list.
        const ONE_BY_ONE: usize = 8;
        if owners.is_empty() || self.known_empty.get() {
            return false;
        }
        let mut zrem: Vec<&[u8]> = vec![&self.zset];
        zrem.extend(owners.iter().map(Vec::as_slice));
        let mut removed = self.write("ZREM", &zrem);
        if owners.len() <= ONE_BY_ONE {
            for owner in owners {
                removed += self.unlist(owner, self.head().as_deref() == Some(&owner[..]));
            }
            return removed > 0;
        }
        let mut leaving: HashSet<&[u8]> = owners.iter().map(Vec::as_slice).collect();
        let all = self.owners();
        let kept: Vec<&[u8]> = all
            .iter()
            .map(Vec::as_slice)
            .filter(|owner| !leaving.remove(owner))
            .collect();
        if kept.len() < all.len() {
            self.write("DEL", &[&self.list[..]]);
            for chunk in kept.chunks(1024) {
                let mut rpush: Vec<&[u8]> = vec![&self.list];
                rpush.extend(chunk.iter().copied());
                self.write("RPUSH", &rpush);
            }
            removed += 1;
        }
        removed > 0
    }

    /// `PUBLISH redisson_lock__channel:{K}:<owner> 0`: the lock is free, your turn.
    pub fn wake(&self, owner: &[u8]) {
        if config::publish() {
            let channel = ffi::string(self.ctx, &wake_channel(&self.lock_key, owner));
            ffi::publish_zero(self.ctx, &channel);
        }
    }

    /// One replicated write (see `store::replicated_write`).
    fn write(&self, command: &str, args: &[&[u8]]) -> i64 {
        self.known_empty.set(false);
        replicated_write(self.ctx, command, args)
    }
}

/// One `SCAN` step over the current database for fair queues, by their deadline zsets
/// (`redisson_lock_timeout:{K}`): the next cursor (0 at the end) and the locks found.
pub fn find_queues(ctx: &Context, cursor: u64) -> Result<(u64, Vec<Vec<u8>>), RedisError> {
    // An empty database holds no queue, so a server started empty searches without a
    // call. The 16 `SCAN` calls of its first cron tick left Valkey's heap (glibc malloc)
    // laid out so that each later plain acquire + release cost ~1,150 instructions more
    // in malloc (`make cost-check`).
    if ffi::db_size(ctx) == 0 {
        return Ok((0, Vec::new()));
    }
    let cursor = cursor.to_string();
    let pattern = [TIMEOUT_PREFIX, b":*"].concat();
    let args: [&[u8]; 7] = [
        cursor.as_bytes(),
        b"MATCH",
        &pattern,
        b"COUNT",
        b"1000",
        b"TYPE",
        b"zset",
    ];
    let unexpected = || RedisError::Str(errors::UNEXPECTED_REPLY);
    let RedisValue::Array(mut parts) = ctx.call("SCAN", &args[..])? else {
        return Err(unexpected());
    };
    let (Some(RedisValue::Array(keys)), Some(next), None) = (parts.pop(), parts.pop(), parts.pop())
    else {
        return Err(unexpected());
    };
    let next = reply_bytes(next)
        .and_then(|text| String::from_utf8(text).ok())
        .and_then(|text| text.parse::<u64>().ok())
        .ok_or_else(unexpected)?;
    let mut locks = Vec::new();
    for key in keys {
        locks.extend(lock_keys_of(
            TIMEOUT_PREFIX,
            &reply_bytes(key).ok_or_else(unexpected)?,
        ));
    }
    Ok((next, locks))
}
