//! rlock: distributed locks as native Redis commands, on Redisson-compatible keys.
//!
//! This file only declares the module: the command table, configs, events, the
//! INFO section, and what load and unload do. docs/ARCHITECTURE.md maps the rest.

pub mod commands;
pub mod config;
pub mod core;
pub mod deadlock;
pub mod deferred;
pub mod errors;
pub mod events;
pub mod ffi;
pub mod guard;
pub mod handoff;
pub mod keyevents;
pub mod latency;
pub mod slots;
pub mod state;
pub mod stats;
pub mod store;
pub mod timers;
pub mod version;
pub mod waiters;

use std::ffi::{CStr, CString};
use std::os::raw::c_int;

use redis_module::configuration::ConfigurationFlags;
use redis_module::{raw, redis_module, Context, RedisString, Status};

use crate::core::wait_stats::{usec_text, Family};

// Redis's allocator inside the server; the system one for `cargo test`, where
// there is no server to allocate from. Either way counted, for `INFO rlock`.
#[cfg(not(test))]
type ModuleAllocator = ffi::CountingAlloc<redis_module::alloc::RedisAlloc>;
#[cfg(not(test))]
const MODULE_ALLOCATOR: ModuleAllocator = ffi::CountingAlloc(redis_module::alloc::RedisAlloc);
#[cfg(test)]
type ModuleAllocator = ffi::CountingAlloc<std::alloc::System>;
#[cfg(test)]
const MODULE_ALLOCATOR: ModuleAllocator = ffi::CountingAlloc(std::alloc::System);

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let words: Vec<&[u8]> = args.iter().map(RedisString::as_slice).collect();
    if let Err(problem) = config::check_load_args(&words) {
        ffi::log_warning(ctx.get_raw(), &format!("rlock: not loaded: {problem}"));
        return Status::Err;
    }
    install_panic_log();
    if let Err(problem) = commands::table::register(ctx) {
        ffi::log_warning(ctx.get_raw(), &format!("rlock: not loaded: {problem}"));
        return Status::Err;
    }
    ffi::register_info(ctx, info);
    ffi::declare_module_options(ctx, ffi::is_valkey(ctx));
    config::check_eviction_policy(ctx);
    latency::read_threshold(ctx);
    deferred::set_runner(handoff::perform);
    // Fair queues already in the keyspace (a `MODULE LOAD` on data) are searched for.
    state::search_queues();
    if !events::subscribe(ctx) {
        ffi::log_warning(
            ctx.get_raw(),
            "rlock: not loaded: could not subscribe to server events",
        );
        return Status::Err;
    }
    Status::Ok
}

/// Refuses to unload while clients wait; otherwise stops every timer (a timer
/// firing into unloaded code would crash the server) and frees all state.
fn deinit(ctx: &Context) -> Status {
    if waiters::blocked_total() > 0 {
        ffi::log_warning(
            ctx.get_raw(),
            "rlock: not unloading: clients are blocked on locks",
        );
        return Status::Err;
    }
    state::reset(ctx, None);
    Status::Ok
}

/// Panics are caught at every entry point; this puts their message in the server log.
fn install_panic_log() {
    std::panic::set_hook(Box::new(|panic| {
        ffi::log_warning(std::ptr::null_mut(), &format!("rlock: {panic}"));
    }));
}

