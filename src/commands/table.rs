//! The one command table: each command declared once, with its handler, flags,
//! arity, key positions, ACL categories and docs. Registration and `COMMAND DOCS`
//! (and so redis-cli's hints and the docs test) come from here.

use std::ffi::{CStr, CString};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use redis_module::{raw, Context};

use super::{dispatch, guarded, info, latch, lock, multi, scan, semaphore, stats, waiters};
use crate::ffi::{self, ArgDoc, ArgKind, CommandCallback, KeyAccess, KeyPositions, RawCtx};

pub struct CommandSpec {
    pub name: &'static CStr,
    pub handler: CommandCallback,
    /// `RedisModule_CreateCommand` flags.
    pub flags: &'static CStr,
    /// Negative: at least that many arguments, the name included.
    pub arity: i32,
    /// First key, last key, step, as `COMMAND INFO` gives them.
    pub keys: (c_int, c_int, c_int),
    /// Where its keys are, and what it does to them: its key spec, which cluster
    /// routing and ACL key patterns check.
    pub positions: KeyPositions,
    pub access: KeyAccess,
    /// ACL categories, on servers that take them from modules (7.2+, Valkey); the
    /// module's own `rlock` category is added where the server has it (7.4+, Valkey 8+).
    pub acl_categories: &'static CStr,
    pub summary: &'static CStr,
    /// The module version that added it (CHANGELOG.md).
    pub since: &'static CStr,
    pub args: &'static [ArgDoc],
}

/// Versions that added commands (CHANGELOG.md): 1.0.0, the reentrant lock; 2.0.0, the rest of
/// Redisson's synchronizers and the multi-key commands; 2.2.0, seeing every lock.
const V1: &CStr = c"1.0.0";
const V2: &CStr = c"2.0.0";
const V2_2: &CStr = c"2.2.0";
const V4_1: &CStr = c"4.1.0";

/// An `extern "C"` entry point for `handler`, for the table below.
macro_rules! entry {
    ($name:literal, $handler:path) => {{
        extern "C" fn call(
            ctx: RawCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            dispatch(ctx, argv, argc, $name, $handler)
        }
        call as CommandCallback
    }};
}

const KEY: ArgDoc = ArgDoc::required(
    c"key",
    ArgKind::Key,
    c"the lock's name, a Redis key holding a hash",
);
const OWNER: ArgDoc = ArgDoc::required(
    c"owner",
    ArgKind::String,
    c"who holds the lock: any bytes, 1 to 1024 of them",
);
const LEASE: ArgDoc = ArgDoc::option(
    c"ms",
    ArgKind::Integer,
    c"LEASE",
    c"lease in ms (default rlock.lease-ms)",
);

const REQ: ArgDoc = ArgDoc::option(
    c"id",
    ArgKind::String,
    c"REQ",
    c"request id: the same call sent again replies the first reply and changes nothing",
);

/// `[READ|WRITE]`: a side of a read-write lock (Redisson's `RReadWriteLock`).
const SIDE: ArgDoc = ArgDoc {
    name: c"side",
    kind: ArgKind::OneOf(&[
        ArgDoc::choice(c"read", c"READ", c"a read hold: shared with other readers"),
        ArgDoc::choice(c"write", c"WRITE", c"the write hold: alone"),
    ]),
    token: None,
    optional: true,
    multiple: false,
    summary: c"a side of a read-write lock (Redisson's RReadWriteLock layout)",
};

const SEMAPHORE: ArgDoc = ArgDoc::required(
    c"key",
    ArgKind::Key,
    c"the semaphore's name, a Redis key holding its permits",
);
const PERMITS: ArgDoc = ArgDoc::option(
    c"n",
    ArgKind::Integer,
    c"PERMITS",
    c"how many permits (default 1)",
);
/// `LEASE ms` where it is required: a leased permit's lease.
const PERMIT_LEASE: ArgDoc = ArgDoc {
    optional: false,
    ..ArgDoc::option(
        c"ms",
        ArgKind::Integer,
        c"LEASE",
        c"lease in ms: the permit comes back by itself when it ends",
    )
};
const PERMIT_ID: ArgDoc = ArgDoc::required(
    c"id",
    ArgKind::String,
    c"a leased permit's id, 32 hex characters",
);
const LATCH: ArgDoc = ArgDoc::required(
    c"key",
    ArgKind::Key,
    c"the latch's name, a Redis key holding its count",
);

