//! The deadlock workload, on a server of its own and without faults: clients take two
//! or three locks of a small set one by one with `BLOCK` (plain, `FAIR`, `READ`/`WRITE`,
//! and now and then a few plain ones at once with `RLOCK.MACQUIRE`), hold them briefly
//! and release them. Some take them in random orders, so that their waits close cycles;
//! others ("ordered") only in one global order (sorted names), on a set of their own,
//! so that no cycle can go through them. Every call is logged with its send and reply
//! times.
//!
//! Checked: no ordered client is ever refused; every `DEADLOCK` names a cycle that was
//! real in the history at the refusal (each holder may have held its key, each owner may
//! have been blocked on it: see `check_cycle`); `INFO rlock` `rlock_deadlocks` equals the
//! refusals the clients saw; mutual exclusion over the holds; and when the load stops,
//! no lock held and no call blocked (a refused call takes nothing).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rlock_module_tests::{Flavor, Server};

use crate::checks::{eventually, info_field};
use crate::history::{self, History, Hold};
use crate::resp::{since_epoch, Conn, ConnError, Frame};
use crate::rng::Rng;
use crate::workload::{Shared, REPLY_TIMEOUT};

const RANDOM_CLIENTS: usize = 5;
const ORDERED_CLIENTS: usize = 3;

/// Longer than any round: a hold ends by its release only.
const LEASE_MS: &str = "30000";

/// The random-order clients' locks: four plain, two read-write (`:rw:` in the name).
const RANDOM_KEYS: [&str; 6] = ["dl:a", "dl:b", "dl:c", "dl:d", "dl:rw:e", "dl:rw:f"];
/// The ordered clients' locks, apart: a cycle through one of them would need a
/// random-order client to hold one of its locks.
const ORDERED_KEYS: [&str; 6] = ["do:a", "do:b", "do:c", "do:d", "do:rw:e", "do:rw:f"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    Fair,
    Read,
    Write,
}

/// One acquire: one key with its mode, or (more than one key) a plain `RLOCK.MACQUIRE`.
#[derive(Debug, Clone)]
struct Step {
    keys: Vec<String>,
    mode: Mode,
}

impl Step {
    fn acquire_args(&self, owner: &str, block_ms: u64) -> Vec<Vec<u8>> {
        let mut args: Vec<String> = match self.keys.len() {
            1 => vec!["RLOCK.ACQUIRE".into(), self.keys[0].clone(), owner.into()],
            n => {
                let mut args = vec!["RLOCK.MACQUIRE".into(), owner.into(), n.to_string()];
                args.extend(self.keys.iter().cloned());
                args
            }
        };
        args.extend(["LEASE".into(), LEASE_MS.into()]);
        args.extend(["BLOCK".into(), block_ms.to_string()]);
        args.extend(self.mode_word().map(String::from));
        args.into_iter().map(String::into_bytes).collect()
    }

    fn release_args(&self, owner: &str) -> Vec<Vec<u8>> {
        let mut args: Vec<String> = match self.keys.len() {
            1 => vec!["RLOCK.RELEASE".into(), self.keys[0].clone(), owner.into()],
            n => {
                let mut args = vec!["RLOCK.MRELEASE".into(), owner.into(), n.to_string()];
                args.extend(self.keys.iter().rev().cloned());
                args
            }
        };
        if matches!(self.mode, Mode::Read | Mode::Write) {
            args.extend(self.mode_word().map(String::from));
        }
        args.into_iter().map(String::into_bytes).collect()
    }

