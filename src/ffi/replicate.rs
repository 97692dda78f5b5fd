//! Effects sent to replicas and the AOF, and pub/sub messages.

use std::ffi::CStr;
use std::os::raw::c_longlong;

use redis_module::{raw, Context, RedisString};

/// `RedisModule_Replicate(ctx, cmd, format, args...)`, the one call behind every effect
/// below. The format's letters name the arguments that follow, in order: `s` a
/// `RedisModuleString`, `l` a long long, `v` an array of strings and its length (which
/// must outlive the call).
macro_rules! replicate {
    ($ctx:expr, $cmd:expr, $format:literal $(, $arg:expr)*) => {
        // SAFETY: each caller's format names the arguments it passes, as above.
        unsafe {
            raw::RedisModule_Replicate.unwrap()(
                $ctx.get_raw(),
                $cmd.as_ptr(),
                $format.as_ptr()
                $(, $arg)*
            );
        }
    };
}

/// `PUBLISH channel 0`, the message of every Redisson unlock and wake.
pub fn publish_zero(ctx: &Context, channel: &RedisString) {
    super::with_constant(b"0", |zero| publish(ctx, channel, zero));
}

/// Propagates `cmd key` to replicas and the AOF.
pub fn replicate_key(ctx: &Context, cmd: &CStr, key: &RedisString) {
    replicate!(ctx, cmd, c"s", key.inner);
}

/// Propagates `cmd key n`.
pub fn replicate_key_int(ctx: &Context, cmd: &CStr, key: &RedisString, n: i64) {
    replicate!(ctx, cmd, c"sl", key.inner, n as c_longlong);
}

/// Propagates `cmd key arg...`.
pub fn replicate_key_args(ctx: &Context, cmd: &CStr, key: &RedisString, args: &[RedisString]) {
    let mut argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
    replicate!(ctx, cmd, c"sv", key.inner, argv.as_mut_ptr(), argv.len());
}

/// Propagates `SET key value PXAT at_ms`.
pub fn replicate_set_pxat(ctx: &Context, key: &RedisString, value: &RedisString, at_ms: i64) {
    super::with_constant(b"PXAT", |pxat| {
        replicate!(
            ctx,
            c"SET",
            c"sssl",
            key.inner,
            value.inner,
            pxat.inner,
            at_ms as c_longlong
        );
    })
}

/// Propagates `cmd key field`.
pub fn replicate_key_field(ctx: &Context, cmd: &CStr, key: &RedisString, field: &RedisString) {
    replicate!(ctx, cmd, c"ss", key.inner, field.inner);
}

/// Propagates `cmd key field n`.
pub fn replicate_key_field_int(
    ctx: &Context,
    cmd: &CStr,
    key: &RedisString,
    field: &RedisString,
    n: i64,
) {
    replicate!(ctx, cmd, c"ssl", key.inner, field.inner, n as c_longlong);
}

/// Propagates `cmd key field value`.
pub fn replicate_key_field_value(
    ctx: &Context,
    cmd: &CStr,
    key: &RedisString,
    field: &RedisString,
    value: &RedisString,
) {
    replicate!(ctx, cmd, c"sss", key.inner, field.inner, value.inner);
}

/// Propagates `cmd key field value field2 n`: two fields in one command (`HSET`).
pub fn replicate_key_two_fields(
    ctx: &Context,
    cmd: &CStr,
    key: &RedisString,
    (field, value): (&RedisString, &RedisString),
    (field2, n): (&RedisString, i64),
) {
    replicate!(
        ctx,
        cmd,
        c"ssssl",
        key.inner,
        field.inner,
        value.inner,
        field2.inner,
        n as c_longlong
    );
}

/// `PUBLISH channel message`, binary-safe; `SPUBLISH` in a cluster, where Redisson
/// listens with `SSUBSCRIBE` (its channels carry the lock's hash tag, so their slot
/// is this node's).
pub fn publish(ctx: &Context, channel: &RedisString, message: &RedisString) {
    // SAFETY: both strings are valid for the call; the shard variant is checked.
    unsafe {
        match raw::RedisModule_PublishMessageShard {
            Some(shard) if super::in_cluster(ctx) => {
                shard(ctx.get_raw(), channel.inner, message.inner);
            }
            _ => {
                raw::RedisModule_PublishMessage.unwrap()(
                    ctx.get_raw(),
                    channel.inner,
                    message.inner,
                );
            }
        }
    }
}

/// Connections subscribed to `channel`: `PUBSUB NUMSUB`, or `PUBSUB SHARDNUMSUB` in a
/// cluster, where unlock messages go by sharded pub/sub.
pub fn channel_subscribers(ctx: &Context, channel: &RedisString) -> i64 {
    let which: &[u8] = if super::in_cluster(ctx) {
        b"SHARDNUMSUB"
    } else {
        b"NUMSUB"
    };
    match ctx.call("PUBSUB", &[which, channel.as_slice()]) {
        Ok(redis_module::RedisValue::Array(reply)) => match reply.get(1) {
            Some(redis_module::RedisValue::Integer(n)) => *n,
            _ => 0,
        },
        _ => 0,
    }
}