const NUMKEYS: ArgDoc = ArgDoc::required(c"numkeys", ArgKind::Integer, c"how many keys follow");

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: c"rlock.acquire",
        since: V1,
        handler: entry!("RLOCK.ACQUIRE", lock::acquire),
        flags: c"write deny-oom blocking",
        arity: -3,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write slow blocking",
        summary: c"Takes or re-enters a lock. Replies the hold count (or fencing token), or null if held by another owner.",
        args: &[
            KEY,
            OWNER,
            SIDE,
            LEASE,
            ArgDoc::option(c"ms", ArgKind::Integer, c"BLOCK", c"wait up to ms inside the server; 0 waits forever"),
            ArgDoc::option(c"fair", ArgKind::Flag, c"FAIR", c"first come, first served on the Redisson fair queue"),
            ArgDoc::option(c"token", ArgKind::Flag, c"TOKEN", c"reply the fencing token instead of the hold count"),
            ArgDoc::option(c"session", ArgKind::Flag, c"SESSION", c"release the hold when this connection closes"),
            REQ,
        ],
    },
    CommandSpec {
        name: c"rlock.release",
        since: V1,
        handler: entry!("RLOCK.RELEASE", lock::release),
        flags: c"write",
        arity: -3,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write fast",
        summary: c"Releases one hold. Replies 1 when the lock is freed, 0 when a re-entry was undone.",
        args: &[
            ArgDoc::required(c"key", ArgKind::Key, c"the lock's name"),
            OWNER,
            SIDE,
            REQ,
        ],
    },
    CommandSpec {
        name: c"rlock.renew",
        since: V1,
        handler: entry!("RLOCK.RENEW", lock::renew),
        flags: c"write",
        arity: -3,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write fast",
        summary: c"Resets the lease of a held lock. Replies 1 if renewed, 0 if not held by owner.",
        args: &[
            ArgDoc::required(c"key", ArgKind::Key, c"the lock's name"),
            OWNER,
            SIDE,
            LEASE,
            REQ,
        ],
    },
    CommandSpec {
        name: c"rlock.macquire",
        since: V2,
        handler: entry!("RLOCK.MACQUIRE", multi::acquire),
        flags: c"write deny-oom blocking getkeys-api",
        arity: -4,
        // Keys counted by `numkeys`: the key spec describes them, and the command
        // names them when asked (`getkeys-api`), which Redis 7.0's cluster routing needs.
        keys: (0, 0, 0),
        positions: KeyPositions::CountedFromSecond,
        access: KeyAccess::Update,
        acl_categories: c"write slow blocking",
        summary: c"Takes every lock or none. Replies the number of locks taken, or null.",
        args: &[
            OWNER,
            NUMKEYS,
            ArgDoc::many(c"key", ArgKind::Key, c"a lock's name; all in one cluster slot"),
            LEASE,
            ArgDoc::option(c"ms", ArgKind::Integer, c"BLOCK", c"wait up to ms until all can be taken; 0 waits forever"),
            ArgDoc::option(c"session", ArgKind::Flag, c"SESSION", c"release the holds when this connection closes"),
            REQ,
        ],
    },
    CommandSpec {
        name: c"rlock.mrelease",
        since: V2,
        handler: entry!("RLOCK.MRELEASE", multi::release),
        flags: c"write getkeys-api",
        arity: -4,
        keys: (0, 0, 0),
        positions: KeyPositions::CountedFromSecond,
        access: KeyAccess::Update,
        acl_categories: c"write slow",
        summary: c"Releases one hold on every lock, or none. Replies how many of the locks are free now.",
        args: &[
            OWNER,
            NUMKEYS,
            ArgDoc::many(c"key", ArgKind::Key, c"a lock's name"),
            REQ,
        ],
    },
    CommandSpec {
        name: c"rlock.forcerelease",
        since: V1,
        handler: entry!("RLOCK.FORCERELEASE", lock::force_release),
        flags: c"write",
        arity: 2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Remove,
        acl_categories: c"write slow dangerous",
        summary: c"Deletes the lock whoever holds it. Replies 1 if a lock was deleted.",
        args: &[ArgDoc::required(c"key", ArgKind::Key, c"the lock's name")],
    },
    CommandSpec {
        name: c"rlock.info",
        since: V1,
        handler: entry!("RLOCK.INFO", info::command),
        flags: c"readonly",
        arity: 2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Read,
        acl_categories: c"read fast",
        summary: c"Shows holders, pttl, fair queue, blocked waiters and fencing token of a lock.",
        args: &[ArgDoc::required(c"key", ArgKind::Key, c"the lock's name")],
    },
    CommandSpec {
        name: c"rlock.scan",
        since: V2_2,
        handler: entry!("RLOCK.SCAN", scan::command),
        flags: c"readonly",
        arity: -2,
        // Keyless: the cursor is not a key. In a cluster, ask every primary.
        keys: (0, 0, 0),
        positions: KeyPositions::Keyless,
        access: KeyAccess::Read,
        acl_categories: c"keyspace read slow",
        summary: c"Iterates the database like SCAN, showing only locks and read-write locks: holders, pttl, blocked waiters.",
        args: &[
            ArgDoc::required(c"cursor", ArgKind::Integer, c"0 to start; then the cursor the last call replied"),
            ArgDoc::option(c"pattern", ArgKind::String, c"MATCH", c"only keys matching this glob-style pattern"),
            ArgDoc::option(c"n", ArgKind::Integer, c"COUNT", c"the work of one call, as SCAN's COUNT (default 10)"),
            ArgDoc {
                name: c"type",
                kind: ArgKind::OneOf(&[
                    ArgDoc::choice(c"lock", c"LOCK", c"reentrant locks only"),
                    ArgDoc::choice(c"rwlock", c"RWLOCK", c"read-write locks only"),
                ]),
                token: Some(c"TYPE"),
                optional: true,
                multiple: false,
                summary: c"only locks of this kind",
            },
        ],
    },
    CommandSpec {
        name: c"rlock.guard",
        since: V4_1,
        handler: entry!("RLOCK.GUARD", guarded::command),
        // `write`: refused on a replica, held back during a pause. Not `deny-oom`: the
        // inner command's own `denyoom` applies (a guarded DEL runs over maxmemory).
        flags: c"write getkeys-api",
        arity: -5,
        // Routed by the lock key; the inner command's keys, in its slot, come from
        // `getkeys-api` (COMMAND GETKEYS, cluster routing, ACL key patterns).
        keys: (1, 1, 1),
        positions: KeyPositions::FirstThenAfterCall,
        access: KeyAccess::Read,
        acl_categories: c"write slow",
        summary: c"Runs a command only while owner holds the lock (and TOKEN n is still its newest fencing token), in the same turn. Replies the command's reply, or NOTHELD.",
        args: &[
            KEY,
            OWNER,
            SIDE,
            ArgDoc::option(c"n", ArgKind::Integer, c"TOKEN", c"the hold's fencing token: refused (STALETOKEN) unless still the lock's newest"),
            ArgDoc {
                optional: false,
                ..ArgDoc::option(c"command", ArgKind::String, c"CALL", c"the command to run while held, as the caller; its keys in the lock's slot")
            },
            ArgDoc {
                name: c"arg",
                kind: ArgKind::String,
                token: None,
                optional: true,
                multiple: true,
                summary: c"the command's arguments",
            },
        ],
    },
    CommandSpec {
        name: c"rlock.waiters",
        since: V2_2,
        handler: entry!("RLOCK.WAITERS", waiters::command),
        flags: c"readonly",
        arity: 2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Read,
        acl_categories: c"read slow",
        summary: c"Lists the calls blocked on a key on this server, in the order they will be served.",
        args: &[ArgDoc::required(c"key", ArgKind::Key, c"a lock's, semaphore's or latch's name")],
    },
    CommandSpec {
        name: c"rsem.trysetpermits",
        since: V2,
        handler: entry!("RSEM.TRYSETPERMITS", semaphore::try_set_permits),
        flags: c"write deny-oom",
        arity: 3,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write fast",
        summary: c"Sets a semaphore's permits if it does not exist. Replies 1 if set, 0 if it existed.",
        args: &[SEMAPHORE, ArgDoc::required(c"permits", ArgKind::Integer, c"how many permits, 0 or more")],
    },
    CommandSpec {
        name: c"rsem.addpermits",
        since: V2,
        handler: entry!("RSEM.ADDPERMITS", semaphore::add_permits),
        flags: c"write deny-oom",
        arity: 3,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write fast",
        summary: c"Adds permits to a semaphore (negative takes them away). Replies the permits available.",
        args: &[SEMAPHORE, ArgDoc::required(c"permits", ArgKind::Integer, c"how many to add; negative takes away")],
    },
    CommandSpec {
        name: c"rsem.acquire",
        since: V2,
        handler: entry!("RSEM.ACQUIRE", semaphore::acquire),
        flags: c"write deny-oom blocking",
        arity: -2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write slow blocking",
        summary: c"Takes permits of a semaphore. Replies 1, or null if not enough are available.",
        args: &[
            SEMAPHORE,
            PERMITS,
            ArgDoc::option(c"ms", ArgKind::Integer, c"BLOCK", c"wait up to ms, in arrival order; 0 waits forever"),
            REQ,
        ],
    },
    CommandSpec {
        name: c"rsem.release",
        since: V2,
        handler: entry!("RSEM.RELEASE", semaphore::release),
        flags: c"write deny-oom",
        arity: -2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write fast",
        summary: c"Gives permits back to a semaphore. Replies the permits available.",
        args: &[SEMAPHORE, PERMITS, REQ],
    },
    CommandSpec {
        name: c"rsem.available",
        since: V2,
        handler: entry!("RSEM.AVAILABLE", semaphore::available),
        flags: c"readonly",
        arity: 2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Read,
        acl_categories: c"read fast",
        summary: c"Replies the permits a semaphore has available.",
        args: &[SEMAPHORE],
    },
    CommandSpec {
        name: c"rsem.lease",
        since: V2,
        handler: entry!("RSEM.LEASE", semaphore::lease),
        flags: c"write deny-oom blocking",
        arity: -4,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write slow blocking",
        summary: c"Leases permits of a permit-expiring semaphore. Replies their ids, or null if not enough are available.",
        args: &[
            SEMAPHORE,
            PERMIT_LEASE,
            PERMITS,
            ArgDoc::option(c"ms", ArgKind::Integer, c"BLOCK", c"wait up to ms, in arrival order; 0 waits forever"),
            ArgDoc::option(c"session", ArgKind::Flag, c"SESSION", c"give the permits back when this connection closes"),
            REQ,
        ],
    },
    CommandSpec {
        name: c"rsem.return",
        since: V2,
        handler: entry!("RSEM.RETURN", semaphore::give_back),
        flags: c"write",
        arity: -3,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write fast",
        summary: c"Gives a leased permit back. Replies 1, or 0 if it is not leased (ended or unknown).",
        args: &[SEMAPHORE, PERMIT_ID, REQ],
    },
    CommandSpec {
        name: c"rsem.renew",
        since: V2,
        handler: entry!("RSEM.RENEW", semaphore::renew),
        flags: c"write",
        arity: 5,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write slow",
        summary: c"Extends a leased permit's lease from now. Replies 1, or 0 if it is not leased.",
        args: &[SEMAPHORE, PERMIT_ID, PERMIT_LEASE],
    },
    CommandSpec {
        name: c"rlatch.trysetcount",
        since: V2,
        handler: entry!("RLATCH.TRYSETCOUNT", latch::try_set_count),
        flags: c"write deny-oom",
        arity: 3,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write fast",
        summary: c"Sets a count-down latch's count if it has none. Replies 1 if set, 0 if not.",
        args: &[LATCH, ArgDoc::required(c"count", ArgKind::Integer, c"the count, 1 or more")],
    },
    CommandSpec {
        name: c"rlatch.countdown",
        since: V2,
        handler: entry!("RLATCH.COUNTDOWN", latch::count_down),
        flags: c"write",
        arity: 2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Update,
        acl_categories: c"write fast",
        summary: c"Counts a latch down by one; at zero its waiters pass. Replies the count.",
        args: &[LATCH],
    },
    CommandSpec {
        name: c"rlatch.await",
        since: V2,
        handler: entry!("RLATCH.AWAIT", latch::await_zero),
        // A wait is served on the primary, where count-downs happen.
        flags: c"write blocking",
        arity: -2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Read,
        acl_categories: c"write slow blocking",
        summary: c"Waits until a latch's count is zero. Replies 1, or null if the wait runs out.",
        args: &[
            LATCH,
            ArgDoc::option(c"ms", ArgKind::Integer, c"BLOCK", c"wait up to ms; 0 waits forever"),
        ],
    },
    CommandSpec {
        name: c"rlatch.count",
        since: V2,
        handler: entry!("RLATCH.COUNT", latch::count),
        flags: c"readonly",
        arity: 2,
        keys: (1, 1, 1),
        positions: KeyPositions::First,
        access: KeyAccess::Read,
        acl_categories: c"read fast",
        summary: c"Replies a latch's count (0 when it has none).",
        args: &[LATCH],
    },
    CommandSpec {
        name: c"rlock.top",
        since: V2_2,
        handler: entry!("RLOCK.TOP", stats::top),
        flags: c"readonly",
        arity: -1,
        keys: (0, 0, 0),
        positions: KeyPositions::Keyless,
        access: KeyAccess::Read,
        // It names keys, as SCAN does.
        acl_categories: c"keyspace read slow",
        summary: c"Shows the most contended keys on this server: calls blocked now, and waits in the stats window.",
        args: &[ArgDoc::option(
            c"n",
            ArgKind::Integer,
            c"COUNT",
            c"how many keys, 1 to 1000 (default 10)",
        )],
    },
    CommandSpec {
        name: c"rlock.resetstat",
        since: V2_2,
        handler: entry!("RLOCK.RESETSTAT", stats::reset_stat),
        flags: c"admin",
        arity: 1,
        keys: (0, 0, 0),
        positions: KeyPositions::Keyless,
        access: KeyAccess::Read,
        acl_categories: c"admin slow dangerous",
        summary: c"Zeroes the INFO rlock counters, the wait histograms and the contention history of RLOCK.TOP.",
        args: &[],
    },
];

