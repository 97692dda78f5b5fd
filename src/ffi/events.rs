//! Keyspace and server event subscriptions, and what the events carry.

use std::ffi::CStr;
use std::os::raw::{c_int, c_void};

use redis_module::{raw, Context, RedisString};

use super::{KeyspaceCallback, RawKeyspaceFn, RawServerEventFn, ServerEventCallback};

/// Subscribes to keyspace events of the given classes.
pub fn subscribe_keyspace(ctx: &Context, classes: c_int, callback: KeyspaceCallback) -> bool {
    // SAFETY: called from OnLoad.
    unsafe {
        raw::RedisModule_SubscribeToKeyspaceEvents.unwrap()(
            ctx.get_raw(),
            classes,
            Some(callback as RawKeyspaceFn),
        ) == raw::REDISMODULE_OK as c_int
    }
}

/// Subscribes to a server event (`REDISMODULE_EVENT_*`).
pub fn subscribe_server_event(ctx: &Context, event: u64, callback: ServerEventCallback) -> bool {
    // SAFETY: called from OnLoad; dataver 1 is what every event used here expects.
    unsafe {
        raw::RedisModule_SubscribeToServerEvent.unwrap()(
            ctx.get_raw(),
            raw::RedisModuleEvent {
                id: event,
                dataver: 1,
            },
            Some(callback as RawServerEventFn),
        ) == raw::REDISMODULE_OK as c_int
    }
}

/// The client id carried by a CLIENT_CHANGE event.
pub fn event_client_id(data: *mut c_void) -> u64 {
    // SAFETY: for CLIENT_CHANGE, data is a RedisModuleClientInfo.
    unsafe { (*(data as *const raw::RedisModuleClientInfo)).id }
}

/// The database a FLUSHDB event is about; -1 for FLUSHALL.
pub fn event_flushed_db(data: *mut c_void) -> i32 {
    // SAFETY: for FLUSHDB, data is a RedisModuleFlushInfo.
    unsafe { (*(data as *const raw::RedisModuleFlushInfo)).dbnum }
}

/// The two databases a SWAPDB event swapped.
pub fn event_swapped_dbs(data: *mut c_void) -> (i32, i32) {
    // SAFETY: for SWAPDB, data is a RedisModuleSwapDbInfo.
    unsafe {
        let info = &*(data as *const raw::RedisModuleSwapDbInfo);
        (info.dbnum_first, info.dbnum_second)
    }
}

/// The names of the configs a CONFIG change event says were set.
pub fn event_config_names(data: *mut c_void) -> Vec<Vec<u8>> {
    // SAFETY: for CONFIG, data is a RedisModuleConfigChange whose config_names
    // holds num_changes NUL-terminated names, alive for the callback.
    unsafe {
        let change = &*(data as *const raw::RedisModuleConfigChange);
        (0..change.num_changes as usize)
            .map(|i| {
                std::ffi::CStr::from_ptr(*change.config_names.add(i))
                    .to_bytes()
                    .to_vec()
            })
            .collect()
    }
}

/// The server's `notify-keyspace-events` flags (`RedisModule_GetNotifyKeyspaceEvents`,
/// 6.0+): a read of one field. 0 where the call is missing.
pub fn keyspace_event_flags() -> c_int {
    // SAFETY: no arguments; the pointer is checked.
    unsafe { raw::RedisModule_GetNotifyKeyspaceEvents.map_or(0, |flags| flags()) }
}

/// Publishes the keyspace event `event` of class module (`d`) on `key`, in the database
/// `ctx` has selected. The server calls every module's subscribers to that class too.
pub fn notify_module_event(ctx: &Context, event: &CStr, key: &RedisString) {
    // SAFETY: ctx is live and has a client (commands, timers, event callbacks); event is
    // NUL-terminated; key is a live RedisModuleString the server only reads.
    unsafe {
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(
            ctx.get_raw(),
            raw::REDISMODULE_NOTIFY_MODULE as c_int,
            event.as_ptr(),
            key.inner,
        );
    }
}
