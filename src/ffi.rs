//! The few raw `RedisModule_*` calls the safe wrappers of `redis-module` 2.0.8 lack
//! or get wrong for binary data. Every `unsafe` block of the module lives here.
//!
//! Each wrapper takes `RedisModuleString`s, never C strings, so owners and keys may
//! hold any byte, NUL included.
//!
//! Functions that take raw pointers take them only as Redis hands them to a
//! callback, valid for that callback's duration.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_longlong, c_void};
use std::ptr;

use redis_module::{raw, Context, RedisString};

/// What a key holds, as far as a lock is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Empty,
    Hash,
    String,
    List,
    Zset,
    /// A set, stream or module type.
    Other,
}

/// An open key. Closed on drop, which also signals WATCHers when it was written.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    /// Opens `name` for reading and writing. Always succeeds for a writable open;
    /// a missing key opens as `KeyKind::Empty`.
    pub fn open_writable(ctx: &Context, name: &RedisString) -> Key {
        Self::open(ctx, name, raw::REDISMODULE_READ | raw::REDISMODULE_WRITE)
    }

    pub fn open_readonly(ctx: &Context, name: &RedisString) -> Key {
        Self::open(ctx, name, raw::REDISMODULE_READ)
    }

    fn open(ctx: &Context, name: &RedisString, mode: u32) -> Key {
        // SAFETY: ctx is the live context of this call; name is a valid string.
        let ptr =
            unsafe { raw::RedisModule_OpenKey.unwrap()(ctx.get_raw(), name.inner, mode as c_int) };
        Key { ptr }
    }

    pub fn kind(&self) -> KeyKind {
        if self.ptr.is_null() {
            return KeyKind::Empty;
        }
        // SAFETY: ptr is an open key.
        let kind = unsafe { raw::RedisModule_KeyType.unwrap()(self.ptr) } as isize;
        match kind {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            raw::REDISMODULE_KEYTYPE_LIST => KeyKind::List,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::Zset,
            _ => KeyKind::Other,
        }
    }

    /// Number of fields of a hash (elements of any other type).
    pub fn value_length(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        // SAFETY: ptr is an open key.
        unsafe { raw::RedisModule_ValueLength.unwrap()(self.ptr) }
    }

    /// A hash field's value. Call only on a hash.
    pub fn hash_get(&self, field: &RedisString) -> Option<RedisString> {
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        // SAFETY: HashGet takes (field, out-pointer) pairs ended by NULL. The string
        // it returns is ours to free, which RedisString does on drop.
        unsafe {
            raw::RedisModule_HashGet.unwrap()(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.inner,
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>(),
            );
        }
        (!value.is_null()).then(|| RedisString::from_redis_module_string(ptr::null_mut(), value))
    }

    /// Sets a hash field to an integer, creating the hash if the key is empty.
    pub fn hash_set_int(&self, ctx: &Context, field: &RedisString, value: i64) {
        if value == 1 {
            // The common case, a first hold: a shared "1", since HashSet copies.
            ONE.with(|one| self.hash_set(field, one));
            return;
        }
        let value = RedisString::create_from_slice(ctx.get_raw(), value.to_string().as_bytes());
        self.hash_set(field, &value);
    }

    fn hash_set(&self, field: &RedisString, value: &RedisString) {
        // SAFETY: HashSet takes (field, value) pairs ended by NULL and copies both.
        unsafe {
            raw::RedisModule_HashSet.unwrap()(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.inner,
                value.inner,
                ptr::null_mut::<c_void>(),
            );
        }
    }

    /// Removes a hash field.
    pub fn hash_del(&self, field: &RedisString) {
        // REDISMODULE_HASH_DELETE, a sentinel pointer with the value 1.
        let delete = ptr::without_provenance_mut::<raw::RedisModuleString>(1);
        // SAFETY: as hash_set_int, with the delete sentinel as value.
        unsafe {
            raw::RedisModule_HashSet.unwrap()(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.inner,
                delete,
                ptr::null_mut::<c_void>(),
            );
        }
    }

    /// The key's content as bytes, for a string key.
    pub fn string_value(&self) -> Vec<u8> {
        let mut len = 0usize;
        // SAFETY: DMA in read mode on a string key; the bytes are copied before
        // anything else touches the key.
        unsafe {
            let data = raw::RedisModule_StringDMA.unwrap()(
                self.ptr,
                &mut len,
                raw::REDISMODULE_READ as c_int,
            );
            if data.is_null() {
                return Vec::new();
            }
            std::slice::from_raw_parts(data as *const u8, len).to_vec()
        }
    }

    /// Replaces the key with a string holding `value`.
    pub fn string_set_int(&self, ctx: &Context, value: i64) {
        // SAFETY: StringSet copies the string, which is freed here.
        unsafe {
            let value = raw::RedisModule_CreateStringFromLongLong.unwrap()(ctx.get_raw(), value);
            raw::RedisModule_StringSet.unwrap()(self.ptr, value);
            raw::RedisModule_FreeString.unwrap()(ctx.get_raw(), value);
        }
    }

    /// Remaining time to live in ms; -1 without expiry, -2 for a missing key.
    pub fn pttl(&self) -> i64 {
        if self.kind() == KeyKind::Empty {
            return -2;
        }
        // SAFETY: ptr is an open, existing key.
        let ttl = unsafe { raw::RedisModule_GetExpire.unwrap()(self.ptr) };
        if ttl == raw::REDISMODULE_NO_EXPIRE as i64 {
            -1
        } else {
            ttl
        }
    }

    /// Sets an absolute unix-ms expiry on an existing key.
    pub fn set_abs_expire(&self, at_ms: i64) {
        // SAFETY: ptr is an open, existing, writable key.
        unsafe {
            raw::RedisModule_SetAbsExpire.unwrap()(self.ptr, at_ms);
        }
    }

    pub fn delete(&self) {
        // SAFETY: ptr is an open, writable key.
        unsafe {
            raw::RedisModule_DeleteKey.unwrap()(self.ptr);
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: ptr was opened by OpenKey and is closed once.
            unsafe { raw::RedisModule_CloseKey.unwrap()(self.ptr) }
        }
    }
}

