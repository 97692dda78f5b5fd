//! Running a command on the caller's behalf (`RLOCK.GUARD`), and naming its keys.

use std::ffi::CString;
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisString};

/// Why `call_replying` ran nothing: the server refused the command before running it,
/// on a server that does not turn such refusals into error replies (`errno`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallRefused(pub i32);

/// `errno` of a call the ACL refused.
const EACCES: i32 = 13;

/// Runs `argv` (its name first) as the caller: checked against the caller's ACL user,
/// keys included (`C`), replicated and written to the AOF as itself (`!`), refused over
/// `maxmemory` if the command is `denyoom` (`M`), errors replied as errors (`E`), in
/// the caller's protocol (`0`). Its reply becomes the caller's reply.
pub fn call_replying(ctx: &Context, argv: &[RedisString]) -> Result<(), CallRefused> {
    let Some((name, args)) = argv.split_first() else {
        return Err(CallRefused(0));
    };
    let Ok(name) = CString::new(name.as_slice()) else {
        return Err(CallRefused(0));
    };
    let mut raw_args: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
    // SAFETY: "v" takes an array of live RedisModuleStrings and its length, valid for the
    // call; the reply is handed to the caller's reply and freed here, once.
    unsafe {
        let reply = raw::RedisModule_Call.unwrap()(
            ctx.get_raw(),
            name.as_ptr(),
            c"v!CEM0".as_ptr(),
            raw_args.as_mut_ptr(),
            raw_args.len(),
        );
        if reply.is_null() {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            return Err(CallRefused(errno));
        }
        // Redis 7.0 words an ACL refusal of a module's call `ERR acl verification failed`;
        // later servers say `NOPERM`: the caller gets NOPERM from every server.
        if raw::RedisModule_CallReplyType.unwrap()(reply) == raw::REDISMODULE_REPLY_ERROR as c_int {
            let mut len = 0usize;
            let text = raw::RedisModule_CallReplyStringPtr.unwrap()(reply, &mut len);
            let text = match text.is_null() {
                true => &[][..],
                false => std::slice::from_raw_parts(text as *const u8, len),
            };
            if text.starts_with(b"ERR acl verification failed") {
                raw::RedisModule_FreeCallReply.unwrap()(reply);
                return Err(CallRefused(EACCES));
            }
        }
        raw::RedisModule_ReplyWithCallReply.unwrap()(ctx.get_raw(), reply);
        raw::RedisModule_FreeCallReply.unwrap()(reply);
    }
    Ok(())
}

/// Where a command's keys are in `argv` (its name at 0), and what it does to each
/// (`REDISMODULE_CMD_KEY_*` flags; full access where the server cannot say). Empty for
/// a command without keys, an unknown command or a wrong number of arguments.
pub fn command_keys(ctx: &Context, argv: &[RedisString]) -> Vec<(usize, i32)> {
    let mut raw_args: Vec<*mut raw::RedisModuleString> = argv.iter().map(|a| a.inner).collect();
    let mut count: c_int = 0;
    let mut flags: *mut c_int = std::ptr::null_mut();
    // SAFETY: the function pointers are checked; argv holds live strings for the call;
    // the arrays the server returns are read for `count` entries and freed once.
    unsafe {
        let positions = match raw::RedisModule_GetCommandKeysWithFlags {
            Some(keys) => keys(
                ctx.get_raw(),
                raw_args.as_mut_ptr(),
                raw_args.len() as c_int,
                &mut count,
                &mut flags,
            ),
            None => match raw::RedisModule_GetCommandKeys {
                Some(keys) => keys(
                    ctx.get_raw(),
                    raw_args.as_mut_ptr(),
                    raw_args.len() as c_int,
                    &mut count,
                ),
                None => return Vec::new(),
            },
        };
        if positions.is_null() {
            return Vec::new();
        }
        let full = (raw::REDISMODULE_CMD_KEY_RW
            | raw::REDISMODULE_CMD_KEY_ACCESS
            | raw::REDISMODULE_CMD_KEY_UPDATE) as i32;
        let found = (0..count.max(0) as usize)
            .map(|i| {
                let position = *positions.add(i);
                let key_flags = if flags.is_null() { full } else { *flags.add(i) };
                (position.max(0) as usize, key_flags)
            })
            .filter(|(position, _)| *position < argv.len())
            .collect();
        let free = raw::RedisModule_Free.unwrap();
        free(positions.cast());
        if !flags.is_null() {
            free(flags.cast());
        }
        found
    }
}

/// Names argument `position` as a key in a `COMMAND GETKEYS` (or routing, or ACL)
/// request, with what the command does to it, where the server takes flags (7.0+).
pub fn key_at_position(ctx: &Context, position: usize, flags: i32) {
    // SAFETY: called only while the server asks for keys, with a position inside the
    // call's arguments (the caller checks).
    unsafe {
        match raw::RedisModule_KeyAtPosWithFlags {
            Some(at) => at(ctx.get_raw(), position as c_int, flags),
            None => raw::RedisModule_KeyAtPos.unwrap()(ctx.get_raw(), position as c_int),
        }
    }
}

/// The access flags of a key a command only reads.
pub fn read_key_flags() -> i32 {
    (raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS) as i32
}
