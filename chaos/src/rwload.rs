//! Read-write lock load: module clients taking `READ` and `WRITE` holds (with `BLOCK`,
//! `SESSION`, `LEASE`, `REQ`, renewals, releases), and Redisson-style clients running
//! Redisson's read and write lock scripts, on a few locks of their own. Their holds go
//! into the history marked read or write; the checker lets reads overlap and nothing
//! else (see `history::mutual_exclusion`).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rlock_module_tests::helper_key;
use rlock_module_tests::redisson::{READ_LOCK, READ_UNLOCK, WRITE_LOCK, WRITE_UNLOCK};

use crate::history::{History, Hold};
use crate::resp::{Conn, ConnError, Frame};
use crate::rng::Rng;
use crate::scripts::eval;
use crate::workload::{
    acknowledged, acquire_failed, blocking_call, error_reply, not_granted, push_wait_options,
    try_failed, ClientConn, Shared, MIN_DEFAULT_LEASE_MS,
};

/// The read-write locks of a run: apart from the reentrant ones, since a key is one or
/// the other.
pub fn lock_names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("rw:{i}")).collect()
}

/// One client: module calls, or with `redisson` Redisson's scripts. Returns its holds.
pub fn client(
    shared: Arc<Shared>,
    index: usize,
    mut rng: Rng,
    locks: Vec<String>,
    redisson: bool,
) -> History {
    let mut history = History::default();
    ClientConn::until_stopped(&shared, Some("rw connection lost or moved"), |seq, conn| {
        let lock = rng.pick(&locks).clone();
        let prefix = if redisson { "jr" } else { "rw" };
        let owner = format!("{prefix}{index}-{seq}");
        let write = rng.chance(30);
        let who = || format!("rw client {owner} on {lock}");
        conn.cycle(&lock, who, |c| {
            let turn = Turn {
                shared: &shared,
                lock: &lock,
                owner: &owner,
                write,
            };
            match redisson {
                false => module_cycle(turn, c, &mut rng, &mut history),
                true => redisson_cycle(turn, c, &mut rng, &mut history),
            }
        });
    });
    history
}

/// How a cycle ends: an error ends the connection too (see `after_cycle`).
type CycleResult = Result<(), ConnError>;

/// One cycle's lock, owner and side.
#[derive(Clone, Copy)]
struct Turn<'a> {
    shared: &'a Shared,
    lock: &'a str,
    owner: &'a str,
    write: bool,
}

impl Turn<'_> {
    /// The hold from the acquire sent at `asked`, granted at `start`, to `end`, into
    /// `history` once settled: a read hold is shared.
    fn settle(
        self,
        c: &mut Conn,
        (asked, start, end): (Instant, Instant, Instant),
        granted_for_sure: bool,
        history: &mut History,
    ) {
        let hold = Hold {
            lock: self.lock.to_string(),
            owner: self.owner.to_string(),
            asked,
            start,
            end,
            token: None,
            shared: !self.write,
            acknowledged: true,
            timeline: c.take_timeline(),
        };
        self.shared.settle(hold, granted_for_sure, history);
    }
}

fn side(write: bool) -> &'static [u8] {
    if write {
        b"WRITE"
    } else {
        b"READ"
    }
}

/// One module acquire of a side and, if granted, a renewal now and then and the release.
fn module_cycle(turn: Turn, c: &mut Conn, rng: &mut Rng, history: &mut History) -> CycleResult {
    let (shared, lock, owner, write) = (turn.shared, turn.lock, turn.owner, turn.write);
    let lease = (!rng.chance(10)).then(|| rng.range(150, 2000));
    let block = rng.chance(60).then(|| rng.range(20, 1500));
    let session = rng.chance(30);
    let req = (shared.req && rng.chance(50)).then(|| format!("{owner}-a"));
    let (lease_text, block_text) = (lease.map(|l| l.to_string()), block.map(|b| b.to_string()));
    let mut args: Vec<&[u8]> = vec![
        b"RLOCK.ACQUIRE",
        lock.as_bytes(),
        owner.as_bytes(),
        side(write),
    ];
    if let Some(lease) = &lease_text {
        args.extend([&b"LEASE"[..], lease.as_bytes()]);
    }
    push_wait_options(&mut args, block_text.as_deref(), session, req.as_deref());
    shared.count("rw acquire");
    let (sent, reply) = blocking_call(shared, c, lock, block.is_some(), &args);
    match reply? {
        Frame::Int(1) => {}
        Frame::Bulk(None) => return not_granted(shared, c, "rw acquire null"),
        Frame::Error(e) => return acquire_failed(shared, c, lock, "rw acquire", &e),
        other => {
            shared.violation(format!("{owner}: rw acquire replied {other:?}"));
            c.take_timeline();
            return c.check_in_step();
        }
    }
    shared.count(if write {
        "rw write grant"
    } else {
        "rw read grant"
    });
    let start = Instant::now();
    let lease = Duration::from_millis(lease.unwrap_or(MIN_DEFAULT_LEASE_MS));
    let mut bound = sent + lease;
    let granted_for_sure = acknowledged(shared, c)?;
    // A release once sent may have run, whatever came back: the hold may end there.
    let mut released: Option<Instant> = None;
    let outcome = (|| -> Result<(), ConnError> {
        if rng.chance(30) {
            let renewal = rng.range(150, 2000);
            let text = renewal.to_string();
            shared.count("rw renew");
            let renew_sent = Instant::now();
            bound = bound.min(renew_sent + Duration::from_millis(renewal));
            let args: [&[u8]; 6] = [
                b"RLOCK.RENEW",
                lock.as_bytes(),
                owner.as_bytes(),
                side(write),
                b"LEASE",
                text.as_bytes(),
            ];
            match c.call(&args)? {
                Frame::Int(1) => {
                    if acknowledged(shared, c)? {
                        bound = renew_sent + Duration::from_millis(renewal);
                    }
                }
                Frame::Int(0) => shared.count("rw renew lost"),
                Frame::Error(e) => error_reply(shared, lock, "rw renew", &e),
                other => shared.violation(format!("{owner}: rw renew replied {other:?}")),
            }
        }
        thread::sleep(Duration::from_millis(rng.below(30)));
        shared.count("rw release");
        released = Some(Instant::now());
        let args: [&[u8]; 4] = [
            b"RLOCK.RELEASE",
            lock.as_bytes(),
            owner.as_bytes(),
            side(write),
        ];
        match c.call(&args)? {
            Frame::Int(1) => {}
            Frame::Error(e) => error_reply(shared, lock, "rw release", &e),
            other => shared.violation(format!("{owner}: rw release replied {other:?}")),
        }
        Ok(())
    })();
    let mut end = bound.min(released.unwrap_or(bound));
    if outcome.is_err() && session {
        if let Some(killed) = shared.kills.lock().unwrap().get(&c.id) {
            end = end.min(*killed);
        }
    }
    turn.settle(c, (sent, start, end), granted_for_sure, history);
    outcome?;
    c.check_in_step()
}