    fn mode_word(&self) -> Option<&'static str> {
        match self.mode {
            Mode::Plain => None,
            Mode::Fair => Some("FAIR"),
            Mode::Read => Some("READ"),
            Mode::Write => Some("WRITE"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Reply {
    Granted,
    Released,
    TimedOut,
    Deadlock(String),
    /// Anything unexpected: a violation.
    Other(String),
    /// No reply: the call may have run, or may still be blocked.
    Lost,
}

/// One call of the history.
#[derive(Debug, Clone)]
struct Call {
    owner: String,
    keys: Vec<String>,
    release: bool,
    multi: bool,
    text: String,
    sent: Instant,
    replied: Option<Instant>,
    reply: Reply,
}

impl Call {
    fn acquires(&self, key: &str) -> bool {
        !self.release && self.keys.iter().any(|k| k == key)
    }

    /// Whether the server may have been running it (blocked, say) at some moment of
    /// `from..=to`: it was sent before `to`, and its reply came after `from`, if ever.
    fn may_run_within(&self, from: Instant, to: Instant) -> bool {
        self.sent <= to && self.replied.map_or(true, |at| at >= from)
    }

    fn report(&self) -> String {
        let replied = self.replied.map_or("never".into(), since_epoch);
        format!(
            "{}..{} {}: {:?}",
            since_epoch(self.sent),
            replied,
            self.text,
            self.reply
        )
    }
}

/// One wait of a cycle as a `DEADLOCK` error names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub owner: Vec<u8>,
    pub key: Vec<u8>,
    pub holder: Vec<u8>,
    /// `kept for`: a free lock kept for the holder's multi-key call.
    pub kept: bool,
}

/// A name in double quotes as the module writes it (`\"`, `\\`, `\xNN`) at the start of
/// `text`: the name and the rest.
fn unquote(text: &str) -> Option<(Vec<u8>, &str)> {
    let body = text.strip_prefix('"')?;
    let bytes = body.as_bytes();
    let mut name = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some((name, &body[i + 1..])),
            b'\\' => {
                match bytes.get(i + 1)? {
                    b'x' => {
                        let hex = body.get(i + 2..i + 4)?;
                        name.push(u8::from_str_radix(hex, 16).ok()?);
                        i += 2;
                    }
                    b @ (b'"' | b'\\') => name.push(*b),
                    _ => return None,
                }
                i += 2;
            }
            b => {
                name.push(b);
                i += 1;
            }
        }
    }
    None
}

/// The waits a `DEADLOCK "o1" waits for "k1" held by "o2"; ...` error names, in order;
/// `None` if the text does not read so.
pub fn parse_cycle(error: &str) -> Option<Vec<Edge>> {
    let mut rest = error.strip_prefix("DEADLOCK ")?;
    let mut edges = Vec::new();
    loop {
        let (edge, after) = Edge::read(rest)?;
        edges.push(edge);
        if after.is_empty() {
            return Some(edges);
        }
        rest = after.strip_prefix("; ")?;
    }
}

impl Edge {
    /// The wait `"o1" waits for "k1" held by "o2"` (or `kept for`) at the start of `text`,
    /// and the rest.
    fn read(text: &str) -> Option<(Edge, &str)> {
        let (owner, after) = unquote(text)?;
        let (key, after) = unquote(after.strip_prefix(" waits for ")?)?;
        let (kept, after) = [(false, " held by "), (true, " kept for ")]
            .into_iter()
            .find_map(|(kept, link)| Some((kept, after.strip_prefix(link)?)))?;
        let (holder, rest) = unquote(after)?;
        let edge = Edge {
            owner,
            key,
            holder,
            kept,
        };
        Some((edge, rest))
    }
}

/// Two or three keys of `keys`, in a random order or (`ordered`) sorted, each with a
/// mode; a plain key now and then joins the plain step before it into one
/// `RLOCK.MACQUIRE`.
fn plan(rng: &mut Rng, keys: &[&str], ordered: bool) -> Vec<Step> {
    let mut pool = keys.to_vec();
    let mut chosen: Vec<&str> = (0..rng.range(2, 3))
        .map(|_| pool.swap_remove(rng.below(pool.len() as u64) as usize))
        .collect();
    if ordered {
        chosen.sort_unstable();
    }
    let mut steps: Vec<Step> = Vec::new();
    for key in chosen {
        let mode = match (key.contains(":rw:"), rng.chance(50)) {
            (true, true) => Mode::Write,
            (true, false) => Mode::Read,
            (false, _) if rng.chance(25) => Mode::Fair,
            (false, _) => Mode::Plain,
        };
        match steps.last_mut() {
            Some(last) if mode == Mode::Plain && last.mode == Mode::Plain && rng.chance(50) => {
                last.keys.push(key.to_string())
            }
            _ => steps.push(Step {
                keys: vec![key.to_string()],
                mode,
            }),
        }
    }
    steps
}

