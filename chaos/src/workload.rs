//! The load: clients on raw connections making random lock calls over every option,
//! recording what they saw; and a scratch client in other databases, where faults
//! flush and swap.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::history::{Force, History, Hold};
use crate::resp::{refs, Conn, ConnError, Frame};
use crate::rng::Rng;

/// The longest a reply may take: BLOCK (at most 1.5 s) plus the longest fault
/// (a FAILOVER, at most 5 s; a restart from AOF, about 1 s).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

/// The smallest `rlock.lease-ms` the faults set: the lease of a call without LEASE.
pub const MIN_DEFAULT_LEASE_MS: u64 = 1000;

/// The database the checked load runs in; faults flush and swap only these others.
pub const SCRATCH_DBS: [&str; 2] = ["9", "10"];

/// What the clients and the fault injector share.
pub struct Shared {
    /// The port of the current primary (it moves with FAILOVER).
    pub primary: AtomicU16,
    pub stop: AtomicBool,
    /// Client connections alive now, as `CLIENT ID`s, for faults to aim at.
    pub live: Mutex<Vec<i64>>,
    /// When a `CLIENT KILL` was sent to each connection.
    pub kills: Mutex<HashMap<i64, Instant>>,
    /// When each `RLOCK.FORCERELEASE` was sent, on which lock.
    pub forced: Mutex<Vec<Force>>,
    /// The connections now sending a blocking acquire, and the lock each waits on.
    pub waiting: Mutex<HashMap<i64, String>>,
    pub violations: Mutex<Vec<String>>,
    pub counts: Mutex<BTreeMap<String, u64>>,
    /// Whether the server takes `REQ id`.
    pub req: bool,
    /// Each fault injected, and when.
    pub fault_log: Mutex<Vec<(Instant, String)>>,
    /// In a cluster: the node that serves each lock, as last learned.
    pub cluster: bool,
    pub routes: Mutex<HashMap<String, u16>>,
    /// Whether a grant, renewal or re-entry counts only once `WAIT 1` says the replica
    /// has it. In a cluster, a manual failover that outlives its pause lets the old
    /// primary take writes that the promoted replica never sees: what the docs tell
    /// users to acknowledge with `WAIT` before relying on a grant.
    pub acknowledge: bool,
    /// Until when a `CLIENT PAUSE WRITE` may hold writes back (set before the pause is
    /// sent): clients that send `CLIENT UNBLOCK` themselves skip it meanwhile (see
    /// `faults::Topology::unblock_hits_server_bug`).
    pub writes_paused_until: Mutex<Option<Instant>>,
    /// The unplanned-failover phase: the primary is killed and a replica promoted
    /// (`faults::Fault::Promote`). There grants on odd connection ids are not
    /// acknowledged (`acknowledged`), the rest are.
    pub unplanned: bool,
    /// When each primary was killed in that phase (noted just before the kill).
    pub promotions: Mutex<Vec<Instant>>,
    /// Holds whose grant no replica acknowledged and that a promotion may have lost:
    /// one that another owner's hold overlaps is a lost grant, counted apart.
    pub unacknowledged: Mutex<History>,
}

impl Shared {
    pub fn new(primary: u16, req: bool) -> Shared {
        Shared {
            primary: AtomicU16::new(primary),
            stop: AtomicBool::new(false),
            live: Mutex::new(Vec::new()),
            kills: Mutex::new(HashMap::new()),
            forced: Mutex::new(Vec::new()),
            waiting: Mutex::new(HashMap::new()),
            violations: Mutex::new(Vec::new()),
            counts: Mutex::new(BTreeMap::new()),
            req,
            fault_log: Mutex::new(Vec::new()),
            cluster: false,
            routes: Mutex::new(HashMap::new()),
            acknowledge: false,
            writes_paused_until: Mutex::new(None),
            unplanned: false,
            promotions: Mutex::new(Vec::new()),
            unacknowledged: Mutex::new(History::default()),
        }
    }

