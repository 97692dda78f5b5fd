//! What `COMMAND DOCS` and redis-cli's hints say about each command.

use redis_module::Context;

use crate::ffi::{set_command_info, ArgDoc, ArgKind};

const fn arg(
    name: &'static std::ffi::CStr,
    kind: ArgKind,
    summary: &'static std::ffi::CStr,
) -> ArgDoc {
    ArgDoc {
        name,
        kind,
        token: None,
        optional: false,
        summary,
    }
}

const fn option(
    name: &'static std::ffi::CStr,
    kind: ArgKind,
    token: &'static std::ffi::CStr,
    summary: &'static std::ffi::CStr,
) -> ArgDoc {
    ArgDoc {
        name,
        kind,
        token: Some(token),
        optional: true,
        summary,
    }
}

/// Sets command docs where the server has `RedisModule_SetCommandInfo` (7.0+).
/// Also sets each command's arity, so Redis itself rejects a wrong argument count.
pub fn describe_commands(ctx: &Context) {
    let key = arg(
        c"key",
        ArgKind::Key,
        c"the lock's name, a Redis key holding a hash",
    );
    let owner = || {
        arg(
            c"owner",
            ArgKind::String,
            c"who holds the lock: any bytes, 1 to 1024 of them",
        )
    };
    let lease = || {
        option(
            c"ms",
            ArgKind::Integer,
            c"LEASE",
            c"lease in ms (default rlock.lease-ms)",
        )
    };
    let described = [
        set_command_info(
            ctx,
            c"rlock.acquire",
            c"Takes or re-enters a lock. Replies the hold count (or fencing token), or null if held by another owner.",
            -3,
            &[
                key,
                owner(),
                lease(),
                option(c"ms", ArgKind::Integer, c"BLOCK", c"wait up to ms inside the server; 0 waits forever"),
                option(c"fair", ArgKind::Flag, c"FAIR", c"first come, first served on the Redisson fair queue"),
                option(c"token", ArgKind::Flag, c"TOKEN", c"reply the fencing token instead of the hold count"),
                option(c"session", ArgKind::Flag, c"SESSION", c"release the hold when this connection closes"),
            ],
        ),
        set_command_info(
            ctx,
            c"rlock.release",
            c"Releases one hold. Replies 1 when the lock is freed, 0 when a re-entry was undone.",
            3,
            &[arg(c"key", ArgKind::Key, c"the lock's name"), owner()],
        ),
        set_command_info(
            ctx,
            c"rlock.renew",
            c"Resets the lease of a held lock. Replies 1 if renewed, 0 if not held by owner.",
            -3,
            &[arg(c"key", ArgKind::Key, c"the lock's name"), owner(), lease()],
        ),
        set_command_info(
            ctx,
            c"rlock.forcerelease",
            c"Deletes the lock whoever holds it. Replies 1 if a lock was deleted.",
            2,
            &[arg(c"key", ArgKind::Key, c"the lock's name")],
        ),
        set_command_info(
            ctx,
            c"rlock.info",
            c"Shows holders, pttl, fair queue, blocked waiters and fencing token of a lock.",
            2,
            &[arg(c"key", ArgKind::Key, c"the lock's name")],
        ),
    ];
    if described.contains(&false) {
        ctx.log_notice("rlock: this server does not take command docs; COMMAND DOCS will be empty");
    }
}
