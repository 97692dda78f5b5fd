//! Keyspace and server events that free locks, end sessions or change what the
//! module knows. A source only: callbacks update the state and queue work in
//! `deferred`, since writing inside them can replicate out of order on Redis 7.0.

use std::collections::BTreeMap;
use std::os::raw::{c_char, c_int, c_void};
use std::time::{Duration, Instant};

use redis_module::{raw, Context, NotifyEvent};

use crate::core::deferred::Work;
use crate::core::keyevents::KeyEvent;
use crate::core::semaphore::PermitId;
use crate::core::shrink_set;
use crate::core::waitlist::{LockId, Wants};
use crate::ffi::{self, RawCtx};
use crate::store::{self, KeyRole};
use crate::{config, deferred, errors, guard, keyevents, latency, slots, state, stats, timers};

pub fn subscribe(ctx: &Context) -> bool {
    // No string class: it would cost every SET and INCR in the server a module
    // callback. Fencing counters are looked up instead (see `core::fences`). No module
    // class either: the module's own events (`keyevents`) must not come back here.
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
        && ffi::subscribe_server_event(ctx, raw::REDISMODULE_EVENT_CONFIG, on_config)
        && ffi::subscribe_server_event(ctx, raw::REDISMODULE_EVENT_CRON_LOOP, on_cron)
        && subscribe_slot_migration(ctx)
}

/// Atomic slot migration's event: `VALKEYMODULE_EVENT_ATOMIC_SLOT_MIGRATION` (19) on
/// Valkey 9, `REDISMODULE_EVENT_CLUSTER_SLOT_MIGRATION` (18) on Redis 8.4. The numbers
/// differ (18 is another event on Valkey, 19 another on Redis), the sub-event this
/// module acts on does not: 5, this node's slots handed over. A server without the
/// event refuses the subscription; the slot sweep alone then notices slots that left.
const VALKEY_ATOMIC_SLOT_MIGRATION: u64 = 19;
const REDIS_CLUSTER_SLOT_MIGRATION: u64 = 18;
const SLOT_EXPORT_COMPLETED: u64 = 5;

fn subscribe_slot_migration(ctx: &Context) -> bool {
    let (event, since) = if ffi::is_valkey(ctx) {
        (VALKEY_ATOMIC_SLOT_MIGRATION, 0x0009_0000)
    } else {
        (REDIS_CLUSTER_SLOT_MIGRATION, 0x0008_0400)
    };
    if ffi::server_version() >= since {
        // A refusal leaves the sweep to it: nothing else depends on the event.
        ffi::subscribe_server_event(ctx, event, on_slot_migration);
    }
    true
}

