//! A read-write lock in Redisson's `RReadWriteLock` layout: the hash `K` with its
//! `mode` field, readers' `owner` and the writer's `owner:write` counts, one string
//! key per read hold (`suffix(K, owner):rwlock_timeout:n`, value `1`, TTL = that
//! hold's lease), `K`'s expiry the longest of them (or the writer's lease), and the
//! channel `redisson_rwlock:{K}`.

use std::cell::RefCell;

use redis_module::{Context, NotifyEvent, RedisError, RedisString, RedisValue};

use super::lock::{AcquirePlan, LockKey, RwPlanned};
use super::{announce, helper_string, reply_bytes, Fence};
use crate::config;
use crate::core::args::AcquireOptions;
use crate::core::fences::ReentryToken;
use crate::core::hold::parse_count;
use crate::core::integer::parse_i64;
use crate::core::keys::{write_read_timeout_key, READ_WRITE_MODE_FIELD, RW_CHANNEL_PREFIX};
use crate::core::lease::Lease;
use crate::core::rwlock::{
    decide_rw_acquire, decide_rw_release, field_hold, hold_field, is_newcomer, settle, RwAcquire,
    RwMode, RwRelease, RwState, Settle,
};
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// Read holds past this many per owner are not looked at one by one: a count that
/// large was not made by re-entries, and reading it must not stall the server.
const MAX_READ_HOLDS_SCANNED: i64 = 10_000;

/// What a read-write release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RwReleased {
    pub release: RwRelease,
    /// The lock is free now; its unlock message is that side's.
    pub freed_by: Option<RwMode>,
}

impl<'a> LockKey<'a> {
    /// The read-write lock's mode, `None` while free; `WRONGTYPE` for a reentrant lock.
    pub fn rw_mode(&self) -> Result<Option<RwMode>, RedisError> {
        if !self.is_held() {
            return Ok(None);
        }
        self.key
            .hash_get_c(READ_WRITE_MODE_FIELD)
            .and_then(|mode| RwMode::of_word(mode.as_slice()))
            .map(Some)
            .ok_or(RedisError::Str(errors::REENTRANT_LOCK))
    }

    /// The read-write lock as `owner` sees it.
    pub fn rw_state(&self, owner: &[u8]) -> Result<RwState, RedisError> {
        let Some(mode) = self.rw_mode()? else {
            return Ok(RwState::Free);
        };
        Ok(RwState::Held {
            mode,
            own_reads: self.count_of(&hold_field(owner, RwMode::Read))?,
            own_writes: self.count_of(&hold_field(owner, RwMode::Write))?,
            fields: self.key.value_length().saturating_sub(1),
        })
    }

    fn count_of(&self, field: &[u8]) -> Result<Option<i64>, RedisError> {
        let field = ffi::string(self.ctx, field);
        match self.key.hash_get(&field) {
            Some(stored) => Ok(Some(
                parse_count(stored.as_slice()).map_err(errors::hold_error)?,
            )),
            None => Ok(None),
        }
    }

