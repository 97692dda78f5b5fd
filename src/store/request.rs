//! Records of calls made with `REQ id`: `rlock_request:{K}:<id>`, a string with
//! the lease as its TTL, written and replicated with the change it records.

use redis_module::{Context, NotifyEvent, RedisError, RedisString};

use super::{announce, helper_string};
use crate::core::requests::{
    encode, leased_ids, record_key, replay, Replay, RequestId, RequestKind, REQUEST_PREFIX,
};
use crate::core::semaphore::PermitId;
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// The record of one request id on one lock, named once for the lookup and the write.
pub struct RequestRecord {
    name: RedisString,
}

impl RequestRecord {
    pub fn new(ctx: &Context, lock_name: &RedisString, id: &RequestId) -> RequestRecord {
        let helper = helper_string(ctx, REQUEST_PREFIX, lock_name.as_slice());
        RequestRecord {
            name: ffi::string(ctx, &record_key(helper.as_slice(), id)),
        }
    }

    /// The reply of an earlier call with this id, if `owner` made the same call on this
    /// lock within its lease. An id used by another owner or command is an error.
    pub fn earlier_reply(
        &self,
        ctx: &Context,
        kind: RequestKind,
        owner: &[u8],
    ) -> Result<Option<i64>, RedisError> {
        let key = Key::open_readonly(ctx, &self.name);
        match key.kind() {
            KeyKind::Empty => Ok(None),
            KeyKind::String => match replay(&key.string_value(), kind, owner) {
                Replay::Reply(reply) => Ok(Some(reply)),
                Replay::Conflict => Err(RedisError::Str(errors::REQUEST_CONFLICT)),
            },
            _ => Err(errors::wrong_type()),
        }
    }

    /// The permit ids an earlier `RSEM.LEASE` with this id granted, if it was made on
    /// this semaphore within its lease. An id used by another command is an error.
    pub fn earlier_lease(&self, ctx: &Context) -> Result<Option<Vec<PermitId>>, RedisError> {
        let key = Key::open_readonly(ctx, &self.name);
        match key.kind() {
            KeyKind::Empty => Ok(None),
            KeyKind::String => {
                let record = key.string_value();
                let ids = leased_ids(&record)
                    .and_then(|shown| shown.chunks(32).map(PermitId::parse_hex).collect())
                    .ok_or(RedisError::Str(errors::REQUEST_CONFLICT))?;
                Ok(Some(ids))
            }
            _ => Err(errors::wrong_type()),
        }
    }

    /// Deletes the record (its call was undone): the same call sent again is a new call.
    pub fn forget(&self, ctx: &Context) {
        let key = Key::open_writable(ctx, &self.name);
        if key.kind() != KeyKind::Empty {
            key.delete();
            ffi::replicate_key(ctx, c"DEL", &self.name);
            announce(ctx, NotifyEvent::GENERIC, "del", &self.name);
        }
    }

    /// Records that `owner`'s call `kind` with this id replied `reply`, for `ttl_ms`.
    /// Called only after `earlier_reply` found none, so it cannot fail.
    pub fn write(&self, ctx: &Context, kind: RequestKind, owner: &[u8], reply: i64, ttl_ms: i64) {
        let value = ffi::string(ctx, &encode(kind, reply, owner));
        let at_ms = ffi::now_ms().saturating_add(ttl_ms);
        let key = Key::open_writable(ctx, &self.name);
        key.string_set(&value);
        key.set_abs_expire(at_ms);
        ffi::replicate_set_pxat(ctx, &self.name, &value, at_ms);
        announce(ctx, NotifyEvent::STRING, "set", &self.name);
    }
}
