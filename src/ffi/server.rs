//! The server around a call: clock, context flags, client, database, log, INFO.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};

use redis_module::{raw, Context};

/// The server's clock, unix ms.
pub fn now_ms() -> i64 {
    // SAFETY: no arguments; the API table is initialised before any command runs.
    unsafe { raw::RedisModule_Milliseconds.unwrap()() }
}

/// `RedisModule_GetContextFlags`.
pub fn context_flags(ctx: &Context) -> u32 {
    // SAFETY: ctx is a live context.
    unsafe { raw::RedisModule_GetContextFlags.unwrap()(ctx.get_raw()) as u32 }
}

/// Registers the `INFO rlock` callback.
pub fn register_info(ctx: &Context, callback: extern "C" fn(*mut raw::RedisModuleInfoCtx, c_int)) {
    // SAFETY: registration happens in OnLoad with the load context.
    unsafe {
        raw::RedisModule_RegisterInfoFunc.unwrap()(ctx.get_raw(), Some(callback));
    }
}

/// Writes the module's own section to an INFO reply: text fields, then integer fields.
pub fn info_section(
    info: *mut raw::RedisModuleInfoCtx,
    text: &[(&CStr, &CStr)],
    fields: &[(&CStr, i64)],
) {
    // SAFETY: info is the live info context handed to the callback; an empty
    // section name means the module's own name. Every string is NUL-terminated.
    unsafe {
        raw::RedisModule_InfoAddSection.unwrap()(info, c"".as_ptr());
        for (name, value) in text {
            raw::RedisModule_InfoAddFieldCString.unwrap()(
                info,
                name.as_ptr(),
                value.as_ptr() as *mut _,
            );
        }
        for (name, value) in fields {
            raw::RedisModule_InfoAddFieldLongLong.unwrap()(info, name.as_ptr(), *value);
        }
    }
}

/// Adds a sample to the server's latency monitor (`LATENCY LATEST`, `LATENCY HISTORY`).
/// The server records it whenever `ms` is at least `latency-monitor-threshold`, 0
/// included: the caller checks the threshold.
pub fn latency_add_sample(event: &CStr, ms: i64) {
    // SAFETY: event is NUL-terminated and static for the caller; the pointer is checked.
    unsafe {
        if let Some(add) = raw::RedisModule_LatencyAddSample {
            add(event.as_ptr(), ms);
        }
    }
}

/// A value in an INFO dict field (`name:k=v,k=v`).
pub enum InfoValue {
    Text(std::ffi::CString),
    Integer(i64),
}

/// Writes the module's section `section` (the server names it `rlock_<section>`) of
/// dict fields, each `name:k=v,k=v`.
pub fn info_dict_section(
    info: *mut raw::RedisModuleInfoCtx,
    section: &CStr,
    fields: &[(std::ffi::CString, Vec<(&CStr, InfoValue)>)],
) {
    // SAFETY: info is the live info context handed to the callback; every string is
    // NUL-terminated and lives across the calls that read it.
    unsafe {
        raw::RedisModule_InfoAddSection.unwrap()(info, section.as_ptr());
        for (name, values) in fields {
            raw::RedisModule_InfoBeginDictField.unwrap()(info, name.as_ptr());
            for (key, value) in values {
                match value {
                    InfoValue::Text(text) => raw::RedisModule_InfoAddFieldCString.unwrap()(
                        info,
                        key.as_ptr(),
                        text.as_ptr() as *mut _,
                    ),
                    InfoValue::Integer(n) => {
                        raw::RedisModule_InfoAddFieldLongLong.unwrap()(info, key.as_ptr(), *n)
                    }
                };
            }
            raw::RedisModule_InfoEndDictField.unwrap()(info);
        }
    }
}

/// Logs a line to the server log, at warning level. Binary-safe: the message is
/// cut at the first NUL.
pub fn log_warning(ctx: *mut raw::RedisModuleCtx, message: &str) {
    let mut line: Vec<u8> = message.bytes().take_while(|b| *b != 0).collect();
    line.push(0);
    // SAFETY: fmt is "%s" and line is NUL-terminated. A null ctx logs as the module-less server.
    unsafe {
        raw::RedisModule_Log.unwrap()(
            ctx,
            c"warning".as_ptr(),
            c"%s".as_ptr(),
            line.as_ptr() as *const c_char,
        );
    }
}

/// The id of the connection running `ctx` (as `CLIENT ID`).
pub fn client_id(ctx: &Context) -> u64 {
    // SAFETY: ctx is live.
    unsafe { raw::RedisModule_GetClientId.unwrap()(ctx.get_raw()) }
}

/// The name of connection `id` (`CLIENT SETNAME`); empty when it has none, is gone, or
/// the server lacks `RedisModule_GetClientNameById` (before Redis 7.0.3).
pub fn client_name(ctx: &Context, id: u64) -> Vec<u8> {
    // SAFETY: ctx is live; the name the server returns carries a reference for the
    // caller, copied out and then given back with FreeString. The pointers are checked.
    unsafe {
        let Some(get) = raw::RedisModule_GetClientNameById else {
            return Vec::new();
        };
        let name = get(ctx.get_raw(), id);
        if name.is_null() {
            return Vec::new();
        }
        let bytes = super::string_bytes(name).to_vec();
        raw::RedisModule_FreeString.unwrap()(ctx.get_raw(), name);
        bytes
    }
}

pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: ctx is live.
    unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.get_raw()) }
}

/// How many keys the database selected on `ctx` holds.
pub fn db_size(ctx: &Context) -> u64 {
    // SAFETY: ctx is live.
    unsafe { raw::RedisModule_DbSize.unwrap()(ctx.get_raw()) }
}

