//! `RLOCK.GUARD key owner [READ|WRITE] [TOKEN n] CALL command [arg ...]`: runs the
//! inner command only while `owner` holds `key`, in the same turn as the check.

use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

use super::key_owner_rest;
use crate::core::args::parse_guard_options;
use crate::core::cluster::key_slot;
use crate::core::guard::{
    decide, is_script, refusal, stale_token_line, CommandTraits, Guard, Refusal,
};
use crate::store::{Fence, LockKey};
use crate::{errors, ffi, state, stats};

/// The lock key, the options before `CALL`, then the inner command.
const FIRST_OPTION: usize = 3;

pub fn command(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if ctx.is_keys_position_request() {
        return name_the_keys(ctx, args);
    }
    let (key, owner, _) = key_owner_rest(args, 5)?;
    let words: Vec<&[u8]> = args[FIRST_OPTION..]
        .iter()
        .map(RedisString::as_slice)
        .collect();
    let options = parse_guard_options(&words).map_err(errors::arg_error)?;
    let inner = &args[FIRST_OPTION + options.command_at..];
    if let Some(refused) = inner_refusal(ctx, &words[options.command_at..]) {
        return Err(RedisError::String(refused.to_string()));
    }
    if ffi::in_cluster(ctx) {
        let slot = key_slot(key.as_slice());
        let keys = ffi::command_keys(ctx, inner);
        if keys
            .iter()
            .any(|(at, _)| key_slot(inner[*at].as_slice()) != slot)
        {
            return Err(RedisError::Str(errors::CROSS_SLOT));
        }
    }
    let held = LockKey::open(ctx, key)?.holds_now(owner, options.mode)?;
    let newest = match (held, options.token) {
        (true, Some(_)) => Fence::newest(ctx, key)?,
        _ => None,
    };
    match decide(held, options.token, newest) {
        Guard::Run => {
            stats::GUARD_CALLS.incr();
            ffi::call_replying(ctx, inner).map_err(errors::guard_call_refused)?;
            Ok(RedisValue::NoReply)
        }
        Guard::NotHeld => {
            stats::GUARD_REFUSALS.incr();
            Err(errors::not_held())
        }
        Guard::StaleToken { newest } => {
            stats::GUARD_REFUSALS.incr();
            stats::GUARD_STALE_TOKENS.incr();
            let asked = options.token.unwrap_or_default();
            Err(RedisError::String(stale_token_line(asked, newest)))
        }
    }
}

/// Why the inner command may not run, from what the server says of it (`COMMAND INFO`,
/// asked once per name and remembered).
fn inner_refusal(ctx: &Context, inner: &[&[u8]]) -> Option<Refusal> {
    let in_script = is_script(inner[0]) && ffi::in_script(ctx);
    let name = inner[0];
    let known = state::with(|s| {
        s.known_commands
            .get(name)
            .map(|traits| refusal(inner, Some(traits), in_script))
    });
    if let Some(refused) = known {
        return refused;
    }
    let traits = describe(ctx, name);
    let refused = refusal(inner, traits.as_ref(), in_script);
    if let Some(traits) = traits {
        state::with(|s| s.known_commands.learn(name, traits));
    }
    refused
}

/// `COMMAND INFO name`, as far as a guard cares; `None` for a command the server lacks.
fn describe(ctx: &Context, name: &[u8]) -> Option<CommandTraits> {
    let reply = ctx.call("COMMAND", &[b"INFO".as_slice(), name]).ok()?;
    let RedisValue::Array(entries) = reply else {
        return None;
    };
    entries.first().and_then(traits_of)
}

fn traits_of(entry: &RedisValue) -> Option<CommandTraits> {
    let RedisValue::Array(fields) = entry else {
        return None;
    };
    let RedisValue::Integer(arity) = fields.get(1)? else {
        return None;
    };
    let mut traits = CommandTraits {
        arity: *arity,
        ..Default::default()
    };
    if let Some(RedisValue::Array(flags)) = fields.get(2) {
        for flag in flags.iter().filter_map(text) {
            match flag.as_slice() {
                b"blocking" => traits.blocking = true,
                b"pubsub" => traits.pubsub = true,
                b"noscript" => traits.noscript = true,
                _ => {}
            }
        }
    }
    if let Some(RedisValue::Array(subcommands)) = fields.get(9) {
        for sub in subcommands {
            let (Some(full), Some(sub_traits)) = (first_text(sub), traits_of(sub)) else {
                continue;
            };
            // Named `container|sub`.
            let sub_name = match full.iter().position(|b| *b == b'|') {
                Some(bar) => full[bar + 1..].to_ascii_lowercase(),
                None => full.to_ascii_lowercase(),
            };
            traits.subcommands.insert(sub_name, sub_traits);
        }
    }
    Some(traits)
}

fn first_text(entry: &RedisValue) -> Option<Vec<u8>> {
    match entry {
        RedisValue::Array(fields) => fields.first().and_then(text),
        _ => None,
    }
}

fn text(value: &RedisValue) -> Option<Vec<u8>> {
    match value {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.as_bytes().to_vec()),
        RedisValue::SimpleStringStatic(s) => Some(s.as_bytes().to_vec()),
        RedisValue::StringBuffer(b) => Some(b.clone()),
        RedisValue::BulkRedisString(s) => Some(s.as_slice().to_vec()),
        _ => None,
    }
}

/// `COMMAND GETKEYS`, routing and ACL key checks: the lock key (read), then the inner
/// command's keys as the server finds them, with the inner command's own access flags.
fn name_the_keys(ctx: &Context, args: &[RedisString]) -> RedisResult {
    if args.len() > 1 {
        ffi::key_at_position(ctx, 1, ffi::read_key_flags());
    }
    if args.len() > FIRST_OPTION {
        let words: Vec<&[u8]> = args[FIRST_OPTION..]
            .iter()
            .map(RedisString::as_slice)
            .collect();
        if let Ok(options) = parse_guard_options(&words) {
            let start = FIRST_OPTION + options.command_at;
            for (at, flags) in ffi::command_keys(ctx, &args[start..]) {
                ffi::key_at_position(ctx, start + at, flags);
            }
        }
    }
    Ok(RedisValue::NoReply)
}
