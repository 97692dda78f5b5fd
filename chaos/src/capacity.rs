//! The semaphore checker: at no instant may the permits certainly held at once weigh more
//! than the semaphore has; and once the load has stopped, the permits available are the
//! semaphore's, give or take what the faults left unknown.
//!
//! A hold is recorded as for locks (`history`): the interval in which its permits were
//! certainly taken, on the clients' one monotonic clock, from the grant's reply to the
//! earliest moment the permits may have come back (the first give-back sent, the lease's
//! end counted from the send of the call that set it, less a few ms for the server's clock
//! reads, or a `SESSION` connection's kill). Each lies inside the real hold, so if the
//! intervals that overlap at an instant weigh more than the permits, the server handed
//! out more than it had: never an artefact of timing.
//!
//! That holds only while the semaphore has the permits it was given. The clients give back
//! only what they took, but a fault can leave a call's effect unknown (its reply lost):
//!
//! - a take or a give-back that may or may not have run may *leak* permits: fewer are
//!   available than the semaphore was given. The capacity check stays sound (fewer can be
//!   handed out); the conservation check allows for it;
//! - a give-back resent after its `REQ` record may have expired may have run twice, which
//!   *inflates* the semaphore by its weight from the resend's send on. The capacity there
//!   and after is raised by that weight, and conservation allows for it.
//!
//! A plain permit has no lease: a permit a client took and never gave back is held until
//! the run ends. The clients always send a give-back (resent until it is certain, or the
//! doubt recorded), so every recorded hold ends at the first one sent; the ledger keeps the
//! doubts. The load moves to a fresh semaphore on every doubt (`permits::Semaphores`), so
//! most semaphores have none and are checked exactly.
//!
//! A `kill -9` restart reloads an AOF written with `appendfsync always` before any reply, and
//! `FAILOVER` pauses writes until the target has caught up: nothing replied is lost there. A
//! killed primary (the unplanned phase) or a failover that outlived its pause (the cluster)
//! loses what no replica acknowledged: there every take and give-back is acknowledged with
//! `WAIT`, a hold whose take was not and that a kill fell within is not checked (its give-back
//! may add permits: a doubt), and a give-back not acknowledged before a kill may leak.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::history::report_hold;
use crate::resp::since_epoch;

/// Milliseconds taken off a lease's end: the server writes a deadline as its wall clock in
/// whole ms plus the lease (up to 1 ms early), compares it with its clock truncated to ms,
/// and its wall clock may run a little apart from the clients' monotonic one.
pub const CLOCK_SLACK: Duration = Duration::from_millis(5);

#[derive(Debug, Clone)]
pub struct PermitHold {
    pub semaphore: String,
    pub owner: String,
    /// How many permits.
    pub weight: u64,
    /// When the call that was granted was sent.
    pub asked: Instant,
    pub start: Instant,
    pub end: Instant,
    /// The holder's commands and replies, for reports.
    pub timeline: Vec<String>,
}

impl PermitHold {
    fn report(&self) -> String {
        let plural = if self.weight == 1 { "" } else { "s" };
        let held = format!("{} permit{plural}, ", self.weight);
        report_hold(&self.owner, &held, self.start, self.end, &self.timeline)
    }
}

#[derive(Debug, Default, Clone)]
pub struct PermitHistory {
    pub holds: Vec<PermitHold>,
}

impl PermitHistory {
    /// Keeps `hold` if its interval is not empty.
    pub fn add(&mut self, hold: PermitHold) {
        if hold.end > hold.start && hold.weight > 0 {
            self.holds.push(hold);
        }
    }

    pub fn merge(&mut self, other: PermitHistory) {
        self.holds.extend(other.holds);
    }
}

/// What is known of one semaphore besides its holds.
#[derive(Debug, Clone, Default)]
pub struct Account {
    /// The permits it was given (`TRYSETPERMITS`).
    pub permits: u64,
    /// Permits that may have been taken and never given back.
    pub may_leak: u64,
    /// Permits that may have been given back twice, each from when.
    pub may_inflate: Vec<(Instant, u64)>,
    /// The doubts, said, for reports.
    pub doubts: Vec<String>,
    /// When a reply first showed the semaphore exists.
    pub seen_set: Option<Instant>,
    /// Permits available as replies showed them: (sent, replied, permits).
    pub readings: Vec<(Instant, Instant, i64)>,
    /// Give-backs no replica acknowledged, in the unplanned-failover phase: (sent, permits).
    /// A primary killed after one may have lost it (`permits::conservation`).
    pub unacknowledged_releases: Vec<(Instant, u64)>,
}