/// Selects `db` for the keys opened next through `ctx`; false if it does not exist.
pub fn select_db(ctx: &Context, db: i32) -> bool {
    // SAFETY: ctx is live.
    unsafe { raw::RedisModule_SelectDb.unwrap()(ctx.get_raw(), db) == raw::REDISMODULE_OK as c_int }
}

/// `db` selected on `ctx` until the guard drops, when the database selected before is
/// selected again (also when a panic unwinds). `None` when `db` does not exist.
pub struct DbSelected<'a> {
    ctx: &'a Context,
    previous: i32,
}

impl<'a> DbSelected<'a> {
    pub fn new(ctx: &'a Context, db: i32) -> Option<DbSelected<'a>> {
        let previous = selected_db(ctx);
        if previous != db && !select_db(ctx, db) {
            return None;
        }
        Some(DbSelected { ctx, previous })
    }
}

impl Drop for DbSelected<'_> {
    fn drop(&mut self) {
        if selected_db(self.ctx) != self.previous {
            select_db(self.ctx, self.previous);
        }
    }
}

/// Whether this server is a primary, where the module's timers and waiters live.
pub fn is_primary(ctx: &Context) -> bool {
    context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_MASTER != 0
}

/// Whether the server is loading its data (an RDB, an AOF, a replica's full sync).
pub fn is_loading(ctx: &Context) -> bool {
    context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_LOADING != 0
}

/// Whether the server runs in cluster mode (`cluster-enabled yes`).
pub fn in_cluster(ctx: &Context) -> bool {
    context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_CLUSTER != 0
}

/// Whether the call runs inside a script or a function.
pub fn in_script(ctx: &Context) -> bool {
    context_flags(ctx) & raw::REDISMODULE_CTX_FLAGS_LUA != 0
}

/// Whether the call may block its client: not inside MULTI, a script or a function.
pub fn may_block(ctx: &Context) -> bool {
    let refused = raw::REDISMODULE_CTX_FLAGS_MULTI
        | raw::REDISMODULE_CTX_FLAGS_LUA
        | raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING;
    context_flags(ctx) & refused == 0
}

/// Whether writes are paused: `CLIENT PAUSE`, `FAILOVER`, a cluster manual failover.
/// The module must then start no write of its own (`RedisModule_AvoidReplicaTraffic`).
pub fn writes_paused() -> bool {
    // SAFETY: no arguments; the pointer is checked.
    unsafe { raw::RedisModule_AvoidReplicaTraffic.is_some_and(|paused| paused() != 0) }
}

/// The server's version as `0x00MMmmpp` (Valkey reports its own numbering); 0 if unknown.
pub fn server_version() -> i32 {
    // SAFETY: no arguments; the pointer is checked.
    unsafe { raw::RedisModule_GetServerVersion.map_or(0, |version| version()) }
}

/// Whether `CLIENT UNBLOCK` can end a module's wait without a race. Before Redis 7.4
/// (and Valkey 8), an unblock by TIMEOUT of a client the module had just answered
/// skipped the timeout callback and called the disconnect callback in its place,
/// exactly as an unblock by ERROR does: the module could not tell whether the client
/// had been replied to. Those servers get no timeout callback, so `CLIENT UNBLOCK`
/// leaves the wait alone, as Redis does for every module command without one.
pub fn client_unblock_is_safe() -> bool {
    server_version() >= 0x0007_0400
}

/// Whether the server is Valkey (its `INFO server` has `valkey_version`). Valkey and
/// Redis number module options and server events differently past the ones they share.
pub fn is_valkey(ctx: &Context) -> bool {
    match ctx.call("INFO", &[&b"server"[..]]) {
        Ok(redis_module::RedisValue::SimpleString(text))
        | Ok(redis_module::RedisValue::BulkString(text)) => text.contains("valkey_version:"),
        Ok(redis_module::RedisValue::StringBuffer(bytes)) => {
            String::from_utf8_lossy(&bytes).contains("valkey_version:")
        }
        Ok(redis_module::RedisValue::VerbatimString((_, bytes))) => {
            String::from_utf8_lossy(&bytes).contains("valkey_version:")
        }
        _ => false,
    }
}

/// Valkey's `VALKEYMODULE_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION`: without it Valkey 9
/// refuses `CLUSTER MIGRATESLOTS` on every node of the cluster while the module is
/// loaded. (Redis gives this bit another meaning: set it on Valkey only.)
const VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// Valkey's `VALKEYMODULE_OPTIONS_SKIP_COMMAND_VALIDATION` (8.1+; older Valkey ignores
/// it): `RedisModule_Replicate` then skips looking the command name up (an sds built,
/// split on `|`, a dict lookup, freed: about 1,400 instructions a call). Every name
/// the module replicates is a constant of a plain command. (Redis gives this bit
/// another meaning: set it on Valkey only.)
const VALKEY_OPTIONS_SKIP_COMMAND_VALIDATION: c_int = 1 << 4;

/// On Valkey: declares that the module handles atomic slot migration (see `slots`),
/// and that the commands it replicates need no validation. Sets every module option
/// the module uses in one call, as the call replaces them all.
pub fn declare_module_options(ctx: &Context, valkey: bool) {
    let options = if valkey {
        VALKEY_OPTIONS_HANDLE_ATOMIC_SLOT_MIGRATION | VALKEY_OPTIONS_SKIP_COMMAND_VALIDATION
    } else {
        0
    };
    // SAFETY: ctx is the OnLoad context; the pointer is checked.
    unsafe {
        if let Some(set) = raw::RedisModule_SetModuleOptions {
            set(ctx.get_raw(), options);
        }
    }
}
