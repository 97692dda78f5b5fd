//! The fair queue on Redisson's keys: `redisson_lock_queue:{K}` (owners in arrival
//! order) and `redisson_lock_timeout:{K}` (owner -> absolute deadline). Queue
//! writes go through `RedisModule_Call` with replication, so they reach replicas
//! and the AOF as the plain list and zset commands Redisson itself sends.

use std::cell::RefCell;
use std::collections::HashSet;

use redis_module::{
    CallOptions, CallOptionsBuilder, CallResult, Context, RedisError, RedisResult, RedisValue,
};

use crate::commands::acquire::try_acquire;
use crate::core::args::AcquireOptions;
use crate::core::fair::{
    blocked_score, decide_fair_acquire, on_expired, queue_deadline, Expired, FairAcquire,
};
use crate::core::keys::{helper_key, wake_channel, QUEUE_PREFIX, TIMEOUT_PREFIX};
use crate::core::waitlist::LockId;
use crate::ffi::{self, Key, KeyKind};
use crate::store::{reply_bytes, LockKey, WRONGTYPE};
use crate::{config, events, sessions, timers, waiters};

thread_local! {
    /// Locks whose queue this module has written to and still watches.
    static TRACKED: RefCell<HashSet<LockId>> = RefCell::new(HashSet::new());
}

pub fn is_tracked(lock: &LockId) -> bool {
    TRACKED.with(|t| t.borrow().contains(lock))
}

/// Marks `lock` as having a fair queue, which its releases must serve.
pub fn track(lock: &LockId) {
    TRACKED.with(|t| t.borrow_mut().insert(lock.clone()));
}

pub fn untrack(lock: &LockId) {
    TRACKED.with(|t| t.borrow_mut().remove(lock));
}

pub fn untrack_all() {
    TRACKED.with(|t| t.borrow_mut().clear());
}

pub fn tracked_none() -> bool {
    TRACKED.with(|t| t.borrow().is_empty())
}

pub fn tracked() -> Vec<LockId> {
    TRACKED.with(|t| t.borrow().iter().cloned().collect())
}

/// The two queue keys of one lock, checked to be a list and a zset (or absent).
pub struct FairQueue<'a> {
    ctx: &'a Context,
    lock_key: Vec<u8>,
    list: Vec<u8>,
    zset: Vec<u8>,
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
            return Err(RedisError::Str(WRONGTYPE));
        }
        Ok(FairQueue {
            ctx,
            lock_key: lock_key.to_vec(),
            list,
            zset,
        })
    }

    pub fn head(&self) -> Option<Vec<u8>> {
        let reply = self.ctx.call("LINDEX", &[&self.list[..], b"0"]).ok()?;
        reply_bytes(reply)
    }

    pub fn deadline_of(&self, owner: &[u8]) -> Option<i64> {
        let reply = self.ctx.call("ZSCORE", &[&self.zset[..], owner]).ok()?;
        let score = reply_bytes(reply)?;
        std::str::from_utf8(&score)
            .ok()?
            .parse::<f64>()
            .ok()
            .map(|s| s as i64)
    }

    /// Entries whose deadline is at or before `now_ms`.
    pub fn expired(&self, now_ms: i64) -> Vec<Vec<u8>> {
        let now = now_ms.to_string();
        match self
            .ctx
            .call("ZRANGEBYSCORE", &[&self.zset[..], b"-inf", now.as_bytes()])
        {
            Ok(RedisValue::Array(owners)) => owners.into_iter().filter_map(reply_bytes).collect(),
            _ => Vec::new(),
        }
    }

    pub fn push(&self, owner: &[u8], deadline: i64) -> Result<(), RedisError> {
        let score = deadline.to_string();
        self.write("ZADD", &[&self.zset[..], score.as_bytes(), owner])?;
        self.write("RPUSH", &[&self.list[..], owner])
    }

    pub fn set_deadline(&self, owner: &[u8], deadline: i64) -> Result<(), RedisError> {
        let score = deadline.to_string();
        self.write("ZADD", &[&self.zset[..], b"XX", score.as_bytes(), owner])
    }

    /// Takes `owner` out of the queue: O(1) at the head, O(n) from mid-queue.
    pub fn remove(&self, owner: &[u8], at_head: bool) -> Result<(), RedisError> {
        self.write("ZREM", &[&self.zset[..], owner])?;
        if at_head {
            self.write("LPOP", &[&self.list[..]])
        } else {
            self.write("LREM", &[&self.list[..], b"1", owner])
        }
    }

    /// `PUBLISH redisson_lock__channel:{K}:<owner> 0`: the lock is free, your turn.
    pub fn wake(&self, owner: &[u8]) {
        if config::publish() {
            let channel = ffi::string(self.ctx, &wake_channel(&self.lock_key, owner));
            ffi::publish_zero(self.ctx, &channel);
        }
    }

    fn write(&self, command: &str, args: &[&[u8]]) -> Result<(), RedisError> {
        thread_local! {
            static REPLICATED: CallOptions = CallOptionsBuilder::new().replicate().build();
        }
        let mut result: Option<CallResult> = None;
        events::own_write(|| {
            result = Some(REPLICATED.with(|options| self.ctx.call_ext(command, options, args)));
        });
        let result = result.expect("own_write runs its closure");
        result.map(|_| ()).map_err(|e| {
            RedisError::String(
                e.to_utf8_string()
                    .unwrap_or_else(|| "ERR queue write failed".into()),
            )
        })
    }
}

