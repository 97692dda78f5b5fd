//! Semaphore load: module clients taking permits (`RSEM.ACQUIRE`/`RSEM.RELEASE` with
//! `PERMITS`, `BLOCK`, `REQ`; leased ones with `RSEM.LEASE`/`RSEM.RENEW`/`RSEM.RETURN` with
//! `PERMITS`, `BLOCK`, `SESSION`, `REQ`) and Redisson-style clients running Redisson's
//! semaphore and permit-expirable semaphore scripts by `EVALSHA`, on semaphores of
//! `PERMITS` permits. Every hold goes into a `PermitHistory` with its weight, checked by
//! `capacity::over_capacity`; once the load stops, every semaphore must have its permits
//! back (`conservation`).
//!
//! A hold's interval is the one in which its permits were certainly taken (see
//! `capacity`): from the grant's reply to the first give-back sent, the lease's end counted
//! from the send of the call that set it (less `CLOCK_SLACK`), or the kill of a `SESSION`
//! lease's connection. A call whose reply a fault cut may or may not have run:
//!
//! - a module acquire is sent again with its `REQ` id (no wait) on a fresh connection, while
//!   the answer can still come from the first's record (`rlock.lease-ms`, 1 s at least):
//!   `1` is a hold from that reply (the first's or this one's permits, never both), null
//!   that neither took any;
//! - a module give-back is resent with its `REQ` id the same way until one is answered;
//! - whatever stays unknown (a Redisson call has no id; a resend answered too late to be
//!   sure the record still lived) is recorded in the ledger as permits that may have leaked
//!   or may have been given back twice, and the load moves on to a fresh semaphore
//!   (`Semaphores::doubt`), so that leaks do not starve it and most semaphores are checked
//!   exactly. A leased permit always comes back at its lease's end: a cut lease leaves no
//!   doubt.
//!
//! A server error reply (`READONLY`, `LOADING`, `UNBLOCKED`, `NOSCRIPT`) means the call did
//! not run. Module give-backs are now and then sent in one packet with a `CLIENT UNBLOCK` or
//! `CLIENT KILL` of a client blocked on the same semaphore, so that the permits handed to a
//! waiter meet its cancellation in one event-loop turn.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rlock_module_tests::helper_key;
use rlock_module_tests::redisson::{
    PERMIT_AVAILABLE, PERMIT_RELEASE, PERMIT_RELEASE_MANY, PERMIT_TRY_ACQUIRE,
    PERMIT_TRY_SET_PERMITS, PERMIT_UPDATE_LEASE, SEMAPHORE_RELEASE, SEMAPHORE_TRY_ACQUIRE,
    SEMAPHORE_TRY_SET_PERMITS,
};

use crate::capacity::{self, Account, Ledger, PermitHistory, PermitHold, CLOCK_SLACK};
use crate::resp::{encode, refs, since_epoch, Conn, ConnError, Frame, Journal};
use crate::rng::Rng;
use crate::scripts::evalsha;
use crate::workload::{
    acknowledged_always, acquire_failed, blocking_call, connection, drop_connection, error_reply,
    moved_if_read_only, not_granted, push_wait_options, ClientConn, Shared, MIN_DEFAULT_LEASE_MS,
};

/// The permits of every semaphore.
pub const PERMITS: u64 = 3;

/// The longest lease or renewal the load asks for.
const MAX_LEASE_MS: u64 = 2000;

/// How long a `REQ` record lives at least: a call sent again is answered from the first's
/// record if it runs within this of the first's send.
const RECORD: Duration = Duration::from_millis(MIN_DEFAULT_LEASE_MS);

/// Calls cut by a fault are sent again for this long after the first was sent, so that the
/// resends are answered while the first's record lives.
const RESEND_FOR: Duration = Duration::from_millis(600);

/// Redisson's score for a permit without lease.
const NO_LEASE_SCORE: &[u8] = b"922337203685477";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `RSemaphore`: permits without lease.
    Plain,
    /// `RPermitExpirableSemaphore`: leased permits (and plain takes beside them).
    Leased,
}

/// A fault left a call's effect unknown.
enum Doubt {
    /// `n` permits may have been taken and never given back.
    Leak(u64),
    /// `n` permits may have been given back twice, from this instant.
    Inflate(Instant, u64),
}

/// The semaphores of a run: the one of each kind the load uses now, and the ledger of
/// all of them.
pub struct Semaphores {
    tag: String,
    generations: [AtomicU64; 2],
    pub ledger: Mutex<Ledger>,
    /// Every command and reply of the semaphore clients, for a finding's history.
    pub journal: Journal,
}

impl Semaphores {
    /// Semaphores named `{tag}:p0`, `{tag}:l0`, `{tag}:p1`...
    pub fn new(tag: &str) -> Semaphores {
        Semaphores {
            tag: tag.to_string(),
            generations: [AtomicU64::new(0), AtomicU64::new(0)],
            ledger: Mutex::new(Ledger::default()),
            journal: Journal::default(),
        }
    }

    fn name(&self, kind: Kind, generation: u64) -> String {
        let letter = match kind {
            Kind::Plain => 'p',
            Kind::Leased => 'l',
        };
        format!("{}:{letter}{generation}", self.tag)
    }

    /// The semaphore of `kind` the load uses now.
    fn current(&self, kind: Kind) -> String {
        let key = self.name(kind, self.generations[kind as usize].load(Ordering::SeqCst));
        self.ledger
            .lock()
            .unwrap()
            .semaphores
            .entry(key.clone())
            .or_insert_with(|| Account {
                permits: PERMITS,
                ..Account::default()
            });
        key
    }

    /// Records a doubt on `key`, and moves the load of its kind to a fresh semaphore if
    /// `key` is the one it uses.
    fn doubt(&self, shared: &Shared, key: &str, doubt: Doubt, why: &str) {
        shared.count(&format!("semaphore doubt: {why}"));
        {
            let mut ledger = self.ledger.lock().unwrap();
            let account = ledger.semaphores.entry(key.to_string()).or_default();
            match doubt {
                Doubt::Leak(n) => {
                    account.may_leak += n;
                    account.doubts.push(format!("{n} may have leaked: {why}"));
                }
                Doubt::Inflate(from, n) => {
                    account.may_inflate.push((from, n));
                    account.doubts.push(format!(
                        "{n} may have come back twice from {}: {why}",
                        crate::resp::since_epoch(from)
                    ));
                }
            }
        }
        for kind in [Kind::Plain, Kind::Leased] {
            let slot = &self.generations[kind as usize];
            let generation = slot.load(Ordering::SeqCst);
            if self.name(kind, generation) == key
                && slot
                    .compare_exchange(
                        generation,
                        generation + 1,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    )
                    .is_ok()
            {
                shared.count("semaphore moved on after a doubt");
            }
        }
    }

