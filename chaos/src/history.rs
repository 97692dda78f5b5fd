//! What the clients saw, and the checks run over it.
//!
//! A hold is recorded as the interval in which the lock was certainly held, on the
//! clients' one monotonic clock: from the moment the grant's reply was read to the
//! earliest moment the hold may have ended, that is the first of: the release was
//! sent; the last call that set the lease was sent, plus that lease (the server
//! starts a lease when it receives the call, later than it was sent); the holder's
//! connection was killed, for a SESSION hold. So each interval lies inside the real
//! hold, and two intervals of different owners on one lock that overlap are a
//! violation of mutual exclusion, never an artefact of timing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::resp::since_epoch;

#[derive(Debug, Clone)]
pub struct Hold {
    pub lock: String,
    pub owner: String,
    /// When the acquire that was granted was sent: the grant came after.
    pub asked: Instant,
    pub start: Instant,
    pub end: Instant,
    /// The fencing token, when the grant replied one.
    pub token: Option<i64>,
    /// A read hold of a read-write lock: other owners' read holds may overlap it.
    pub shared: bool,
    /// Whether a replica acknowledged the grant (`WAIT`) before it was relied on: a
    /// promotion may lose one that none did, its fencing token included.
    pub acknowledged: bool,
    /// The holder's commands and replies from its acquire to its last release, for reports.
    pub timeline: Vec<String>,
}

impl Hold {
    fn report(&self) -> String {
        report_hold(&self.owner, "", self.start, self.end, &self.timeline)
    }
}

/// A hold in a finding's report: its owner, what it held (`held`, before the interval)
/// and when, then its timeline a line each.
pub(crate) fn report_hold(
    owner: &str,
    held: &str,
    start: Instant,
    end: Instant,
    timeline: &[String],
) -> String {
    format!(
        "  {owner} ({held}{}..{}):\n{}",
        since_epoch(start),
        since_epoch(end),
        timeline
            .iter()
            .map(|line| format!("    {line}\n"))
            .collect::<String>()
    )
}

#[derive(Debug, Default, Clone)]
pub struct History {
    pub holds: Vec<Hold>,
}

impl History {
    pub fn add(&mut self, hold: Hold) {
        if hold.end > hold.start {
            self.holds.push(hold);
        }
    }

    pub fn merge(&mut self, other: History) {
        self.holds.extend(other.holds);
    }
}

/// An `RLOCK.FORCERELEASE`: sent, and its reply read (`None` if it never was).
#[derive(Debug, Clone)]
pub struct Force {
    pub lock: String,
    pub sent: Instant,
    pub replied: Option<Instant>,
}

impl Force {
    /// Whether the server may have run it after granting a hold whose acquire was
    /// sent at `asked`: it ran somewhere between its send and its reply.
    pub fn may_follow(&self, lock: &str, asked: Instant) -> bool {
        self.lock == lock && self.replied.map_or(true, |replied| replied > asked)
    }
}

/// `RLOCK.FORCERELEASE` ends whatever hold the lock has when the server runs it, at
/// some moment after it was sent. So a hold it may have met ends, at the latest, when
/// the force release was sent (an interval that then becomes empty is dropped).
pub fn end_at_force_releases(history: &mut History, forced: &[Force]) {
    for hold in &mut history.holds {
        let first = forced
            .iter()
            .filter(|f| f.may_follow(&hold.lock, hold.asked) && f.sent < hold.end)
            .map(|f| f.sent)
            .min();
        if let Some(at) = first {
            hold.end = hold.end.min(at);
        }
    }
    history.holds.retain(|h| h.end > h.start);
}

/// Two owners held one lock at once, and not both for reading. `faults` (when each was
/// injected, and what) are shown around each finding.
pub fn mutual_exclusion(history: &History, faults: &[(Instant, String)]) -> Vec<String> {
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in &history.holds {
        by_lock.entry(&hold.lock).or_default().push(hold);
    }
    let mut found = Vec::new();
    for (lock, mut holds) in by_lock {
        holds.sort_by_key(|h| h.start);
        // Sweep: the holds still running when each one starts.
        let mut running: Vec<&Hold> = Vec::new();
        for hold in holds {
            running.retain(|prev| prev.end > hold.start);
            let clash = running
                .iter()
                .find(|prev| prev.owner != hold.owner && !(prev.shared && hold.shared));
            if let Some(prev) = clash {
                let around = (prev.asked - Duration::from_secs(1))..prev.end;
                let nearby: String = faults
                    .iter()
                    .filter(|(at, _)| around.contains(at))
                    .map(|(at, what)| format!("    {} {what}\n", since_epoch(*at)))
                    .collect();
                found.push(format!(
                    "mutual exclusion on {lock}: {} held it until {:?} after {} took it\n{}{}  faults:\n{nearby}",
                    prev.owner,
                    prev.end - hold.start,
                    hold.owner,
                    prev.report(),
                    hold.report(),
                ));
            }
            running.push(hold);
        }
    }
    found
}

