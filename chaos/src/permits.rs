//! Semaphore load: module clients taking permits (`RSEM.ACQUIRE`/`RSEM.RELEASE`, and
//! leased ones with `RSEM.LEASE`/`RSEM.RENEW`/`RSEM.RETURN`, with `BLOCK`, `SESSION`,
//! `REQ`) and Redisson-style clients running Redisson's semaphore and permit-expirable
//! semaphore scripts, on semaphores of one permit each. One permit makes a semaphore a
//! mutex: every hold goes into the history under the semaphore's name and its own
//! owner, and the lock checker (`history::mutual_exclusion`) finds two that overlap.
//!
//! A hold's interval is the one in which the permit was certainly taken, as for locks:
//! from the grant's reply to the first of the give-back sent, the lease's end counted from
//! the send of the call that set it (the server counts from later), and the connection's
//! kill for a SESSION lease. Plain permits have no lease: a give-back whose reply is lost
//! is resent with the same `REQ` id (applied at most once), so a fault does not leak the
//! permit for the rest of the phase; Redisson's release has no id and is not resent.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rlock_module_tests::helper_key;
use rlock_module_tests::redisson::{
    PERMIT_RELEASE, PERMIT_TRY_ACQUIRE, SEMAPHORE_RELEASE, SEMAPHORE_TRY_ACQUIRE,
};

use crate::history::{History, Hold};
use crate::resp::{Conn, ConnError, Frame};
use crate::rng::Rng;
use crate::workload::{acknowledged, connection, drop_connection, error_reply, Shared};

/// The semaphore of plain permits (`RSemaphore`).
pub const PLAIN: &str = "sem:plain";
/// The semaphore of leased permits (`RPermitExpirableSemaphore`).
pub const LEASED: &str = "sem:leased";

/// Redisson's score for a permit without lease.
const NO_LEASE_SCORE: &[u8] = b"922337203685477";

/// One client: module calls, or with `redisson` Redisson's scripts. Returns its holds.
pub fn client(shared: Arc<Shared>, index: usize, mut rng: Rng, redisson: bool) -> History {
    let mut history = History::default();
    let mut conn: Option<Conn> = None;
    let mut seq = 0u64;
    while !shared.stop.load(Ordering::SeqCst) {
        seq += 1;
        let leased = rng.chance(50);
        let key = if leased { LEASED } else { PLAIN };
        let prefix = if redisson { "js" } else { "sm" };
        let owner = format!("{prefix}{index}-{seq}");
        let Some(c) = connection(&shared, &mut conn, key) else {
            thread::sleep(Duration::from_millis(20));
            continue;
        };
        let result = (|| -> Result<(), ConnError> {
            // One permit each, set once: `TRYSETPERMITS` changes nothing after the first.
            c.call(&[b"RSEM.TRYSETPERMITS", key.as_bytes(), b"1"])?;
            match (redisson, leased) {
                (false, false) => module_plain(&shared, c, &owner, &mut rng, &mut history),
                (false, true) => module_lease(&shared, c, &owner, &mut rng, &mut history),
                (true, false) => redisson_plain(&shared, c, &owner, &mut rng, &mut history),
                (true, true) => redisson_lease(&shared, c, &owner, &mut rng, &mut history),
            }
        })();
        match result {
            Ok(()) => {}
            Err(ConnError::Io(_)) | Err(ConnError::Moved) => {
                shared.count("semaphore connection lost or moved");
                drop_connection(&shared, &mut conn);
                thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                shared.violation(format!("semaphore client {owner} on {key}: {e}"));
                drop_connection(&shared, &mut conn);
            }
        }
    }
    drop_connection(&shared, &mut conn);
    history
}

