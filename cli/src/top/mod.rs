//! `rlock top`'s model: what one look at the servers shows (`TopState`), and how two looks
//! make rates. Drawing is in `view` (a pure function of `TopState`); polling and keys are in
//! `commands/top.rs`.

pub mod view;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rlock_client::{ContendedKey, Locks, ServerStats};

use crate::output;

/// Counters summed over the primaries, by the name the rates use.
const COUNTERS: &[(&str, &[&str])] = &[
    // `acquires` counts every lock taken from free, read and write sides and multi-key sets
    // included, by a call or a hand-off; permits are counted apart, at once or handed off.
    (
        "acquires",
        &["acquires", "permit_acquires", "permit_handoffs"],
    ),
    ("handoffs", &["handoffs", "permit_handoffs"]),
    ("timeouts", &["wait_timeouts"]),
    ("deadlocks", &["deadlocks"]),
    ("expiries", &["expiries", "permit_reclaims"]),
    (
        "releases",
        &["releases", "multi_releases", "permit_releases"],
    ),
];

/// Per second, over the last interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// The seconds between the two looks.
    pub over_secs: f64,
    pub acquires: f64,
    pub handoffs: f64,
    pub timeouts: f64,
    pub deadlocks: f64,
    pub expiries: f64,
    pub releases: f64,
}

/// Wait percentiles of one family (`lock`, `fair`, `read`, ...), in microseconds.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyWait {
    pub family: String,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// A contended key, one row of the screen: the client's, as `RLOCK.TOP` lists it.
pub type KeyRow = ContendedKey;

/// A row for the tests (the client's type is built field by field outside its crate).
#[cfg(test)]
pub fn key_row(key: &str, kind: &str, waiters: u64, longest_wait_ms: u64) -> KeyRow {
    let mut row = KeyRow::default();
    (row.key, row.kind) = (key.into(), kind.into());
    (row.waiters, row.longest_wait_ms) = (waiters, longest_wait_ms);
    row
}

/// Everything the screen shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopState {
    /// What is watched: the URL, `(cluster)` after it for a cluster.
    pub target: String,
    /// Primaries that answered.
    pub nodes: usize,
    pub interval: Duration,
    /// `None` until two looks were made.
    pub rates: Option<Rates>,
    /// Calls blocked now, over every primary.
    pub blocked: u64,
    /// The longest of their waits so far, in ms.
    pub longest_wait_ms: u64,
    /// Families with granted waits in the server's window (worst primary's figures).
    pub waits: Vec<FamilyWait>,
    /// The most contended keys, merged over the primaries.
    pub keys: Vec<KeyRow>,
    /// The module's version as the server says it.
    pub version: String,
    /// The last look failed: why (the rest is from the look before).
    pub error: Option<String>,
    /// Wall-clock time of the last look, `HH:MM:SS` UTC.
    pub clock: String,
}

/// Makes `TopState`s from looks at the servers.
pub struct Sampler {
    locks: Locks,
    count: u32,
    last: Option<(Instant, BTreeMap<&'static str, u64>)>,
    pub state: TopState,
}

fn sum(stats: &[ServerStats]) -> BTreeMap<&'static str, u64> {
    COUNTERS
        .iter()
        .map(|(name, fields)| {
            let total = stats
                .iter()
                .flat_map(|s| fields.iter().map(move |f| s.number(f).unwrap_or(0)))
                .sum();
            (*name, total)
        })
        .collect()
}

fn rate(now: &BTreeMap<&str, u64>, before: &BTreeMap<&str, u64>, name: &str, secs: f64) -> f64 {
    // A RLOCK.RESETSTAT or a restart makes a counter go down: no negative rates.
    now[name].saturating_sub(before[name]) as f64 / secs
}

/// Merges the keys of several primaries: most waiters now first, then the longest wait,
/// then the most waits and timeouts in the window.
pub fn merge_keys(mut keys: Vec<KeyRow>, count: usize) -> Vec<KeyRow> {
    keys.sort_by(|a, b| {
        (b.waiters, b.longest_wait_ms, b.waits, b.timeouts).cmp(&(
            a.waiters,
            a.longest_wait_ms,
            a.waits,
            a.timeouts,
        ))
    });
    keys.truncate(count);
    keys
}