extern "C" fn info(info: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    guard::callback("INFO", || {
        ffi::info_section(
            info,
            &[(c"version", version::TEXT)],
            &[
                (c"acquires", stats::ACQUIRES.get()),
                (c"reentries", stats::REENTRIES.get()),
                (c"read_acquires", stats::READ_ACQUIRES.get()),
                (c"write_acquires", stats::WRITE_ACQUIRES.get()),
                (c"multi_acquires", stats::MULTI_ACQUIRES.get()),
                (c"multi_releases", stats::MULTI_RELEASES.get()),
                (c"permit_acquires", stats::PERMIT_ACQUIRES.get()),
                (c"permit_handoffs", stats::PERMIT_HANDOFFS.get()),
                (c"permit_releases", stats::PERMIT_RELEASES.get()),
                (c"permit_leases", stats::PERMIT_LEASES.get()),
                (c"permit_returns", stats::PERMIT_RETURNS.get()),
                (c"permit_reclaims", stats::PERMIT_RECLAIMS.get()),
                (c"latch_countdowns", stats::LATCH_COUNTDOWNS.get()),
                (c"releases", stats::RELEASES.get()),
                (c"force_releases", stats::FORCE_RELEASES.get()),
                (c"handoffs", stats::HANDOFFS.get()),
                (c"expiries", stats::EXPIRIES.get()),
                (c"session_releases", stats::SESSION_RELEASES.get()),
                (c"slot_exports", stats::SLOT_EXPORTS.get()),
                (c"blocked", waiters::blocked_total() as i64),
                (c"waiting_longest_ms", waiters::longest_wait_ms()),
                (c"wait_timeouts", stats::WAIT_TIMEOUTS.get()),
                (c"wait_cancels", stats::WAIT_CANCELS.get()),
                (c"deadlocks", stats::DEADLOCKS.get()),
                (c"guard_calls", stats::GUARD_CALLS.get()),
                (c"guard_refusals", stats::GUARD_REFUSALS.get()),
                (c"guard_stale_tokens", stats::GUARD_STALE_TOKENS.get()),
                (c"tracked_locks", state::tracked_locks() as i64),
                (c"allocated_bytes", ffi::allocated_bytes()),
                (c"eviction_unsafe", config::eviction_unsafe() as i64),
                (
                    c"acl_categories_missing",
                    commands::table::acl_categories_missing() as i64,
                ),
                (
                    c"acl_category_rlock",
                    commands::table::acl_category_rlock() as i64,
                ),
            ],
        );
        // A crash report may come while the state is borrowed: the counters only.
        if for_crash_report == 0 {
            ffi::info_dict_section(info, c"latency", &latency_fields());
        }
    });
}

/// `# rlock_latency`: per family with samples, `wait_usec_<family>` (percentiles in the
/// window) and `waitstat_<family>` (outcomes since load or RLOCK.RESETSTAT); then
/// `handoff_usec`. In the grammar of the server's `latency_percentiles_usec_<cmd>`.
fn latency_fields() -> Vec<(CString, Vec<(&'static CStr, ffi::InfoValue)>)> {
    let percentiles = |p: [u64; 3]| {
        let text = |usec| ffi::InfoValue::Text(CString::new(usec_text(usec)).unwrap_or_default());
        vec![
            (c"p50", text(p[0])),
            (c"p99", text(p[1])),
            (c"p99.9", text(p[2])),
        ]
    };
    let (now_ms, window_ms) = (stats::now_us() / 1000, config::stats_window_ms());
    state::with(|s| {
        let stats = &s.wait_stats;
        let mut fields = Vec::new();
        for family in Family::ALL {
            if let Some(p) = stats.wait_percentiles(family, now_ms, window_ms) {
                let name = format!("wait_usec_{}", family.name());
                fields.push((CString::new(name).unwrap_or_default(), percentiles(p)));
            }
        }
        for family in Family::ALL {
            let totals = stats.totals(family);
            if totals.is_empty() {
                continue;
            }
            let n = |n: u64| ffi::InfoValue::Integer(n.min(i64::MAX as u64) as i64);
            let name = format!("waitstat_{}", family.name());
            let values = vec![
                (c"granted", n(totals.granted)),
                (c"timeouts", n(totals.timeouts)),
                (c"cancels", n(totals.cancels)),
                (c"usec", n(totals.usec)),
            ];
            fields.push((CString::new(name).unwrap_or_default(), values));
        }
        if let Some(p) = stats.handoff_percentiles(now_ms, window_ms) {
            fields.push((c"handoff_usec".to_owned(), percentiles(p)));
        }
        fields
    })
}

redis_module! {
    name: "rlock",
    version: version::NUMBER,
    allocator: (ModuleAllocator, MODULE_ALLOCATOR),
    data_types: [],
    init: init,
    deinit: deinit,
    configurations: [
        i64: [
            ["lease-ms", &config::LEASE_MS, config::DEFAULT_LEASE_MS, 1, config::MAX_MS, ConfigurationFlags::DEFAULT, None],
            ["fair-wait-ms", &config::FAIR_WAIT_MS, config::DEFAULT_FAIR_WAIT_MS, 1, config::MAX_MS, ConfigurationFlags::DEFAULT, None],
            ["stats-window-ms", &config::STATS_WINDOW_MS, config::DEFAULT_STATS_WINDOW_MS, config::MIN_STATS_WINDOW_MS, config::MAX_STATS_WINDOW_MS, ConfigurationFlags::DEFAULT, None],
        ],
        string: [],
        bool: [
            ["publish", &config::PUBLISH, true, ConfigurationFlags::DEFAULT, None],
            ["deadlock-detection", &config::DEADLOCK_DETECTION, true, ConfigurationFlags::DEFAULT, None],
        ],
        enum: [],
        module_args_as_configuration: true,
    ]
}
