//! Samples for the server's latency monitor, for the module's own work that holds the
//! event loop: `rlock-deferred` (one run of self-started work: the deferred batch, a
//! lease deadline, a slot sweep) and `rlock-scan` (one `RLOCK.SCAN`).
//!
//! As for the server's own events, a sample is added only at or above
//! `latency-monitor-threshold` and never while it is 0 (`RedisModule_LatencyAddSample`
//! itself would record every sample then). The threshold is read once at load and
//! followed through the `Config` server event, not read for every sample.

use std::ffi::CStr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;

use redis_module::{Context, RedisValue};

use crate::core::integer::parse_i64;
use crate::ffi;

pub const DEFERRED: &CStr = c"rlock-deferred";
pub const SCAN: &CStr = c"rlock-scan";

/// The server config this follows.
pub const THRESHOLD_CONFIG: &[u8] = b"latency-monitor-threshold";

/// `latency-monitor-threshold` in ms; 0 turns the monitor off.
static THRESHOLD_MS: AtomicI64 = AtomicI64::new(0);

pub fn threshold_ms() -> i64 {
    THRESHOLD_MS.load(Ordering::Relaxed)
}

/// Reads `latency-monitor-threshold` (at load, and when `CONFIG SET` changes it).
pub fn read_threshold(ctx: &Context) {
    let value = match ctx.call("CONFIG", &["GET", "latency-monitor-threshold"]) {
        Ok(RedisValue::Array(pair)) if pair.len() == 2 => match &pair[1] {
            RedisValue::SimpleString(s) | RedisValue::BulkString(s) => parse_i64(s.as_bytes()),
            RedisValue::StringBuffer(b) => parse_i64(b),
            RedisValue::BulkRedisString(s) => parse_i64(s.as_slice()),
            RedisValue::Integer(n) => Some(*n),
            _ => None,
        },
        _ => None,
    };
    if let Some(ms) = value {
        THRESHOLD_MS.store(ms.max(0), Ordering::Relaxed);
    }
}

/// Whether a run of `ms` is a sample: at or above a threshold that is not 0.
pub fn is_sample(threshold_ms: i64, ms: i64) -> bool {
    threshold_ms > 0 && ms >= threshold_ms
}

/// Adds a sample of `event` for the work started at `started`, if it took long enough.
pub fn sample(event: &CStr, started: Instant) {
    let threshold = threshold_ms();
    if threshold == 0 {
        return;
    }
    let ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
    if is_sample(threshold, ms) {
        ffi::latency_add_sample(event, ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_only_at_or_above_a_threshold_that_is_on() {
        assert!(!is_sample(0, 0));
        assert!(!is_sample(0, 500));
        assert!(!is_sample(10, 9));
        assert!(is_sample(10, 10));
        assert!(is_sample(1, 250));
    }
}