/// A server event's `extern "C"` callback: `body` runs in the panic guard with the raw
/// context, the subevent and the event's data.
macro_rules! server_event {
    ($(#[$doc:meta])* $name:ident, $what:literal, |$ctx:ident, $subevent:ident, $data:ident| $body:block) => {
        $(#[$doc])*
        extern "C" fn $name(
            ctx: RawCtx,
            _event: raw::RedisModuleEvent,
            subevent: u64,
            data: *mut c_void,
        ) {
            guard::callback($what, || {
                let ($ctx, $subevent, $data) = (ctx, subevent, data);
                $body
            });
        }
    };
}

/// [`server_event!`] for a callback that acts on one subevent, `wanted`, alone.
macro_rules! on_subevent {
    ($name:ident, $what:literal, $wanted:expr, |$ctx:ident, $data:ident| $body:block) => {
        server_event!($name, $what, |$ctx, subevent, $data| {
            if subevent != $wanted {
                return;
            }
            $body
        });
    };
}

server_event!(
    /// Slots of this node went to another by atomic migration: the waiters on their locks
    /// are sent there now, rather than at the sweep's next round.
    on_slot_migration,
    "slot migration event",
    |ctx, subevent, _data| {
        if subevent == SLOT_EXPORT_COMPLETED {
            stats::SLOT_EXPORTS.incr();
            slots::sweep_soon(&Context::new(ctx));
        }
    }
);

extern "C" fn on_keyspace(
    ctx: RawCtx,
    _class: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    guard::callback("keyspace event", || {
        // The command that wrote already did what the event would ask.
        if state::is_own_write() {
            return;
        }
        // Re-scoring (a Redisson acquire's ZINCRBY per waiter) neither creates a queue
        // nor removes anyone: nothing to learn, and it comes in thousands.
        if ffi::c_str_bytes(event) == b"zincr" {
            return;
        }
        let ctx = Context::new(ctx);
        let key = ffi::string_bytes(key);
        match store::role_of(key) {
            KeyRole::FairDeadlines { locks } => {
                fair_queue_changed(&ctx, locks, ffi::c_str_bytes(event));
                return;
            }
            KeyRole::FenceCounter { locks } => {
                fence_changed(&ctx, locks, ffi::c_str_bytes(event));
                return;
            }
            KeyRole::Other => {}
        }
        if state::all_idle() && state::with(|s| s.sessions.is_empty()) {
            return;
        }
        let lock = LockId {
            db: ffi::selected_db(&ctx),
            key: key.to_vec(),
        };
        let (watched, session) = state::with(|s| {
            (
                s.waiters.has_waiters(&lock)
                    || s.fair_queues.contains(&lock)
                    || s.sharing.contains(&lock),
                s.sessions.has_lock(&lock),
            )
        });
        if !watched && !session {
            return;
        }
        // Someone else wrote the lock: a Redisson client took its turn, if one was open.
        state::with(|s| s.sharing.end_window(&lock));
        match ffi::c_str_bytes(event) {
            b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from" => {
                if ffi::c_str_bytes(event) == b"expired" {
                    stats::EXPIRIES.incr();
                    if session || holds_lock_waiters(&lock) {
                        keyevents::lock(&ctx, KeyEvent::Expire, &lock);
                    }
                }
                state::with(|s| s.sessions.forget_lock(&lock));
                if watched {
                    state::mark_freed(&lock, stats::now_us());
                    deferred::push(&ctx, Work::Serve { lock });
                }
            }
            // Someone else changed the lease (a Redisson watchdog, a PEXPIRE): the
            // timer moves on the next turn, where reading the key is safe.
            b"expire" | b"persist" if watched => deferred::push(&ctx, Work::Serve { lock }),
            // Another key took the lock's name (its hold, if any, is gone with the old
            // one): looked at again, as a new lock.
            b"rename_to" | b"move_to" | b"copy_to" | b"restore" if watched => {
                deferred::push(&ctx, Work::Serve { lock })
            }
            _ => {}
        }
    });
    raw::REDISMODULE_OK as c_int
}

/// Whether what waits on `lock` here waits for a lock (rather than permits or a latch),
/// or a round of hand-offs or a fair queue is kept for it: its expiry ends a lock's hold.
fn holds_lock_waiters(lock: &LockId) -> bool {
    state::with(|s| {
        s.sharing.contains(lock)
            || s.fair_queues.contains(lock)
            || s.waiters
                .head(lock)
                .is_some_and(|(_, w)| w.wants == Wants::Hold)
    })
}

/// A fencing counter appeared (loaded, restored, renamed or copied in) or went: its
/// value may have been handed out by someone else, so a re-entry takes a new token.
fn fence_changed(ctx: &Context, locks: Vec<Vec<u8>>, event: &[u8]) {
    let db = ffi::selected_db(ctx);
    for key in locks {
        let lock = LockId { db, key };
        match event {
            b"loaded" | b"restore" | b"rename_to" | b"copy_to" | b"move_to" | b"del"
            | b"expired" | b"evicted" | b"rename_from" | b"move_from" => {
                state::with(|s| s.fences.forget(&lock))
            }
            _ => {}
        }
    }
}

/// Another client (a Redisson fair lock, a replica's primary, a load) wrote a
/// fair queue's zset: the lock is tracked so its releases serve the queue, and
/// waiters blocked here whose entry was removed go back in line.
fn fair_queue_changed(ctx: &Context, locks: Vec<Vec<u8>>, event: &[u8]) {
    // Queues belong to the primary: on a replica they arrive by replication and
    // nothing here serves them, so tracking them would only grow.
    if !ffi::is_primary(ctx) {
        return;
    }
    let removed = matches!(
        event,
        b"zrem" | b"zremrangebyscore" | b"zremrangebyrank" | b"del"
    );
    // The zset is gone: a Redisson queue that emptied, a deleted one, an expired one.
    let gone = matches!(
        event,
        b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from"
    );
    let db = ffi::selected_db(ctx);
    for key in locks {
        let lock = LockId { db, key };
        let waiting = state::with(|s| s.waiters.has_waiters(&lock));
        if gone && !waiting {
            state::with(|s| s.fair_queues.remove(&lock));
        } else if !removed && !gone {
            // Its entries' deadlines are read at the next look, on the next cron tick.
            let now = ffi::now_ms();
            state::with(|s| s.fair_queues.look_by(&lock, now));
        } else if waiting {
            deferred::push(ctx, Work::Requeue { lock });
        }
    }
}

on_subevent!(
    on_flush,
    "flush event",
    raw::REDISMODULE_SUBEVENT_FLUSHDB_END,
    |ctx, data| {
        let db = Some(ffi::event_flushed_db(data)).filter(|db| *db >= 0);
        serve_later(&Context::new(ctx), db);
    }
);

server_event!(on_swapdb, "swapdb event", |ctx, _subevent, data| {
    let ctx = Context::new(ctx);
    let (first, second) = ffi::event_swapped_dbs(data);
    let locks = state::with(|s| {
        s.fences.clear();
        // Holds now sit in another database than the one they were taken in.
        s.sessions.forget_db(Some(first));
        s.sessions.forget_db(Some(second));
        s.session_permits.forget_db(Some(first));
        s.session_permits.forget_db(Some(second));
        let mut locks = s.waiters.locks_in(Some(first));
        locks.extend(s.waiters.locks_in(Some(second)));
        // Rounds of locks nobody waits for here: the keys under those names are
        // other locks now.
        let rounds: Vec<LockId> = s
            .sharing
            .locks()
            .filter(|l| (l.db == first || l.db == second) && !locks.contains(l))
            .cloned()
            .collect();
        for lock in &rounds {
            s.sharing.forget(lock);
        }
        // Leases moved with their database: watched under its new number too.
        let swapped: Vec<LockId> = s
            .leased_semaphores
            .iter()
            .filter(|l| l.db == first || l.db == second)
            .map(|l| LockId {
                db: if l.db == first { second } else { first },
                key: l.key.clone(),
            })
            .collect();
        locks.extend(
            s.leased_semaphores
                .iter()
                .filter(|l| l.db == first || l.db == second)
                .cloned(),
        );
        s.leased_semaphores.extend(swapped.iter().cloned());
        locks.extend(swapped);
        // Fair queues too: each is looked at under both numbers now, and tracked
        // on where it is found.
        let queues: Vec<LockId> = s
            .fair_queues
            .iter()
            .filter(|l| l.db == first || l.db == second)
            .cloned()
            .collect();
        let now = ffi::now_ms();
        for lock in queues {
            let moved = LockId {
                db: if lock.db == first { second } else { first },
                key: lock.key.clone(),
            };
            s.fair_queues.look_by(&moved, now);
            s.fair_queues.look_by(&lock, now);
        }
        locks
    });
    for lock in locks {
        deferred::push(&ctx, Work::Serve { lock });
    }
});

/// After a flush, every lock in `db` (or everywhere) is gone, and with it every fair
/// queue, lease zset and hold there: what the module knew of them is forgotten now,
/// not left to a later serve (which a lock's other roles could send elsewhere). Only
/// clients blocked here remain, to be served.
fn serve_later(ctx: &Context, db: Option<i32>) {
    let flushed = |lock: &LockId| db.is_none_or(|db| lock.db == db);
    let (locks, forgotten) = state::with(|s| {
        s.fences.flushed(db);
        s.sessions.forget_db(db);
        s.session_permits.forget_db(db);
        s.fair_queues.remove_where(flushed);
        let mut forgotten: Vec<LockId> =
            s.sharing.locks().filter(|l| flushed(l)).cloned().collect();
        forgotten.extend(s.leased_semaphores.iter().filter(|l| flushed(l)).cloned());
        for lock in &forgotten {
            s.sharing.forget(lock);
            s.leased_semaphores.remove(lock);
        }
        shrink_set(&mut s.leased_semaphores);
        let waiting = s.waiters.locks_in(db);
        forgotten.retain(|lock| !waiting.contains(lock));
        (waiting, forgotten)
    });
    // Their timers watched keys that are gone; locks with waiters re-arm theirs when served.
    for lock in &forgotten {
        timers::cancel(ctx, lock);
    }
    for lock in locks {
        deferred::push(ctx, Work::Serve { lock });
    }
}

server_event!(
    /// The server's cron (`hz` times a second): tracked fair queues whose earliest deadline
    /// came are looked at (see `handoff::locks::look_at_queue`). A cron tick rather than a timer:
    /// a timer kept for callers that poll would hold up `MODULE UNLOAD` for as long as
    /// `rlock.fair-wait-ms`, and their entries need not go to the millisecond. A search for
    /// queues the module does not know goes on a few steps.
    on_cron,
    "cron event",
    |ctx, _subevent, _data| {
        let ctx = Context::new(ctx);
        if state::with(|s| s.queue_search.is_some()) {
            search_queues(&ctx);
        }
        if state::with(|s| s.fair_queues.is_empty()) {
            return;
        }
        let now = ffi::now_ms();
        let due = state::with(|s| s.fair_queues.due(now));
        if due.is_empty() {
            return;
        }
        for lock in due {
            deferred::push(&ctx, Work::LookAtQueue { lock });
        }
    }
);

/// How much of a cron tick the search for fair queues takes at most: a `SCAN` step of
/// 1,000 keys takes well under it, so a few steps run per tick.
const SEARCH_BUDGET: Duration = Duration::from_millis(1);

/// Steps of the search for fair queues the module does not know (see
/// `core::fair::QueueSearch`), each queue found tracked and looked at on the next tick:
/// a dead head's entry goes at its deadline, a free lock's head is woken, and the lock's
/// release or expiry serves it. Only a primary tracks queues; a load under way would hide
/// part of the keyspace (the search starts again when it ends).
fn search_queues(ctx: &Context) {
    if !ffi::is_primary(ctx) {
        state::with(|s| s.queue_search = None);
        return;
    }
    if ffi::is_loading(ctx) {
        return;
    }
    let started = Instant::now();
    let now = ffi::now_ms();
    while let Some(search) = state::with(|s| s.queue_search) {
        // Past the last database, the search is over.
        let found = ffi::DbSelected::new(ctx, search.db)
            .map(|_selected| store::find_queues(ctx, search.cursor));
        let Some(Ok((next, keys))) = found else {
            state::with(|s| s.queue_search = None);
            return;
        };
        state::with(|s| {
            for key in keys {
                s.fair_queues.look_by(&LockId { db: search.db, key }, now);
            }
            s.queue_search = Some(search.after(next));
        });
        if started.elapsed() >= SEARCH_BUDGET {
            return;
        }
    }
}

server_event!(on_role, "role event", |ctx, subevent, _data| {
    if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA {
        // Waiters, timers and sessions belong to a primary; counters now
        // arrive by replication, unseen.
        state::reset(&Context::new(ctx), Some(errors::DEMOTED));
    } else if subevent == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER {
        // The fair queues that came by replication are served from now on.
        state::search_queues();
    }
});

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
            state::with(|s| s.fences.clear());
        }
        // Fair queues an AOF brought back raised no event: searched for.
        if subevent == raw::REDISMODULE_SUBEVENT_LOADING_ENDED {
            state::search_queues();
        }
    });
}

