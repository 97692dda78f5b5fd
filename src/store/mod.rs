//! The only code that knows the key layout: the lock hash, the fair queue's list
//! and deadline zset, the fencing counter and the pub/sub channels, all as
//! Redisson lays them out. Callers speak in verbs (acquire, release, enqueue,
//! dequeue, wake); nothing outside this folder names a key or sends `RM_Call`.
//!
//! Every write is replicated as a plain command with absolute times (`HSET`,
//! `HDEL`, `DEL`, `PEXPIREAT`, `SET`, `RPUSH`, `ZADD`, ...), so a replica or an
//! AOF replays it without the module, and is announced with the keyspace event the
//! plain command would have raised.

mod fence;
mod holders;
mod latch;
mod leases;
mod lock;
mod multi;
mod queue;
mod report;
mod request;
mod rwlock;
mod scan;
mod semaphore;

use std::cell::RefCell;

use redis_module::{
    CallOptions, CallOptionsBuilder, CallReply, CallResult, Context, NotifyEvent, RedisError,
    RedisString, RedisValue,
};

pub use fence::Fence;
pub use holders::holding_owners;
pub use latch::Latch;
pub use leases::PermitLeases;
pub use lock::{AcquirePlan, LockKey, RwPlanned};
pub use multi::{holds_all, release_all, take_all, TakeAll};
pub use queue::{find_queues, FairQueue};
pub use report::{read_report, LockReport};
pub use request::RequestRecord;
pub use rwlock::{ReleasedHold, RwReleased, Unlock};
pub use scan::{scan_locks, ScannedLock};
pub use semaphore::Semaphore;

use crate::config;
use crate::core::cluster::{key_slot, route, SlotRoute};
use crate::core::keys::{
    helper_key, lock_keys_of, write_helper_key, CHANNEL_PREFIX, TIMEOUT_PREFIX, TOKEN_PREFIX,
};
use crate::core::waitlist::LockId;
use crate::errors;
use crate::ffi::{self, Key};
use crate::state;

/// The lock named `lock_name` in the current database.
pub fn lock_id(ctx: &Context, lock_name: &RedisString) -> LockId {
    LockId {
        db: ffi::selected_db(ctx),
        key: lock_name.as_slice().to_vec(),
    }
}

/// What a key is to the module, told from its name alone.
pub enum KeyRole {
    /// A fair queue's deadline zset, of these locks.
    FairDeadlines { locks: Vec<Vec<u8>> },
    /// A fencing counter, of these locks.
    FenceCounter { locks: Vec<Vec<u8>> },
    /// Possibly a lock.
    Other,
}

pub fn role_of(key: &[u8]) -> KeyRole {
    if key.starts_with(TIMEOUT_PREFIX) {
        KeyRole::FairDeadlines {
            locks: lock_keys_of(TIMEOUT_PREFIX, key),
        }
    } else if key.starts_with(TOKEN_PREFIX) {
        KeyRole::FenceCounter {
            locks: lock_keys_of(TOKEN_PREFIX, key),
        }
    } else {
        KeyRole::Other
    }
}

/// Expires `lock` now if its lease has run out: opening a key expires it, which
/// Redis's own expiry would do only whenever its sampling got round to it.
pub fn expire_if_due(ctx: &Context, lock: &LockId) {
    let key = ffi::string(ctx, &lock.key);
    drop(Key::open_writable(ctx, &key));
}

/// The lease left on `lock`, in ms: -1 without one, -2 when the lock is free.
pub fn pttl(ctx: &Context, lock: &LockId) -> i64 {
    let key = ffi::string(ctx, &lock.key);
    Key::open_readonly(ctx, &key).pttl()
}

/// Raises the keyspace event the plain command would, for clients that enabled
/// that class in `notify-keyspace-events`. Skipped otherwise: every event also
/// runs each module's subscriber, which costs more than the write itself.
fn announce(ctx: &Context, class: NotifyEvent, event: &str, key: &RedisString) {
    if redis_module::raw::get_keyspace_events().intersects(class) {
        let _own = state::own_write();
        ctx.notify_keyspace_event(class, event, key);
    }
}

/// One write through `RedisModule_Call`, replicated as the plain command it is (so a
/// replica or the AOF replays it without the module) and raising the keyspace event
/// the command raises. The keys' types are checked before, so a write fails only if the
/// server is out of memory or refuses writes: that is logged rather than half-reported.
/// Returns an integer reply, or 0.
fn replicated_write(ctx: &Context, command: &str, args: &[&[u8]]) -> i64 {
    thread_local! {
        static REPLICATED: CallOptions = CallOptionsBuilder::new().replicate().build();
    }
    let result: CallResult = {
        let _own = state::own_write();
        REPLICATED.with(|options| ctx.call_ext(command, options, args))
    };
    match result {
        Ok(CallReply::I64(n)) => n.to_i64(),
        Ok(_) => 0,
        Err(error) => {
            ffi::log_warning(
                ctx.get_raw(),
                &format!(
                    "rlock: write {command} failed: {}",
                    error.to_utf8_string().unwrap_or_default()
                ),
            );
            0
        }
    }
}