    /// Whether a primary was killed (and a replica promoted) between `from` and `to`.
    pub fn promoted_between(&self, from: Instant, to: Instant) -> bool {
        self.promotions
            .lock()
            .unwrap()
            .iter()
            .any(|at| from <= *at && *at <= to)
    }

    /// Where a hold goes once its end is known. An acknowledged grant is checked. One no
    /// replica acknowledged is checked too in the unplanned-failover phase when no primary
    /// was killed between its acquire's send and its end (one primary granted it and saw
    /// it end: nothing of it could be lost meanwhile); across a kill it is kept apart, for
    /// the count of lost grants. Elsewhere (the cluster) it is not checked.
    pub fn settle(&self, mut hold: Hold, acknowledged: bool, history: &mut History) {
        hold.acknowledged = acknowledged;
        if acknowledged {
            history.add(hold);
        } else if !self.unplanned {
            self.count("hold not checked: its grant was not acknowledged");
        } else if self.promoted_between(hold.asked, hold.end) {
            self.count("unacknowledged holds across a promotion");
            self.unacknowledged.lock().unwrap().add(hold);
        } else {
            self.count("unacknowledged holds within one primary's term (checked)");
            history.add(hold);
        }
    }

    /// The port of the server for `lock`.
    pub fn port_of(&self, lock: &str) -> u16 {
        match self.routes.lock().unwrap().get(lock) {
            Some(port) => *port,
            None => self.primary.load(Ordering::SeqCst),
        }
    }

    pub fn log_fault(&self, what: String) {
        self.fault_log.lock().unwrap().push((Instant::now(), what));
    }

    pub fn count(&self, what: &str) {
        *self
            .counts
            .lock()
            .unwrap()
            .entry(what.to_string())
            .or_default() += 1;
    }

    pub fn violation(&self, what: String) {
        eprintln!("VIOLATION: {what}");
        self.violations.lock().unwrap().push(what);
    }

    /// Whether a force release may have met a hold whose acquire was sent at `asked`.
    fn force_released_since(&self, lock: &str, asked: Instant) -> bool {
        let forced = self.forced.lock().unwrap();
        forced.iter().any(|f| f.may_follow(lock, asked))
    }

    /// Whether a `CLIENT PAUSE WRITE` may be holding writes back now.
    pub fn writes_may_be_paused(&self) -> bool {
        self.writes_paused_until
            .lock()
            .unwrap()
            .is_some_and(|until| Instant::now() < until)
    }

    fn killed_at(&self, conn: i64) -> Option<Instant> {
        self.kills.lock().unwrap().get(&conn).copied()
    }
}

/// Options of one acquire.
#[derive(Debug, Clone)]
struct Call {
    lock: String,
    owner: String,
    lease_ms: Option<u64>,
    block_ms: Option<u64>,
    fair: bool,
    token: bool,
    session: bool,
    req: Option<String>,
}

impl Call {
    fn acquire_args(&self) -> Vec<Vec<u8>> {
        let mut args: Vec<Vec<u8>> = vec![
            b"RLOCK.ACQUIRE".to_vec(),
            self.lock.clone().into_bytes(),
            self.owner.clone().into_bytes(),
        ];
        if let Some(ms) = self.lease_ms {
            args.push(b"LEASE".to_vec());
            args.push(ms.to_string().into_bytes());
        }
        if let Some(ms) = self.block_ms {
            args.push(b"BLOCK".to_vec());
            args.push(ms.to_string().into_bytes());
        }
        for (on, word) in [
            (self.fair, "FAIR"),
            (self.token, "TOKEN"),
            (self.session, "SESSION"),
        ] {
            if on {
                args.push(word.as_bytes().to_vec());
            }
        }
        if let Some(id) = &self.req {
            args.push(b"REQ".to_vec());
            args.push(id.clone().into_bytes());
        }
        args
    }

    /// The lease this call's grant certainly lasts, from when it was sent.
    fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.unwrap_or(MIN_DEFAULT_LEASE_MS))
    }
}

