//! Redisson's permit-expiring semaphore (`RPermitExpirableSemaphore`) on its keys: the
//! string `K` of available permits, as for `RSemaphore`, and the zset `{K}:timeout` of
//! leased permits, permit id (16 raw bytes) -> deadline in unix ms, or 922337203685477
//! for a permit without lease. A lease that has ended is taken back (its permit added
//! to `K`) by whoever looks first: Redisson's scripts with their caller's clock, the
//! module with the server's. Written through the key API, replicated as `ZADD`, `ZREM`
//! and `INCRBY`/`DECRBY`.

use redis_module::{Context, NotifyEvent, RedisError, RedisString};

use super::{announce, replicated_write, Semaphore};
use crate::core::keys::permit_leases_key;
use crate::core::semaphore::{earliest_lease_end, PermitId};
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// A permit-expiring semaphore: its permits string and its leases zset, opened once.
pub struct PermitLeases<'a> {
    ctx: &'a Context,
    semaphore: Semaphore<'a>,
    zset_name: RedisString,
    zset: Key,
}

impl<'a> PermitLeases<'a> {
    /// Opens the semaphore `name` and its leases to read and change them: `WRONGTYPE`
    /// unless `K` is a string or missing and `{K}:timeout` a zset or missing.
    pub fn open(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let semaphore = Semaphore::open(ctx, name)?;
        let zset_name = ffi::string(ctx, &permit_leases_key(name.as_slice()));
        let zset = Key::open_writable(ctx, &zset_name);
        Self::checked(ctx, semaphore, zset_name, zset)
    }

    /// Opens them only to read (a read-only command).
    pub fn read(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let semaphore = Semaphore::read(ctx, name)?;
        let zset_name = ffi::string(ctx, &permit_leases_key(name.as_slice()));
        let zset = Key::open_readonly(ctx, &zset_name);
        Self::checked(ctx, semaphore, zset_name, zset)
    }

    fn checked(
        ctx: &'a Context,
        semaphore: Semaphore<'a>,
        zset_name: RedisString,
        zset: Key,
    ) -> Result<Self, RedisError> {
        if !matches!(zset.kind(), KeyKind::Empty | KeyKind::Zset) {
            return Err(errors::wrong_type());
        }
        Ok(PermitLeases {
            ctx,
            semaphore,
            zset_name,
            zset,
        })
    }

    pub fn semaphore(&mut self) -> &mut Semaphore<'a> {
        &mut self.semaphore
    }

    /// Permits available now, counting leases that ended but were not taken back yet.
    pub fn available(&self) -> i64 {
        let ended = self.ended(ffi::now_ms(), usize::MAX).len() as i64;
        self.semaphore.available().saturating_add(ended)
    }

    /// Takes back every lease that ended at or before `now`, as Redisson's scripts do
    /// (the new total published when above zero). The permit ids taken back.
    pub fn reclaim_ended(&mut self, now: i64) -> Vec<Vec<u8>> {
        let ended = self.ended(now, usize::MAX);
        if ended.is_empty() {
            return ended;
        }
        let members: Vec<RedisString> = ended.iter().map(|id| ffi::string(self.ctx, id)).collect();
        for member in &members {
            self.zset.zset_remove(member);
        }
        ffi::replicate_key_args(self.ctx, c"ZREM", &self.zset_name, &members);
        announce(self.ctx, NotifyEvent::ZSET, "zrem", &self.zset_name);
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
        let score = ffi::string(self.ctx, deadline.to_string().as_bytes());
        let mut args = Vec::with_capacity(ids.len() * 2);
        for id in ids {
            let member = ffi::string(self.ctx, &id.0);
            self.zset.zset_add(deadline as f64, &member, false);
            args.push(score.clone());
            args.push(member);
        }
        ffi::replicate_key_args(self.ctx, c"ZADD", &self.zset_name, &args);
        announce(self.ctx, NotifyEvent::ZSET, "zadd", &self.zset_name);
        if let Some(ttl) = self.semaphore.pttl() {
            let ttl = ttl.to_string();
            replicated_write(
                self.ctx,
                "PEXPIRE",
                &[self.zset_name.as_slice(), ttl.as_bytes()],
            );
        }
        true
    }

    /// Gives permit `id` back if it is leased (ended or not, as Redisson's release does),
    /// publishing the new total. `None` when it is not leased; else whether its lease
    /// was still running at `now`.
    pub fn give_back(&mut self, id: &PermitId, now: i64) -> Option<bool> {
        let member = ffi::string(self.ctx, &id.0);
        let deadline = self.zset.zset_score(&member)?;
        self.zset.zset_remove(&member);
        ffi::replicate_key_args(self.ctx, c"ZREM", &self.zset_name, &[member]);
        announce(self.ctx, NotifyEvent::ZSET, "zrem", &self.zset_name);
        self.semaphore.give(1);
        Some(deadline > now as f64)
    }

    /// Moves the end of permit `id`'s lease to `deadline`, if it is leased. Ended leases
    /// are taken back first (see `reclaim_ended`), so an ended one is not renewed.
    pub fn renew(&mut self, id: &PermitId, deadline: i64) -> bool {
        let member = ffi::string(self.ctx, &id.0);
        if !self.zset.zset_add(deadline as f64, &member, true) {
            return false;
        }
        let score = ffi::string(self.ctx, deadline.to_string().as_bytes());
        ffi::replicate_key_args(self.ctx, c"ZADD", &self.zset_name, &[score, member]);
        announce(self.ctx, NotifyEvent::ZSET, "zadd", &self.zset_name);
        true
    }

    /// Whether permit `id` is leased and its lease runs past `now`.
    pub fn is_leased(&self, id: &PermitId, now: i64) -> bool {
        let member = ffi::string(self.ctx, &id.0);
        self.zset
            .zset_score(&member)
            .is_some_and(|deadline| deadline > now as f64)
    }

    /// Whether leases may be written: in a cluster, a missing zset is created only where
    /// the slot allows it (see `store::check_slot_may_grow`): `-TRYAGAIN` while it may be
    /// on its way to another node.
    pub fn check_may_grow(&self) -> Result<(), RedisError> {
        if self.zset.kind() == KeyKind::Empty {
            super::check_slot_may_grow(
                self.ctx,
                self.semaphore.name(),
                &[self.zset_name.as_slice()],
            )?;
        }
        Ok(())
    }

    /// When the earliest lease ends (unix ms), if any lease can end. Scores below 0 are
    /// nobody's deadline: Redisson's reclaim, and the module's, start at 0.
    pub fn earliest_end(&self) -> Option<i64> {
        let lowest = self.zset.zset_range_by_score(0.0, f64::INFINITY, 1);
        earliest_lease_end(lowest.first().map(|(_, score)| *score))
    }

    /// The ids whose lease ended at or before `now` (Redisson's range: scores 0 to now).
    fn ended(&self, now: i64, limit: usize) -> Vec<Vec<u8>> {
        self.zset
            .zset_range_by_score(0.0, now as f64, limit)
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    }
}