/// Whether `name` exists, without opening a key handle (so nothing is signalled
/// as modified). Falls back to a read-only open where the API is missing.
pub fn key_exists(ctx: &Context, name: &RedisString) -> bool {
    // SAFETY: ctx and name are valid for the call.
    match unsafe { raw::RedisModule_KeyExists } {
        Some(exists) => unsafe { exists(ctx.get_raw(), name.inner) != 0 },
        None => Key::open_readonly(ctx, name).kind() != KeyKind::Empty,
    }
}

thread_local! {
    /// Strings the hot path would otherwise create and free on every call. Made
    /// without a context, so they live as long as the thread.
    static ONE: RedisString = RedisString::create_from_slice(ptr::null_mut(), b"1");
    static ZERO: RedisString = RedisString::create_from_slice(ptr::null_mut(), b"0");
}

/// `PUBLISH channel 0`, the message of every Redisson unlock and wake.
pub fn publish_zero(ctx: &Context, channel: &RedisString) {
    ZERO.with(|zero| publish(ctx, channel, zero));
}

/// Propagates `cmd key` to replicas and the AOF.
pub fn replicate_key(ctx: &Context, cmd: &CStr, key: &RedisString) {
    // SAFETY: the format "s" takes one RedisModuleString.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(ctx.get_raw(), cmd.as_ptr(), c"s".as_ptr(), key.inner);
    }
}

/// Propagates `cmd key n`.
pub fn replicate_key_int(ctx: &Context, cmd: &CStr, key: &RedisString, n: i64) {
    // SAFETY: the format "sl" takes a RedisModuleString and a long long.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.get_raw(),
            cmd.as_ptr(),
            c"sl".as_ptr(),
            key.inner,
            n as c_longlong,
        );
    }
}

/// Propagates `cmd key field`.
pub fn replicate_key_field(ctx: &Context, cmd: &CStr, key: &RedisString, field: &RedisString) {
    // SAFETY: the format "ss" takes two RedisModuleStrings.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.get_raw(),
            cmd.as_ptr(),
            c"ss".as_ptr(),
            key.inner,
            field.inner,
        );
    }
}