/// One client: a thread that acquires, works, renews, re-enters and releases, until
/// `stop`. Returns the holds it saw.
pub fn client(shared: Arc<Shared>, index: usize, mut rng: Rng, locks: Vec<String>) -> History {
    let mut history = History::default();
    ClientConn::until_stopped(&shared, Some("connection lost or moved"), |seq, conn| {
        let call = Call {
            lock: rng.pick(&locks).clone(),
            owner: format!("c{index}-{seq}"),
            lease_ms: (!rng.chance(10)).then(|| rng.range(150, 2000)),
            block_ms: rng.chance(60).then(|| rng.range(20, 1500)),
            fair: rng.chance(30),
            token: rng.chance(40),
            session: rng.chance(30),
            req: (shared.req && rng.chance(70)).then(|| format!("{index}-{seq}-a")),
        };
        let who = || format!("client c{index} on {}", call.lock);
        conn.cycle(&call.lock, who, |c| {
            // Now and then two locks at once, all or none (not in a cluster, where these
            // locks are in different slots).
            if !shared.cluster && locks.len() > 1 && rng.chance(10) {
                let other = loop {
                    let other = rng.pick(&locks);
                    if *other != call.lock {
                        break other.clone();
                    }
                };
                multi_cycle(&shared, c, &call, &other, &mut history)
            } else {
                cycle(&shared, c, &call, &mut rng, &mut history)
            }
        });
    });
    history
}

/// A connection to the server of `lock`: the primary, or in a cluster the node that
/// serves its slot as far as the client knows.
pub fn connection<'a>(
    shared: &Shared,
    conn: &'a mut Option<Conn>,
    lock: &str,
) -> Option<&'a mut Conn> {
    let port = shared.port_of(lock);
    if conn.as_ref().is_some_and(|c| c.port != port) {
        drop_connection(shared, conn);
    }
    if conn.is_none() {
        let c = Conn::connect(port, REPLY_TIMEOUT).ok()?;
        shared.live.lock().unwrap().push(c.id);
        *conn = Some(c);
    }
    conn.as_mut()
}

pub fn drop_connection(shared: &Shared, conn: &mut Option<Conn>) {
    if let Some(c) = conn.take() {
        shared.live.lock().unwrap().retain(|id| *id != c.id);
    }
}

/// Appends the options of an acquire that come after its own: `BLOCK ms`, `SESSION`,
/// `REQ id`, each where given.
pub fn push_wait_options<'a>(
    args: &mut Vec<&'a [u8]>,
    block: Option<&'a str>,
    session: bool,
    req: Option<&'a str>,
) {
    if let Some(block) = block {
        args.extend([&b"BLOCK"[..], block.as_bytes()]);
    }
    if session {
        args.push(b"SESSION");
    }
    if let Some(id) = req {
        args.extend([&b"REQ"[..], id.as_bytes()]);
    }
}

/// A client thread's connection across its cycles: to the server of each cycle's key
/// ([`connection`]), dropped and found again after a cut or a move ([`after_cycle`], counted
/// as `lost` if named), given up when the client ends.
pub struct ClientConn<'a> {
    shared: &'a Shared,
    conn: Option<Conn>,
    lost: Option<&'static str>,
}

impl<'a> ClientConn<'a> {
    pub fn new(shared: &'a Shared, lost: Option<&'static str>) -> ClientConn<'a> {
        ClientConn {
            shared,
            conn: None,
            lost,
        }
    }

    /// One cycle on the connection to `key`'s server; without one, a pause instead. An
    /// error other than a cut or a move is a violation, told as `who`.
    pub fn cycle(
        &mut self,
        key: &str,
        who: impl FnOnce() -> String,
        cycle: impl FnOnce(&mut Conn) -> Result<(), ConnError>,
    ) {
        let Some(c) = connection(self.shared, &mut self.conn, key) else {
            thread::sleep(Duration::from_millis(20));
            return;
        };
        let result = cycle(c);
        after_cycle(self.shared, &mut self.conn, result, self.lost, who);
    }
}

