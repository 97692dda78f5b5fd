//! The lock hash `K`: owner -> hold count, the lease as its expiry.

use redis_module::{Context, NotifyEvent, RedisError, RedisString};

use super::{announce, Fence};
use crate::core::args::AcquireOptions;
use crate::core::fences::ReentryToken;
use crate::core::hold::{
    decide_acquire, decide_release, decide_release_all, parse_count, Acquire, LockState, Release,
};
use crate::core::keys::READ_WRITE_MODE_FIELD;
use crate::core::lease::Lease;
use crate::core::rwlock::{RwMode, RwState};
use crate::errors;
use crate::ffi::{self, Key, KeyKind};
use crate::stats;

/// A lock hash, open for the length of one command or callback.
pub struct LockKey<'a> {
    pub(super) ctx: &'a Context,
    pub(super) name: &'a RedisString,
    pub(super) key: Key,
}

/// What a read-write acquire found.
pub enum RwPlanned<'a> {
    Plan(AcquirePlan<'a>),
    Busy,
    /// The owner holds reads and asked to write (see `RwAcquire::OwnReadsBlockWrite`).
    OwnReadsBlockWrite,
}

/// An acquire that was checked and can be written without failing.
pub struct AcquirePlan<'a> {
    pub(super) count: i64,
    /// The fencing counter and the token this hold gets, when fencing is in use.
    pub(super) fence: Option<(Fence<'a>, i64)>,
    /// The fencing token is bumped (a free-to-held transition, or fencing starts now).
    pub(super) bump: bool,
    pub(super) reply_token: bool,
    /// The lock goes from free to held.
    pub(super) first_hold: bool,
    /// The owner had no hold on this side before (not a re-entry).
    pub(super) new_holder: bool,
    /// The owner held nothing on the lock: it waits behind blocked clients.
    pub(super) newcomer: bool,
    /// The side of a read-write lock; `None` for a reentrant lock.
    pub(super) mode: Option<RwMode>,
}

impl AcquirePlan<'_> {
    /// Whether the caller held nothing on the lock: then it waits behind the clients
    /// blocked on it rather than take a share of it ahead of them.
    pub fn is_newcomer(&self) -> bool {
        self.newcomer
    }
}

impl<'a> LockKey<'a> {
    /// Opens the lock `name`; `WRONGTYPE` unless it is a hash or missing.
    pub fn open(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let key = Key::open_writable(ctx, name);
        match key.kind() {
            KeyKind::Empty | KeyKind::Hash => Ok(LockKey { ctx, name, key }),
            _ => Err(errors::wrong_type()),
        }
    }

    pub fn is_held(&self) -> bool {
        self.key.kind() == KeyKind::Hash
    }

    /// The lock as `owner` sees it.
    pub fn state(&self, owner: &RedisString) -> Result<LockState, RedisError> {
        if !self.is_held() {
            return Ok(LockState::Free);
        }
        let own = self
            .key
            .hash_get(owner)
            .map(|stored| parse_count(stored.as_slice()));
        let holders = self.key.value_length();
        // A read-write lock: its read holds would be taken for counts here. It has a
        // `mode` field beside its holders, so a hash of one field that is the owner's
        // count is not one (the common release skips this lookup).
        if holders != 1 || !matches!(own, Some(Ok(_))) {
            if let Some(mode) = self.key.hash_get_c(READ_WRITE_MODE_FIELD) {
                if RwMode::of_word(mode.as_slice()).is_some() {
                    return Err(RedisError::Str(errors::READ_WRITE_LOCK));
                }
            }
        }
        let own_count = own.transpose().map_err(errors::hold_error)?;
        Ok(LockState::Held { own_count, holders })
    }

    /// Whether `owner` holds the lock; with a side, that side of a read-write lock.
    pub fn holds(&self, owner: &RedisString, mode: Option<RwMode>) -> Result<bool, RedisError> {
        let Some(mode) = mode else {
            return self.is_held_by(owner);
        };
        Ok(match self.rw_state(owner.as_slice())? {
            RwState::Free => false,
            RwState::Held {
                own_reads,
                own_writes,
                ..
            } => match mode {
                RwMode::Read => own_reads.is_some(),
                RwMode::Write => own_writes.is_some(),
            },
        })
    }

    /// Whether `owner` holds the lock at this moment (with a side, that side of a
    /// read-write lock). The lease is the key's expiry, compared with the clock of this
    /// call, not left to the module's timers: opening the key looks it up as every
    /// command does, and a key past its expiry opens as missing (the server deletes it
    /// then, or, while writes are paused, only hides it), even when no timer has run
    /// since (a `DEBUG SLEEP`, a busy server). module-tests/tests/guard.rs checks it.
    pub fn holds_now(&self, owner: &RedisString, mode: Option<RwMode>) -> Result<bool, RedisError> {
        match mode {
            Some(side) => self.holds_side_now(owner, side),
            None => self.is_held_by(owner),
        }
    }

    /// Whether `owner` holds the lock.
    pub fn is_held_by(&self, owner: &RedisString) -> Result<bool, RedisError> {
        Ok(matches!(
            self.state(owner)?,
            LockState::Held {
                own_count: Some(_),
                ..
            }
        ))
    }

