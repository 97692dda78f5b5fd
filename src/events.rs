//! Keyspace and server events that free locks or end sessions. Callbacks only
//! record what to do; the writes run from a 0 ms timer (see `timers`), since
//! writing inside these callbacks can replicate out of order on Redis 7.0.

use std::cell::Cell;
use std::os::raw::{c_char, c_int, c_void};

use redis_module::{raw, Context, NotifyEvent};

use crate::core::fences::KnownFences;
use crate::core::keys::{lock_keys_of, TIMEOUT_PREFIX, TOKEN_PREFIX};
use crate::core::waitlist::LockId;
use crate::ffi::{self, RawCtx};
use crate::store::with_fences;
use crate::{fair, guard, sessions, stats, timers, waiters};

const DEMOTED: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

thread_local! {
    /// Set while the module itself announces its own writes.
    static OWN_WRITE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `announce` (a keyspace notification of the module's own write) without
/// reacting to it: the command that wrote already did what the event would ask.
pub fn own_write(announce: impl FnOnce()) {
    OWN_WRITE.with(|flag| flag.set(true));
    announce();
    OWN_WRITE.with(|flag| flag.set(false));
}

pub fn subscribe(ctx: &Context) -> bool {
    let classes = (NotifyEvent::GENERIC
        | NotifyEvent::EXPIRED
        | NotifyEvent::EVICTED
        | NotifyEvent::ZSET
        | NotifyEvent::LOADED)
        .bits();
    ffi::subscribe_keyspace(ctx, classes, on_keyspace)
        && ffi::subscribe_server_event(ctx, raw::REDISMODULE_EVENT_FLUSHDB, on_flush)
        && ffi::subscribe_server_event(ctx, raw::REDISMODULE_EVENT_SWAPDB, on_swapdb)
        && ffi::subscribe_server_event(
            ctx,
            raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
            on_role,
        )
        && ffi::subscribe_server_event(ctx, raw::REDISMODULE_EVENT_CLIENT_CHANGE, on_client)
        && ffi::subscribe_server_event(ctx, raw::REDISMODULE_EVENT_LOADING, on_loading)
}

extern "C" fn on_keyspace(
    ctx: RawCtx,
    _class: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    guard::callback("keyspace event", || {
        if OWN_WRITE.with(Cell::get) {
            return;
        }
        let ctx = Context::new(ctx);
        let key = ffi::string_bytes(key);
        if key.starts_with(TIMEOUT_PREFIX) {
            fair_queue_changed(&ctx, key, ffi::c_str_bytes(event));
            return;
        }
        if key.starts_with(TOKEN_PREFIX) {
            fence_changed(&ctx, key, ffi::c_str_bytes(event));
            return;
        }
        if waiters::all_idle() && sessions::is_empty() {
            return;
        }
        let lock = LockId {
            db: ffi::selected_db(&ctx),
            key: key.to_vec(),
        };
        let watched = waiters::has_waiters(&lock) || fair::is_tracked(&lock);
        if !watched && !sessions::has_lock(&lock) {
            return;
        }
        match ffi::c_str_bytes(event) {
            b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from" => {
                if ffi::c_str_bytes(event) == b"expired" {
                    stats::EXPIRIES.incr();
                }
                sessions::forget_lock(&lock);
                if watched {
                    timers::defer_serve(&ctx, lock);
                }
            }
            // Someone else changed the lease (a Redisson watchdog, a PEXPIRE): the
            // timer moves on the next turn, where reading the key is safe.
            b"expire" | b"persist" if watched => timers::defer_serve(&ctx, lock),
            _ => {}
        }
    });
    raw::REDISMODULE_OK as c_int
}

/// A fencing counter appeared (loaded, restored, renamed or copied in) or went.
/// Counters written by plain string commands (a Redisson fenced lock's INCR) are
/// string events, which the module does not subscribe to: see `KnownFences`.
fn fence_changed(ctx: &Context, token_key: &[u8], event: &[u8]) {
    let db = ffi::selected_db(ctx);
    for key in lock_keys_of(TOKEN_PREFIX, token_key) {
        let lock = LockId { db, key };
        match event {
            b"loaded" | b"restore" | b"rename_to" | b"copy_to" | b"move_to" => {
                with_fences(|f| f.seen(lock))
            }
            b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from" => {
                with_fences(|f| f.gone(&lock))
            }
            _ => {}
        }
    }
}