impl<'a> ClientConn<'a> {
    /// A client's cycles until the load stops, on one connection: `turn` gets each cycle's
    /// number (from 1) and the connection.
    pub fn until_stopped(
        shared: &'a Shared,
        lost: Option<&'static str>,
        mut turn: impl FnMut(u64, &mut ClientConn<'a>),
    ) {
        let mut conn = ClientConn::new(shared, lost);
        let mut seq = 0;
        while !shared.stop.load(Ordering::SeqCst) {
            seq += 1;
            turn(seq, &mut conn);
        }
    }
}

impl Drop for ClientConn<'_> {
    fn drop(&mut self) {
        drop_connection(self.shared, &mut self.conn);
    }
}

/// The holds of every client thread, once they stopped; a thread that panicked is a
/// violation.
pub fn join_clients(shared: &Shared, threads: Vec<thread::JoinHandle<History>>) -> History {
    let mut history = History::default();
    for t in threads {
        match t.join() {
            Ok(h) => history.merge(h),
            Err(_) => shared.violation("a client thread panicked".into()),
        }
    }
    history
}

/// `Moved` if an error reply says the server takes no writes (it turned replica, or is
/// loading after a restart): the client goes to the primary again.
pub fn moved_if_read_only(e: &str) -> Result<(), ConnError> {
    if e.starts_with("READONLY") || e.starts_with("LOADING") {
        return Err(ConnError::Moved);
    }
    Ok(())
}

/// A cycle that took nothing (no grant, or a wait given up): counted as `what`, its
/// timeline dropped, the step checked in.
pub fn not_granted(shared: &Shared, c: &mut Conn, what: &str) -> Result<(), ConnError> {
    shared.count(what);
    c.take_timeline();
    c.check_in_step()
}

/// An acquire's error reply: counted if a fault explains it (see `error_reply`), the
/// timeline dropped and the step checked in; `Moved` if the server takes no writes.
pub fn acquire_failed(
    shared: &Shared,
    c: &mut Conn,
    lock: &str,
    what: &str,
    e: &str,
) -> Result<(), ConnError> {
    error_reply(shared, lock, what, e);
    c.take_timeline();
    c.check_in_step()?;
    moved_if_read_only(e)
}

/// A Redisson try answered neither with the lock nor with a wait: an error reply is
/// counted if a fault explains it (see `error_reply`), any other reply is a violation;
/// the timeline is dropped, and the step checked in unless the server takes no writes.
pub fn try_failed(
    shared: &Shared,
    c: &mut Conn,
    lock: &str,
    what: &str,
    reply: Frame,
) -> Result<(), ConnError> {
    match reply {
        Frame::Error(e) => {
            error_reply(shared, lock, what, &e);
            c.take_timeline();
            moved_if_read_only(&e)?;
        }
        other => {
            shared.violation(format!("{what} replied {other:?}"));
            c.take_timeline();
        }
    }
    c.check_in_step()
}

/// What a client does after one cycle: a cut or moved connection (the server turned
/// replica in a FAILOVER, or is loading after a restart) is dropped, counted as `lost`
/// if named, and found again after a pause; any other error is a violation, told as
/// `who` (with the connection dropped all the same).
pub fn after_cycle(
    shared: &Shared,
    conn: &mut Option<Conn>,
    result: Result<(), ConnError>,
    lost: Option<&str>,
    who: impl FnOnce() -> String,
) {
    match result {
        Ok(()) => {}
        Err(ConnError::Io(_)) | Err(ConnError::Moved) => {
            if let Some(lost) = lost {
                shared.count(lost);
            }
            drop_connection(shared, conn);
            thread::sleep(Duration::from_millis(10));
        }
        Err(e) => {
            shared.violation(format!("{}: {e}", who()));
            drop_connection(shared, conn);
        }
    }
}

/// Sends an acquire that may block: while a `BLOCK` call is out, the connection is
/// listed in `waiting` under `key` for faults to aim at. The timeline starts with the
/// call. When it was sent, and the reply.
pub fn blocking_call(
    shared: &Shared,
    c: &mut Conn,
    key: &str,
    blocks: bool,
    args: &[&[u8]],
) -> (Instant, Result<Frame, ConnError>) {
    if blocks {
        shared.waiting.lock().unwrap().insert(c.id, key.to_string());
    }
    c.start_timeline();
    let sent = Instant::now();
    let reply = c.call(args);
    shared.waiting.lock().unwrap().remove(&c.id);
    (sent, reply)
}