on_subevent!(
    on_client,
    "client event",
    raw::REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED,
    |ctx, data| {
        let ctx = Context::new(ctx);
        let client = ffi::event_client_id(data);
        let (holds, permits) = state::with(|s| {
            s.disconnecting = Some(client);
            (
                s.sessions.disconnected(client),
                s.session_permits.disconnected(client),
            )
        });
        let mut leases: BTreeMap<LockId, Vec<PermitId>> = BTreeMap::new();
        for (lock, id) in permits {
            if let Some(id) = PermitId::from_raw(&id) {
                leases.entry(lock).or_default().push(id);
            }
        }
        for (lock, ids) in leases {
            state::mark_freed(&lock, stats::now_us());
            deferred::push(&ctx, Work::ReturnLeases { lock, ids });
        }
        for (lock, field) in holds {
            state::mark_freed(&lock, stats::now_us());
            deferred::push(
                &ctx,
                Work::Release {
                    lock,
                    field,
                    all: true,
                    req: None,
                },
            );
        }
    }
);

on_subevent!(
    on_config,
    "config event",
    raw::REDISMODULE_SUBEVENT_CONFIG_CHANGE,
    |ctx, data| {
        let names = ffi::event_config_names(data);
        let changed = |config: &[u8]| names.iter().any(|name| name.eq_ignore_ascii_case(config));
        if changed(b"maxmemory-policy") {
            config::check_eviction_policy(&Context::new(ctx));
        }
        if changed(latency::THRESHOLD_CONFIG) {
            latency::read_threshold(&Context::new(ctx));
        }
    }
);
