//! Module configs: `rlock.lease-ms`, `rlock.fair-wait-ms`, `rlock.publish`,
//! `rlock.stats-window-ms`, `rlock.deadlock-detection`.
//! Set at load (`MODULE LOAD path lease-ms 5000`) or with `CONFIG SET rlock.<name>`.
//! And the one server config that makes locks unsafe: `maxmemory-policy allkeys-*`.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use redis_module::{Context, RedisValue};

use crate::core::integer::parse_i64;
use crate::core::lease::{Lease, MAX_LEASE_MS};
use crate::ffi;

pub const DEFAULT_LEASE_MS: i64 = 30_000;
pub const DEFAULT_FAIR_WAIT_MS: i64 = 300_000;
pub const MAX_MS: i64 = MAX_LEASE_MS;
/// The window of `INFO rlock`'s percentiles and `RLOCK.TOP`: 1 s to 1 hour.
pub const DEFAULT_STATS_WINDOW_MS: i64 = 60_000;
pub const MIN_STATS_WINDOW_MS: i64 = 1_000;
pub const MAX_STATS_WINDOW_MS: i64 = 3_600_000;

pub static LEASE_MS: AtomicI64 = AtomicI64::new(DEFAULT_LEASE_MS);
pub static FAIR_WAIT_MS: AtomicI64 = AtomicI64::new(DEFAULT_FAIR_WAIT_MS);
pub static PUBLISH: AtomicBool = AtomicBool::new(true);
/// Whether a wait that would close a cycle of waits is refused with `DEADLOCK`.
pub static DEADLOCK_DETECTION: AtomicBool = AtomicBool::new(true);
pub static STATS_WINDOW_MS: AtomicI64 = AtomicI64::new(DEFAULT_STATS_WINDOW_MS);
/// The server may evict any key, locks and fencing counters included.
pub static EVICTION_UNSAFE: AtomicBool = AtomicBool::new(false);

/// The lease used when a command gives none.
pub fn default_lease() -> Lease {
    Lease::from_ms(LEASE_MS.load(Ordering::Relaxed))
        .unwrap_or_else(|| Lease::from_ms(DEFAULT_LEASE_MS).expect("the default lease is in range"))
}

pub fn fair_wait_ms() -> i64 {
    FAIR_WAIT_MS.load(Ordering::Relaxed)
}

pub fn publish() -> bool {
    PUBLISH.load(Ordering::Relaxed)
}

pub fn deadlock_detection() -> bool {
    DEADLOCK_DETECTION.load(Ordering::Relaxed)
}

pub fn stats_window_ms() -> u64 {
    STATS_WINDOW_MS
        .load(Ordering::Relaxed)
        .clamp(MIN_STATS_WINDOW_MS, MAX_STATS_WINDOW_MS) as u64
}

/// Whether `maxmemory-policy` lets the server evict keys without a TTL: the
/// fencing counters, and locks whatever their lease.
pub fn evicts_any_key(policy: &[u8]) -> bool {
    policy.starts_with(b"allkeys-")
}

pub fn eviction_unsafe() -> bool {
    EVICTION_UNSAFE.load(Ordering::Relaxed)
}

/// Reads `maxmemory-policy` (at load, and when `CONFIG SET` changes it), keeps
/// the answer for `INFO rlock`, and warns in the log when locks may be evicted.
pub fn check_eviction_policy(ctx: &Context) {
    let policy = match ctx.call("CONFIG", &["GET", "maxmemory-policy"]) {
        Ok(RedisValue::Array(pair)) if pair.len() == 2 => match &pair[1] {
            RedisValue::SimpleString(s) | RedisValue::BulkString(s) => s.as_bytes().to_vec(),
            RedisValue::StringBuffer(b) => b.clone(),
            RedisValue::BulkRedisString(s) => s.as_slice().to_vec(),
            _ => return,
        },
        _ => return,
    };
    let unsafe_now = evicts_any_key(&policy);
    EVICTION_UNSAFE.store(unsafe_now, Ordering::Relaxed);
    if unsafe_now {
        ffi::log_warning(
            ctx.get_raw(),
            &format!(
                "rlock: maxmemory-policy is {}: the server may evict any key, locks and fencing \
                 counters included. An evicted lock is free to anyone while its holder still \
                 believes it holds it; an evicted counter starts fencing tokens again at 1. \
                 Use noeviction, or a volatile-* policy, which spares the counters.",
                String::from_utf8_lossy(&policy)
            ),
        );
    }
}

/// Checks the `name value` pairs given to `MODULE LOAD`, so that a typo or a value
/// out of range fails the load instead of being ignored.
pub fn check_load_args(args: &[&[u8]]) -> Result<(), String> {
    if !args.len().is_multiple_of(2) {
        return Err("module arguments must be pairs of config name and value".into());
    }
    for pair in args.chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        let shown = String::from_utf8_lossy(name);
        let ok = match name {
            b"lease-ms" | b"fair-wait-ms" => {
                matches!(parse_i64(value), Some(ms) if (1..=MAX_MS).contains(&ms))
            }
            b"publish" | b"deadlock-detection" => matches!(value, b"yes" | b"no"),
            b"stats-window-ms" => matches!(
                parse_i64(value),
                Some(ms) if (MIN_STATS_WINDOW_MS..=MAX_STATS_WINDOW_MS).contains(&ms)
            ),
            _ => {
                return Err(format!(
                    "unknown config '{shown}' (known: lease-ms, fair-wait-ms, publish, stats-window-ms, deadlock-detection)"
                ))
            }
        };
        if !ok {
            return Err(format!(
                "bad value for config '{shown}': lease-ms and fair-wait-ms take 1 to {MAX_MS}, \
                 publish and deadlock-detection take yes or no, stats-window-ms takes {MIN_STATS_WINDOW_MS} to {MAX_STATS_WINDOW_MS}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allkeys_policies_evict_any_key() {
        for policy in ["allkeys-lru", "allkeys-lfu", "allkeys-random"] {
            assert!(evicts_any_key(policy.as_bytes()), "{policy}");
        }
        for policy in [
            "noeviction",
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "",
        ] {
            assert!(!evicts_any_key(policy.as_bytes()), "{policy}");
        }
    }

    #[test]
    fn load_args_are_checked() {
        assert!(check_load_args(&[]).is_ok());
        assert!(check_load_args(&[b"lease-ms", b"5000", b"publish", b"no"]).is_ok());
        assert!(check_load_args(&[b"lease-ms"]).is_err());
        assert!(check_load_args(&[b"lease-ms", b"0"]).is_err());
        assert!(check_load_args(&[b"publish", b"maybe"]).is_err());
        assert!(check_load_args(&[b"deadlock-detection", b"no"]).is_ok());
        assert!(check_load_args(&[b"deadlock-detection", b"off"]).is_err());
        assert!(check_load_args(&[b"lease", b"10"]).is_err());
        assert!(check_load_args(&[b"stats-window-ms", b"1000"]).is_ok());
        assert!(check_load_args(&[b"stats-window-ms", b"999"]).is_err());
        assert!(check_load_args(&[b"stats-window-ms", b"3600001"]).is_err());
    }
}