impl Account {
    /// The most permits the semaphore may have at `at`.
    pub fn capacity_at(&self, at: Instant) -> u64 {
        self.permits
            + self
                .may_inflate
                .iter()
                .filter(|(from, _)| *from < at)
                .map(|(_, w)| w)
                .sum::<u64>()
    }

    fn inflation(&self) -> u64 {
        self.may_inflate.iter().map(|(_, w)| w).sum()
    }
}

/// Every semaphore of a run, by key.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    pub semaphores: BTreeMap<String, Account>,
}

/// What the capacity check found: violations, and the most permits seen certainly held at
/// once on any semaphore (the check bites only if that reaches the permits).
#[derive(Debug, Default)]
pub struct Finding {
    pub violations: Vec<String>,
    pub peak: u64,
    /// Instants at which the semaphore's permits were all certainly held.
    pub full: u64,
}

/// The capacity check: at each hold's start (where the weight held at once can grow), the
/// holds still running weigh at most the semaphore's capacity then.
pub fn over_capacity(
    history: &PermitHistory,
    ledger: &Ledger,
    faults: &[(Instant, String)],
) -> Finding {
    let mut by_key: BTreeMap<&str, Vec<&PermitHold>> = BTreeMap::new();
    for hold in &history.holds {
        by_key.entry(&hold.semaphore).or_default().push(hold);
    }
    let mut finding = Finding::default();
    for (key, mut holds) in by_key {
        let Some(account) = ledger.semaphores.get(key) else {
            finding.violations.push(format!(
                "{} holds on {key}, a semaphore the load never set",
                holds.len()
            ));
            continue;
        };
        holds.sort_by_key(|h| h.start);
        let mut running: Vec<&PermitHold> = Vec::new();
        let mut reported = 0usize;
        for hold in holds {
            running.retain(|prev| prev.end > hold.start);
            running.push(hold);
            let weight: u64 = running.iter().map(|h| h.weight).sum();
            let capacity = account.capacity_at(hold.start);
            finding.peak = finding.peak.max(weight);
            if weight == capacity {
                finding.full += 1;
            }
            if weight <= capacity {
                continue;
            }
            reported += 1;
            if reported > 5 {
                continue;
            }
            let first = running.iter().map(|h| h.asked).min().unwrap_or(hold.asked);
            let around = (first - Duration::from_secs(1))..hold.start;
            let nearby: String = faults
                .iter()
                .filter(|(at, _)| around.contains(at))
                .map(|(at, what)| format!("    {} {what}\n", since_epoch(*at)))
                .collect();
            finding.violations.push(format!(
                "over capacity on {key}: {weight} permits certainly held at {} of {capacity}{}\n{}  faults:\n{nearby}",
                since_epoch(hold.start),
                if account.may_inflate.is_empty() {
                    String::new()
                } else {
                    format!(" (doubts: {})", account.doubts.join("; "))
                },
                running.iter().map(|h| h.report()).collect::<String>(),
            ));
        }
        if reported > 5 {
            finding.violations.push(format!(
                "over capacity on {key}: {} more instants not shown",
                reported - 5
            ));
        }
    }
    finding
}