/// Sends `args` and reads the reply: the call as logged.
fn timed(conn: &mut Conn, owner: &str, step: &Step, release: bool, args: &[Vec<u8>]) -> Call {
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let text = refs
        .iter()
        .map(|a| String::from_utf8_lossy(a))
        .collect::<Vec<_>>()
        .join(" ");
    let sent = Instant::now();
    let frame = conn.call(&refs);
    let replied = Instant::now();
    let reply = match frame {
        Err(ConnError::Io(_) | ConnError::NoReply) => Reply::Lost,
        Err(e) => Reply::Other(format!("{e}")),
        Ok(Frame::Int(n)) if release && (0..=step.keys.len() as i64).contains(&n) => {
            Reply::Released
        }
        Ok(other) if release => Reply::Other(format!("{other:?}")),
        Ok(Frame::Int(n)) if n == step.keys.len() as i64 => Reply::Granted,
        Ok(Frame::Bulk(None)) => Reply::TimedOut,
        Ok(Frame::Error(e)) if e.starts_with("DEADLOCK ") => Reply::Deadlock(e),
        Ok(other) => Reply::Other(format!("{other:?}")),
    };
    Call {
        owner: owner.to_string(),
        keys: step.keys.clone(),
        release,
        multi: step.keys.len() > 1,
        text,
        sent,
        replied: (reply != Reply::Lost).then_some(replied),
        reply,
    }
}

/// One client until `stop`: rounds of two or three locks, each round with an owner of
/// its own (`r3-17`: random-order client 3's round 17; `o` for the ordered). Returns its
/// calls and its holds.
fn client(
    shared: Arc<Shared>,
    port: u16,
    ordered: bool,
    index: usize,
    mut rng: Rng,
) -> (Vec<Call>, History) {
    let (mut calls, mut holds) = (Vec::new(), History::default());
    let mut conn = match Conn::connect(port, REPLY_TIMEOUT) {
        Ok(conn) => conn,
        Err(e) => {
            shared.violation(format!("deadlock client: connect: {e}"));
            return (calls, holds);
        }
    };
    let (prefix, keys) = match ordered {
        true => ("o", &ORDERED_KEYS),
        false => ("r", &RANDOM_KEYS),
    };
    let mut round = 0u64;
    'rounds: while !shared.stop.load(Ordering::SeqCst) {
        round += 1;
        let owner = format!("{prefix}{index}-{round}");
        let mut held: Vec<(Step, Instant, Instant)> = Vec::new();
        let mut every_lock = true;
        shared.count("rounds");
        for step in plan(&mut rng, keys, ordered) {
            let block = match ordered {
                true => rng.range(1000, 3000),
                false => rng.range(100, 1500),
            };
            shared.count(if step.keys.len() > 1 {
                "multi-key acquires"
            } else {
                "acquires"
            });
            let call = timed(
                &mut conn,
                &owner,
                &step,
                false,
                &step.acquire_args(&owner, block),
            );
            let reply = call.reply.clone();
            let (sent, replied) = (call.sent, call.replied);
            calls.push(call);
            every_lock = reply == Reply::Granted;
            match reply {
                Reply::Granted => held.push((step, sent, replied.unwrap_or(sent))),
                Reply::TimedOut => {
                    shared.count("timed out");
                    break;
                }
                Reply::Deadlock(_) => {
                    shared.count("DEADLOCK replies");
                    if ordered {
                        shared.count("DEADLOCK replies to ordered clients");
                    }
                    break;
                }
                Reply::Lost => {
                    shared.count("connection lost");
                    shared.violation(format!("{owner}: no reply to an acquire"));
                    break 'rounds;
                }
                Reply::Released | Reply::Other(_) => {
                    shared.violation(format!(
                        "{owner}: {} replied {reply:?}",
                        calls[calls.len() - 1].text
                    ));
                    break;
                }
            }
            thread::sleep(Duration::from_millis(rng.below(3)));
        }
        if every_lock {
            shared.count("rounds with every lock taken");
        }
        thread::sleep(Duration::from_millis(rng.below(8)));
        while let Some((step, asked, start)) = held.pop() {
            let call = timed(&mut conn, &owner, &step, true, &step.release_args(&owner));
            for key in &step.keys {
                holds.add(Hold {
                    lock: key.clone(),
                    owner: owner.clone(),
                    asked,
                    start,
                    end: call.sent,
                    token: None,
                    shared: step.mode == Mode::Read,
                    acknowledged: true,
                    timeline: vec![call.text.clone()],
                });
            }
            let reply = call.reply.clone();
            let text = call.text.clone();
            calls.push(call);
            match reply {
                Reply::Released => {}
                Reply::Lost => {
                    shared.count("connection lost");
                    shared.violation(format!("{owner}: no reply to {text}"));
                    break 'rounds;
                }
                other => shared.violation(format!("{owner}: {text} replied {other:?}")),
            }
        }
    }
    (calls, holds)
}