/// An error reply to a semaphore call: counted if a fault explains it; whether the
/// connection should be given up (the server stopped taking writes).
fn failed(shared: &Shared, c: &mut Conn, what: &str, e: &str) -> Result<(), ConnError> {
    error_reply(shared, "semaphore", what, e);
    c.take_timeline();
    c.check_in_step()?;
    if e.starts_with("READONLY") || e.starts_with("LOADING") {
        return Err(ConnError::Moved);
    }
    Ok(())
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `RSEM.ACQUIRE` (sometimes blocking, sometimes with `REQ`), a short hold, and
/// `RSEM.RELEASE` with a `REQ` id, resent once the connection is back if its reply was lost.
fn module_plain(
    shared: &Shared,
    c: &mut Conn,
    owner: &str,
    rng: &mut Rng,
    history: &mut History,
) -> Result<(), ConnError> {
    let block = rng.chance(60).then(|| rng.range(20, 1500).to_string());
    // Always with an id where the server takes one: a call cut by a fault is sent again
    // to learn whether it took the permit, which has no lease to end it otherwise.
    let req = shared.req.then(|| format!("{owner}-a"));
    let mut args: Vec<&[u8]> = vec![b"RSEM.ACQUIRE", PLAIN.as_bytes()];
    if let Some(block) = &block {
        args.extend([&b"BLOCK"[..], block.as_bytes()]);
    }
    if let Some(id) = &req {
        args.extend([&b"REQ"[..], id.as_bytes()]);
    }
    shared.count("sem acquire");
    if block.is_some() {
        shared
            .waiting
            .lock()
            .unwrap()
            .insert(c.id, PLAIN.to_string());
    }
    c.start_timeline();
    let sent = Instant::now();
    let reply = c.call(&args);
    shared.waiting.lock().unwrap().remove(&c.id);
    if let (Err(ConnError::Io(_)), Some(id)) = (&reply, &req) {
        recover_acquire(shared, owner, id, rng, history);
    }
    match reply? {
        Frame::Int(1) => {}
        f if f.is_null() => {
            shared.count("sem acquire null");
            c.take_timeline();
            return c.check_in_step();
        }
        Frame::Error(e) => return failed(shared, c, "sem acquire", &e),
        other => {
            shared.violation(format!("{owner}: RSEM.ACQUIRE replied {other:?}"));
            c.take_timeline();
            return c.check_in_step();
        }
    }
    shared.count("sem grant");
    let start = Instant::now();
    let granted_for_sure = acknowledged(shared, c)?;
    thread::sleep(Duration::from_millis(rng.below(20)));
    let released = Instant::now();
    let release_id = format!("{owner}-r");
    let release: Vec<&[u8]> = match shared.req {
        true => vec![
            b"RSEM.RELEASE",
            PLAIN.as_bytes(),
            b"REQ",
            release_id.as_bytes(),
        ],
        false => vec![b"RSEM.RELEASE", PLAIN.as_bytes()],
    };
    shared.count("sem release");
    let outcome = match c.call(&release) {
        Ok(Frame::Int(_)) => Ok(()),
        Ok(Frame::Error(e)) => {
            error_reply(shared, PLAIN, "sem release", &e);
            Ok(())
        }
        Ok(other) => {
            shared.violation(format!("{owner}: RSEM.RELEASE replied {other:?}"));
            Ok(())
        }
        Err(e) => Err(e),
    };
    if granted_for_sure {
        history.add(Hold {
            lock: PLAIN.to_string(),
            owner: owner.to_string(),
            asked: sent,
            start,
            end: released,
            token: None,
            shared: false,
            timeline: c.take_timeline(),
        });
    } else {
        shared.count("hold not checked: its grant was not acknowledged");
        c.take_timeline();
    }
    if let Err(e) = outcome {
        // Resent on a new connection, once: a permit has no lease to end it.
        if shared.req {
            resend_release(shared, &release);
        }
        return Err(e);
    }
    c.check_in_step()
}

/// An `RSEM.ACQUIRE` whose reply was lost: sent again with its `REQ` id (no wait) on a
/// fresh connection. `1` means the permit is taken (by the first call, or by this one):
/// certainly held from that reply, and given back; null, that neither took it.
fn recover_acquire(shared: &Shared, owner: &str, req: &str, rng: &mut Rng, history: &mut History) {
    let again: [&[u8]; 4] = [b"RSEM.ACQUIRE", PLAIN.as_bytes(), b"REQ", req.as_bytes()];
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(50));
        let mut fresh = None;
        let Some(c) = connection(shared, &mut fresh, PLAIN) else {
            continue;
        };
        c.start_timeline();
        let sent = Instant::now();
        let reply = c.call(&again);
        match reply {
            Ok(Frame::Int(1)) => {
                shared.count("sem acquire recovered by its REQ id");
                let start = Instant::now();
                let for_sure = acknowledged(shared, c).unwrap_or(false);
                thread::sleep(Duration::from_millis(rng.below(10)));
                let release_id = format!("{owner}-r");
                let release: [&[u8]; 4] = [
                    b"RSEM.RELEASE",
                    PLAIN.as_bytes(),
                    b"REQ",
                    release_id.as_bytes(),
                ];
                let released = Instant::now();
                let done = matches!(c.call(&release), Ok(Frame::Int(_)));
                if for_sure {
                    history.add(Hold {
                        lock: PLAIN.to_string(),
                        owner: owner.to_string(),
                        asked: sent,
                        start,
                        end: released,
                        token: None,
                        shared: false,
                        timeline: c.take_timeline(),
                    });
                }
                drop_connection(shared, &mut fresh);
                if !done {
                    resend_release(shared, &release);
                }
                return;
            }
            Ok(f) if f.is_null() => {
                shared.count("sem acquire cut by a fault: not granted");
                drop_connection(shared, &mut fresh);
                return;
            }
            _ => drop_connection(shared, &mut fresh),
        }
    }
    shared.count("sem acquire cut by a fault: unknown, the permit may leak");
}