/// Checks an error reply: the ones faults explain are counted, others are violations.
/// A redirection (`MOVED`, `ASK`: in a cluster, the lock's slot moved) is followed next
/// time: `MOVED` names the node that serves the slot now.
pub fn error_reply(shared: &Shared, lock: &str, what: &str, error: &str) {
    let kind = error.split_whitespace().next().unwrap_or("");
    match kind {
        "UNBLOCKED" | "READONLY" | "LOADING" | "MASTERDOWN" | "NOTHELD" => {
            shared.count(&format!("{what} {kind}"))
        }
        "MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" if shared.cluster => {
            shared.count(&format!("{what} {kind}"));
            let port = error
                .split_whitespace()
                .nth(2)
                .and_then(|addr| addr.rsplit_once(':'))
                .and_then(|(_, port)| port.parse().ok());
            if let (Some(port), "MOVED") = (port, kind) {
                shared.routes.lock().unwrap().insert(lock.to_string(), port);
            }
        }
        _ => shared.violation(format!("{what} replied an unexpected error: {error}")),
    }
}

/// One acquire, and if granted the work, renewals, re-entry and release.
fn cycle(
    shared: &Shared,
    conn: &mut Conn,
    call: &Call,
    rng: &mut Rng,
    history: &mut History,
) -> Result<(), ConnError> {
    let args = call.acquire_args();
    shared.count("acquire");
    let (sent, reply) = blocking_call(
        shared,
        conn,
        &call.lock,
        call.block_ms.is_some(),
        &refs(&args),
    );
    let reply = reply?;
    let token = match reply {
        Frame::Int(n) => {
            if !call.token && n != 1 {
                shared.violation(format!(
                    "{} got hold count {n} on a first acquire",
                    call.owner
                ));
            }
            call.token.then_some(n)
        }
        Frame::Bulk(None) => {
            shared.count("acquire null");
            return conn.check_in_step();
        }
        Frame::Error(e) => {
            error_reply(shared, &call.lock, "acquire", &e);
            conn.check_in_step()?;
            return moved_if_read_only(&e);
        }
        other => {
            shared.violation(format!("acquire replied {other:?}"));
            return conn.check_in_step();
        }
    };
    shared.count("grant");
    let mut start = Instant::now();
    let mut bound = sent + call.lease();
    let mut granted_for_sure = match acknowledged(shared, conn) {
        Ok(acknowledged) => acknowledged,
        Err(e) => {
            // Cut while waiting for the replica (a killed primary): a grant of unknown
            // fate, held at most until its lease ends (or, with SESSION, the kill of its
            // connection).
            let killed = call.session.then(|| shared.killed_at(conn.id)).flatten();
            let hold = Hold {
                lock: call.lock.clone(),
                owner: call.owner.clone(),
                asked: sent,
                start,
                end: killed.map_or(bound, |at| at.min(bound)),
                token,
                shared: false,
                acknowledged: false,
                timeline: conn.take_timeline(),
            };
            shared.settle(hold, false, history);
            return Err(e);
        }
    };
    // A retried acquire replays its reply and adds no hold.
    let (mut sent, mut token) = (sent, token);
    if call.req.is_some() && rng.chance(20) {
        shared.count("acquire resent");
        let resent = Instant::now();
        let again = conn.call(&refs(&args))?;
        // The hold may have ended before the resend ran (its lease, while a `WAIT` waited
        // for a replica that a failover left behind; a force release): then the call ran
        // again, and a grant is a new hold, the same reply as a replay.
        let may_have_ended =
            Instant::now() >= bound || shared.force_released_since(&call.lock, sent);
        match again {
            Frame::Int(n) if may_have_ended => {
                shared.count("acquire resent after its hold may have ended");
                // The first hold ends at its lease; the one the reply may be starts with
                // the reply. As a replay of a hold about to lapse it may end at once:
                // only a renewal or a re-entry extends it.
                let first = Hold {
                    lock: call.lock.clone(),
                    owner: call.owner.clone(),
                    asked: sent,
                    start,
                    end: bound,
                    token,
                    shared: false,
                    acknowledged: true,
                    timeline: conn.take_timeline(),
                };
                shared.settle(first, granted_for_sure, history);
                conn.start_timeline();
                (sent, start, bound) = (resent, Instant::now(), resent);
                token = call.token.then_some(n);
                granted_for_sure = acknowledged(shared, conn)?;
            }
            Frame::Int(n) if Some(n) == token || (token.is_none() && n == 1) => {}
            Frame::Bulk(None) if may_have_ended => {}
            Frame::Error(e) => error_reply(shared, &call.lock, "acquire resent", &e),
            other => shared.violation(format!(
                "{}: a resent acquire with REQ replied {other:?}, the first {reply:?}",
                call.owner
            )),
        }
    }
    let mut holds = 1;
    let mut released = None;
    let outcome = hold_and_release(
        shared,
        conn,
        call,
        rng,
        &mut bound,
        &mut holds,
        &mut released,
    );
    // A release once sent may have run, whatever happened after (a lost connection while
    // it was resent, say): the hold may end there.
    let mut end = bound.min(released.unwrap_or(bound));
    if outcome.is_err() && call.session {
        if let Some(killed) = shared.killed_at(conn.id) {
            end = end.min(killed);
        }
    }
    shared.settle(
        Hold {
            lock: call.lock.clone(),
            owner: call.owner.clone(),
            asked: sent,
            start,
            end,
            token,
            shared: false,
            acknowledged: true,
            timeline: conn.take_timeline(),
        },
        granted_for_sure,
        history,
    );
    outcome?;
    conn.check_in_step()
}