/// What one refusal's cycle gets wrong against the history, if anything. `refused` is
/// the call that got `DEADLOCK`; `by_owner`, every call by owner. Conservative: a wait or
/// a hold counts if it may have been there at some moment between the refusal's send
/// and its reply, whatever the order of the calls within that window.
fn check_cycle(
    refused: &Call,
    edges: &[Edge],
    by_owner: &HashMap<&str, Vec<&Call>>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    let name = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let (from, to) = (refused.sent, refused.replied.unwrap_or(refused.sent));
    let Some(first) = edges.first() else {
        return vec!["no wait in it".into()];
    };
    if name(&first.owner) != refused.owner || !refused.acquires(&name(&first.key)) {
        wrong.push(format!(
            "its first wait is not the refused call's ({} on {:?})",
            refused.owner, refused.keys
        ));
    }
    for (i, edge) in edges.iter().enumerate() {
        let next = &edges[(i + 1) % edges.len()];
        if edge.holder != next.owner {
            wrong.push(format!(
                "the waits do not close: {} then {}",
                name(&edge.holder),
                name(&next.owner)
            ));
        }
        let (owner, key, holder) = (name(&edge.owner), name(&edge.key), name(&edge.holder));
        let no_calls = Vec::new();
        let owner_calls = by_owner.get(owner.as_str()).unwrap_or(&no_calls);
        let holder_calls = by_owner.get(holder.as_str()).unwrap_or(&no_calls);
        // An owner waits with a call on the key (the refused call's wait is its own).
        if i > 0
            && !owner_calls
                .iter()
                .any(|c| c.acquires(&key) && c.may_run_within(from, to))
        {
            wrong.push(format!("{owner} had no call on {key} then"));
        }
        let holds = match edge.kept {
            // A lock kept for the holder's multi-key call: that call was waiting.
            true => holder_calls
                .iter()
                .any(|c| c.multi && c.acquires(&key) && c.may_run_within(from, to)),
            // Granted before the refusal's reply, not released before its send.
            false => {
                let granted = holder_calls.iter().any(|c| {
                    c.acquires(&key)
                        && c.sent <= to
                        && matches!(c.reply, Reply::Granted | Reply::Lost)
                });
                let released = holder_calls.iter().any(|c| {
                    c.release && c.keys.contains(&key) && c.replied.is_some_and(|at| at < from)
                });
                granted && !released
            }
        };
        if !holds {
            let how = if edge.kept { "kept for" } else { "held by" };
            wrong.push(format!("{key} was not {how} {holder} then"));
        }
    }
    wrong
}

/// Every `DEADLOCK` reply checked against the history: the violations, and counts.
fn check_refusals(calls: &[Call], counts: &mut BTreeMap<String, u64>) -> Vec<String> {
    let mut by_owner: HashMap<&str, Vec<&Call>> = HashMap::new();
    for call in calls {
        by_owner.entry(call.owner.as_str()).or_default().push(call);
    }
    let mut found = Vec::new();
    for call in calls {
        let Reply::Deadlock(text) = &call.reply else {
            continue;
        };
        let Some(edges) = parse_cycle(text) else {
            found.push(format!("a DEADLOCK that does not read as a cycle: {text}"));
            continue;
        };
        *counts.entry("cycles checked".into()).or_default() += 1;
        let size = match edges.len() {
            n if n >= 4 => "cycles of 4 or more owners".to_string(),
            n => format!("cycles of {n} owners"),
        };
        *counts.entry(size).or_default() += 1;
        let kept = edges.iter().filter(|e| e.kept).count() as u64;
        *counts
            .entry("waits on a lock kept for a multi-key call".into())
            .or_default() += kept;
        let mut wrong = check_cycle(call, &edges, &by_owner);
        // Only random-order clients (`r...`) can close a cycle.
        if call.owner.starts_with('o') {
            wrong.push(format!("{} takes its locks in one order", call.owner));
        }
        if wrong.is_empty() {
            continue;
        }
        let mut owners: Vec<&str> = edges
            .iter()
            .map(|e| std::str::from_utf8(&e.owner).unwrap_or(""))
            .collect();
        owners.sort_unstable();
        owners.dedup();
        let timeline: String = owners
            .iter()
            .flat_map(|o| by_owner.get(o).into_iter().flatten())
            .map(|c| format!("    {}\n", c.report()))
            .collect();
        found.push(format!(
            "a DEADLOCK that is no deadlock: {}\n  refused: {}\n  {}\n  calls:\n{timeline}",
            text,
            call.report(),
            wrong.join("; ")
        ));
    }
    found
}

