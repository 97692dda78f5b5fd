//! Clocks and counters shared by the scenarios: server CPU from `INFO cpu`,
//! this process's CPU from `getrusage`, medians and percentiles.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use rlock_module_tests::{parse_info, Server};

/// A connection for the benchmark: no response timeout, since `BLOCK 0` waits for ever
/// and a loaded 2-core machine can stall a reply past redis-rs's 500 ms default.
pub async fn connect(server: &Server) -> MultiplexedConnection {
    let config = AsyncConnectionConfig::new()
        .set_response_timeout(None)
        .set_connection_timeout(Some(Duration::from_secs(10)));
    server
        .client()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap_or_else(|e| panic!("connect to {server:?}: {e}"))
}

/// `n` connections, opened concurrently.
pub async fn connect_many(server: &Server, n: usize) -> Vec<MultiplexedConnection> {
    futures_util::future::join_all((0..n).map(|_| connect(server))).await
}

/// The server's own CPU time (user + sys, all threads), in seconds.
pub async fn server_cpu(con: &mut MultiplexedConnection) -> f64 {
    let text: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(con)
        .await
        .expect("INFO cpu");
    let info = parse_info(&text);
    let field = |name: &str| -> f64 {
        info.get(name)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO cpu has no {name}: {text}"))
    };
    field("used_cpu_sys") + field("used_cpu_user")
}

/// This process's CPU time (user + sys, all threads), in seconds.
pub fn own_cpu() -> f64 {
    // SAFETY: getrusage writes one plain struct that we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Wall, server CPU and client CPU at one instant.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    pub at: Instant,
    pub server_cpu: f64,
    pub client_cpu: f64,
}

impl Snapshot {
    pub async fn take(control: &mut MultiplexedConnection) -> Snapshot {
        let server_cpu = server_cpu(control).await;
        Snapshot {
            at: Instant::now(),
            server_cpu,
            client_cpu: own_cpu(),
        }
    }
}

/// What a measured window cost: wall seconds, and server / client CPU seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    pub secs: f64,
    pub server_cpu: f64,
    pub client_cpu: f64,
}

impl Window {
    pub fn between(a: &Snapshot, b: &Snapshot) -> Window {
        Window {
            secs: (b.at - a.at).as_secs_f64(),
            server_cpu: (b.server_cpu - a.server_cpu).max(0.0),
            client_cpu: (b.client_cpu - a.client_cpu).max(0.0),
        }
    }

    /// Share of one core the server used, in percent.
    pub fn server_busy(&self) -> f64 {
        100.0 * self.server_cpu / self.secs
    }

    pub fn client_busy(&self) -> f64 {
        100.0 * self.client_cpu / self.secs
    }

    /// Server CPU microseconds per operation (NaN when there were none).
    pub fn server_us_per(&self, ops: u64) -> f64 {
        if ops == 0 {
            f64::NAN
        } else {
            self.server_cpu * 1e6 / ops as f64
        }
    }
}

/// The median of the finite values (NaN if none).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Nearest-rank percentile of sorted values (NaN if empty); `p` in 0..=100.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `a / b`, NaN when either is missing or b is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// A tiny xorshift generator: key choice needs speed, not quality.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median([3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median([4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median([f64::NAN]).is_nan());
        let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&sorted, 50.0), 50.0);
        assert_eq!(percentile(&sorted, 99.0), 99.0);
        assert_eq!(percentile(&sorted[..1], 99.0), 1.0);
    }
}
