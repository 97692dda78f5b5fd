//! Command registration, `COMMAND DOCS`, and the arguments of a call.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisString};

use super::{CommandCallback, RawCommandFn, RawCtx};

/// One argument of a command, for `COMMAND DOCS`.
#[derive(Clone, Copy)]
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// The keyword before the value, e.g. `LEASE`.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    /// Given one or more times, as `key [key ...]`.
    pub multiple: bool,
    pub summary: &'static CStr,
}

impl ArgDoc {
    pub const fn required(name: &'static CStr, kind: ArgKind, summary: &'static CStr) -> ArgDoc {
        ArgDoc {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
            summary,
        }
    }

    /// A required argument given one or more times, as `key [key ...]`.
    pub const fn many(name: &'static CStr, kind: ArgKind, summary: &'static CStr) -> ArgDoc {
        ArgDoc {
            multiple: true,
            ..ArgDoc::required(name, kind, summary)
        }
    }

    /// A bare keyword that is one of the choices of a `OneOf`.
    pub const fn choice(
        name: &'static CStr,
        token: &'static CStr,
        summary: &'static CStr,
    ) -> ArgDoc {
        ArgDoc {
            name,
            kind: ArgKind::Flag,
            token: Some(token),
            optional: false,
            multiple: false,
            summary,
        }
    }

    /// An optional keyword, with a value named `name` unless `kind` is `Flag`.
    pub const fn option(
        name: &'static CStr,
        kind: ArgKind,
        token: &'static CStr,
        summary: &'static CStr,
    ) -> ArgDoc {
        ArgDoc {
            name,
            kind,
            token: Some(token),
            optional: true,
            multiple: false,
            summary,
        }
    }
}

#[derive(Clone, Copy)]
pub enum ArgKind {
    Key,
    String,
    Integer,
    /// A bare keyword such as `FAIR`.
    Flag,
    /// One of these keywords, such as `READ|WRITE`.
    OneOf(&'static [ArgDoc]),
}

/// Where a command's keys are, for its key spec.
#[derive(Clone, Copy)]
pub enum KeyPositions {
    /// One key, the first argument.
    First,
    /// `numkeys key [key ...]` from the second argument on (`owner numkeys key ...`).
    CountedFromSecond,
    /// No key at all (`RLOCK.TOP`): no key spec.
    Keyless,
    /// The first argument, then the keys of a command after the keyword `CALL`
    /// (`RLOCK.GUARD`): a second key spec from `CALL` to the end, `INCOMPLETE` and
    /// `VARIABLE_FLAGS`, so the server asks the command itself (`getkeys-api`).
    FirstThenAfterCall,
}

/// What a command does to its keys, for its key spec: ACL key patterns (`%R~`,
/// `%W~`) and `COMMAND INFO` go by it.
#[derive(Clone, Copy)]
pub enum KeyAccess {
    /// Reads the key and nothing else (`RO ACCESS`).
    Read,
    /// Reads and changes the key, which it may create or delete (`RW ACCESS UPDATE`,
    /// as `HSET` and `HINCRBY`).
    Update,
    /// Deletes the key whatever it holds (`RM DELETE`, as `DEL`).
    Remove,
}

impl KeyAccess {
    fn flags(self) -> u64 {
        (match self {
            KeyAccess::Read => raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
            KeyAccess::Update => {
                raw::REDISMODULE_CMD_KEY_RW
                    | raw::REDISMODULE_CMD_KEY_ACCESS
                    | raw::REDISMODULE_CMD_KEY_UPDATE
            }
            KeyAccess::Remove => raw::REDISMODULE_CMD_KEY_RM | raw::REDISMODULE_CMD_KEY_DELETE,
        }) as u64
    }
}

/// What `COMMAND DOCS` and `COMMAND INFO` say of a command.
pub struct CommandDoc<'a> {
    pub summary: &'static CStr,
    /// The module version that added the command, `x.y.z`.
    pub since: &'static CStr,
    pub arity: i32,
    pub positions: KeyPositions,
    pub access: KeyAccess,
    pub args: &'a [ArgDoc],
}