/// The module's own ACL category: `+@rlock` allows every rlock command.
const RLOCK_CATEGORY: &CStr = c"rlock";

/// Whether the server put the commands in ACL categories (7.2+, Valkey), and whether
/// it took the `rlock` category (7.4+, Valkey 8+): `INFO rlock` says so.
static ACL_CATEGORIES: AtomicBool = AtomicBool::new(false);
static ACL_CATEGORY_RLOCK: AtomicBool = AtomicBool::new(false);

pub fn acl_categories_missing() -> bool {
    !ACL_CATEGORIES.load(Ordering::Relaxed)
}

pub fn acl_category_rlock() -> bool {
    ACL_CATEGORY_RLOCK.load(Ordering::Relaxed)
}

/// Puts every command in its ACL categories, and in `rlock` where the server takes
/// module categories. On a server without the API (Redis 7.0) the commands are in no
/// category at all, so `-@write` does not stop them: one warning says so.
fn set_acl_categories(ctx: &Context) -> Result<(), String> {
    let own = ffi::add_acl_category(ctx, RLOCK_CATEGORY) == Some(true);
    let mut set_any = false;
    for command in COMMANDS {
        let mut categories = command.acl_categories.to_bytes().to_vec();
        if own {
            categories.push(b' ');
            categories.extend_from_slice(RLOCK_CATEGORY.to_bytes());
        }
        let categories = CString::new(categories).map_err(|e| e.to_string())?;
        match ffi::set_acl_categories(ctx, command.name, &categories) {
            Some(true) => set_any = true,
            Some(false) => {
                return Err(format!(
                    "the server refused the ACL categories of {}",
                    command.name.to_string_lossy()
                ))
            }
            None => {}
        }
    }
    ACL_CATEGORIES.store(set_any, Ordering::Relaxed);
    ACL_CATEGORY_RLOCK.store(set_any && own, Ordering::Relaxed);
    if !set_any {
        ffi::log_warning(
            ctx.get_raw(),
            "rlock: this server cannot put module commands in ACL categories (Redis 7.2+ can): \
             -@write, -@dangerous and +@rlock do not apply to rlock's commands; name them \
             in ACL rules instead, e.g. -rlock.forcerelease (see docs/COMMANDS.md, ACL)",
        );
    }
    Ok(())
}