/// Propagates `cmd key field n`.
pub fn replicate_key_field_int(
    ctx: &Context,
    cmd: &CStr,
    key: &RedisString,
    field: &RedisString,
    n: i64,
) {
    // SAFETY: the format "ssl" takes two RedisModuleStrings and a long long.
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.get_raw(),
            cmd.as_ptr(),
            c"ssl".as_ptr(),
            key.inner,
            field.inner,
            n as c_longlong,
        );
    }
}

/// `PUBLISH channel message`, binary-safe.
pub fn publish(ctx: &Context, channel: &RedisString, message: &RedisString) {
    // SAFETY: both strings are valid for the call.
    unsafe {
        raw::RedisModule_PublishMessage.unwrap()(ctx.get_raw(), channel.inner, message.inner);
    }
}

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

/// Writes one section of integer fields to an INFO reply.
pub fn info_section(info: *mut raw::RedisModuleInfoCtx, fields: &[(&CStr, i64)]) {
    // SAFETY: info is the live info context handed to the callback; an empty
    // section name means the module's own name.
    unsafe {
        raw::RedisModule_InfoAddSection.unwrap()(info, c"".as_ptr());
        for (name, value) in fields {
            raw::RedisModule_InfoAddFieldLongLong.unwrap()(info, name.as_ptr(), *value);
        }
    }
}

/// One argument of a command, for `COMMAND DOCS`.
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// The keyword before the value, e.g. `LEASE`.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub summary: &'static CStr,
}

#[derive(Clone, Copy)]
pub enum ArgKind {
    Key,
    String,
    Integer,
    /// A bare keyword such as `FAIR`.
    Flag,
}