/// Whether `available`, read once the load stopped and every lease ended, is what the
/// semaphore must have: its permits, less what may have leaked, plus what may have been
/// given back twice. Readings taken during the load must lie between none and the
/// capacity then.
pub fn conservation(key: &str, account: &Account, available: i64) -> Vec<String> {
    let mut found = Vec::new();
    let low = account.permits as i64 - account.may_leak as i64;
    let high = (account.permits + account.inflation()) as i64;
    if available < low || available > high {
        found.push(format!(
            "conservation on {key}: {available} permits available once every holder gave \
             its permits back and every lease ended, of {} (between {low} and {high} given the \
             doubts: {})",
            account.permits,
            if account.doubts.is_empty() {
                "none".to_string()
            } else {
                account.doubts.join("; ")
            }
        ));
    }
    let wrong: Vec<String> = account
        .readings
        .iter()
        .filter(|(_, replied, permits)| {
            *permits < 0 || *permits > account.capacity_at(*replied) as i64
        })
        .map(|(sent, replied, permits)| {
            format!(
                "{permits} (sent {}, replied {}, of {})",
                since_epoch(*sent),
                since_epoch(*replied),
                account.capacity_at(*replied)
            )
        })
        .collect();
    if !wrong.is_empty() {
        found.push(format!(
            "{key} read more permits available than it had, or fewer than none, {} time(s) \
             during the load; the first: {}",
            wrong.len(),
            wrong[..wrong.len().min(3)].join(", ")
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(t0: Instant, key: &str, owner: &str, weight: u64, from: u64, to: u64) -> PermitHold {
        PermitHold {
            semaphore: key.into(),
            owner: owner.into(),
            weight,
            asked: t0 + Duration::from_millis(from),
            start: t0 + Duration::from_millis(from),
            end: t0 + Duration::from_millis(to),
            timeline: Vec::new(),
        }
    }

    /// Holds `(owner, weight, from, to)` of semaphore `s`, in ms after `t0`.
    fn holds_of_s(t0: Instant, holds: &[(&str, u64, u64, u64)]) -> PermitHistory {
        let mut h = PermitHistory::default();
        for &(owner, weight, from, to) in holds {
            h.add(hold(t0, "s", owner, weight, from, to));
        }
        h
    }

    fn ledger(key: &str, permits: u64) -> Ledger {
        let mut ledger = Ledger::default();
        ledger.semaphores.insert(
            key.into(),
            Account {
                permits,
                ..Account::default()
            },
        );
        ledger
    }

    #[test]
    fn weights_add_up_to_the_permits_and_no_further() {
        let t0 = Instant::now();
        let ledger = ledger("s", 3);
        // c starts as b ends: three held at b's start and at c's.
        let mut h = holds_of_s(t0, &[("a", 2, 0, 100), ("b", 1, 10, 50), ("c", 1, 50, 80)]);
        let found = over_capacity(&h, &ledger, &[]);
        assert!(found.violations.is_empty(), "{:?}", found.violations);
        assert_eq!(found.peak, 3);
        assert_eq!(found.full, 2);
        h.add(hold(t0, "s", "d", 2, 90, 120));
        let found = over_capacity(&h, &ledger, &[]);
        assert_eq!(found.violations.len(), 1, "{:?}", found.violations);
        assert!(found.violations[0].contains("4 permits"));
        // The same holds on a semaphore the load never set are reported as such.
        let found = over_capacity(&h, &self::ledger("other", 3), &[]);
        assert_eq!(found.violations.len(), 1);
    }

    #[test]
    fn a_long_hold_counts_past_short_ones_between() {
        let t0 = Instant::now();
        let ledger = ledger("s", 2);
        let h = holds_of_s(
            t0,
            &[
                ("long", 1, 0, 1000),
                ("short", 1, 10, 20),
                ("x", 1, 500, 510),
                ("y", 1, 505, 520),
            ],
        );
        assert_eq!(over_capacity(&h, &ledger, &[]).violations.len(), 1);
    }

    #[test]
    fn a_possible_double_give_back_raises_the_capacity_from_its_send() {
        let t0 = Instant::now();
        let mut ledger = ledger("s", 1);
        let h = holds_of_s(t0, &[("a", 1, 0, 100), ("b", 1, 50, 60)]);
        assert_eq!(over_capacity(&h, &ledger, &[]).violations.len(), 1);
        let account = ledger.semaphores.get_mut("s").unwrap();
        account
            .may_inflate
            .push((t0 + Duration::from_millis(40), 1));
        assert!(over_capacity(&h, &ledger, &[]).violations.is_empty());
        // From after b's grant it does not excuse b.
        let account = ledger.semaphores.get_mut("s").unwrap();
        account.may_inflate[0].0 = t0 + Duration::from_millis(55);
        assert_eq!(over_capacity(&h, &ledger, &[]).violations.len(), 1);
    }

    #[test]
    fn conservation_allows_exactly_the_doubts() {
        let t0 = Instant::now();
        let mut account = Account {
            permits: 3,
            ..Account::default()
        };
        assert!(conservation("s", &account, 3).is_empty());
        assert_eq!(conservation("s", &account, 2).len(), 1);
        assert_eq!(conservation("s", &account, 4).len(), 1);
        account.may_leak = 2;
        assert!(conservation("s", &account, 1).is_empty());
        assert_eq!(conservation("s", &account, 0).len(), 1);
        account.may_inflate.push((t0, 1));
        assert!(conservation("s", &account, 4).is_empty());
        assert_eq!(conservation("s", &account, 5).len(), 1);
        account
            .readings
            .push((t0, t0 + Duration::from_millis(1), 5));
        assert_eq!(conservation("s", &account, 3).len(), 1);
    }

    #[test]
    fn empty_holds_are_not_recorded() {
        let t0 = Instant::now();
        let h = holds_of_s(t0, &[("a", 1, 10, 10), ("b", 0, 10, 20)]);
        assert!(h.holds.is_empty());
    }
}