    /// Every command naming `key` and the replies to it, in time order, one per line.
    pub fn history(&self, key: &str, faults: &[(Instant, String)]) -> String {
        let mut journal = self.journal.lock().unwrap().clone();
        journal.extend(
            faults
                .iter()
                .map(|(at, what)| (*at, -1, 0, format!("-> fault: {what}"))),
        );
        journal.sort_by_key(|(at, ..)| *at);
        let mut on_key = std::collections::HashSet::new();
        let mut out = String::new();
        for (at, id, port, what) in journal {
            if id == -1 {
                if !out.is_empty() {
                    out.push_str(&format!("    {} {what}\n", since_epoch(at)));
                }
                continue;
            }
            if what.starts_with("->") {
                let named = what.split(' ').any(|word| {
                    word == key
                        || word
                            .trim_start_matches("{")
                            .starts_with(&format!("{key}}}"))
                });
                if named {
                    on_key.insert(id);
                } else {
                    on_key.remove(&id);
                    continue;
                }
            } else if !on_key.contains(&id) {
                continue;
            }
            out.push_str(&format!("    {} c{id}@{port} {what}\n", since_epoch(at)));
        }
        out
    }

    fn read(&self, key: &str, sent: Instant, permits: i64) {
        let mut ledger = self.ledger.lock().unwrap();
        if let Some(account) = ledger.semaphores.get_mut(key) {
            account.readings.push((sent, Instant::now(), permits));
        }
    }
}

/// The permit-expirable semaphore's zset of leases.
fn timeouts(key: &str) -> String {
    format!("{{{key}}}:timeout")
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// One client: module calls, or with `redisson` Redisson's scripts. Returns its holds.
pub fn client(
    shared: Arc<Shared>,
    semaphores: Arc<Semaphores>,
    index: usize,
    mut rng: Rng,
    redisson: bool,
) -> PermitHistory {
    let mut history = PermitHistory::default();
    ClientConn::until_stopped(
        &shared,
        Some("semaphore connection lost or moved"),
        |seq, conn| {
            let kind = if rng.chance(50) {
                Kind::Leased
            } else {
                Kind::Plain
            };
            let key = semaphores.current(kind);
            let prefix = if redisson { "js" } else { "sm" };
            let owner = format!("{prefix}{index}-{seq}");
            let who = || format!("semaphore client {owner} on {key}");
            conn.cycle(&key, who, |c| {
                c.set_journal(&semaphores.journal);
                let mut cycle = Cycle {
                    shared: &shared,
                    semaphores: &semaphores,
                    key: key.clone(),
                    owner: owner.clone(),
                    rng: &mut rng,
                    history: &mut history,
                };
                cycle.set(c, redisson, kind).and_then(|()| {
                    if cycle.rng.chance(15) {
                        cycle.available(c, redisson, kind)?;
                    }
                    match (redisson, kind) {
                        (false, Kind::Plain) => cycle.module_acquire(c),
                        // Plain takes on the leased semaphore too: one count, one line of waiters.
                        (false, Kind::Leased) if cycle.rng.chance(25) => cycle.module_acquire(c),
                        (false, Kind::Leased) => cycle.module_lease(c),
                        (true, Kind::Plain) => cycle.redisson_plain(c),
                        (true, Kind::Leased) => cycle.redisson_lease(c),
                    }
                })
            });
        },
    );
    history
}

/// One cycle of a client on one semaphore.
struct Cycle<'a> {
    shared: &'a Shared,
    semaphores: &'a Semaphores,
    key: String,
    owner: String,
    rng: &'a mut Rng,
    history: &'a mut PermitHistory,
}

/// How a resent call came back.
enum Resent {
    /// Answered: this reply, read at this instant.
    Answered(Frame, Instant),
    /// An error reply: it did not run.
    NotRun,
    /// Cut again: it may have run, up to this instant.
    Unknown(Instant),
}

/// A renewal of one leased permit as reports name it ([`Cycle::renewal_reply`]): the call,
/// the permit, what is counted when the lease had ended, the label of an error reply.
struct Renewal<'n> {
    call: &'n str,
    id: String,
    ended: &'n str,
    label: &'n str,
}