/// A give-back whose reply was lost, sent again (same `REQ` id) on a fresh connection.
fn resend_release(shared: &Shared, release: &[&[u8]]) {
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(50));
        let mut fresh = None;
        let Some(c) = connection(shared, &mut fresh, PLAIN) else {
            continue;
        };
        let done = matches!(c.call(release), Ok(Frame::Int(_)));
        drop_connection(shared, &mut fresh);
        if done {
            shared.count("sem release resent");
            return;
        }
    }
    shared.count("sem release lost: the permit may leak");
}

/// `RSEM.LEASE` (sometimes blocking, with `SESSION`, with `REQ`), a renewal now and then,
/// and `RSEM.RETURN`.
fn module_lease(
    shared: &Shared,
    c: &mut Conn,
    owner: &str,
    rng: &mut Rng,
    history: &mut History,
) -> Result<(), ConnError> {
    let lease = rng.range(150, 2000);
    let lease_text = lease.to_string();
    let block = rng.chance(60).then(|| rng.range(20, 1500).to_string());
    let session = rng.chance(30);
    let req = (shared.req && rng.chance(50)).then(|| format!("{owner}-l"));
    let mut args: Vec<&[u8]> = vec![
        b"RSEM.LEASE",
        LEASED.as_bytes(),
        b"LEASE",
        lease_text.as_bytes(),
    ];
    if let Some(block) = &block {
        args.extend([&b"BLOCK"[..], block.as_bytes()]);
    }
    if session {
        args.push(b"SESSION");
    }
    if let Some(id) = &req {
        args.extend([&b"REQ"[..], id.as_bytes()]);
    }
    shared.count("sem lease");
    if block.is_some() {
        shared
            .waiting
            .lock()
            .unwrap()
            .insert(c.id, LEASED.to_string());
    }
    c.start_timeline();
    let sent = Instant::now();
    let reply = c.call(&args);
    shared.waiting.lock().unwrap().remove(&c.id);
    let id = match reply? {
        Frame::Array(Some(ids)) if ids.len() == 1 => match ids[0].text() {
            Some(id) if id.len() == 32 => id,
            _ => {
                shared.violation(format!("{owner}: RSEM.LEASE replied the id {:?}", ids[0]));
                c.take_timeline();
                return c.check_in_step();
            }
        },
        f if f.is_null() => {
            shared.count("sem lease null");
            c.take_timeline();
            return c.check_in_step();
        }
        Frame::Error(e) => return failed(shared, c, "sem lease", &e),
        other => {
            shared.violation(format!("{owner}: RSEM.LEASE replied {other:?}"));
            c.take_timeline();
            return c.check_in_step();
        }
    };
    shared.count("sem lease grant");
    let start = Instant::now();
    let mut bound = sent + Duration::from_millis(lease);
    let granted_for_sure = acknowledged(shared, c)?;
    let mut returned: Option<Instant> = None;
    let outcome = (|| -> Result<(), ConnError> {
        if rng.chance(30) {
            let renewal = rng.range(150, 2000);
            let text = renewal.to_string();
            shared.count("sem renew");
            let renew_sent = Instant::now();
            bound = bound.min(renew_sent + Duration::from_millis(renewal));
            let args: [&[u8]; 5] = [
                b"RSEM.RENEW",
                LEASED.as_bytes(),
                id.as_bytes(),
                b"LEASE",
                text.as_bytes(),
            ];
            match c.call(&args)? {
                Frame::Int(1) => {
                    if acknowledged(shared, c)? {
                        bound = renew_sent + Duration::from_millis(renewal);
                    }
                }
                Frame::Int(0) => shared.count("sem renew lost"),
                Frame::Error(e) => error_reply(shared, LEASED, "sem renew", &e),
                other => shared.violation(format!("{owner}: RSEM.RENEW replied {other:?}")),
            }
        }
        thread::sleep(Duration::from_millis(rng.below(30)));
        shared.count("sem return");
        returned = Some(Instant::now());
        let give: [&[u8]; 3] = [b"RSEM.RETURN", LEASED.as_bytes(), id.as_bytes()];
        match c.call(&give)? {
            Frame::Int(1) => {}
            Frame::Int(0) => shared.count("sem return: not leased (the lease ended)"),
            Frame::Error(e) => error_reply(shared, LEASED, "sem return", &e),
            other => shared.violation(format!("{owner}: RSEM.RETURN replied {other:?}")),
        }
        Ok(())
    })();
    let mut end = bound.min(returned.unwrap_or(bound));
    if outcome.is_err() && session {
        if let Some(killed) = shared.kills.lock().unwrap().get(&c.id) {
            end = end.min(*killed);
        }
    }
    if granted_for_sure {
        history.add(Hold {
            lock: LEASED.to_string(),
            owner: owner.to_string(),
            asked: sent,
            start,
            end,
            token: None,
            shared: false,
            timeline: c.take_timeline(),
        });
    } else {
        shared.count("hold not checked: its grant was not acknowledged");
        c.take_timeline();
    }
    outcome?;
    c.check_in_step()
}