/// Drops entries whose deadline has passed, except those of waiters still
/// blocked here, whose real deadline is put back.
fn purge(queue: &FairQueue, lock: &LockId, now_ms: i64) -> Result<(), RedisError> {
    let expired = queue.expired(now_ms);
    if expired.is_empty() {
        return Ok(());
    }
    let mut head = queue.head();
    for owner in expired {
        let blocked = waiters::blocked_deadline(lock, &owner);
        match on_expired(blocked, now_ms, config::fair_wait_ms()) {
            Expired::Restore(deadline) => queue.set_deadline(&owner, deadline)?,
            Expired::Purge => {
                let at_head = head.as_deref() == Some(&owner[..]);
                queue.remove(&owner, at_head)?;
                if at_head {
                    head = queue.head();
                }
            }
        }
    }
    Ok(())
}

/// `RLOCK.ACQUIRE key owner FAIR [...]`.
pub fn acquire(
    ctx: &Context,
    key: &redis_module::RedisString,
    owner: &redis_module::RedisString,
    options: &AcquireOptions,
) -> RedisResult {
    let lock = waiters::lock_id(ctx, key);
    let queue = FairQueue::open(ctx, key.as_slice())?;
    let state = LockKey::open(ctx, key)?
        .state(owner)
        .map_err(crate::commands::hold_error)?;
    let now = ffi::now_ms();
    purge(&queue, &lock, now)?;
    let decision = decide_fair_acquire(state, queue.head().as_deref(), owner.as_slice())
        .map_err(crate::commands::hold_error)?;
    match decision {
        FairAcquire::Take { .. } | FairAcquire::Reenter { .. } => {
            let reply = try_acquire(ctx, key, owner, options)?;
            if let FairAcquire::Take { from_head: true } = decision {
                queue.remove(owner.as_slice(), true)?;
            }
            if options.session {
                sessions::record(ffi::client_id(ctx), lock.clone(), owner.as_slice().to_vec());
            }
            timers::watch(ctx, &lock);
            Ok(reply)
        }
        FairAcquire::Queue => {
            let blocking = options.block.filter(|_| waiters::may_block(ctx));
            let deadline = queue_deadline(now, blocking, config::fair_wait_ms());
            let score = blocked_score(now, deadline, config::fair_wait_ms());
            if queue.deadline_of(owner.as_slice()).is_some() {
                queue.set_deadline(owner.as_slice(), score)?;
            } else {
                queue.push(owner.as_slice(), score)?;
            }
            track(&lock);
            let reply = match blocking {
                Some(wait) => waiters::block(ctx, lock.clone(), owner, *options, wait, deadline),
                None => Ok(RedisValue::Null),
            };
            // A free lock whose head is waiting elsewhere gets its head woken.
            if LockKey::open(ctx, key).is_ok_and(|l| !l.is_held()) {
                waiters::serve(ctx, &lock);
            } else {
                timers::watch(ctx, &lock);
            }
            reply
        }
    }
}

/// Hands a free fair lock to its queue's head: a waiter blocked here gets it now;
/// a polling one (rlock or Redisson) is woken on its channel and keeps the turn
/// until its deadline. Returns false when the queue is empty, so plain waiters go.
pub fn serve(ctx: &Context, lock: &LockId) -> bool {
    let Ok(queue) = FairQueue::open(ctx, &lock.key) else {
        return false; // Not a queue: plain waiters are served.
    };
    let key = ffi::string(ctx, &lock.key);
    loop {
        if purge(&queue, lock, ffi::now_ms()).is_err() {
            return true;
        }
        match LockKey::open(ctx, &key) {
            Ok(lock_key) if !lock_key.is_held() => {}
            _ => return true,
        }
        let Some(head) = queue.head() else {
            untrack(lock);
            return false;
        };
        if !waiters::grant_to_owner(ctx, lock, &head, |_| queue.remove(&head, true)) {
            queue.wake(&head);
            return true;
        }
    }
}

/// A blocked fair waiter left (timeout, disconnect, unblock): its entry goes.
pub fn leave(ctx: &Context, lock: &LockId, owner: &[u8]) {
    if waiters::blocked_deadline(lock, owner).is_some() {
        return; // The same owner waits on another connection: keep the place.
    }
    let Ok(queue) = FairQueue::open(ctx, &lock.key) else {
        return;
    };
    let at_head = queue.head().as_deref() == Some(owner);
    if queue.deadline_of(owner).is_some() && queue.remove(owner, at_head).is_ok() && at_head {
        waiters::serve(ctx, lock);
    }
}

/// Someone else removed entries from `lock`'s deadline zset (a Redisson client
/// purges what its own re-scoring made look stale). Waiters still blocked here
/// that lost their entry go back in line, at the tail, in their arrival order.
pub fn requeue_missing(ctx: &Context, lock: &LockId) {
    let Ok(queue) = FairQueue::open(ctx, &lock.key) else {
        return;
    };
    let now = ffi::now_ms();
    for (owner, deadline) in waiters::fair_waiters(lock) {
        if queue.deadline_of(&owner).is_none() {
            let score = blocked_score(now, deadline, config::fair_wait_ms());
            if queue.push(&owner, score).is_err() {
                return;
            }
            track(lock);
        }
    }
    waiters::serve(ctx, lock);
}