/// A fencing token that is not greater than one handed to another owner of the
/// lock whose hold ended before this one began; against an unacknowledged grant only if
/// no primary was killed (`promotions`) between its acquire and this hold's start.
pub fn fencing(history: &History, promotions: &[Instant]) -> Vec<String> {
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in history.holds.iter().filter(|h| h.token.is_some()) {
        by_lock.entry(&hold.lock).or_default().push(hold);
    }
    let mut found = Vec::new();
    for (lock, mut holds) in by_lock {
        holds.sort_by_key(|h| h.start);
        // The largest token among holds that ended before `hold` started.
        let mut ended: Vec<&Hold> = Vec::new();
        for hold in &holds {
            let before = ended
                .iter()
                .filter(|h| h.end <= hold.start && h.owner != hold.owner)
                .filter(|h| {
                    h.acknowledged
                        || !promotions
                            .iter()
                            .any(|at| h.asked <= *at && *at <= hold.start)
                })
                .filter_map(|h| h.token.map(|t| (t, &h.owner)))
                .max();
            if let (Some((max, owner)), Some(token)) = (before, hold.token) {
                if token <= max {
                    found.push(format!(
                        "fencing on {lock}: {} got token {token} after {owner} had {max}",
                        hold.owner
                    ));
                }
            }
            ended.push(hold);
        }
    }
    found
}