/// The seed of a run's deadlock workload on `flavor`: from the run's seed, without
/// drawing from the generator that seeds the other phases (so their seeds stay).
pub fn seed(run_seed: u64, flavor: Flavor) -> u64 {
    let salt = flavor
        .name()
        .bytes()
        .fold(0xDEAD_10C5_u64, |h, b| h.rotate_left(8) ^ u64::from(b));
    Rng::new(run_seed ^ salt).next_u64()
}

/// The workload on a fresh server of `flavor` for `secs` seconds: the violations, the
/// counts and how many holds were checked.
pub fn run(flavor: Flavor, seed: u64, secs: u64) -> (Vec<String>, BTreeMap<String, u64>, usize) {
    // Reports give times from the first of them read: from now.
    since_epoch(Instant::now());
    let server = Server::start(flavor);
    let port = server.port;
    let shared = Arc::new(Shared::new(port, false));
    let mut rng = Rng::new(seed);
    let threads: Vec<_> = (0..RANDOM_CLIENTS + ORDERED_CLIENTS)
        .map(|i| {
            let (shared, rng) = (shared.clone(), rng.fork());
            let (ordered, index) = (i >= RANDOM_CLIENTS, i % RANDOM_CLIENTS);
            thread::spawn(move || client(shared, port, ordered, index, rng))
        })
        .collect();
    thread::sleep(Duration::from_secs(secs));
    shared.stop.store(true, Ordering::SeqCst);
    let (mut calls, mut holds) = (Vec::new(), History::default());
    for t in threads {
        match t.join() {
            Ok((c, h)) => {
                calls.extend(c);
                holds.merge(h);
            }
            Err(_) => shared.violation("a deadlock client panicked".into()),
        }
    }
    let mut violations = shared.violations.lock().unwrap().clone();
    let mut counts = shared.counts.lock().unwrap().clone();
    violations.extend(check_refusals(&calls, &mut counts));
    violations.extend(history::mutual_exclusion(&holds, &[]));
    counts.insert("holds checked".into(), holds.holds.len() as u64);
    let refusals = counts.get("DEADLOCK replies").copied().unwrap_or(0);
    let lost = counts.contains_key("connection lost");
    violations.extend(after_load(server.port, refusals, lost));
    (violations, counts, holds.holds.len())
}