/// Describes a registered command through `RedisModule_SetCommandInfo` (7.0+).
/// Returns false where the server lacks the API or refuses the description.
pub fn set_command_info(
    ctx: &Context,
    command: &CStr,
    summary: &'static CStr,
    arity: i32,
    args: &[ArgDoc],
) -> bool {
    // SAFETY: checks the function pointers before use; every pointer handed to
    // Redis points into memory leaked for the life of the process, which is what
    // SetCommandInfo expects (it copies, but we stay conservative).
    unsafe {
        let (Some(get_command), Some(set_info)) =
            (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo)
        else {
            return false;
        };
        let handle = get_command(ctx.get_raw(), command.as_ptr());
        if handle.is_null() {
            return false;
        }
        let mut raw_args: Vec<raw::RedisModuleCommandArg> = args
            .iter()
            .map(|arg| {
                let mut entry: raw::RedisModuleCommandArg = std::mem::zeroed();
                entry.name = arg.name.as_ptr();
                entry.type_ = match arg.kind {
                    ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                    ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                    ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                    ArgKind::Flag => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                };
                entry.key_spec_index = if matches!(arg.kind, ArgKind::Key) {
                    0
                } else {
                    -1
                };
                entry.token = arg.token.map_or(ptr::null(), CStr::as_ptr);
                entry.summary = arg.summary.as_ptr();
                entry.flags = if arg.optional {
                    raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int
                } else {
                    raw::REDISMODULE_CMD_ARG_NONE as c_int
                };
                entry
            })
            .collect();
        raw_args.push(std::mem::zeroed());
        let version = Box::leak(Box::new(raw::RedisModuleCommandInfoVersion {
            version: 1,
            sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
            sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
            sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
        }));
        let mut info: raw::RedisModuleCommandInfo = std::mem::zeroed();
        info.version = version;
        info.summary = summary.as_ptr();
        info.since = c"0.1.0".as_ptr();
        info.arity = arity;
        info.args = Box::leak(raw_args.into_boxed_slice()).as_mut_ptr();
        set_info(handle, &info) == raw::REDISMODULE_OK as c_int
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

/// Raw callback shapes, for the extern "C" functions the module hands to Redis.
pub type RawCtx = *mut raw::RedisModuleCtx;
pub type RawBlocked = *mut raw::RedisModuleBlockedClient;
pub type CommandCallback = extern "C" fn(RawCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;
pub type DisconnectCallback = extern "C" fn(RawCtx, RawBlocked);
pub type TimerCallback = extern "C" fn(RawCtx, *mut c_void);
pub type KeyspaceCallback =
    extern "C" fn(RawCtx, c_int, *const c_char, *mut raw::RedisModuleString) -> c_int;
pub type ServerEventCallback = extern "C" fn(RawCtx, raw::RedisModuleEvent, u64, *mut c_void);

/// A client blocked by `RedisModule_BlockClient`. Redis requires exactly one
/// `RedisModule_UnblockClient` per handle, so `unblock` consumes it.
#[derive(Debug)]
pub struct BlockedClient(RawBlocked);

impl BlockedClient {
    /// Blocks the client running `ctx`. `timeout_ms` 0 waits forever. The outcome
    /// handed to `unblock` reaches `on_reply` and is then dropped as a `Box<T>`.
    pub fn block<T>(
        ctx: &Context,
        on_reply: CommandCallback,
        on_timeout: CommandCallback,
        on_disconnect: DisconnectCallback,
        timeout_ms: i64,
    ) -> BlockedClient {
        // SAFETY: ctx is the context of a command that may block; the callbacks
        // have the C signatures Redis expects, and free_boxed::<T> matches what unblock() hands over.
        unsafe {
            let handle = raw::RedisModule_BlockClient.unwrap()(
                ctx.get_raw(),
                Some(on_reply as RawCommandFn),
                Some(on_timeout as RawCommandFn),
                Some(free_boxed::<T>),
                timeout_ms,
            );
            raw::RedisModule_SetDisconnectCallback.unwrap()(
                handle,
                Some(on_disconnect as RawDisconnectFn),
            );
            BlockedClient(handle)
        }
    }

    /// An id for this handle, equal to `handle_id_of` in its callbacks.
    pub fn id(&self) -> usize {
        self.0 as usize
    }

    /// Ends the block. With an outcome the reply callback gets it; without, the
    /// client already left (timeout, disconnect) and nothing is replied.
    pub fn unblock<T>(self, outcome: Option<T>) {
        let data = outcome.map_or(ptr::null_mut(), |o| {
            Box::into_raw(Box::new(o)) as *mut c_void
        });
        // SAFETY: each handle is unblocked once, since self is consumed.
        unsafe {
            raw::RedisModule_UnblockClient.unwrap()(self.0, data);
        }
    }

    /// The handle behind a disconnect callback's argument.
    pub fn from_disconnect(handle: RawBlocked) -> BlockedClient {
        BlockedClient(handle)
    }

    /// Forgets the handle without unblocking, for a handle still kept elsewhere.
    pub fn forget(self) {}
}

type RawCommandFn = unsafe extern "C" fn(RawCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;
type RawDisconnectFn = unsafe extern "C" fn(RawCtx, RawBlocked);
type RawTimerFn = unsafe extern "C" fn(RawCtx, *mut c_void);
type RawKeyspaceFn =
    unsafe extern "C" fn(RawCtx, c_int, *const c_char, *mut raw::RedisModuleString) -> c_int;
type RawServerEventFn = unsafe extern "C" fn(RawCtx, raw::RedisModuleEvent, u64, *mut c_void);

unsafe extern "C" fn free_boxed<T>(_ctx: RawCtx, data: *mut c_void) {
    if !data.is_null() {
        // SAFETY: data came from Box::<T>::into_raw in BlockedClient::unblock.
        drop(Box::from_raw(data as *mut T));
    }
}

/// The blocked-client handle behind a reply or timeout callback.
pub fn handle_id_of(ctx: &Context) -> usize {
    // SAFETY: ctx is a blocked-client callback context.
    unsafe { raw::RedisModule_GetBlockedClientHandle.unwrap()(ctx.get_raw()) as usize }
}

/// The outcome handed to `unblock`, inside a reply or timeout callback.
pub fn blocked_outcome<T>(ctx: &Context) -> Option<&T> {
    // SAFETY: the private data is null or a Box<T> from unblock(), alive until the
    // free callback runs after this one.
    unsafe {
        let data = raw::RedisModule_GetBlockedClientPrivateData.unwrap()(ctx.get_raw());
        (data as *const T).as_ref()
    }
}

/// The id of the connection running `ctx` (as `CLIENT ID`).
pub fn client_id(ctx: &Context) -> u64 {
    // SAFETY: ctx is live.
    unsafe { raw::RedisModule_GetClientId.unwrap()(ctx.get_raw()) }
}

pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: ctx is live.
    unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.get_raw()) }
}

/// Selects `db` for the keys opened next through `ctx`; false if it does not exist.
pub fn select_db(ctx: &Context, db: i32) -> bool {
    // SAFETY: ctx is live.
    unsafe { raw::RedisModule_SelectDb.unwrap()(ctx.get_raw(), db) == raw::REDISMODULE_OK as c_int }
}

pub type TimerId = raw::RedisModuleTimerID;

/// A one-shot module timer that calls `callback` with `tag` after `delay_ms`.
pub fn create_timer(ctx: &Context, delay_ms: i64, callback: TimerCallback, tag: u64) -> TimerId {
    // SAFETY: the tag travels as a pointer-sized integer and is never dereferenced.
    unsafe {
        raw::RedisModule_CreateTimer.unwrap()(
            ctx.get_raw(),
            delay_ms,
            Some(callback as RawTimerFn),
            tag as usize as *mut c_void,
        )
    }
}

/// Stops a pending timer. Never call it for the timer whose callback is running.
pub fn stop_timer(ctx: &Context, id: TimerId) -> bool {
    let mut data: *mut c_void = ptr::null_mut();
    // SAFETY: data receives the tag, which needs no freeing.
    unsafe {
        raw::RedisModule_StopTimer.unwrap()(ctx.get_raw(), id, &mut data)
            == raw::REDISMODULE_OK as c_int
    }
}

/// The tag a timer was created with.
pub fn timer_tag(data: *mut c_void) -> u64 {
    data as usize as u64
}

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

/// A C string handed to a callback, as bytes.
pub fn c_str_bytes<'a>(s: *const c_char) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    // SAFETY: Redis passes NUL-terminated event names that outlive the callback.
    unsafe { CStr::from_ptr(s).to_bytes() }
}