/// `RLOCK.MACQUIRE` of `call.lock` and `other` (with the call's lease, wait and session),
/// and if granted `RLOCK.MRELEASE` of both, naming them in the other order. Each lock's
/// hold goes into the history.
fn multi_cycle(
    shared: &Shared,
    conn: &mut Conn,
    call: &Call,
    other: &str,
    history: &mut History,
) -> Result<(), ConnError> {
    let lease = call.lease_ms.map(|ms| ms.to_string());
    let block = call.block_ms.map(|ms| ms.to_string());
    let mut args: Vec<&[u8]> = vec![
        b"RLOCK.MACQUIRE",
        call.owner.as_bytes(),
        b"2",
        call.lock.as_bytes(),
        other.as_bytes(),
    ];
    if let Some(lease) = &lease {
        args.extend([&b"LEASE"[..], lease.as_bytes()]);
    }
    push_wait_options(&mut args, block.as_deref(), call.session, None);
    shared.count("multi acquire");
    let (sent, reply) = blocking_call(shared, conn, &call.lock, call.block_ms.is_some(), &args);
    match reply? {
        Frame::Int(2) => {}
        Frame::Bulk(None) => return not_granted(shared, conn, "multi acquire null"),
        Frame::Error(e) => return acquire_failed(shared, conn, &call.lock, "multi acquire", &e),
        other => {
            shared.violation(format!("{}: multi acquire replied {other:?}", call.owner));
            conn.take_timeline();
            return conn.check_in_step();
        }
    }
    shared.count("multi grant");
    let start = Instant::now();
    let bound = sent + call.lease();
    let granted_for_sure = acknowledged(shared, conn)?;
    thread::sleep(Duration::from_millis(5));
    let released = Instant::now();
    let outcome = conn.call(&[
        b"RLOCK.MRELEASE",
        call.owner.as_bytes(),
        b"2",
        other.as_bytes(),
        call.lock.as_bytes(),
    ]);
    let mut end = bound.min(released);
    if outcome.is_err() && call.session {
        if let Some(killed) = shared.killed_at(conn.id) {
            end = end.min(killed);
        }
    }
    let timeline = conn.take_timeline();
    for lock in [&call.lock, other] {
        shared.settle(
            Hold {
                lock: lock.to_string(),
                owner: call.owner.clone(),
                asked: sent,
                start,
                end,
                token: None,
                shared: false,
                acknowledged: true,
                timeline: timeline.clone(),
            },
            granted_for_sure,
            history,
        );
    }
    match outcome? {
        Frame::Int(_) => {}
        Frame::Error(e) => error_reply(shared, &call.lock, "multi release", &e),
        other => shared.violation(format!("{}: multi release replied {other:?}", call.owner)),
    }
    conn.check_in_step()
}