/// Registers every command, then describes it where the server takes command
/// docs (7.0+), which also sets its arity and key spec.
pub fn register(ctx: &Context) -> Result<(), String> {
    for command in COMMANDS {
        if !ffi::create_command(
            ctx,
            command.name,
            command.handler,
            command.flags,
            command.keys,
        ) {
            return Err(format!(
                "could not register {}",
                command.name.to_string_lossy()
            ));
        }
    }
    set_acl_categories(ctx)?;
    describe(ctx);
    Ok(())
}

/// Describes every command where the server takes command docs. A command whose
/// description is refused is named in the log, and the others are still described.
fn describe(ctx: &Context) {
    let mut refused = Vec::new();
    for c in COMMANDS {
        let doc = ffi::CommandDoc {
            summary: c.summary,
            since: c.since,
            arity: c.arity,
            positions: c.positions,
            access: c.access,
            args: c.args,
        };
        match ffi::set_command_info(ctx, c.name, &doc) {
            Some(true) => {}
            Some(false) => refused.push(c.name.to_string_lossy()),
            None => {
                ctx.log_notice(
                    "rlock: this server does not take command docs; COMMAND DOCS will be empty",
                );
                return;
            }
        }
    }
    if !refused.is_empty() {
        ffi::log_warning(
            ctx.get_raw(),
            &format!(
                "rlock: the server refused the command docs of {}; COMMAND DOCS lacks them",
                refused.join(", ")
            ),
        );
    }
}