/// Describes a registered command through `RedisModule_SetCommandInfo` (7.0+), with
/// its key specs. `None` where the server lacks the API, `Some(false)` where it has no
/// such command or refuses the description.
pub fn set_command_info(ctx: &Context, command: &CStr, doc: &CommandDoc) -> Option<bool> {
    let CommandDoc {
        summary,
        since,
        arity,
        positions,
        access,
        args,
    } = *doc;
    // SAFETY: checks the function pointers before use; every pointer handed to
    // Redis points into memory leaked for the life of the process, which is what
    // SetCommandInfo expects (it copies, but we stay conservative).
    unsafe {
        let (Some(get_command), Some(set_info)) =
            (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo)
        else {
            return None;
        };
        let handle = get_command(ctx.get_raw(), command.as_ptr());
        if handle.is_null() {
            return Some(false);
        }
        let raw_args = command_args(args);
        let version = Box::leak(Box::new(raw::RedisModuleCommandInfoVersion {
            version: 1,
            sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
            sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
            sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
        }));
        let mut info: raw::RedisModuleCommandInfo = std::mem::zeroed();
        info.version = version;
        info.summary = summary.as_ptr();
        info.since = since.as_ptr();
        info.arity = arity;
        info.args = raw_args;
        let mut key_spec: raw::RedisModuleCommandKeySpec = std::mem::zeroed();
        key_spec.flags = access.flags();
        key_spec.begin_search_type =
            raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        match positions {
            KeyPositions::First | KeyPositions::FirstThenAfterCall => {
                key_spec.bs.index.pos = 1;
                key_spec.find_keys_type =
                    raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
                key_spec.fk.range.lastkey = 0;
                key_spec.fk.range.keystep = 1;
                key_spec.fk.range.limit = 0;
            }
            KeyPositions::CountedFromSecond => {
                key_spec.bs.index.pos = 2;
                key_spec.find_keys_type =
                    raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
                key_spec.fk.keynum.keynumidx = 0;
                key_spec.fk.keynum.firstkey = 1;
                key_spec.fk.keynum.keystep = 1;
            }
            KeyPositions::Keyless => {}
        }
        if !matches!(positions, KeyPositions::Keyless) {
            let mut key_specs = vec![key_spec];
            if matches!(positions, KeyPositions::FirstThenAfterCall) {
                let mut inner: raw::RedisModuleCommandKeySpec = std::mem::zeroed();
                inner.flags = (raw::REDISMODULE_CMD_KEY_RW
                    | raw::REDISMODULE_CMD_KEY_INCOMPLETE
                    | raw::REDISMODULE_CMD_KEY_VARIABLE_FLAGS) as u64;
                inner.begin_search_type =
                    raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
                inner.bs.keyword.keyword = c"CALL".as_ptr();
                inner.bs.keyword.startfrom = 3;
                inner.find_keys_type =
                    raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
                inner.fk.range.lastkey = -1;
                inner.fk.range.keystep = 1;
                inner.fk.range.limit = 0;
                key_specs.push(inner);
            }
            // The array ends with a zeroed spec.
            key_specs.push(std::mem::zeroed());
            info.key_specs = Box::leak(key_specs.into_boxed_slice()).as_mut_ptr();
        }
        Some(set_info(handle, &info) == raw::REDISMODULE_OK as c_int)
    }
}

/// `args` as the zero-terminated array `RedisModuleCommandInfo` takes, leaked for the
/// life of the process; a `OneOf`'s choices as its sub-arguments.
///
/// # Safety
/// Only builds plain C structs from static strings.
unsafe fn command_args(args: &[ArgDoc]) -> *mut raw::RedisModuleCommandArg {
    if args.is_empty() {
        return ptr::null_mut();
    }
    let mut raw_args: Vec<raw::RedisModuleCommandArg> = args
        .iter()
        .map(|arg| {
            // SAFETY: a zeroed RedisModuleCommandArg is a valid, empty one.
            let mut entry: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
            entry.name = arg.name.as_ptr();
            entry.type_ = match arg.kind {
                ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                ArgKind::Flag => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                ArgKind::OneOf(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            };
            if let ArgKind::OneOf(choices) = arg.kind {
                // SAFETY: as above, for the choices.
                entry.subargs = unsafe { command_args(choices) };
            }
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
            if arg.multiple {
                entry.flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int;
            }
            entry
        })
        .collect();
    // SAFETY: the array ends with a zeroed entry.
    raw_args.push(unsafe { std::mem::zeroed() });
    Box::leak(raw_args.into_boxed_slice()).as_mut_ptr()
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

/// Registers a module command with its legacy key range (first, last, step).
pub fn create_command(
    ctx: &Context,
    name: &CStr,
    handler: CommandCallback,
    flags: &CStr,
    (first_key, last_key, key_step): (c_int, c_int, c_int),
) -> bool {
    // SAFETY: called from OnLoad with static C strings.
    unsafe {
        raw::RedisModule_CreateCommand.unwrap()(
            ctx.get_raw(),
            name.as_ptr(),
            Some(handler as RawCommandFn),
            flags.as_ptr(),
            first_key,
            last_key,
            key_step,
        ) == raw::REDISMODULE_OK as c_int
    }
}

/// Adds an ACL category of the module's own (`RedisModule_AddACLCategory`, Redis
/// 7.4+, Valkey 8+; only during `OnLoad`). `None` where the server lacks the API.
pub fn add_acl_category(ctx: &Context, name: &CStr) -> Option<bool> {
    // SAFETY: the function pointer is checked; called from OnLoad with a static string.
    unsafe {
        let add = raw::RedisModule_AddACLCategory?;
        Some(add(ctx.get_raw(), name.as_ptr()) == raw::REDISMODULE_OK as c_int)
    }
}

/// Puts a registered command in ACL categories (space-separated, e.g. `"write
/// blocking"`), where the server has `RedisModule_SetCommandACLCategories` (7.2+,
/// Valkey). `None` where it does not; `Some(false)` if the server refused.
pub fn set_acl_categories(ctx: &Context, command: &CStr, categories: &CStr) -> Option<bool> {
    // SAFETY: both function pointers are checked; called from OnLoad with static strings.
    unsafe {
        let set_categories = raw::RedisModule_SetCommandACLCategories?;
        let handle = raw::RedisModule_GetCommand?(ctx.get_raw(), command.as_ptr());
        if handle.is_null() {
            return Some(false);
        }
        Some(set_categories(handle, categories.as_ptr()) == raw::REDISMODULE_OK as c_int)
    }
}