/// Whether the write just made reached the replica (`WAIT 1`), when the run asks for
/// acknowledgements; `true` when it does not. A write the replica never got is lost if
/// the replica is promoted without a pause (see `Shared::acknowledge`).
pub fn acknowledged(shared: &Shared, conn: &mut Conn) -> Result<bool, ConnError> {
    // In the unplanned-failover phase, part of the load never waits for the replica.
    if shared.unplanned && conn.id % 2 == 1 {
        return Ok(false);
    }
    acknowledged_always(shared, conn)
}

/// `acknowledged`, for the clients that always wait (semaphores and latches).
pub fn acknowledged_always(shared: &Shared, conn: &mut Conn) -> Result<bool, ConnError> {
    if !shared.acknowledge {
        return Ok(true);
    }
    match conn.call(&[b"WAIT", b"1", b"1000"])? {
        Frame::Int(n) if n >= 1 => Ok(true),
        Frame::Int(_) => {
            shared.count("WAIT: no replica acknowledged");
            Ok(false)
        }
        Frame::Error(e) => {
            shared.count(&format!(
                "WAIT {}",
                e.split_whitespace().next().unwrap_or("")
            ));
            Ok(false)
        }
        other => {
            shared.violation(format!("WAIT replied {other:?}"));
            Ok(false)
        }
    }
}

/// Works while holding: renewals and a re-entry at random, then the releases. Sets
/// `released` when the first release is sent, the earliest the hold may end by it.
/// `bound` is kept at the earliest the hold may end by its lease.
fn hold_and_release(
    shared: &Shared,
    conn: &mut Conn,
    call: &Call,
    rng: &mut Rng,
    bound: &mut Instant,
    holds: &mut u32,
    released: &mut Option<Instant>,
) -> Result<(), ConnError> {
    let lock = call.lock.as_bytes();
    let owner = call.owner.as_bytes();
    if rng.chance(30) {
        let lease = rng.range(150, 2000);
        let lease_text = lease.to_string();
        let id = format!("{}-n", call.owner);
        let mut args: Vec<&[u8]> =
            vec![b"RLOCK.RENEW", lock, owner, b"LEASE", lease_text.as_bytes()];
        if shared.req {
            args.extend([&b"REQ"[..], id.as_bytes()]);
        }
        shared.count("renew");
        let sent = Instant::now();
        // Until the reply says, the lease may be the old one or the new one.
        *bound = (*bound).min(sent + Duration::from_millis(lease));
        match conn.call(&args)? {
            Frame::Int(1) => {
                if acknowledged(shared, conn)? {
                    *bound = sent + Duration::from_millis(lease);
                }
            }
            Frame::Int(0) => shared.count("renew lost"),
            Frame::Error(e) => error_reply(shared, &call.lock, "renew", &e),
            other => shared.violation(format!("renew replied {other:?}")),
        }
    }
    if rng.chance(20) {
        let lease = rng.range(150, 2000);
        let lease_text = lease.to_string();
        shared.count("reentry");
        let sent = Instant::now();
        *bound = (*bound).min(sent + Duration::from_millis(lease));
        match conn.call(&[
            b"RLOCK.ACQUIRE",
            lock,
            owner,
            b"LEASE",
            lease_text.as_bytes(),
        ])? {
            Frame::Int(2) => {
                *holds += 1;
                if acknowledged(shared, conn)? {
                    *bound = sent + Duration::from_millis(lease);
                }
            }
            // Lost meanwhile (lease), and maybe taken again: one hold either way.
            Frame::Int(1) => {}
            Frame::Bulk(None) => shared.count("reentry lost"),
            Frame::Error(e) => error_reply(shared, &call.lock, "reentry", &e),
            other => shared.violation(format!("re-entry replied {other:?}")),
        }
    }
    thread::sleep(Duration::from_millis(rng.below(30)));
    for n in 0..*holds {
        let id = format!("{}-r{n}", call.owner);
        let mut args: Vec<&[u8]> = vec![b"RLOCK.RELEASE", lock, owner];
        let with_req = shared.req && rng.chance(70);
        if with_req {
            args.extend([&b"REQ"[..], id.as_bytes()]);
        }
        shared.count("release");
        let sent = Instant::now();
        if n == 0 {
            *released = Some(sent);
        }
        let first = conn.call(&args)?;
        match &first {
            Frame::Int(_) => {}
            Frame::Error(e) => error_reply(shared, &call.lock, "release", e),
            other => shared.violation(format!("release replied {other:?}")),
        }
        if with_req && rng.chance(30) {
            shared.count("release resent");
            let again = conn.call(&args)?;
            if let Frame::Error(e) = &again {
                // Not a primary any more (FAILOVER), loading, or (in a cluster) the slot
                // moved: the resend did not run.
                let kind = e.split_whitespace().next().unwrap_or("");
                if [
                    "READONLY",
                    "LOADING",
                    "MOVED",
                    "ASK",
                    "TRYAGAIN",
                    "CLUSTERDOWN",
                ]
                .contains(&kind)
                {
                    shared.count("release resent READONLY");
                    continue;
                }
            }
            // The server keeps a release's REQ record for its lease-ms (1 s at least
            // here): a resend that a pause held back longer may run again.
            let record_may_be_gone =
                Instant::now() >= sent + Duration::from_millis(MIN_DEFAULT_LEASE_MS);
            if again != first && record_may_be_gone {
                shared.count("release resent after its REQ record may have expired");
            } else if again != first && !matches!(first, Frame::Error(_)) {
                shared.violation(format!(
                    "{}: a resent release with REQ replied {again:?}, the first {first:?}",
                    call.owner
                ));
            }
        }
    }
    Ok(())
}