/// Redisson's `suffixName(K, x)`.
fn suffixed(key: &str, suffix: &str) -> String {
    if key.contains('{') {
        format!("{key}:{suffix}")
    } else {
        format!("{{{key}}}:{suffix}")
    }
}

/// Redisson's read or write `tryLock(wait, lease)`: its script, polled until the wait
/// is over; once it holds, works a little and unlocks with its script.
fn redisson_cycle(turn: Turn, c: &mut Conn, rng: &mut Rng, history: &mut History) -> CycleResult {
    let (shared, lock, owner, write) = (turn.shared, turn.lock, turn.owner, turn.write);
    let lease = rng.range(150, 2000).to_string();
    let write_field = format!("{owner}:write");
    let timeouts = suffixed(lock, owner) + ":rwlock_timeout";
    let give_up = Instant::now() + Duration::from_millis(rng.range(20, 1500));
    c.start_timeline();
    let (sent, start) = loop {
        shared.count("redisson rw tryLock");
        let sent = Instant::now();
        let reply = match write {
            true => eval(
                c,
                WRITE_LOCK,
                &[lock.as_bytes()],
                &[lease.as_bytes(), write_field.as_bytes()],
            )?,
            false => eval(
                c,
                READ_LOCK,
                &[lock.as_bytes(), timeouts.as_bytes()],
                &[lease.as_bytes(), owner.as_bytes(), write_field.as_bytes()],
            )?,
        };
        match reply {
            Frame::Bulk(None) => break (sent, Instant::now()),
            Frame::Int(ttl) => {
                if Instant::now() >= give_up {
                    return not_granted(shared, c, "redisson rw gave up");
                }
                thread::sleep(Duration::from_millis(ttl.clamp(1, 20) as u64));
            }
            other => return try_failed(shared, c, lock, "redisson rw tryLock", other),
        }
    };
    shared.count(if write {
        "redisson write grant"
    } else {
        "redisson read grant"
    });
    let granted_for_sure = acknowledged(shared, c)?;
    // In a cluster Redisson publishes on sharded channels.
    let publish: &[u8] = if shared.cluster {
        b"spublish"
    } else {
        b"publish"
    };
    let bound = sent + Duration::from_millis(lease.parse().unwrap_or(150));
    thread::sleep(Duration::from_millis(rng.below(30)));
    let channel = helper_key("redisson_rwlock", lock.as_bytes());
    let latch = format!(
        "{}:{owner}",
        String::from_utf8_lossy(&helper_key("redisson_unlock_latch", lock.as_bytes()))
    );
    let released = Instant::now();
    let reply = match write {
        true => eval(
            c,
            WRITE_UNLOCK,
            &[lock.as_bytes(), &channel, latch.as_bytes()],
            &[b"1", b"30000", write_field.as_bytes(), publish, b"1000"],
        ),
        false => {
            let key_prefix = suffixed(lock, "x");
            let key_prefix = key_prefix.trim_end_matches(":x");
            let keys: [&[u8]; 5] = [
                lock.as_bytes(),
                &channel,
                timeouts.as_bytes(),
                key_prefix.as_bytes(),
                latch.as_bytes(),
            ];
            eval(
                c,
                READ_UNLOCK,
                &keys,
                &[b"0", owner.as_bytes(), publish, b"1000"],
            )
        }
    };
    let end = bound.min(released);
    turn.settle(c, (sent, start, end), granted_for_sure, history);
    match reply? {
        Frame::Int(_) => {}
        // The lease ran out first.
        Frame::Bulk(None) => shared.count("redisson rw unlock: not held"),
        Frame::Error(e) => error_reply(shared, lock, "redisson rw unlock", &e),
        other => shared.violation(format!("redisson rw unlock replied {other:?}")),
    }
    c.check_in_step()
}