impl Cycle<'_> {
    fn doubt(&self, doubt: Doubt, why: &str) {
        self.semaphores.doubt(self.shared, &self.key, doubt, why);
    }

    /// Whether a grant sent at `sent` and not acknowledged may have been lost since, with a
    /// killed primary: then its lease is unknown to the new one.
    fn may_be_lost(&self, acknowledged: bool, sent: Instant) -> bool {
        !acknowledged
            && self.shared.acknowledge
            && self.shared.promoted_between(sent, Instant::now())
    }

    /// The reply to `renewal` of a permit, its `lease` being its bound before the renewal and
    /// after it, and whether its grant was acknowledged and when it was sent: `bound` moves
    /// to the renewed one once acknowledged; a 0 while the lease had to run still is a
    /// violation.
    fn renewal_reply(
        &self,
        c: &mut Conn,
        reply: Frame,
        bound: &mut Instant,
        renewal: Renewal,
        (before, renewed, granted_for_sure, sent): (Instant, Instant, bool, Instant),
    ) -> Result<(), ConnError> {
        match reply {
            Frame::Int(1) => {
                if acknowledged_always(self.shared, c)? {
                    *bound = renewed;
                }
            }
            Frame::Int(0)
                if Instant::now() < before && !self.may_be_lost(granted_for_sure, sent) =>
            {
                self.shared.violation(format!(
                    "{}: {} of {} replied 0 before its lease could have ended",
                    self.owner, renewal.call, renewal.id
                ));
            }
            Frame::Int(0) => self.shared.count(renewal.ended),
            Frame::Error(e) => error_reply(self.shared, &self.key, renewal.label, &e),
            other => self.shared.violation(format!(
                "{}: {} replied {other:?}",
                self.owner, renewal.call
            )),
        }
        Ok(())
    }

    /// A give-back of plain permits sent at `sent` that no replica acknowledged (where the
    /// run acknowledges writes: a failover may lose the others): lost if a primary is
    /// killed or failed over later, so the permits may stay taken (`conservation` counts it
    /// when a promotion followed).
    fn unacknowledged_release(&self, sent: Instant, weight: u64) {
        if !self.shared.acknowledge {
            return;
        }
        self.shared.count("sem release not acknowledged");
        let mut ledger = self.semaphores.ledger.lock().unwrap();
        let account = ledger.semaphores.entry(self.key.clone()).or_default();
        account.unacknowledged_releases.push((sent, weight));
    }

    /// The channel Redisson publishes on, and the publish command it uses.
    fn channel(&self) -> (Vec<u8>, &'static [u8]) {
        let publish: &[u8] = if self.shared.cluster {
            b"spublish"
        } else {
            b"publish"
        };
        (helper_key("redisson_sc", self.key.as_bytes()), publish)
    }

    /// Redisson's `EVALSHA`, falling back to `EVAL`.
    fn script(
        &self,
        c: &mut Conn,
        script: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> Result<Frame, ConnError> {
        let (reply, loaded) = evalsha(c, script, keys, args)?;
        if loaded {
            self.shared.count("redisson NOSCRIPT, then EVAL");
        }
        Ok(reply)
    }

    /// An error reply: counted if a fault explains it; `Moved` if the server stopped
    /// taking writes (the client goes to the primary again).
    fn failed(&self, c: &mut Conn, what: &str, e: &str) -> Result<(), ConnError> {
        acquire_failed(self.shared, c, &self.key, what, e)
    }

    fn unexpected(&self, c: &mut Conn, what: &str, reply: &Frame) -> Result<(), ConnError> {
        self.shared.violation(format!(
            "{} on {}: {what} replied {reply:?}",
            self.owner, self.key
        ));
        c.take_timeline();
        c.check_in_step()
    }

    /// Redisson's `tryAcquire` (`try_once`: its script, once), tried every 5 ms until
    /// `give_up` while `granted` says not yet (`Some(false)`). When the try it says took
    /// the permits (`Some(true)`) was sent and answered; `None` when the cycle is over
    /// (given up, an error reply, another reply). Counted as `redisson {name} ...`; a
    /// reply neither says reported as Redisson's `{what}tryAcquire`.
    fn poll(
        &self,
        c: &mut Conn,
        (name, what): (&str, &str),
        give_up: Instant,
        granted: impl Fn(&Frame) -> Option<bool>,
        mut try_once: impl FnMut(&Self, &mut Conn) -> Result<Frame, ConnError>,
    ) -> Result<Option<(Instant, Instant)>, ConnError> {
        loop {
            self.shared.count(&format!("redisson {name} tryAcquire"));
            let sent = Instant::now();
            match try_once(self, c)? {
                f if granted(&f) == Some(true) => return Ok(Some((sent, Instant::now()))),
                f if granted(&f) == Some(false) => {
                    if Instant::now() >= give_up {
                        let gave_up = format!("redisson {name} gave up");
                        return not_granted(self.shared, c, &gave_up).map(|()| None);
                    }
                    thread::sleep(Duration::from_millis(5));
                }
                Frame::Error(e) => {
                    let what = format!("redisson {name} tryAcquire");
                    return self.failed(c, &what, &e).map(|()| None);
                }
                other => {
                    let what = format!("Redisson's {what}tryAcquire");
                    return self.unexpected(c, &what, &other).map(|()| None);
                }
            }
        }
    }

    /// A fresh connection for a resend, and the resend's outcome.
    fn resend(&self, args: &[&[u8]]) -> Option<Resent> {
        let mut fresh = None;
        let c = connection(self.shared, &mut fresh, &self.key)?;
        c.set_journal(&self.semaphores.journal);
        let reply = c.call(args);
        let at = Instant::now();
        drop_connection(self.shared, &mut fresh);
        Some(match reply {
            Ok(Frame::Error(e)) => {
                error_reply(self.shared, &self.key, "sem resend", &e);
                Resent::NotRun
            }
            Ok(frame) => Resent::Answered(frame, at),
            Err(_) => Resent::Unknown(at),
        })
    }

    /// `RSEM.TRYSETPERMITS` (or Redisson's `trySetPermits`) of `PERMITS`, every cycle: the
    /// first sets the semaphore, the others find it. Set again after a reply showed it
    /// exists, it had vanished.
    fn set(&mut self, c: &mut Conn, redisson: bool, kind: Kind) -> Result<(), ConnError> {
        let permits = PERMITS.to_string();
        let key = self.key.clone();
        let sent = Instant::now();
        let reply = if redisson {
            let (channel, publish) = self.channel();
            let script = match kind {
                Kind::Plain => SEMAPHORE_TRY_SET_PERMITS,
                Kind::Leased => PERMIT_TRY_SET_PERMITS,
            };
            self.script(
                c,
                script,
                &[key.as_bytes(), &channel],
                &[permits.as_bytes(), publish],
            )?
        } else {
            c.call(&[b"RSEM.TRYSETPERMITS", key.as_bytes(), permits.as_bytes()])?
        };
        match reply {
            Frame::Int(n @ (0 | 1)) => {
                let mut ledger = self.semaphores.ledger.lock().unwrap();
                let account = ledger.semaphores.entry(key.clone()).or_default();
                if let (1, Some(seen)) = (n, account.seen_set) {
                    // A set no replica had yet is lost with a killed primary (the takes
                    // after it were acknowledged, so they had it: none is lost with it).
                    let lost = self.shared.acknowledge && self.shared.promoted_between(seen, sent);
                    if lost {
                        self.shared
                            .count("semaphore set lost with a killed primary");
                    }
                    if seen < sent && !lost {
                        self.shared.violation(format!(
                            "{key} was set again by {} (sent {}), after a reply at {} showed it \
                             existed: it had vanished",
                            self.owner,
                            crate::resp::since_epoch(sent),
                            crate::resp::since_epoch(seen)
                        ));
                    }
                }
                if n == 1 {
                    self.shared.count("semaphore set");
                }
                account.seen_set = Some(account.seen_set.unwrap_or_else(Instant::now));
                Ok(())
            }
            Frame::Error(e) => self.failed(c, "sem set", &e),
            other => self.unexpected(c, "try set permits", &other),
        }
    }

    /// The permits available, read as each side reads them: `RSEM.AVAILABLE`, Redisson's
    /// `GET` (plain) or its available-permits script (leased). Checked once the load stops.
    fn available(&mut self, c: &mut Conn, redisson: bool, kind: Kind) -> Result<(), ConnError> {
        let key = self.key.clone();
        let sent = Instant::now();
        let reply = match (redisson, kind) {
            (false, _) => c.call(&[b"RSEM.AVAILABLE", key.as_bytes()])?,
            (true, Kind::Plain) => c.call(&[b"GET", key.as_bytes()])?,
            (true, Kind::Leased) => {
                let (channel, publish) = self.channel();
                let now = unix_ms().to_string();
                let zset = timeouts(&key);
                self.script(
                    c,
                    PERMIT_AVAILABLE,
                    &[key.as_bytes(), zset.as_bytes(), &channel],
                    &[now.as_bytes(), publish],
                )?
            }
        };
        let permits = match &reply {
            Frame::Int(n) => Some(*n),
            Frame::Bulk(Some(text)) => std::str::from_utf8(text).ok().and_then(|t| t.parse().ok()),
            Frame::Bulk(None) => Some(0),
            Frame::Error(e) => return self.failed(c, "sem available", e),
            _ => None,
        };
        // A read on a replica (`GET`, `RSEM.AVAILABLE`) may lag: a past count, as bounded.
        match permits {
            Some(n) => self.semaphores.read(&key, sent, n),
            None => return self.unexpected(c, "available", &reply),
        }
        self.shared.count("sem available read");
        Ok(())
    }

    /// `RSEM.ACQUIRE` of one or two permits (sometimes blocking; always with a `REQ` id where
    /// the server takes one), a short hold, and `RSEM.RELEASE` of as many.
    fn module_acquire(&mut self, c: &mut Conn) -> Result<(), ConnError> {
        let weight = if self.rng.chance(35) { 2 } else { 1 };
        let explicit = weight > 1 || self.rng.chance(30);
        let block = self
            .rng
            .chance(60)
            .then(|| self.rng.range(20, 1500).to_string());
        let req = self.shared.req.then(|| format!("{}-a", self.owner));
        let weight_text = weight.to_string();
        let key = self.key.clone();
        let mut args: Vec<&[u8]> = vec![b"RSEM.ACQUIRE", key.as_bytes()];
        if explicit {
            args.extend([&b"PERMITS"[..], weight_text.as_bytes()]);
        }
        if let Some(block) = &block {
            args.extend([&b"BLOCK"[..], block.as_bytes()]);
        }
        if let Some(id) = &req {
            args.extend([&b"REQ"[..], id.as_bytes()]);
        }
        self.shared.count("sem acquire");
        let (sent, reply) = blocking_call(self.shared, c, &key, block.is_some(), &args);
        let reply = match reply {
            Err(ConnError::Io(e)) => {
                let timeline = c.take_timeline();
                self.recover_acquire(weight, sent, req.as_deref(), timeline);
                return Err(ConnError::Io(e));
            }
            other => other?,
        };
        match reply {
            Frame::Int(1) => {}
            f if f.is_null() => return not_granted(self.shared, c, "sem acquire null"),
            Frame::Error(e) => return self.failed(c, "sem acquire", &e),
            other => return self.unexpected(c, "RSEM.ACQUIRE", &other),
        }
        self.shared.count("sem grant");
        let start = Instant::now();
        // From here the permits are held: a connection cut before the release is sent
        // still gives them back, from a fresh connection (a permit has no lease to end it).
        let for_sure = match acknowledged_always(self.shared, c) {
            Ok(for_sure) => for_sure,
            Err(e) => return self.cut_while_holding(c, weight, explicit, sent, start, false, e),
        };
        // The same call again: answered from its record, it takes nothing more.
        if req.is_some() && self.rng.chance(20) {
            self.shared.count("sem acquire resent");
            let again = match c.call(&args) {
                Ok(again) => again,
                Err(e) => {
                    return self.cut_while_holding(c, weight, explicit, sent, start, for_sure, e)
                }
            };
            let at = Instant::now();
            match again {
                Frame::Int(1) if at < sent + RECORD => {}
                Frame::Error(e) => error_reply(self.shared, &key, "sem acquire resent", &e),
                // The record may be gone: a second take, or none.
                Frame::Int(1) => self.doubt(
                    Doubt::Leak(weight),
                    "an acquire resent after its record may have expired took permits again",
                ),
                f if f.is_null() && at >= sent + RECORD => {}
                other => self.shared.violation(format!(
                    "{}: RSEM.ACQUIRE resent with its REQ id replied {other:?}, the first 1",
                    self.owner
                )),
            }
        }
        thread::sleep(Duration::from_millis(self.rng.below(20)));
        let (end, outcome) = self.module_release(c, weight, explicit);
        self.record(weight, sent, start, end, for_sure, c.take_timeline());
        outcome?;
        c.check_in_step()
    }

    /// The connection of a client holding `weight` plain permits was cut before its release
    /// was sent: the release goes from fresh connections (resent with its `REQ` id, or
    /// until answered), and the hold ends when it is first sent.
    #[allow(clippy::too_many_arguments)]
    fn cut_while_holding(
        &mut self,
        c: &mut Conn,
        weight: u64,
        explicit: bool,
        asked: Instant,
        start: Instant,
        for_sure: bool,
        e: ConnError,
    ) -> Result<(), ConnError> {
        self.shared
            .count("sem connection cut while holding: released elsewhere");
        let owned = self.release_args(weight, explicit);
        let args = refs(&owned);
        let first = Instant::now();
        if self.shared.req {
            self.resend_release(&args, weight, first, false);
        } else {
            self.resend_until_answered(&args, weight);
        }
        self.record(weight, asked, start, first, for_sure, c.take_timeline());
        Err(e)
    }

    /// `RSEM.RELEASE` of `weight` permits (`PERMITS` named if `explicit` or more than
    /// one), with the cycle's release `REQ` id where the server takes one.
    fn release_args(&self, weight: u64, explicit: bool) -> Vec<Vec<u8>> {
        let mut args = vec![b"RSEM.RELEASE".to_vec(), self.key.as_bytes().to_vec()];
        if explicit || weight > 1 {
            args.extend([b"PERMITS".to_vec(), weight.to_string().into_bytes()]);
        }
        if self.shared.req {
            args.extend([b"REQ".to_vec(), format!("{}-r", self.owner).into_bytes()]);
        }
        args
    }

    /// Records a hold of plain permits; one whose grant the replica may not have is not
    /// checked, and its give-back may have added permits the semaphore did not lack.
    fn record(
        &mut self,
        weight: u64,
        asked: Instant,
        start: Instant,
        end: Instant,
        for_sure: bool,
        timeline: Vec<String>,
    ) {
        // Unacknowledged, but one primary granted it and saw it end: certain.
        let one_term = self.shared.unplanned && !self.shared.promoted_between(asked, end);
        if !for_sure && !one_term {
            self.shared
                .count("hold not checked: its grant was not acknowledged");
            self.doubt(
                Doubt::Inflate(end, weight),
                "a grant the replica may not have was given back",
            );
            return;
        }
        self.history.add(PermitHold {
            semaphore: self.key.clone(),
            owner: self.owner.clone(),
            weight,
            asked,
            start,
            end,
            timeline,
        });
    }

    /// An `RSEM.ACQUIRE` whose reply was lost: sent again with its `REQ` id (no wait) on
    /// fresh connections. `1`: held from that reply (the first's permits or this one's;
    /// both only if the first's record may have expired), then given back; null: none
    /// taken, if answered while the first's record lived.
    fn recover_acquire(
        &mut self,
        weight: u64,
        first: Instant,
        req: Option<&str>,
        mut timeline: Vec<String>,
    ) {
        let Some(id) = req else {
            self.doubt(
                Doubt::Leak(weight),
                "an acquire without REQ id cut by a fault",
            );
            return;
        };
        let key = self.key.clone();
        let weight_text = weight.to_string();
        let args: [&[u8]; 6] = [
            b"RSEM.ACQUIRE",
            key.as_bytes(),
            b"PERMITS",
            weight_text.as_bytes(),
            b"REQ",
            id.as_bytes(),
        ];
        while Instant::now() < first + RESEND_FOR {
            thread::sleep(Duration::from_millis(20));
            let mut fresh = None;
            let Some(c) = connection(self.shared, &mut fresh, &key) else {
                continue;
            };
            c.set_journal(&self.semaphores.journal);
            c.start_timeline();
            let sent = Instant::now();
            let reply = c.call(&args);
            let at = Instant::now();
            let in_time = at < first + RECORD;
            match reply {
                Ok(Frame::Int(1)) => {
                    self.shared.count("sem acquire recovered by its REQ id");
                    self.shared.log_fault(format!(
                        "{} on {key}: an acquire cut by a fault, sent again with its REQ id, \
                         replied 1",
                        self.owner
                    ));
                    if !in_time {
                        self.doubt(
                            Doubt::Leak(weight),
                            "an acquire resent after its record may have expired took permits",
                        );
                    }
                    let for_sure = acknowledged_always(self.shared, c).unwrap_or(false);
                    thread::sleep(Duration::from_millis(self.rng.below(10)));
                    let (end, _) = self.module_release(c, weight, true);
                    timeline.extend(c.take_timeline());
                    self.record(weight, sent, at, end, for_sure, timeline);
                    drop_connection(self.shared, &mut fresh);
                    return;
                }
                Ok(f) if f.is_null() => {
                    drop_connection(self.shared, &mut fresh);
                    if in_time {
                        self.shared.count("sem acquire cut by a fault: not granted");
                    } else {
                        self.doubt(
                            Doubt::Leak(weight),
                            "an acquire resent after its record may have expired found none",
                        );
                    }
                    return;
                }
                Ok(Frame::Error(e)) => {
                    error_reply(self.shared, &key, "sem acquire recovery", &e);
                }
                Ok(other) => {
                    self.shared.violation(format!(
                        "{}: RSEM.ACQUIRE resent with its REQ id replied {other:?}",
                        self.owner
                    ));
                    drop_connection(self.shared, &mut fresh);
                    return;
                }
                Err(_) => {}
            }
            drop_connection(self.shared, &mut fresh);
        }
        self.doubt(
            Doubt::Leak(weight),
            "an acquire cut by a fault, not answered again in time",
        );
    }

    /// `RSEM.RELEASE` of `weight` permits with a `REQ` id; resent on fresh connections
    /// until one is answered, while the answer can still come from the first's record.
    /// Returns when the first was sent (the hold's end) and what became of `c`.
    fn module_release(
        &mut self,
        c: &mut Conn,
        weight: u64,
        explicit: bool,
    ) -> (Instant, Result<(), ConnError>) {
        let key = self.key.clone();
        let owned = self.release_args(weight, explicit);
        let args = refs(&owned);
        self.shared.count("sem release");
        let first = Instant::now();
        let reply = if self.rng.chance(20) {
            self.release_racing(c, &args)
        } else {
            c.call(&args)
        };
        let (maybe_ran, outcome) = match reply {
            Ok(Frame::Int(n)) => {
                if self.shared.acknowledge
                    && !matches!(acknowledged_always(self.shared, c), Ok(true))
                {
                    self.unacknowledged_release(first, weight);
                }
                if self.shared.req && self.rng.chance(20) {
                    self.shared.count("sem release resent");
                    let resent = Instant::now();
                    match c.call(&args) {
                        Ok(Frame::Int(m)) if m == n => {}
                        Ok(Frame::Int(_)) if Instant::now() >= first + RECORD => {
                            self.doubt(
                                Doubt::Inflate(resent, weight),
                                "a release resent after its record may have expired ran again",
                            );
                        }
                        Ok(Frame::Error(e)) => {
                            error_reply(self.shared, &key, "sem release resent", &e)
                        }
                        Ok(other) => self.shared.violation(format!(
                            "{}: RSEM.RELEASE resent with its REQ id replied {other:?}, the first {n}",
                            self.owner
                        )),
                        Err(e) => return (first, Err(e)),
                    }
                }
                return (first, Ok(()));
            }
            Ok(Frame::Error(e)) => {
                error_reply(self.shared, &key, "sem release", &e);
                (false, moved_if_read_only(&e))
            }
            Ok(other) => {
                self.shared
                    .violation(format!("{}: RSEM.RELEASE replied {other:?}", self.owner));
                return (first, Ok(()));
            }
            Err(ConnError::Io(e)) => (true, Err(ConnError::Io(e))),
            Err(e) => return (first, Err(e)),
        };
        if !self.shared.req {
            if maybe_ran {
                self.doubt(
                    Doubt::Leak(weight),
                    "a release without REQ id cut by a fault",
                );
            } else {
                // Did not run: sent again, as often as it takes.
                self.resend_until_answered(&args, weight);
            }
            return (first, outcome);
        }
        self.resend_release(&args, weight, first, maybe_ran);
        (first, outcome)
    }

    /// A give-back with no `REQ` id that did not run, resent until it is answered.
    fn resend_until_answered(&mut self, args: &[&[u8]], weight: u64) {
        for _ in 0..20 {
            thread::sleep(Duration::from_millis(50));
            match self.resend(args) {
                Some(Resent::Answered(..)) => {
                    self.unacknowledged_release(Instant::now(), weight);
                    return;
                }
                Some(Resent::Unknown(_)) => {
                    self.doubt(Doubt::Leak(weight), "a release resent and cut by a fault");
                    return;
                }
                Some(Resent::NotRun) | None => {}
            }
        }
        self.doubt(Doubt::Leak(weight), "a release never answered");
    }

    /// A give-back that may not have run, resent with its `REQ` id. A resend that runs
    /// while the first's record lives gives nothing back twice; one answered (or cut)
    /// later may have, if an earlier one ran.
    fn resend_release(&mut self, args: &[&[u8]], weight: u64, first: Instant, mut maybe_ran: bool) {
        while Instant::now() < first + RESEND_FOR {
            thread::sleep(Duration::from_millis(20));
            let sent = Instant::now();
            match self.resend(args) {
                Some(Resent::Answered(Frame::Int(_), at)) => {
                    self.unacknowledged_release(first, weight);
                    self.shared.count("sem release resent after a fault");
                    if maybe_ran && at >= first + RECORD {
                        self.doubt(
                            Doubt::Inflate(sent, weight),
                            "a release resent may have run after its record expired",
                        );
                    }
                    return;
                }
                Some(Resent::Answered(other, _)) => {
                    self.shared.violation(format!(
                        "{}: RSEM.RELEASE resent with its REQ id replied {other:?}",
                        self.owner
                    ));
                    return;
                }
                Some(Resent::Unknown(at)) => {
                    if maybe_ran && at >= first + RECORD {
                        self.doubt(
                            Doubt::Inflate(sent, weight),
                            "a release resent may have run after its record expired",
                        );
                        break;
                    }
                    maybe_ran = true;
                }
                Some(Resent::NotRun) | None => {}
            }
        }
        self.doubt(
            Doubt::Leak(weight),
            "a release cut by a fault, not answered again in time",
        );
    }

    /// The give-back in one packet with a `CLIENT UNBLOCK` (`ERROR` or `TIMEOUT`) or
    /// `CLIENT KILL` of a client blocked on this semaphore: the permits handed to it meet
    /// its cancellation in one turn. Not while writes may be paused (a Redis bug: see
    /// `faults::Topology::unblock_hits_server_bug`). The give-back's reply.
    fn release_racing(&mut self, c: &mut Conn, args: &[&[u8]]) -> Result<Frame, ConnError> {
        let waiters: Vec<i64> = self
            .shared
            .waiting
            .lock()
            .unwrap()
            .iter()
            .filter(|(id, on)| **on == self.key && **id != c.id)
            .map(|(id, _)| *id)
            .collect();
        if waiters.is_empty() || self.shared.writes_may_be_paused() {
            return c.call(args);
        }
        let target = self.rng.pick(&waiters).to_string();
        let mut packet = encode(args);
        let what = match self.rng.below(3) {
            0 => {
                self.shared
                    .kills
                    .lock()
                    .unwrap()
                    .insert(target.parse().unwrap_or(0), Instant::now());
                packet.extend(encode(&[b"CLIENT", b"KILL", b"ID", target.as_bytes()]));
                "kill"
            }
            1 => {
                packet.extend(encode(&[
                    b"CLIENT",
                    b"UNBLOCK",
                    target.as_bytes(),
                    b"ERROR",
                ]));
                "unblock error"
            }
            _ => {
                packet.extend(encode(&[
                    b"CLIENT",
                    b"UNBLOCK",
                    target.as_bytes(),
                    b"TIMEOUT",
                ]));
                "unblock timeout"
            }
        };
        self.shared.count(&format!("sem release racing a {what}"));
        self.shared.log_fault(format!(
            "{} releases on {} with {what} of {target}",
            self.owner, self.key
        ));
        c.send_raw(&packet)?;
        let reply = c.read()?;
        c.read()?;
        Ok(reply)
    }

    /// `RSEM.LEASE` of one or two permits (`BLOCK`, `SESSION`, `REQ` at random), a renewal
    /// now and then, and `RSEM.RETURN` of each (with `REQ` at random, resent at times).
    fn module_lease(&mut self, c: &mut Conn) -> Result<(), ConnError> {
        let weight = if self.rng.chance(30) { 2 } else { 1 };
        let lease = self.rng.range(150, MAX_LEASE_MS);
        let lease_text = lease.to_string();
        let weight_text = weight.to_string();
        let explicit = weight > 1 || self.rng.chance(30);
        let block = self
            .rng
            .chance(60)
            .then(|| self.rng.range(20, 1500).to_string());
        let session = self.rng.chance(30);
        let req = (self.shared.req && self.rng.chance(50)).then(|| format!("{}-l", self.owner));
        let key = self.key.clone();
        let mut args: Vec<&[u8]> = vec![
            b"RSEM.LEASE",
            key.as_bytes(),
            b"LEASE",
            lease_text.as_bytes(),
        ];
        if explicit {
            args.extend([&b"PERMITS"[..], weight_text.as_bytes()]);
        }
        push_wait_options(&mut args, block.as_deref(), session, req.as_deref());
        self.shared.count("sem lease");
        let (sent, reply) = blocking_call(self.shared, c, &key, block.is_some(), &args);
        let ids: Vec<String> = match reply? {
            Frame::Array(Some(items)) => {
                let ids: Vec<String> = items.iter().filter_map(Frame::text).collect();
                let good = ids.len() == weight as usize
                    && ids.iter().all(|id| {
                        id.len() == 32
                            && id
                                .bytes()
                                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
                    });
                if !good {
                    return self.unexpected(c, "RSEM.LEASE", &Frame::Array(Some(items)));
                }
                ids
            }
            f if f.is_null() => return not_granted(self.shared, c, "sem lease null"),
            Frame::Error(e) => return self.failed(c, "sem lease", &e),
            other => return self.unexpected(c, "RSEM.LEASE", &other),
        };
        self.shared.count("sem lease grant");
        let start = Instant::now();
        let granted_for_sure = acknowledged_always(self.shared, c)?;
        let mut bounds = vec![sent + Duration::from_millis(lease) - CLOCK_SLACK; ids.len()];
        let mut returned: Vec<Option<Instant>> = vec![None; ids.len()];
        let outcome = (|| -> Result<(), ConnError> {
            if self.rng.chance(30) {
                let i = self.rng.below(ids.len() as u64) as usize;
                let renewal = self.rng.range(150, MAX_LEASE_MS);
                let text = renewal.to_string();
                self.shared.count("sem renew");
                let renew_sent = Instant::now();
                let before = bounds[i];
                let renewed = renew_sent + Duration::from_millis(renewal) - CLOCK_SLACK;
                bounds[i] = before.min(renewed);
                let args: [&[u8]; 5] = [
                    b"RSEM.RENEW",
                    key.as_bytes(),
                    ids[i].as_bytes(),
                    b"LEASE",
                    text.as_bytes(),
                ];
                let reply = c.call(&args)?;
                let renewal = Renewal {
                    call: "RSEM.RENEW",
                    id: ids[i].clone(),
                    ended: "sem renew: the lease had ended",
                    label: "sem renew",
                };
                let lease = (before, renewed, granted_for_sure, sent);
                self.renewal_reply(c, reply, &mut bounds[i], renewal, lease)?;
            }
            thread::sleep(Duration::from_millis(self.rng.below(30)));
            for (i, id) in ids.iter().enumerate() {
                self.shared.count("sem return");
                let return_id = format!("{}-t{i}", self.owner);
                let mut give: Vec<&[u8]> = vec![b"RSEM.RETURN", key.as_bytes(), id.as_bytes()];
                let with_req = self.shared.req && self.rng.chance(50);
                if with_req {
                    give.extend([&b"REQ"[..], return_id.as_bytes()]);
                }
                let return_sent = Instant::now();
                returned[i] = Some(return_sent);
                let first = c.call(&give)?;
                match &first {
                    Frame::Int(1) => {}
                    Frame::Int(0)
                        if Instant::now() < bounds[i]
                            && !self.may_be_lost(granted_for_sure, sent) =>
                    {
                        self.shared.violation(format!(
                            "{}: RSEM.RETURN of {id} replied 0 before its lease could have ended",
                            self.owner
                        ));
                    }
                    Frame::Int(0) => self.shared.count("sem return: the lease had ended"),
                    Frame::Error(e) => error_reply(self.shared, &key, "sem return", e),
                    other => self
                        .shared
                        .violation(format!("{}: RSEM.RETURN replied {other:?}", self.owner)),
                }
                if with_req && matches!(first, Frame::Int(_)) && self.rng.chance(30) {
                    self.shared.count("sem return resent");
                    let again = c.call(&give)?;
                    let in_time = Instant::now() < return_sent + RECORD;
                    match &again {
                        Frame::Error(e) => error_reply(self.shared, &key, "sem return resent", e),
                        _ if again == first || !in_time => {}
                        _ => self.shared.violation(format!(
                            "{}: RSEM.RETURN resent with its REQ id replied {again:?}, the first {first:?}",
                            self.owner
                        )),
                    }
                }
            }
            Ok(())
        })();
        let killed = match (&outcome, session) {
            (Err(_), true) => self.shared.kills.lock().unwrap().get(&c.id).copied(),
            _ => None,
        };
        let timeline = c.take_timeline();
        if !granted_for_sure {
            self.shared
                .count("hold not checked: its grant was not acknowledged");
        } else {
            for i in 0..ids.len() {
                let mut end = bounds[i].min(returned[i].unwrap_or(bounds[i]));
                if let Some(killed) = killed {
                    end = end.min(killed);
                }
                self.history.add(PermitHold {
                    semaphore: key.clone(),
                    owner: format!("{} {}", self.owner, ids[i]),
                    weight: 1,
                    asked: sent,
                    start,
                    end,
                    timeline: timeline.clone(),
                });
            }
        }
        outcome?;
        c.check_in_step()
    }

    /// Redisson's `tryAcquire(permits, wait)`: its script, polled until the wait is over;
    /// once it holds, works a little and releases as many with its script.
    fn redisson_plain(&mut self, c: &mut Conn) -> Result<(), ConnError> {
        let weight: u64 = if self.rng.chance(35) { 2 } else { 1 };
        let weight_text = weight.to_string();
        let key = self.key.clone();
        let give_up = Instant::now() + Duration::from_millis(self.rng.range(20, 1500));
        c.start_timeline();
        let granted = |f: &Frame| match f {
            Frame::Int(n @ (0 | 1)) => Some(*n == 1),
            _ => None,
        };
        let polled = self.poll(c, ("sem", ""), give_up, granted, |this, c| {
            let reply = this.script(
                c,
                SEMAPHORE_TRY_ACQUIRE,
                &[key.as_bytes()],
                &[weight_text.as_bytes()],
            );
            if let Err(ConnError::Io(_)) = &reply {
                this.doubt(Doubt::Leak(weight), "Redisson's tryAcquire cut by a fault");
            }
            reply
        })?;
        let Some((sent, start)) = polled else {
            return Ok(());
        };
        self.shared.count("redisson sem grant");
        // A connection cut from here on still gives the permits back, from fresh ones.
        let (for_sure, cut) = match acknowledged_always(self.shared, c) {
            Ok(for_sure) => (for_sure, None),
            Err(e) => (false, Some(e)),
        };
        if cut.is_none() {
            thread::sleep(Duration::from_millis(self.rng.below(20)));
        }
        let (channel, publish) = self.channel();
        let released = Instant::now();
        let keys: [&[u8]; 2] = [key.as_bytes(), &channel];
        let argv: [&[u8]; 2] = [weight_text.as_bytes(), publish];
        let reply = match cut {
            Some(_) => Ok(Frame::Error("connection cut before the release".into())),
            None => self.script(c, SEMAPHORE_RELEASE, &keys, &argv),
        };
        let outcome = match reply {
            Ok(f) if f.is_null() => {
                if self.shared.acknowledge
                    && !matches!(acknowledged_always(self.shared, c), Ok(true))
                {
                    self.unacknowledged_release(released, weight);
                }
                Ok(())
            }
            Ok(Frame::Error(e)) => {
                if cut.is_none() {
                    error_reply(self.shared, &key, "redisson sem release", &e);
                } else {
                    self.shared
                        .count("redisson sem connection cut while holding: released elsewhere");
                }
                // It did not run: again on fresh connections (no id, but nothing ran).
                let mut done = false;
                for _ in 0..20 {
                    thread::sleep(Duration::from_millis(50));
                    let mut fresh = None;
                    let Some(f) = connection(self.shared, &mut fresh, &key) else {
                        continue;
                    };
                    f.set_journal(&self.semaphores.journal);
                    let again = self.script(f, SEMAPHORE_RELEASE, &keys, &argv);
                    drop_connection(self.shared, &mut fresh);
                    match again {
                        Ok(f) if f.is_null() => {
                            self.unacknowledged_release(released, weight);
                            done = true
                        }
                        Ok(Frame::Error(_)) => continue,
                        _ => self.doubt(
                            Doubt::Leak(weight),
                            "Redisson's release resent and cut by a fault",
                        ),
                    }
                    break;
                }
                if !done {
                    self.doubt(Doubt::Leak(weight), "Redisson's release never ran");
                }
                moved_if_read_only(&e)
            }
            Ok(other) => {
                self.shared
                    .violation(format!("Redisson's release replied {other:?}"));
                Ok(())
            }
            Err(e) => {
                self.doubt(Doubt::Leak(weight), "Redisson's release cut by a fault");
                Err(e)
            }
        };
        self.record(weight, sent, start, released, for_sure, c.take_timeline());
        if let Some(e) = cut {
            return Err(e);
        }
        outcome?;
        c.check_in_step()
    }

    /// Redisson's permit-expirable `tryAcquire(permits, wait, lease)` with client-made ids:
    /// its script, polled until the wait is over; a lease update now and then; then its
    /// `release(id)` of each, or `release(ids)` of both at once.
    fn redisson_lease(&mut self, c: &mut Conn) -> Result<(), ConnError> {
        let weight: usize = if self.rng.chance(30) { 2 } else { 1 };
        let lease = self.rng.range(150, MAX_LEASE_MS);
        let ids: Vec<Vec<u8>> = (0..weight)
            .map(|_| (0..16).map(|_| self.rng.below(256) as u8).collect())
            .collect();
        let key = self.key.clone();
        let (channel, publish) = self.channel();
        let zset = timeouts(&key);
        let weight_text = weight.to_string();
        let give_up = Instant::now() + Duration::from_millis(self.rng.range(20, 1500));
        c.start_timeline();
        let granted = |f: &Frame| match f {
            f if f.text().as_deref() == Some("OK") => Some(true),
            f if f.is_null() || matches!(f, Frame::Bulk(Some(_)) | Frame::Int(_)) => Some(false),
            _ => None,
        };
        let polled = self.poll(c, ("permit", "permit "), give_up, granted, |this, c| {
            let now = unix_ms();
            let (deadline, now) = ((now + lease as i64).to_string(), now.to_string());
            let mut argv: Vec<&[u8]> = vec![
                weight_text.as_bytes(),
                deadline.as_bytes(),
                now.as_bytes(),
                NO_LEASE_SCORE,
                publish,
            ];
            argv.extend(ids.iter().map(Vec::as_slice));
            this.script(
                c,
                PERMIT_TRY_ACQUIRE,
                &[key.as_bytes(), zset.as_bytes(), &channel],
                &argv,
            )
        })?;
        let Some((sent, start)) = polled else {
            return Ok(());
        };
        self.shared.count("redisson permit grant");
        let granted_for_sure = acknowledged_always(self.shared, c)?;
        // Its deadline is the client's clock at the send plus the lease: the module's timer
        // takes the permit back then.
        let mut bounds = vec![sent + Duration::from_millis(lease) - CLOCK_SLACK; weight];
        let mut released = vec![None; weight];
        let outcome = (|| -> Result<(), ConnError> {
            if self.rng.chance(25) {
                let i = self.rng.below(weight as u64) as usize;
                let renewal = self.rng.range(150, MAX_LEASE_MS);
                self.shared.count("redisson permit updateLeaseTime");
                let renew_sent = Instant::now();
                let now = unix_ms();
                let (deadline, now) = ((now + renewal as i64).to_string(), now.to_string());
                let before = bounds[i];
                let renewed = renew_sent + Duration::from_millis(renewal) - CLOCK_SLACK;
                bounds[i] = before.min(renewed);
                let reply = self.script(
                    c,
                    PERMIT_UPDATE_LEASE,
                    &[key.as_bytes(), zset.as_bytes(), &channel],
                    &[&ids[i], deadline.as_bytes(), now.as_bytes(), publish],
                )?;
                let renewal = Renewal {
                    call: "Redisson's updateLeaseTime",
                    id: hex(&ids[i]),
                    ended: "redisson permit update: lease ended",
                    label: "redisson permit update",
                };
                let lease = (before, renewed, granted_for_sure, sent);
                self.renewal_reply(c, reply, &mut bounds[i], renewal, lease)?;
            }
            thread::sleep(Duration::from_millis(self.rng.below(30)));
            if weight > 1 && self.rng.chance(50) {
                let at = Instant::now();
                released.iter_mut().for_each(|r| *r = Some(at));
                let now = unix_ms().to_string();
                let mut argv: Vec<&[u8]> = vec![weight_text.as_bytes(), now.as_bytes(), publish];
                argv.extend(ids.iter().map(Vec::as_slice));
                let reply = self.script(
                    c,
                    PERMIT_RELEASE_MANY,
                    &[key.as_bytes(), &channel, zset.as_bytes()],
                    &argv,
                )?;
                let earliest = bounds.iter().min().copied().unwrap_or(at);
                let lost = self.may_be_lost(granted_for_sure, sent);
                self.check_release(&reply, weight as i64, earliest, "release(ids)", lost);
            } else {
                for i in 0..weight {
                    let at = Instant::now();
                    released[i] = Some(at);
                    let now = unix_ms().to_string();
                    let reply = self.script(
                        c,
                        PERMIT_RELEASE,
                        &[key.as_bytes(), &channel, zset.as_bytes()],
                        &[&ids[i], b"1", now.as_bytes(), publish],
                    )?;
                    let lost = self.may_be_lost(granted_for_sure, sent);
                    self.check_release(&reply, 1, bounds[i], "release(id)", lost);
                }
            }
            Ok(())
        })();
        let timeline = c.take_timeline();
        if granted_for_sure {
            for i in 0..weight {
                self.history.add(PermitHold {
                    semaphore: key.clone(),
                    owner: format!("{} {}", self.owner, hex(&ids[i])),
                    weight: 1,
                    asked: sent,
                    start,
                    end: bounds[i].min(released[i].unwrap_or(bounds[i])),
                    timeline: timeline.clone(),
                });
            }
        } else {
            self.shared
                .count("hold not checked: its grant was not acknowledged");
        }
        outcome?;
        c.check_in_step()
    }

    /// A Redisson release of leased permits: `all` released, or 0 only if a lease may have
    /// ended (the reply came after `bound`, the earliest end of the leases it named).
    fn check_release(&self, reply: &Frame, all: i64, bound: Instant, what: &str, lost: bool) {
        match reply {
            Frame::Int(n) if *n == all => {}
            Frame::Int(0) if Instant::now() < bound && !lost => self.shared.violation(format!(
                "{}: Redisson's {what} on {} replied 0 before its lease could have ended",
                self.owner, self.key
            )),
            Frame::Int(0) => self
                .shared
                .count("redisson permit release: the lease had ended"),
            Frame::Error(e) => error_reply(self.shared, &self.key, "redisson permit release", e),
            other => self
                .shared
                .violation(format!("Redisson's {what} replied {other:?}")),
        }
    }
}