/// The channel Redisson publishes on, and the publish command it uses.
fn channel(shared: &Shared, key: &str) -> (Vec<u8>, &'static [u8]) {
    let publish: &[u8] = if shared.cluster {
        b"spublish"
    } else {
        b"publish"
    };
    (helper_key("redisson_sc", key.as_bytes()), publish)
}

/// Redisson's `tryAcquire(wait)`: its script, polled until the wait is over; once it
/// holds, works a little and releases with its script.
fn redisson_plain(
    shared: &Shared,
    c: &mut Conn,
    owner: &str,
    rng: &mut Rng,
    history: &mut History,
) -> Result<(), ConnError> {
    let give_up = Instant::now() + Duration::from_millis(rng.range(20, 1500));
    c.start_timeline();
    let (sent, start) = loop {
        shared.count("redisson sem tryAcquire");
        let sent = Instant::now();
        let args: [&[u8]; 5] = [
            b"EVAL",
            SEMAPHORE_TRY_ACQUIRE.as_bytes(),
            b"1",
            PLAIN.as_bytes(),
            b"1",
        ];
        match c.call(&args)? {
            Frame::Int(1) => break (sent, Instant::now()),
            Frame::Int(0) => {
                if Instant::now() >= give_up {
                    shared.count("redisson sem gave up");
                    c.take_timeline();
                    return c.check_in_step();
                }
                thread::sleep(Duration::from_millis(5));
            }
            Frame::Error(e) => return failed(shared, c, "redisson sem tryAcquire", &e),
            other => {
                shared.violation(format!("redisson sem tryAcquire replied {other:?}"));
                c.take_timeline();
                return c.check_in_step();
            }
        }
    };
    shared.count("redisson sem grant");
    let granted_for_sure = acknowledged(shared, c)?;
    thread::sleep(Duration::from_millis(rng.below(20)));
    let (channel, publish) = channel(shared, PLAIN);
    let released = Instant::now();
    let reply = c.call(&[
        b"EVAL",
        SEMAPHORE_RELEASE.as_bytes(),
        b"2",
        PLAIN.as_bytes(),
        &channel,
        b"1",
        publish,
    ]);
    if granted_for_sure {
        history.add(Hold {
            lock: PLAIN.to_string(),
            owner: owner.to_string(),
            asked: sent,
            start,
            end: released,
            token: None,
            shared: false,
            timeline: c.take_timeline(),
        });
    } else {
        shared.count("hold not checked: its grant was not acknowledged");
        c.take_timeline();
    }
    match reply? {
        f if f.is_null() => {}
        Frame::Error(e) => error_reply(shared, PLAIN, "redisson sem release", &e),
        other => shared.violation(format!("redisson sem release replied {other:?}")),
    }
    c.check_in_step()
}