/// The bytes of a RedisModuleString handed to a callback.
pub fn string_bytes<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    RedisString::string_as_slice(s)
}

/// A binary-safe RedisModuleString (the crate's `create_string` refuses NUL bytes).
pub fn string(ctx: &Context, bytes: &[u8]) -> RedisString {
    RedisString::create_from_slice(ctx.get_raw(), bytes)
}

/// Calls `f` with a command's arguments as `RedisString`s borrowed from `argv`:
/// no allocation and no reference counting for the common short call.
pub fn with_args<R>(
    ctx: RawCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    f: impl FnOnce(&[RedisString]) -> R,
) -> R {
    const INLINE: usize = 12;
    let raw_args: &[*mut raw::RedisModuleString] = if argv.is_null() || argc <= 0 {
        &[]
    } else {
        // SAFETY: Redis hands argc valid strings that outlive the command call.
        unsafe { std::slice::from_raw_parts(argv, argc as usize) }
    };
    let borrow = |arg: &*mut raw::RedisModuleString| {
        std::mem::ManuallyDrop::new(RedisString::from_redis_module_string(ctx, *arg))
    };
    if raw_args.len() <= INLINE {
        let mut inline: [std::mem::MaybeUninit<std::mem::ManuallyDrop<RedisString>>; INLINE] =
            [const { std::mem::MaybeUninit::uninit() }; INLINE];
        for (slot, arg) in inline.iter_mut().zip(raw_args) {
            slot.write(borrow(arg));
        }
        // SAFETY: the first raw_args.len() slots are initialised; ManuallyDrop<T> has
        // T's layout, and none of them is dropped, so Redis keeps its strings.
        let args = unsafe {
            std::slice::from_raw_parts(inline.as_ptr() as *const RedisString, raw_args.len())
        };
        f(args)
    } else {
        let owned: Vec<std::mem::ManuallyDrop<RedisString>> = raw_args.iter().map(borrow).collect();
        // SAFETY: as above, for a heap array.
        let args = unsafe {
            std::slice::from_raw_parts(owned.as_ptr() as *const RedisString, owned.len())
        };
        f(args)
    }
}

/// Registers a module command with the legacy key range 1..1 (one key, first argument).
pub fn create_command(ctx: &Context, name: &CStr, handler: CommandCallback, flags: &CStr) -> bool {
    // SAFETY: called from OnLoad with static C strings.
    unsafe {
        raw::RedisModule_CreateCommand.unwrap()(
            ctx.get_raw(),
            name.as_ptr(),
            Some(handler as RawCommandFn),
            flags.as_ptr(),
            1,
            1,
            1,
        ) == raw::REDISMODULE_OK as c_int
    }
}