/// Once the load stopped and every lease ended: each semaphore the load set has its
/// permits back, as `RSEM.AVAILABLE` on the primary reads them, and the readings taken
/// during the load were within bounds (`capacity::conservation`).
pub fn conservation(
    port: u16,
    semaphores: &Semaphores,
    faults: &[(Instant, String)],
    promotions: &[Instant],
) -> Vec<String> {
    // Every lease and renewal was at most `MAX_LEASE_MS`, from before its reply.
    thread::sleep(Duration::from_millis(MAX_LEASE_MS + 100));
    let mut ledger = semaphores.ledger.lock().unwrap().clone();
    // A give-back no replica acknowledged, followed by a killed primary, may be lost.
    for account in ledger.semaphores.values_mut() {
        let lost: Vec<u64> = account
            .unacknowledged_releases
            .iter()
            .filter(|(sent, _)| promotions.iter().any(|at| at >= sent))
            .map(|(_, weight)| *weight)
            .collect();
        if !lost.is_empty() {
            account.may_leak += lost.iter().sum::<u64>();
            account.doubts.push(format!(
                "{} give-back(s) of {} permit(s) no replica acknowledged before a primary was \
                 killed",
                lost.len(),
                lost.iter().sum::<u64>()
            ));
        }
    }
    let mut found = Vec::new();
    for (key, account) in &ledger.semaphores {
        if account.seen_set.is_none() {
            // Never known to exist (its set was cut, or no client got that far).
            continue;
        }
        // In a cluster the key's node is the one a `MOVED` names.
        let (mut at, mut tries) = (port, 0);
        let (mut c, reply) = loop {
            tries += 1;
            let mut c = match Conn::connect(at, Duration::from_secs(15)) {
                Ok(c) => c,
                Err(e) => return vec![format!("semaphore conservation: connect: {e}")],
            };
            let reply = c.call(&[b"RSEM.AVAILABLE", key.as_bytes()]);
            match &reply {
                Ok(Frame::Error(e)) if e.starts_with("MOVED") && tries < 3 => {
                    let node = e.rsplit(':').next().and_then(|p| p.parse().ok());
                    at = node.unwrap_or(port);
                }
                _ => break (c, reply),
            }
        };
        match reply {
            Ok(Frame::Int(n)) => {
                let wrong = capacity::conservation(key, account, n);
                if !wrong.is_empty() {
                    let zset = timeouts(key);
                    let state = [
                        c.call(&[b"GET", key.as_bytes()]),
                        c.call(&[b"ZRANGE", zset.as_bytes(), b"0", b"-1", b"WITHSCORES"]),
                        c.call(&[b"TIME"]),
                    ];
                    found.push(format!(
                        "{}\n  GET, leases zset, TIME now: {state:?}\n  every call on {key} and its reply:\n{}",
                        wrong.join("\n"),
                        semaphores.history(key, faults)
                    ));
                }
            }
            other => found.push(format!("RSEM.AVAILABLE {key} replied {other:?}")),
        }
    }
    found
}