fn clock() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "{:02}:{:02}:{:02}",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60
    )
}

impl Sampler {
    pub fn new(locks: Locks, target: String, interval: Duration, count: u32) -> Sampler {
        Sampler {
            locks,
            count,
            last: None,
            state: TopState {
                target,
                interval,
                ..TopState::default()
            },
        }
    }

    /// Looks at the servers once and updates `state`.
    pub async fn look(&mut self) {
        let looked = async {
            let stats = self.locks.server_stats().await?;
            let keys = self.locks.contended_keys(self.count).await?;
            Ok::<_, rlock_client::Error>((stats, keys))
        }
        .await;
        let (stats, keys) = match looked {
            Ok(v) => v,
            Err(e) => {
                self.state.error = Some(e.to_string());
                self.state.clock = clock();
                return;
            }
        };
        let now = Instant::now();
        let counters = sum(&stats);
        if let Some((at, before)) = &self.last {
            let secs = now.duration_since(*at).as_secs_f64().max(0.001);
            self.state.rates = Some(Rates {
                over_secs: secs,
                acquires: rate(&counters, before, "acquires", secs),
                handoffs: rate(&counters, before, "handoffs", secs),
                timeouts: rate(&counters, before, "timeouts", secs),
                deadlocks: rate(&counters, before, "deadlocks", secs),
                expiries: rate(&counters, before, "expiries", secs),
                releases: rate(&counters, before, "releases", secs),
            });
        }
        self.last = Some((now, counters));
        let s = &mut self.state;
        s.error = None;
        s.clock = clock();
        s.nodes = stats.len();
        s.blocked = stats.iter().filter_map(|x| x.number("blocked")).sum();
        s.longest_wait_ms = stats
            .iter()
            .filter_map(|x| x.number("waiting_longest_ms"))
            .max()
            .unwrap_or(0);
        s.version = stats
            .iter()
            .find_map(|x| x.fields.get("version").cloned())
            .unwrap_or_default();
        let mut waits: BTreeMap<String, FamilyWait> = BTreeMap::new();
        for node in &stats {
            for family in node.wait_families() {
                let p = node
                    .percentiles(&format!("wait_usec_{family}"))
                    .unwrap_or_default();
                let get = |n: &str| p.iter().find(|(k, _)| k == n).map_or(0.0, |(_, v)| *v);
                let w = waits.entry(family.clone()).or_insert(FamilyWait {
                    family,
                    p50_us: 0.0,
                    p99_us: 0.0,
                });
                w.p50_us = w.p50_us.max(get("p50"));
                w.p99_us = w.p99_us.max(get("p99"));
            }
        }
        s.waits = waits.into_values().collect();
        s.keys = merge_keys(keys, self.count as usize);
    }
}

/// `rlock top --stat`'s header.
pub fn stat_header() -> String {
    format!(
        "{:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9}  {}",
        "acquire/s",
        "handoff/s",
        "timeout/s",
        "deadlk/s",
        "expiry/s",
        "blocked",
        "longest",
        "p50 wait",
        "p99 wait",
        "top key"
    )
}

/// One `--stat` line; `None` before two looks were made (no rates yet).
pub fn stat_line(s: &TopState) -> Option<String> {
    if let Some(e) = &s.error {
        return Some(format!("error: {e}"));
    }
    let r = s.rates?;
    // The family with the worst p99 speaks for all.
    let worst = s.waits.iter().max_by(|a, b| a.p99_us.total_cmp(&b.p99_us));
    let (p50, p99) = worst.map_or(("-".to_owned(), "-".to_owned()), |w| {
        (output::micros(w.p50_us), output::micros(w.p99_us))
    });
    let top = s.keys.first().map_or("-".to_owned(), |k| {
        format!("{} ({} waiting)", k.key, k.waiters)
    });
    Some(format!(
        "{:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>9} {:>9} {:>9}  {}",
        r.acquires,
        r.handoffs,
        r.timeouts,
        r.deadlocks,
        r.expiries,
        s.blocked,
        output::millis(s.longest_wait_ms),
        p50,
        p99,
        top
    ))
}