    /// Checks an acquire by `owner` without writing: `None` when someone else holds
    /// the lock. Every error a write could meet is met here. With `READ` or `WRITE`,
    /// an acquire of that side of a read-write lock.
    pub fn plan_acquire(
        &self,
        owner: &RedisString,
        options: &AcquireOptions,
    ) -> Result<Option<AcquirePlan<'a>>, RedisError> {
        if let Some(mode) = options.mode {
            return Ok(match self.plan_rw_acquire(owner, mode, options)? {
                RwPlanned::Plan(plan) => Some(plan),
                RwPlanned::Busy | RwPlanned::OwnReadsBlockWrite => None,
            });
        }
        let decision = decide_acquire(self.state(owner)?).map_err(errors::hold_error)?;
        let plan = match decision {
            Acquire::Busy => return Ok(None),
            Acquire::Take => {
                // Once fencing is in use on a lock, every free-to-held transition bumps
                // the counter, so the counter always names the current hold.
                let fence = if options.token || Fence::in_use(self.ctx, self.name) {
                    let fence = Fence::open(self.ctx, self.name)?;
                    // A counter remembered but since deleted is not recreated unasked.
                    if options.token || fence.exists() {
                        let next = fence.next()?;
                        Some((fence, next))
                    } else {
                        None
                    }
                } else {
                    None
                };
                AcquirePlan {
                    count: 1,
                    bump: fence.is_some(),
                    fence,
                    reply_token: options.token,
                    first_hold: true,
                    new_holder: true,
                    newcomer: true,
                    mode: None,
                }
            }
            Acquire::Reenter { count } => {
                let (fence, bump) = if options.token {
                    let fence = Fence::open(self.ctx, self.name)?;
                    match fence.reentry_token(owner) {
                        ReentryToken::Same(token) => (Some((fence, token)), false),
                        // Taken before fencing was in use, or the counter's value went
                        // (or may have gone) to someone else: a new token.
                        ReentryToken::Next => {
                            let next = fence.next()?;
                            (Some((fence, next)), true)
                        }
                    }
                } else {
                    (None, false)
                };
                AcquirePlan {
                    count,
                    fence,
                    bump,
                    reply_token: options.token,
                    first_hold: false,
                    new_holder: false,
                    newcomer: false,
                    mode: None,
                }
            }
        };
        Ok(Some(plan))
    }

    /// Writes a checked acquire with `lease`. Returns the reply: the hold count, or
    /// the fencing token when the caller asked for it.
    pub fn commit_acquire(&self, owner: &RedisString, plan: AcquirePlan, lease: Lease) -> i64 {
        let token = plan.fence.map(|(mut fence, token)| {
            if plan.bump {
                fence.store(token, owner);
            }
            token
        });
        if plan.new_holder {
            stats::ACQUIRES.incr();
        } else {
            stats::REENTRIES.incr();
        }
        match plan.mode {
            None => {
                self.set_count(owner, plan.count);
                self.set_deadline(lease.deadline_from(ffi::now_ms()));
            }
            Some(mode) => {
                match mode {
                    RwMode::Read => stats::READ_ACQUIRES.incr(),
                    RwMode::Write => stats::WRITE_ACQUIRES.incr(),
                }
                self.commit_rw_acquire(owner, mode, plan.count, plan.first_hold, lease);
            }
        }
        match (plan.reply_token, token) {
            (true, Some(token)) => token,
            _ => plan.count,
        }
    }

    /// Gives back one of `owner`'s holds, or every one when `all`.
    pub fn release(&self, owner: &RedisString, all: bool) -> Result<Release, RedisError> {
        let state = self.state(owner)?;
        let release = if all {
            decide_release_all(state)
        } else {
            decide_release(state)
        };
        match release {
            Release::NotHeld => {}
            Release::Undo { remaining } => self.set_count(owner, remaining),
            Release::Last { lock_freed: true } => self.delete(),
            Release::Last { lock_freed: false } => self.remove_owner(owner),
        }
        Ok(release)
    }

    /// Resets the lease of a lock `owner` holds. False when it does not hold it.
    pub fn renew(&self, owner: &RedisString, lease: Lease) -> Result<bool, RedisError> {
        if !self.is_held_by(owner)? {
            return Ok(false);
        }
        self.set_deadline(lease.deadline_from(ffi::now_ms()));
        Ok(true)
    }

    /// Deletes the lock whoever holds it. False when it was free.
    pub fn force_release(&self) -> bool {
        if !self.is_held() {
            return false;
        }
        self.delete();
        stats::FORCE_RELEASES.incr();
        true
    }

    pub(super) fn set_count(&self, owner: &RedisString, count: i64) {
        self.key.hash_set_int(self.ctx, owner, count);
        ffi::replicate_key_field_int(self.ctx, c"HSET", self.name, owner, count);
        announce(self.ctx, NotifyEvent::HASH, "hset", self.name);
    }

    pub(super) fn set_deadline(&self, deadline_ms: i64) {
        self.key.set_abs_expire(deadline_ms);
        ffi::replicate_key_int(self.ctx, c"PEXPIREAT", self.name, deadline_ms);
        announce(self.ctx, NotifyEvent::GENERIC, "expire", self.name);
    }

    /// Drops one owner's field from a hash that other owners share.
    pub(super) fn remove_owner(&self, owner: &RedisString) {
        self.key.hash_del(owner);
        ffi::replicate_key_field(self.ctx, c"HDEL", self.name, owner);
        announce(self.ctx, NotifyEvent::HASH, "hdel", self.name);
    }

    /// Deletes the lock. The caller tells Redisson-style waiters, unless a client
    /// blocked here takes it at once (see `handoff::freed_key`).
    pub(super) fn delete(&self) {
        self.key.delete();
        ffi::replicate_key(self.ctx, c"DEL", self.name);
        announce(self.ctx, NotifyEvent::GENERIC, "del", self.name);
    }
}