/// The holds of `unacknowledged` that another owner's hold in `history` overlapped (not
/// both reading): grants a promotion lost and the new primary gave again.
pub fn lost(unacknowledged: &History, history: &History) -> usize {
    unacknowledged
        .holds
        .iter()
        .filter(|u| {
            history.holds.iter().chain(&unacknowledged.holds).any(|h| {
                h.lock == u.lock
                    && h.owner != u.owner
                    && !(h.shared && u.shared)
                    && h.start < u.end
                    && u.start < h.end
            })
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(t0: Instant, lock: &str, owner: &str, from: u64, to: u64, token: Option<i64>) -> Hold {
        Hold {
            lock: lock.into(),
            owner: owner.into(),
            asked: t0 + Duration::from_millis(from),
            start: t0 + Duration::from_millis(from),
            end: t0 + Duration::from_millis(to),
            token,
            shared: false,
            acknowledged: true,
            timeline: Vec::new(),
        }
    }

    /// Holds `(lock, owner, from, to)`, in ms after `t0`, without tokens.
    fn history(t0: Instant, holds: &[(&str, &str, u64, u64)]) -> History {
        let mut h = History::default();
        for &(lock, owner, from, to) in holds {
            h.add(hold(t0, lock, owner, from, to, None));
        }
        h
    }

    #[test]
    fn overlapping_holds_of_two_owners_are_caught() {
        let t0 = Instant::now();
        let mut h = history(
            t0,
            &[("a", "x", 0, 10), ("a", "y", 10, 20), ("b", "z", 5, 15)],
        );
        let found = mutual_exclusion(&h, &[]);
        assert!(found.is_empty(), "{found:?}");
        h.add(hold(t0, "a", "w", 19, 30, None));
        assert_eq!(mutual_exclusion(&h, &[]).len(), 1);
        // A long hold overlapping a later one, with a short one between.
        let h = history(
            t0,
            &[("a", "x", 0, 100), ("a", "x", 10, 20), ("a", "y", 50, 60)],
        );
        let found = mutual_exclusion(&h, &[]);
        assert_eq!(found.len(), 1, "{found:?}");
    }

    #[test]
    fn read_holds_share_and_nothing_else_does() {
        let t0 = Instant::now();
        let read = |owner: &str, from, to| Hold {
            shared: true,
            ..hold(t0, "rw", owner, from, to, None)
        };
        let mut h = History::default();
        h.add(read("a", 0, 50));
        h.add(read("b", 10, 60));
        h.add(hold(t0, "rw", "w", 60, 70, None));
        assert!(mutual_exclusion(&h, &[]).is_empty());
        // A writer inside a long read: caught, even past a short read between.
        h.add(read("c", 100, 300));
        h.add(read("d", 110, 120));
        h.add(hold(t0, "rw", "x", 200, 210, None));
        assert_eq!(
            mutual_exclusion(&h, &[]).len(),
            1,
            "{:?}",
            mutual_exclusion(&h, &[])
        );
        // The writer's own read holds do not clash with its write.
        let mut own = History::default();
        own.add(hold(t0, "rw", "w", 0, 50, None));
        own.add(read("w", 10, 80));
        assert!(mutual_exclusion(&own, &[]).is_empty());
    }

    #[test]
    fn a_force_release_ends_the_hold_it_met() {
        let t0 = Instant::now();
        let mut h = history(t0, &[("a", "x", 0, 100), ("a", "y", 50, 60)]);
        assert_eq!(mutual_exclusion(&h, &[]).len(), 1);
        let force = |sent: u64, replied: Option<u64>| Force {
            lock: "a".into(),
            sent: t0 + Duration::from_millis(sent),
            replied: replied.map(|r| t0 + Duration::from_millis(r)),
        };
        // Answered before x asked: it cannot have met x's hold.
        let mut before = h.clone();
        end_at_force_releases(&mut before, &[force(0, Some(0))]);
        assert_eq!(mutual_exclusion(&before, &[]).len(), 1);
        // Run after y's grant, sent before x's... any hold it may have met ends when it
        // was sent.
        end_at_force_releases(&mut h, &[force(40, Some(45))]);
        assert!(
            mutual_exclusion(&h, &[]).is_empty(),
            "{:?}",
            mutual_exclusion(&h, &[])
        );
        assert_eq!(
            h.holds.len(),
            2,
            "x cut at 40; y asked after the force was answered: kept"
        );
        let mut unanswered = History::default();
        unanswered.add(hold(t0, "a", "x", 10, 100, None));
        end_at_force_releases(&mut unanswered, &[force(5, None)]);
        assert!(
            unanswered.holds.is_empty(),
            "x's hold may have ended at once"
        );
    }

    #[test]
    fn empty_intervals_are_not_recorded() {
        let t0 = Instant::now();
        let mut h = History::default();
        h.add(hold(t0, "a", "x", 10, 10, None));
        h.add(hold(t0, "a", "y", 10, 5, None));
        assert!(h.holds.is_empty());
    }

    #[test]
    fn tokens_must_grow_across_owners() {
        let t0 = Instant::now();
        let mut h = History::default();
        h.add(hold(t0, "a", "x", 0, 10, Some(1)));
        h.add(hold(t0, "a", "y", 20, 30, Some(2)));
        assert!(fencing(&h, &[]).is_empty());
        h.add(hold(t0, "a", "z", 40, 50, Some(2)));
        assert_eq!(fencing(&h, &[]).len(), 1, "{:?}", fencing(&h, &[]));
        // The same owner may see its own token again.
        let mut h = History::default();
        h.add(hold(t0, "a", "x", 0, 10, Some(3)));
        h.add(hold(t0, "a", "x", 20, 30, Some(3)));
        assert!(fencing(&h, &[]).is_empty());
    }

    #[test]
    fn an_unacknowledged_token_counts_only_within_its_primarys_term() {
        let t0 = Instant::now();
        let mut h = History::default();
        let mut early = hold(t0, "a", "x", 0, 10, Some(5));
        early.acknowledged = false;
        h.add(early);
        h.add(hold(t0, "a", "y", 20, 30, Some(5)));
        // Same primary: the counter had 5, so 5 again is a violation.
        assert_eq!(fencing(&h, &[]).len(), 1);
        // A primary killed between x's acquire and y's start may have lost x's token.
        assert!(fencing(&h, &[t0 + Duration::from_millis(15)]).is_empty());
        // An acknowledged token survives it.
        h.holds[0].acknowledged = true;
        assert_eq!(fencing(&h, &[t0 + Duration::from_millis(15)]).len(), 1);
    }

    #[test]
    fn a_lost_grant_is_an_unacknowledged_hold_another_owner_overlapped() {
        let t0 = Instant::now();
        let mut checked = History::default();
        checked.add(hold(t0, "a", "y", 50, 80, None));
        let mut apart = History::default();
        apart.add(hold(t0, "a", "x", 0, 60, None));
        apart.add(hold(t0, "a", "z", 0, 40, None));
        apart.add(hold(t0, "b", "w", 0, 100, None));
        // x overlaps y; z overlaps x (both unacknowledged): both lost; w is alone.
        assert_eq!(lost(&apart, &checked), 2);
        let mut readers = History::default();
        let mut r = hold(t0, "a", "r", 60, 70, None);
        r.shared = true;
        readers.add(r);
        let mut y = checked.holds[0].clone();
        y.shared = true;
        let only_readers = History { holds: vec![y] };
        assert_eq!(lost(&readers, &only_readers), 0);
    }
}