/// Once every client has gone: `rlock_deadlocks` is the refusals the clients saw (unless
/// a reply was lost), and no lock is held, no call blocked.
fn after_load(port: u16, refusals: u64, lost: bool) -> Vec<String> {
    let mut found = Vec::new();
    let mut c = match Conn::connect(port, REPLY_TIMEOUT) {
        Ok(c) => c,
        Err(e) => return vec![format!("after the deadlock load: connect: {e}")],
    };
    match info_field(&mut c, b"rlock", "rlock_deadlocks") {
        Ok(n) if n as u64 == refusals || (lost && n as u64 >= refusals) => {}
        Ok(n) => found.push(format!(
            "INFO rlock counts {n} deadlocks, the clients saw {refusals} DEADLOCK replies"
        )),
        Err(e) => found.push(e),
    }
    let settled = eventually(Duration::from_secs(3), || {
        let blocked = info_field(&mut c, b"rlock", "rlock_blocked")?;
        for key in RANDOM_KEYS.iter().chain(&ORDERED_KEYS) {
            match c.call(&[b"EXISTS", key.as_bytes()]) {
                Ok(Frame::Int(0)) => {}
                Ok(_) => return Err(format!("{key} still held once every client released")),
                Err(e) => return Err(format!("EXISTS {key}: {e}")),
            }
        }
        match blocked {
            0 => Ok(()),
            n => Err(format!(
                "{n} calls still blocked once every client had gone"
            )),
        }
    });
    found.extend(settled.err());
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_reads_back_from_its_error() {
        let edges = parse_cycle(
            r#"DEADLOCK "b" waits for "k1" held by "a"; "a" waits for "k\"2\\" kept for "b\x00""#,
        )
        .unwrap();
        let edge = |owner: &[u8], key: &[u8], holder: &[u8], kept| Edge {
            owner: owner.to_vec(),
            key: key.to_vec(),
            holder: holder.to_vec(),
            kept,
        };
        assert_eq!(
            edges,
            [
                edge(b"b", b"k1", b"a", false),
                edge(b"a", b"k\"2\\", b"b\x00", true)
            ]
        );
        for bad in [
            "DEADLOCK",
            r#"DEADLOCK "b" waits for "k1""#,
            r#"DEADLOCK "b" waits for "k1" held by "a";"#,
            r#"DEADLOCK "b waits for "k1" held by "a""#,
            r#"DEADLOCK "b" waits for "k\q" held by "a""#,
            r#"ERR "b" waits for "k1" held by "a""#,
        ] {
            assert_eq!(parse_cycle(bad), None, "{bad}");
        }
    }

    fn call(
        owner: &str,
        keys: &[&str],
        release: bool,
        at: (u64, Option<u64>),
        reply: Reply,
    ) -> Call {
        let t0 = *T0;
        Call {
            owner: owner.into(),
            keys: keys.iter().map(|k| k.to_string()).collect(),
            release,
            multi: keys.len() > 1,
            text: String::new(),
            sent: t0 + Duration::from_millis(at.0),
            replied: at.1.map(|ms| t0 + Duration::from_millis(ms)),
            reply,
        }
    }

    static T0: std::sync::LazyLock<Instant> = std::sync::LazyLock::new(Instant::now);

    fn verdict(calls: &[Call], refused: usize) -> Vec<String> {
        let mut by_owner: HashMap<&str, Vec<&Call>> = HashMap::new();
        for c in calls {
            by_owner.entry(c.owner.as_str()).or_default().push(c);
        }
        let Reply::Deadlock(text) = &calls[refused].reply else {
            panic!("not a refusal");
        };
        check_cycle(&calls[refused], &parse_cycle(text).unwrap(), &by_owner)
    }

    #[test]
    fn a_cycle_must_be_real_in_the_history() {
        let text = r#"DEADLOCK "b" waits for "k1" held by "a"; "a" waits for "k2" held by "b""#;
        // b's acquire of `key`, refused with `text` between 50 and 51 ms.
        let refusal = |key: &str, text: &str| {
            let reply = Reply::Deadlock(text.into());
            call("b", &[key], false, (50, Some(51)), reply)
        };
        let real = vec![
            call("a", &["k1"], false, (0, Some(1)), Reply::Granted),
            call("b", &["k2"], false, (2, Some(3)), Reply::Granted),
            call("a", &["k2"], false, (10, None), Reply::Lost),
            refusal("k1", text),
        ];
        assert_eq!(verdict(&real, 3), Vec::<String>::new());
        // a released k1 before b asked: wrong.
        let mut released = real.clone();
        released.push(call("a", &["k1"], true, (20, Some(21)), Reply::Released));
        assert_eq!(
            verdict(&released, 3).len(),
            1,
            "{:?}",
            verdict(&released, 3)
        );
        // Released while b's call ran: may have come after the refusal.
        let mut racing = real.clone();
        racing.push(call("a", &["k1"], true, (49, Some(52)), Reply::Released));
        assert!(verdict(&racing, 3).is_empty());
        // a's wait on k2 timed out before b asked: wrong; one granted after is fine.
        let mut timed_out = real.clone();
        timed_out[2] = call("a", &["k2"], false, (10, Some(40)), Reply::TimedOut);
        assert_eq!(verdict(&timed_out, 3).len(), 1);
        timed_out[2] = call("a", &["k2"], false, (10, Some(60)), Reply::Granted);
        assert!(verdict(&timed_out, 3).is_empty());
        // b never held k2.
        let mut never = real.clone();
        never[1] = call("b", &["k3"], false, (2, Some(3)), Reply::Granted);
        assert_eq!(verdict(&never, 3).len(), 1);
        // "kept for": the holder's multi-key call was waiting.
        let kept = r#"DEADLOCK "b" waits for "k1" held by "a"; "a" waits for "k2" kept for "b""#;
        let mut multi = real.clone();
        multi[1] = call("b", &["k2", "k3"], false, (2, None), Reply::Lost);
        multi[3] = refusal("k1", kept);
        assert!(verdict(&multi, 3).is_empty(), "{:?}", verdict(&multi, 3));
        multi[1] = call("b", &["k2"], false, (2, None), Reply::Lost);
        assert_eq!(verdict(&multi, 3).len(), 1);
        // A cycle that does not close, or does not start at the refused call.
        let open = r#"DEADLOCK "b" waits for "k1" held by "a"; "a" waits for "k2" held by "c""#;
        let mut wrong = real.clone();
        wrong[3] = refusal("k1", open);
        assert!(!verdict(&wrong, 3).is_empty());
        wrong[3] = refusal("k9", text);
        assert!(!verdict(&wrong, 3).is_empty());
    }
}