/// Another client (a Redisson fair lock, a replica's primary, a load) wrote a
/// fair queue's zset: the lock is tracked so its releases serve the queue, and
/// waiters blocked here whose entry was removed go back in line.
fn fair_queue_changed(ctx: &Context, zset_key: &[u8], event: &[u8]) {
    let removed = matches!(
        event,
        b"zrem" | b"zremrangebyscore" | b"zremrangebyrank" | b"del"
    );
    // Re-scoring (a Redisson acquire's ZINCRBY per waiter) neither creates a queue
    // nor removes anyone: nothing to learn, and it comes in thousands.
    if event == b"zincr" {
        return;
    }
    let db = ffi::selected_db(ctx);
    for key in lock_keys_of(TIMEOUT_PREFIX, zset_key) {
        let lock = LockId { db, key };
        if !removed {
            fair::track(&lock);
        } else if waiters::has_waiters(&lock) {
            timers::defer_requeue(ctx, lock);
        }
    }
}

extern "C" fn on_flush(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::callback("flush event", || {
        if subevent != raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
            return;
        }
        let db = Some(ffi::event_flushed_db(data)).filter(|db| *db >= 0);
        serve_later(&Context::new(ctx), db);
    });
}

extern "C" fn on_swapdb(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    data: *mut c_void,
) {
    guard::callback("swapdb event", || {
        let ctx = Context::new(ctx);
        let (first, second) = ffi::event_swapped_dbs(data);
        with_fences(KnownFences::lose_track);
        // Holds now sit in another database than the one they were taken in.
        sessions::forget_db(Some(first));
        sessions::forget_db(Some(second));
        for db in [first, second] {
            for lock in waiters::locks_with_waiters(Some(db)) {
                timers::defer_serve(&ctx, lock);
            }
        }
    });
}

/// After a flush, every lock in `db` (or everywhere) is gone.
fn serve_later(ctx: &Context, db: Option<i32>) {
    with_fences(|f| f.flushed(db));
    sessions::forget_db(db);
    let fair_locks = fair::tracked()
        .into_iter()
        .filter(|l| db.is_none_or(|db| l.db == db));
    for lock in waiters::locks_with_waiters(db)
        .into_iter()
        .chain(fair_locks)
    {
        timers::defer_serve(ctx, lock);
    }
}

extern "C" fn on_role(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    guard::callback("role event", || {
        if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA {
            // Waiters, timers and sessions belong to a primary.
            timers::stop_all(&Context::new(ctx));
            // Counters now arrive by replication, unseen.
            with_fences(KnownFences::lose_track);
            waiters::fail_all(DEMOTED);
            sessions::forget_all();
            fair::untrack_all();
        }
    });
}

extern "C" fn on_loading(
    _ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    _data: *mut c_void,
) {
    guard::callback("loading event", || {
        // An AOF replays counters as string commands, which raise no event the
        // module hears; an RDB raises `loaded` for each key, which it does.
        if subevent == raw::REDISMODULE_SUBEVENT_LOADING_AOF_START
            || subevent == raw::REDISMODULE_SUBEVENT_LOADING_REPL_START
        {
            with_fences(KnownFences::lose_track);
        }
    });
}

extern "C" fn on_client(
    ctx: RawCtx,
    _event: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    guard::callback("client event", || {
        if subevent != raw::REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED {
            return;
        }
        let ctx = Context::new(ctx);
        for (lock, owner) in sessions::disconnected(ffi::event_client_id(data)) {
            timers::defer_release(&ctx, lock, owner, true);
        }
    });
}
