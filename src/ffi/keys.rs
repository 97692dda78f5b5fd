//! Keys: open, read, write, expire, delete, through the low-level key API.

use std::os::raw::{c_int, c_void};
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

    /// A hash field's value, the field named by a C string (no string object is made
    /// for it). Call only on a hash.
    pub fn hash_get_c(&self, field: &std::ffi::CStr) -> Option<RedisString> {
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        // SAFETY: with CFIELDS, HashGet takes (C string, out-pointer) pairs ended by
        // NULL; the field outlives the call. The string it returns is ours to free.
        unsafe {
            raw::RedisModule_HashGet.unwrap()(
                self.ptr,
                raw::REDISMODULE_HASH_CFIELDS as c_int,
                field.as_ptr(),
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>(),
            );
        }
        (!value.is_null()).then(|| RedisString::from_redis_module_string(ptr::null_mut(), value))
    }

    /// Every field of a hash and its value, read through `RedisModule_ScanKey` (no
    /// `RedisModule_Call`, nothing written). Call only on a hash.
    pub fn hash_fields(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(self.value_length());
        if self.ptr.is_null() {
            return fields;
        }
        extern "C" fn collect(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            privdata: *mut c_void,
        ) {
            // SAFETY: privdata is the Vec handed to ScanKey below, alive for the scan;
            // field and value are valid for this callback, and copied here.
            unsafe {
                let fields = &mut *(privdata as *mut Vec<(Vec<u8>, Vec<u8>)>);
                let bytes = |s: *mut raw::RedisModuleString| {
                    if s.is_null() {
                        return Vec::new();
                    }
                    let mut len = 0usize;
                    let ptr = raw::RedisModule_StringPtrLen.unwrap()(s, &mut len);
                    std::slice::from_raw_parts(ptr as *const u8, len).to_vec()
                };
                fields.push((bytes(field), bytes(value)));
            }
        }
        // SAFETY: ptr is an open hash key; the cursor is created, run to its end (each
        // ScanKey call a step, 0 when done) and destroyed; privdata outlives the scan.
        unsafe {
            let cursor = raw::RedisModule_ScanCursorCreate.unwrap()();
            let privdata = &mut fields as *mut Vec<(Vec<u8>, Vec<u8>)> as *mut c_void;
            while raw::RedisModule_ScanKey.unwrap()(self.ptr, cursor, Some(collect), privdata) != 0
            {
            }
            raw::RedisModule_ScanCursorDestroy.unwrap()(cursor);
        }
        fields
    }

    /// Sets a hash field to an integer, creating the hash if the key is empty.
    pub fn hash_set_int(&self, ctx: &Context, field: &RedisString, value: i64) {
        if value == 1 {
            // The common case, a first hold: a shared "1", since HashSet copies.
            super::with_constant(b"1", |one| self.hash_set(field, one));
            return;
        }
        let value = RedisString::create_from_slice(ctx.get_raw(), value.to_string().as_bytes());
        self.hash_set(field, &value);
    }

    /// Sets a hash field, creating the hash if the key is empty.
    pub fn hash_set(&self, field: &RedisString, value: &RedisString) {
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

    /// What `read` makes of the key's content, for a string key, without copying it.
    pub fn with_string<T>(&self, read: impl FnOnce(&[u8]) -> Option<T>) -> Option<T> {
        let mut len = 0usize;
        // SAFETY: DMA in read mode on a string key; the bytes are only borrowed for `read`,
        // which cannot reach the key.
        unsafe {
            let data = raw::RedisModule_StringDMA.unwrap()(
                self.ptr,
                &mut len,
                raw::REDISMODULE_READ as c_int,
            );
            if data.is_null() {
                return None;
            }
            read(std::slice::from_raw_parts(data as *const u8, len))
        }
    }

    /// The key's content as bytes, for a string key.
    pub fn string_value(&self) -> Vec<u8> {
        self.with_string(|bytes| Some(bytes.to_vec()))
            .unwrap_or_default()
    }

    /// Makes `bytes` the string's whole content, in place, as `INCRBY` does: the key
    /// keeps its TTL, and is created when missing. Call on a writable key holding a
    /// string or nothing. False if the server refused.
    pub fn string_write(&self, bytes: &[u8]) -> bool {
        // SAFETY: ptr is an open, writable key; after the truncate the DMA pointer has
        // room for exactly `bytes.len()` bytes, written before anything else runs.
        unsafe {
            if raw::RedisModule_StringTruncate.unwrap()(self.ptr, bytes.len())
                != raw::REDISMODULE_OK as c_int
            {
                return false;
            }
            let mut len = 0usize;
            let data = raw::RedisModule_StringDMA.unwrap()(
                self.ptr,
                &mut len,
                raw::REDISMODULE_WRITE as c_int,
            );
            if data.is_null() || len != bytes.len() {
                return false;
            }
            ptr::copy_nonoverlapping(bytes.as_ptr(), data as *mut u8, len);
        }
        true
    }

    /// `ZADD key score member`, or with `only_existing` `ZADD key XX score member`. Call
    /// on a writable key holding a zset or nothing. True if the member is there now.
    pub fn zset_add(&self, score: f64, member: &RedisString, only_existing: bool) -> bool {
        // The server creates an empty zset before it looks at XX: one left behind breaks
        // DEBUG DIGEST on Redis 7.0, and is not a key Redis itself would ever keep.
        if only_existing && self.kind() == KeyKind::Empty {
            return false;
        }
        let mut flags: c_int = if only_existing {
            raw::REDISMODULE_ZADD_XX as c_int
        } else {
            0
        };
        // SAFETY: ptr is an open, writable key; member is a valid string.
        let added =
            unsafe { raw::RedisModule_ZsetAdd.unwrap()(self.ptr, score, member.inner, &mut flags) };
        added == raw::REDISMODULE_OK as c_int && flags & raw::REDISMODULE_ZADD_NOP as c_int == 0
    }

    /// `ZREM key member`; the key goes with its last member. True if it was there.
    pub fn zset_remove(&self, member: &RedisString) -> bool {
        let mut deleted: c_int = 0;
        // SAFETY: ptr is an open, writable key; member is a valid string.
        let ok = unsafe { raw::RedisModule_ZsetRem.unwrap()(self.ptr, member.inner, &mut deleted) };
        ok == raw::REDISMODULE_OK as c_int && deleted != 0
    }

    /// `ZSCORE key member`, for a key holding a zset or nothing.
    pub fn zset_score(&self, member: &RedisString) -> Option<f64> {
        if self.ptr.is_null() {
            return None;
        }
        let mut score = 0f64;
        // SAFETY: ptr is an open key; member is a valid string.
        let ok = unsafe { raw::RedisModule_ZsetScore.unwrap()(self.ptr, member.inner, &mut score) };
        (ok == raw::REDISMODULE_OK as c_int).then_some(score)
    }

    /// The members scored from `min` to `max` (both included), lowest first, with their
    /// scores; at most `limit` of them. For a key holding a zset or nothing.
    pub fn zset_range_by_score(&self, min: f64, max: f64, limit: usize) -> Vec<(Vec<u8>, f64)> {
        let mut found = Vec::new();
        if self.ptr.is_null() || limit == 0 {
            return found;
        }
        // SAFETY: ptr is an open zset key; each element string is copied, then freed (it
        // was made for us, outside any context's automatic memory); the range is stopped.
        unsafe {
            if raw::RedisModule_ZsetFirstInScoreRange.unwrap()(self.ptr, min, max, 0, 0)
                != raw::REDISMODULE_OK as c_int
            {
                return found;
            }
            while found.len() < limit
                && raw::RedisModule_ZsetRangeEndReached.unwrap()(self.ptr) == 0
            {
                let mut score = 0f64;
                let element =
                    raw::RedisModule_ZsetRangeCurrentElement.unwrap()(self.ptr, &mut score);
                if element.is_null() {
                    break;
                }
                let mut len = 0usize;
                let bytes = raw::RedisModule_StringPtrLen.unwrap()(element, &mut len);
                found.push((
                    std::slice::from_raw_parts(bytes as *const u8, len).to_vec(),
                    score,
                ));
                raw::RedisModule_FreeString.unwrap()(ptr::null_mut(), element);
                if raw::RedisModule_ZsetRangeNext.unwrap()(self.ptr) == 0 {
                    break;
                }
            }
            raw::RedisModule_ZsetRangeStop.unwrap()(self.ptr);
        }
        found
    }

    /// Replaces the key with a string holding `value`, made for the key alone.
    pub fn string_set_int(&self, ctx: &Context, value: i64) {
        // SAFETY: the key takes its own reference to the new string; ours is freed here.
        unsafe {
            let value = raw::RedisModule_CreateStringFromLongLong.unwrap()(ctx.get_raw(), value);
            raw::RedisModule_StringSet.unwrap()(self.ptr, value);
            raw::RedisModule_FreeString.unwrap()(ctx.get_raw(), value);
        }
    }

    /// Replaces the key with a string holding `value`. Redis 7.0 keeps `value` itself in
    /// the key (8.x and Valkey copy it): never pass a string the module keeps, such as
    /// `with_constant`'s, whose reference count the server's lazy-free thread would then
    /// change while the main thread does (`FLUSHALL ASYNC`).
    pub fn string_set(&self, value: &RedisString) {
        // SAFETY: ptr is an open, writable key; the key takes its own reference.
        unsafe {
            raw::RedisModule_StringSet.unwrap()(self.ptr, value.inner);
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

/// Whether the server itself would let a client of this context use `keys` here now:
/// an `EXISTS` of them through `RedisModule_Call`, which in a cluster fails (errno
/// `EPERM`) when the server would redirect a client instead (`-MOVED`, `-ASK`,
/// `-TRYAGAIN`, `-CLUSTERDOWN`). A per-key check, no `CLUSTER NODES`.
pub fn keys_routed_here(ctx: &Context, keys: &[&RedisString]) -> bool {
    let mut argv: Vec<*mut raw::RedisModuleString> = keys.iter().map(|k| k.inner).collect();
    // SAFETY: the format "v" takes an array of RedisModuleStrings and its length, valid
    // for the call; the reply, when there is one, is freed here.
    unsafe {
        let reply = raw::RedisModule_Call.unwrap()(
            ctx.get_raw(),
            c"EXISTS".as_ptr(),
            c"v".as_ptr(),
            argv.as_mut_ptr(),
            argv.len(),
        );
        if reply.is_null() {
            return false;
        }
        raw::RedisModule_FreeCallReply.unwrap()(reply);
        true
    }
}