/// A helper key's name as a RedisString, built in a reused buffer.
fn helper_string(ctx: &Context, prefix: &[u8], lock_name: &[u8]) -> RedisString {
    thread_local! {
        static NAME: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    NAME.with(|name| {
        let mut name = name.borrow_mut();
        write_helper_key(&mut name, prefix, lock_name);
        ffi::string(ctx, &name)
    })
}

/// Tells Redisson clients waiting on lock `lock_name` that it is free: `0` on
/// `redisson_lock__channel:{K}`, or a read-write lock's message on
/// `redisson_rwlock:{K}`; nothing when `rlock.publish` is off.
pub fn publish_unlock(ctx: &Context, lock_name: &[u8], unlock: Unlock) {
    if !config::publish() {
        return;
    }
    let Unlock::ReadWrite(freed_by) = unlock else {
        let channel = helper_string(ctx, CHANNEL_PREFIX, lock_name);
        ffi::publish_zero(ctx, &channel);
        return;
    };
    rwlock::publish_rw_unlock(ctx, lock_name, freed_by);
}

/// How many connections listen on the lock's unlock channel (Redisson clients waiting
/// for it); 0 when `rlock.publish` is off, since they would hear nothing.
pub fn unlock_listeners(ctx: &Context, lock_name: &[u8]) -> i64 {
    if !config::publish() {
        return 0;
    }
    let channel = helper_string(ctx, CHANNEL_PREFIX, lock_name);
    ffi::channel_subscribers(ctx, &channel)
}

/// Whether the module may create `helper`, a helper key of lock `lock_key` (its fencing
/// counter, its fair queue, its leases) that is missing here. In a cluster, not while
/// the lock's slot is being migrated away: the key may be missing because `MIGRATE`
/// already moved it, and one created here would exist twice (the migration then stops
/// at `BUSYKEY`, and a counter would start again from 1). The caller gets `-TRYAGAIN`,
/// as for a command whose keys are split by a resharding, and nothing is written.
pub fn check_slot_may_grow(
    ctx: &Context,
    lock_key: &[u8],
    helpers: &[&[u8]],
) -> Result<(), RedisError> {
    if !ffi::in_cluster(ctx) {
        return Ok(());
    }
    if slot_stable_here(ctx, lock_key, helpers) {
        return Ok(());
    }
    let Some(nodes) = cluster_nodes(ctx) else {
        return Ok(());
    };
    let slot = key_slot(lock_key);
    match route(&nodes, slot) {
        SlotRoute::Served => Ok(()),
        SlotRoute::Migrating { .. } => Err(RedisError::Str(errors::SLOT_MIGRATING)),
        other => Err(RedisError::String(
            other.redirect_error(slot).unwrap_or_default(),
        )),
    }
}

/// In a cluster: whether this node serves the slot of `lock_key` and is not moving it,
/// told by the server's own routing rather than `CLUSTER NODES`. `EXISTS lock_key
/// others...` is routed here (see `ffi::keys_routed_here`) exactly when the slot is served
/// here and stable, as long as one of the keys is missing: a slot migrating away
/// answers `-ASK` or `-TRYAGAIN` for a missing key, one being imported `-MOVED`, or
/// `-TRYAGAIN` after `ASKING` (two keys, one missing). `others` are other keys of the
/// lock's slot (its helper keys), and one of them, or `lock_key`, is missing. False says
/// nothing: the caller reads `CLUSTER NODES` for the way the slot went.
pub fn slot_stable_here(ctx: &Context, lock_key: &[u8], others: &[&[u8]]) -> bool {
    let keys: Vec<RedisString> = std::iter::once(lock_key)
        .chain(others.iter().copied())
        .map(|key| ffi::string(ctx, key))
        .collect();
    ffi::keys_routed_here(ctx, &keys.iter().collect::<Vec<_>>())
}

/// `slot_stable_here` for lock `lock_key`, which is missing here: with its fencing
/// counter's name as the second key.
pub fn lock_slot_stable_here(ctx: &Context, lock_key: &[u8]) -> bool {
    let counter = helper_key(TOKEN_PREFIX, lock_key);
    slot_stable_here(ctx, lock_key, &[&counter])
}

/// `CLUSTER NODES`, as this node sees the cluster; `None` outside a cluster.
pub fn cluster_nodes(ctx: &Context) -> Option<String> {
    let text = reply_bytes(ctx.call("CLUSTER", &[&b"NODES"[..]]).ok()?)?;
    String::from_utf8(text).ok()
}

/// A string reply of `RedisModule_Call` as bytes, whichever way the crate decoded it.
fn reply_bytes(value: RedisValue) -> Option<Vec<u8>> {
    match value {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.into_bytes()),
        RedisValue::StringBuffer(b) => Some(b),
        RedisValue::BulkRedisString(s) => Some(s.as_slice().to_vec()),
        RedisValue::Integer(n) => Some(n.to_string().into_bytes()),
        _ => None,
    }
}