    /// Checks an acquire of `mode` by `owner` without writing. Every error a write
    /// could meet is met here.
    pub fn plan_rw_acquire(
        &self,
        owner: &RedisString,
        mode: RwMode,
        options: &AcquireOptions,
    ) -> Result<RwPlanned<'a>, RedisError> {
        let state = self.rw_state(owner.as_slice())?;
        let decision = decide_rw_acquire(state, mode).map_err(errors::hold_error)?;
        let newcomer = is_newcomer(state, decision);
        let (count, first_hold, reentry) = match decision {
            RwAcquire::Busy => return Ok(RwPlanned::Busy),
            RwAcquire::OwnReadsBlockWrite => return Ok(RwPlanned::OwnReadsBlockWrite),
            RwAcquire::Take => (1, true, false),
            RwAcquire::Join { count } => (count, false, false),
            RwAcquire::Reenter { count } => (count, false, true),
        };
        // Fencing: each free-to-held transition bumps the counter, as for a reentrant
        // lock. A hold added beside others (a reader joining readers) shares the
        // current token; a re-entry keeps its own.
        let in_use = options.token || Fence::in_use(self.ctx, self.name);
        let (fence, bump) = match (in_use, first_hold) {
            (false, _) => (None, false),
            (true, true) => {
                let fence = Fence::open(self.ctx, self.name)?;
                if options.token || fence.exists() {
                    let next = fence.next()?;
                    (Some((fence, next)), true)
                } else {
                    (None, false)
                }
            }
            (true, false) if !options.token => (None, false),
            (true, false) => {
                let fence = Fence::open(self.ctx, self.name)?;
                let current = match (reentry, fence.reentry_token(owner)) {
                    (true, ReentryToken::Same(token)) => Some(token),
                    (false, _) => fence.current(),
                    (true, ReentryToken::Next) => None,
                };
                match current {
                    Some(token) => (Some((fence, token)), false),
                    None => {
                        let next = fence.next()?;
                        (Some((fence, next)), true)
                    }
                }
            }
        };
        Ok(RwPlanned::Plan(AcquirePlan {
            count,
            bump,
            fence,
            reply_token: options.token,
            first_hold,
            new_holder: !reentry,
            newcomer,
            mode: Some(mode),
        }))
    }

    /// Writes a checked read-write acquire: the hold's count, `mode` when the lock was
    /// free, a read hold's timeout key, and `K`'s expiry, never below a hold still alive.
    pub(super) fn commit_rw_acquire(
        &self,
        owner: &RedisString,
        mode: RwMode,
        count: i64,
        first_hold: bool,
        lease: Lease,
    ) {
        let now = ffi::now_ms();
        let deadline = lease.deadline_from(now);
        let field = ffi::string(self.ctx, &hold_field(owner.as_slice(), mode));
        if first_hold {
            self.set_mode_and_count(mode, &field, count);
        } else {
            self.set_count(&field, count);
        }
        if mode == RwMode::Read {
            set_read_timeout(
                self.ctx,
                self.name.as_slice(),
                owner.as_slice(),
                count,
                deadline,
            );
        }
        // Holds beside this one (readers, or the writer's own reads) keep theirs.
        let others = self.key.value_length() > 2;
        let deadline = match self.abs_deadline() {
            Some(current) if mode == RwMode::Read || others => current.max(deadline),
            _ => deadline,
        };
        self.set_deadline(deadline);
    }

    /// Gives back `owner`'s hold on side `side`: one, or every one when `all`. A
    /// write-mode lock the writer left, but whose read holds remain, turns `read`.
    pub fn release_rw(
        &self,
        owner: &[u8],
        side: RwMode,
        all: bool,
    ) -> Result<RwReleased, RedisError> {
        let state = self.rw_state(owner)?;
        let release = decide_rw_release(state, side, all);
        let RwState::Held { mode, .. } = state else {
            return Ok(RwReleased {
                release,
                freed_by: None,
            });
        };
        let field = ffi::string(self.ctx, &hold_field(owner, side));
        let (remaining, released) = match release {
            RwRelease::NotHeld => {
                return Ok(RwReleased {
                    release,
                    freed_by: None,
                })
            }
            RwRelease::Undo {
                remaining,
                released,
            } => {
                self.set_count(&field, remaining);
                (remaining, released)
            }
            // The field goes below, unless the whole key does.
            RwRelease::Last { released } => (0, released),
        };
        if side == RwMode::Read {
            for n in remaining + 1..=(remaining + released).min(MAX_READ_HOLDS_SCANNED) {
                delete_read_timeout(self.ctx, self.name.as_slice(), owner, n);
            }
        }
        let writer_left = mode == RwMode::Write && !(side == RwMode::Write && remaining == 0);
        // Holds' fields left beside `mode` once this one's is gone.
        let last = matches!(release, RwRelease::Last { .. });
        let fields = self
            .key
            .value_length()
            .saturating_sub(1 + usize::from(last));
        // Freed with nothing left: one DEL, not an HDEL before it.
        if last && (writer_left || fields > 0) {
            self.remove_owner(&field);
        }
        let read_deadline = match writer_left || fields == 0 {
            true => None,
            false => self.latest_read_deadline()?,
        };
        let freed_by = match settle(side, writer_left, fields, read_deadline) {
            Settle::Keep { deadline } => {
                if mode == RwMode::Write && !writer_left {
                    self.set_mode(RwMode::Read);
                }
                if let Some(deadline) = deadline {
                    self.set_deadline(deadline);
                }
                None
            }
            Settle::Free { freed_by } => {
                self.delete();
                Some(freed_by)
            }
        };
        Ok(RwReleased { release, freed_by })
    }

    /// Resets the lease of `owner`'s holds on side `side`: every read hold's timeout
    /// key (as Redisson's renewal does), or the writer's. False when it holds none.
    pub fn renew_rw(
        &self,
        owner: &RedisString,
        side: RwMode,
        lease: Lease,
    ) -> Result<bool, RedisError> {
        let RwState::Held {
            own_reads,
            own_writes,
            fields,
            ..
        } = self.rw_state(owner.as_slice())?
        else {
            return Ok(false);
        };
        let deadline = lease.deadline_from(ffi::now_ms());
        match (side, own_reads, own_writes) {
            (RwMode::Read, Some(count), _) => {
                let mut renewed = count > MAX_READ_HOLDS_SCANNED;
                for n in 1..=count.min(MAX_READ_HOLDS_SCANNED) {
                    renewed |= renew_read_timeout(
                        self.ctx,
                        self.name.as_slice(),
                        owner.as_slice(),
                        n,
                        deadline,
                    );
                }
                // Every read hold's lease had run out (the server was busy past its
                // deadline, so its timer had not yet run): nothing is renewed, and a reply of
                // 1 would tell the owner it still reads while a writer may take the lock.
                if !renewed {
                    return Ok(false);
                }
                let current = self.abs_deadline().unwrap_or(deadline);
                self.set_deadline(current.max(deadline));
            }
            (RwMode::Write, _, Some(_)) => {
                let deadline = match self.abs_deadline() {
                    Some(current) if fields > 1 => current.max(deadline),
                    _ => deadline,
                };
                self.set_deadline(deadline);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether `owner` holds side `side` now: for reads, one of its read holds' lease keys
    /// is alive (a read hold whose own lease ran out no longer counts, whatever `K`'s
    /// expiry says while another reader keeps it).
    pub fn holds_side_now(&self, owner: &RedisString, side: RwMode) -> Result<bool, RedisError> {
        let RwState::Held {
            own_reads,
            own_writes,
            ..
        } = self.rw_state(owner.as_slice())?
        else {
            return Ok(false);
        };
        Ok(match (side, own_reads, own_writes) {
            (RwMode::Read, Some(count), _) => {
                count > MAX_READ_HOLDS_SCANNED
                    || (1..=count).any(|n| {
                        let name =
                            read_timeout_name(self.ctx, self.name.as_slice(), owner.as_slice(), n);
                        lease_alive(&Key::open_readonly(self.ctx, &name))
                    })
            }
            (RwMode::Write, _, Some(_)) => true,
            _ => false,
        })
    }

    /// Releases the hold a session or an undelivered grant recorded by its hash field:
    /// a read-write lock's `owner` or `owner:write`, else a reentrant lock's owner.
    pub fn release_field(
        &self,
        field: &RedisString,
        all: bool,
    ) -> Result<ReleasedHold, RedisError> {
        if let Ok(Some(_)) = self.rw_mode() {
            let (owner, side) = field_hold(field.as_slice());
            let released = self.release_rw(owner, side, all)?;
            return Ok(ReleasedHold {
                held: released.release != RwRelease::NotHeld,
                last: matches!(released.release, RwRelease::Last { .. }),
                freed_by: released.freed_by.map(Unlock::ReadWrite),
            });
        }
        let release = self.release(field, all)?;
        Ok(ReleasedHold {
            held: release != crate::core::hold::Release::NotHeld,
            last: matches!(release, crate::core::hold::Release::Last { .. }),
            freed_by: (release == crate::core::hold::Release::Last { lock_freed: true })
                .then_some(Unlock::Lock),
        })
    }

    fn set_mode(&self, mode: RwMode) {
        ffi::with_constant(READ_WRITE_MODE_FIELD.to_bytes(), |field| {
            ffi::with_constant(mode.word(), |value| {
                self.key.hash_set(field, value);
                ffi::replicate_key_field_value(self.ctx, c"HSET", self.name, field, value);
            })
        });
        announce(self.ctx, NotifyEvent::HASH, "hset", self.name);
    }

    /// A first hold: `mode` and the holder's count, in one `HSET` sent to replicas.
    fn set_mode_and_count(&self, mode: RwMode, holder: &RedisString, count: i64) {
        ffi::with_constant(READ_WRITE_MODE_FIELD.to_bytes(), |field| {
            ffi::with_constant(mode.word(), |value| {
                self.key.hash_set(field, value);
                self.key.hash_set_int(self.ctx, holder, count);
                let pair = (field, value);
                ffi::replicate_key_two_fields(self.ctx, c"HSET", self.name, pair, (holder, count));
            })
        });
        announce(self.ctx, NotifyEvent::HASH, "hset", self.name);
    }

    /// `K`'s expiry as a unix-ms time, if it has one.
    fn abs_deadline(&self) -> Option<i64> {
        match self.key.pttl() {
            ttl if ttl >= 0 => Some(ffi::now_ms() + ttl),
            _ => None,
        }
    }

    /// The latest deadline among the read holds whose timeout key is alive.
    fn latest_read_deadline(&self) -> Result<Option<i64>, RedisError> {
        let now = ffi::now_ms();
        let mut latest = None;
        let RedisValue::Array(flat) = self.ctx.call("HGETALL", &[self.name.as_slice()])? else {
            return Ok(None);
        };
        let mut flat = flat.into_iter();
        while let (Some(field), Some(count)) = (flat.next(), flat.next()) {
            let (Some(field), Some(count)) = (reply_bytes(field), reply_bytes(count)) else {
                continue;
            };
            let (owner, side) = field_hold(&field);
            let Some(count) = parse_i64(&count) else {
                continue; // `mode`, or a field that is not ours.
            };
            if side == RwMode::Write || field == READ_WRITE_MODE_FIELD.to_bytes() {
                continue;
            }
            if count > MAX_READ_HOLDS_SCANNED {
                // Not looked at: taken as alive as long as the lock.
                latest = latest.max(self.abs_deadline());
                continue;
            }
            for n in 1..=count {
                let name = read_timeout_name(self.ctx, self.name.as_slice(), owner, n);
                let timeout = Key::open_readonly(self.ctx, &name);
                let ttl = timeout.pttl();
                if ttl > 0 {
                    latest = latest.max(Some(now + ttl));
                } else if timeout.kind() == KeyKind::Empty
                    && ffi::in_cluster(self.ctx)
                    && !super::slot_stable_here(self.ctx, self.name.as_slice(), &[name.as_slice()])
                {
                    // Not lapsed: moved away with a slot being migrated (classic `MIGRATE`
                    // moves a lock's keys one by one). The hold lives on; nothing frees the
                    // lock here for it.
                    latest = latest.max(self.abs_deadline());
                }
            }
        }
        Ok(latest)
    }
}

/// Who a lock freed by the module tells, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unlock {
    /// A reentrant lock: `0` on `redisson_lock__channel:{K}`.
    Lock,
    /// A read-write lock: that side's message on `redisson_rwlock:{K}`.
    ReadWrite(RwMode),
}

/// What releasing a recorded hold did.
pub struct ReleasedHold {
    pub held: bool,
    /// The owner's last hold on the key (on that side) went: not an undone re-entry.
    pub last: bool,
    pub freed_by: Option<Unlock>,
}

/// `PUBLISH redisson_rwlock:{K} message`, unless `rlock.publish` is off.
pub(super) fn publish_rw_unlock(ctx: &Context, lock_name: &[u8], freed_by: RwMode) {
    if !config::publish() {
        return;
    }
    let channel = helper_string(ctx, RW_CHANNEL_PREFIX, lock_name);
    ffi::with_constant(freed_by.unlock_message(), |message| {
        ffi::publish(ctx, &channel, message)
    });
}

fn read_timeout_name(ctx: &Context, lock_name: &[u8], owner: &[u8], n: i64) -> RedisString {
    thread_local! {
        static NAME: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    NAME.with(|name| {
        let mut name = name.borrow_mut();
        write_read_timeout_key(&mut name, lock_name, owner, n);
        ffi::string(ctx, &name)
    })
}

/// `SET suffix(K, owner):rwlock_timeout:n 1 PXAT deadline`.
fn set_read_timeout(ctx: &Context, lock_name: &[u8], owner: &[u8], n: i64, deadline: i64) {
    let name = read_timeout_name(ctx, lock_name, owner, n);
    let key = Key::open_writable(ctx, &name);
    // A value of its own: on Redis 7.0 the key keeps the string it is given, and the
    // shared "1" kept there had its reference count raced by `FLUSHALL ASYNC`'s thread.
    key.string_set_int(ctx, 1);
    ffi::with_constant(b"1", |one| {
        key.set_abs_expire(deadline);
        drop(key);
        ffi::replicate_set_pxat(ctx, &name, one, deadline);
    });
    announce(ctx, NotifyEvent::STRING, "set", &name);
}

fn delete_read_timeout(ctx: &Context, lock_name: &[u8], owner: &[u8], n: i64) {
    let name = read_timeout_name(ctx, lock_name, owner, n);
    let key = Key::open_writable(ctx, &name);
    if key.kind() == KeyKind::Empty {
        return;
    }
    key.delete();
    drop(key);
    ffi::replicate_key(ctx, c"DEL", &name);
    announce(ctx, NotifyEvent::GENERIC, "del", &name);
}

/// `PEXPIREAT` on a read hold's timeout key, if it is still there (whether it was).
fn renew_read_timeout(
    ctx: &Context,
    lock_name: &[u8],
    owner: &[u8],
    n: i64,
    deadline: i64,
) -> bool {
    let name = read_timeout_name(ctx, lock_name, owner, n);
    let key = Key::open_writable(ctx, &name);
    if key.kind() == KeyKind::Empty {
        return false;
    }
    key.set_abs_expire(deadline);
    drop(key);
    ffi::replicate_key_int(ctx, c"PEXPIREAT", &name, deadline);
    announce(ctx, NotifyEvent::GENERIC, "expire", &name);
    true
}

/// Whether a read hold's lease key is there and its lease not over by the clock now.
fn lease_alive(key: &Key) -> bool {
    !matches!(key.pttl(), -2 | 0)
}