/// A client in the scratch databases, where faults flush and swap: its replies are
/// checked for shape and step, not for exclusion.
pub fn scratch(shared: Arc<Shared>, mut rng: Rng) {
    let mut conn: Option<Conn> = None;
    let mut seq = 0u64;
    while !shared.stop.load(Ordering::SeqCst) {
        let Some(c) = connection(&shared, &mut conn, "scratch") else {
            thread::sleep(Duration::from_millis(20));
            continue;
        };
        seq += 1;
        let db = rng.pick(&SCRATCH_DBS).as_bytes();
        let owner = format!("s-{seq}");
        let fair = rng.chance(50);
        let result = (|| -> Result<(), ConnError> {
            c.call(&[b"SELECT", db])?;
            let mut args: Vec<&[u8]> = vec![
                b"RLOCK.ACQUIRE",
                b"scratch",
                owner.as_bytes(),
                b"LEASE",
                b"300",
                b"BLOCK",
                b"200",
            ];
            if fair {
                args.push(b"FAIR");
            }
            match c.call(&args)? {
                Frame::Error(e) if moved_if_read_only(&e).is_err() => return Err(ConnError::Moved),
                Frame::Int(_) => {
                    shared.count("scratch grant");
                    thread::sleep(Duration::from_millis(5));
                    let _ = c.call(&[b"RLOCK.RELEASE", b"scratch", owner.as_bytes()])?;
                }
                Frame::Bulk(None) | Frame::Error(_) => {}
                other => shared.violation(format!("scratch acquire replied {other:?}")),
            }
            c.call(&[b"SELECT", b"0"])?;
            c.check_in_step()
        })();
        match result {
            Ok(()) => {}
            Err(ConnError::Io(_)) | Err(ConnError::Moved) => drop_connection(&shared, &mut conn),
            Err(e) => {
                shared.violation(format!("scratch client: {e}"));
                drop_connection(&shared, &mut conn);
            }
        }
    }
    drop_connection(&shared, &mut conn);
}