// The integration tests' holder and blocked waiter, for the live test below.
#[cfg(test)]
#[path = "../../tests/common/locks.rs"]
#[allow(dead_code)] // what the integration tests alone use
mod test_locks;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use rlock_module_tests::{call, flavors, Server};

    use super::test_locks::{blocked_waiter, hold};

    use super::*;

    fn screen(width: u16, height: u16, state: &TopState) -> String {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|f| view::draw(f, state)).unwrap();
        let buffer = terminal.backend().buffer().clone();
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
                    + "\n"
            })
            .collect()
    }

    #[test]
    fn keys_of_several_primaries_merge_by_waiters_then_wait() {
        let k = |key: &str, waiters, longest| key_row(key, "", waiters, longest);
        let merged = merge_keys(
            vec![k("a", 0, 0), k("b", 2, 10), k("c", 2, 50), k("d", 1, 900)],
            3,
        );
        let names: Vec<_> = merged.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(names, ["c", "b", "d"]);
    }

    /// The view drawn from real looks at a server with a blocked call and turnover.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn live_looks_draw_rates_waits_and_the_contended_key() {
        for flavor in flavors() {
            let server = Server::start(flavor);
            let mut c = server.conn();
            hold(&mut c, "hot:key", "holder", "30000");
            let waiter = blocked_waiter(&server, "hot:key", "waiter", "1500");
            let locks = Locks::from_url(&server.url()).unwrap();
            let mut sampler = Sampler::new(locks, server.url(), Duration::from_millis(200), 10);
            sampler.look().await;
            assert!(
                sampler.state.rates.is_none(),
                "{flavor}: one look, no rates"
            );
            // Some turnover between the looks: a waited-for grant and plain acquires.
            for i in 0..5 {
                let owner = format!("o{i}");
                let side: &[&str] = if i % 2 == 0 { &["READ"] } else { &[] };
                let mut take = vec!["RLOCK.ACQUIRE", "cold", &owner];
                take.extend(side);
                call(&mut c, &take).unwrap();
                let mut give = vec!["RLOCK.RELEASE", "cold", &owner];
                give.extend(side);
                call(&mut c, &give).unwrap();
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            sampler.look().await;
            let s = &sampler.state;
            assert!(s.error.is_none(), "{flavor}: {:?}", s.error);
            let r = s.rates.unwrap();
            let taken = (r.acquires * r.over_secs).round();
            assert_eq!(taken, 5.0, "{flavor}: 5 acquires, each counted once: {r:?}");
            assert_eq!(s.blocked, 1, "{flavor}");
            assert!(s.longest_wait_ms >= 200, "{flavor}: {s:?}");
            assert_eq!(s.keys[0].key, "hot:key", "{flavor}");
            for (w, h) in [(80, 24), (120, 40)] {
                let text = screen(w, h, s);
                assert!(text.contains("hot:key"), "{flavor} {w}x{h}:\n{text}");
                assert!(text.contains("blocked now 1"), "{flavor} {w}x{h}:\n{text}");
                assert!(text.contains("Most contended keys"), "{flavor}");
            }
            let got = waiter.join().unwrap();
            assert!(
                matches!(got, Ok(redis::Value::Nil)),
                "{flavor}: timed out: {got:?}"
            );
            // The wait timed out: nobody blocked now, the key stays listed with its timeout.
            sampler.look().await;
            assert_eq!(sampler.state.blocked, 0);
            assert!(sampler
                .state
                .keys
                .iter()
                .any(|k| k.key == "hot:key" && k.timeouts == 1));
            assert!(sampler.state.rates.unwrap().timeouts > 0.0, "{flavor}");
        }
    }
}