/// Redisson's permit-expirable `tryAcquire(wait, lease)` with a client-made id: its
/// script, polled until the wait is over; then its `release(id)`.
fn redisson_lease(
    shared: &Shared,
    c: &mut Conn,
    owner: &str,
    rng: &mut Rng,
    history: &mut History,
) -> Result<(), ConnError> {
    let lease = rng.range(150, 2000);
    let id: Vec<u8> = (0..16).map(|_| rng.below(256) as u8).collect();
    let (channel, publish) = channel(shared, LEASED);
    let zset = format!("{{{LEASED}}}:timeout");
    let give_up = Instant::now() + Duration::from_millis(rng.range(20, 1500));
    c.start_timeline();
    let (sent, start) = loop {
        shared.count("redisson permit tryAcquire");
        let sent = Instant::now();
        let now = unix_ms();
        let (deadline, now) = ((now + lease as i64).to_string(), now.to_string());
        let args: [&[u8]; 12] = [
            b"EVAL",
            PERMIT_TRY_ACQUIRE.as_bytes(),
            b"3",
            LEASED.as_bytes(),
            zset.as_bytes(),
            &channel,
            b"1",
            deadline.as_bytes(),
            now.as_bytes(),
            NO_LEASE_SCORE,
            publish,
            &id,
        ];
        match c.call(&args)? {
            f if f.text().as_deref() == Some("OK") => break (sent, Instant::now()),
            f if f.is_null() || matches!(&f, Frame::Bulk(Some(_))) => {
                if Instant::now() >= give_up {
                    shared.count("redisson permit gave up");
                    c.take_timeline();
                    return c.check_in_step();
                }
                thread::sleep(Duration::from_millis(5));
            }
            Frame::Error(e) => return failed(shared, c, "redisson permit tryAcquire", &e),
            other => {
                shared.violation(format!("redisson permit tryAcquire replied {other:?}"));
                c.take_timeline();
                return c.check_in_step();
            }
        }
    };
    shared.count("redisson permit grant");
    let granted_for_sure = acknowledged(shared, c)?;
    // Its deadline is the client's clock at the send plus the lease: the module's timer
    // takes the permit back then.
    let bound = sent + Duration::from_millis(lease);
    thread::sleep(Duration::from_millis(rng.below(30)));
    let released = Instant::now();
    let now = unix_ms().to_string();
    let reply = c.call(&[
        b"EVAL",
        PERMIT_RELEASE.as_bytes(),
        b"3",
        LEASED.as_bytes(),
        &channel,
        zset.as_bytes(),
        &id,
        b"1",
        now.as_bytes(),
        publish,
    ]);
    if granted_for_sure {
        history.add(Hold {
            lock: LEASED.to_string(),
            owner: owner.to_string(),
            asked: sent,
            start,
            end: bound.min(released),
            token: None,
            shared: false,
            timeline: c.take_timeline(),
        });
    } else {
        shared.count("hold not checked: its grant was not acknowledged");
        c.take_timeline();
    }
    match reply? {
        Frame::Int(1) => {}
        Frame::Int(0) => shared.count("redisson permit release: the lease had ended"),
        Frame::Error(e) => error_reply(shared, LEASED, "redisson permit release", &e),
        other => shared.violation(format!("redisson permit release replied {other:?}")),
    }
    c.check_in_step()
}
