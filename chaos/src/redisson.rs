//! Clients that do what Redisson does, beside the module's clients on the same locks:
//! Redisson's tryLock and unlock scripts, and a wait on the lock's unlock channel (or
//! the holder's TTL) between tries. Their holds go into the same history, so the
//! checker sees a Redisson client and a module client holding one lock at once; and
//! their subscriptions make the module leave freed locks to them now and then (see
//! the module's `core::sharing`), which the load then exercises under faults.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rlock_module_tests::redisson::{TRY_LOCK, UNLOCK};
use rlock_module_tests::unlock_channel;

use crate::history::{History, Hold};
use crate::resp::{Conn, ConnError, Frame};
use crate::rng::Rng;
use crate::scripts::eval;
use crate::workload::{error_reply, not_granted, try_failed, ClientConn, Shared};

/// Unlock messages heard, and the condition a waiting client sleeps on.
type Wakeups = Arc<(Mutex<u64>, Condvar)>;

/// One Redisson-style client: returns the holds it saw.
pub fn client(shared: Arc<Shared>, index: usize, mut rng: Rng, locks: Vec<String>) -> History {
    let wakeups: Wakeups = Arc::new((Mutex::new(0), Condvar::new()));
    let listener = {
        let (shared, locks, wakeups) = (shared.clone(), locks.clone(), wakeups.clone());
        thread::spawn(move || listen(&shared, &locks, &wakeups))
    };
    let mut history = History::default();
    ClientConn::until_stopped(
        &shared,
        Some("redisson connection lost or moved"),
        |seq, conn| {
            let lock = rng.pick(&locks).clone();
            let owner = format!("r{index}-{seq}");
            let who = || format!("redisson client r{index} on {lock}");
            conn.cycle(&lock, who, |c| {
                cycle(&shared, c, &lock, &owner, &mut rng, &wakeups, &mut history)
            });
        },
    );
    let _ = listener.join();
    history
}

/// Redisson's `tryLock(wait, lease)`: tries, and between tries waits for an unlock
/// message or the holder's TTL, until the wait is over; once it holds, works a little
/// and unlocks.
fn cycle(
    shared: &Shared,
    c: &mut Conn,
    lock: &str,
    owner: &str,
    rng: &mut Rng,
    wakeups: &Wakeups,
    history: &mut History,
) -> Result<(), ConnError> {
    let lease = rng.range(150, 2000);
    let lease_text = lease.to_string();
    let give_up = Instant::now() + Duration::from_millis(rng.range(20, 1500));
    c.start_timeline();
    let (sent, start) = loop {
        let heard = *wakeups.0.lock().unwrap();
        shared.count("redisson tryLock");
        let sent = Instant::now();
        let args = [lease_text.as_bytes(), owner.as_bytes()];
        let reply = eval(c, TRY_LOCK, &[lock.as_bytes()], &args)?;
        match reply {
            Frame::Bulk(None) => break (sent, Instant::now()),
            Frame::Int(ttl) => {
                let now = Instant::now();
                if now >= give_up {
                    return not_granted(shared, c, "redisson gave up");
                }
                let wait = (give_up - now).min(Duration::from_millis(ttl.clamp(1, 1000) as u64));
                let (count, condvar) = &**wakeups;
                let guard = count.lock().unwrap();
                let _ = condvar.wait_timeout_while(guard, wait, |n| *n == heard);
            }
            other => return try_failed(shared, c, lock, "redisson tryLock", other),
        }
    };
    shared.count("redisson grant");
    let bound = sent + Duration::from_millis(lease);
    thread::sleep(Duration::from_millis(rng.below(30)));
    let channel = unlock_channel(lock.as_bytes());
    let released = Instant::now();
    let args: [&[u8]; 3] = [b"0", lease_text.as_bytes(), owner.as_bytes()];
    let reply = eval(c, UNLOCK, &[lock.as_bytes(), &channel], &args);
    // The unlock once sent may have run, whatever came back: the hold may end there.
    history.add(Hold {
        lock: lock.to_string(),
        owner: owner.to_string(),
        asked: sent,
        start,
        end: bound.min(released),
        token: None,
        shared: false,
        acknowledged: true,
        timeline: c.take_timeline(),
    });
    match reply? {
        Frame::Int(1) => {}
        // The lease ran out first.
        Frame::Bulk(None) => shared.count("redisson unlock: not held"),
        Frame::Error(e) => error_reply(shared, lock, "redisson unlock", &e),
        other => shared.violation(format!("redisson unlock replied {other:?}")),
    }
    c.check_in_step()
}

/// Listens on every lock's unlock channel, as Redisson's pub/sub connection does, and
/// wakes the waiting client on each message; follows the primary when it moves.
fn listen(shared: &Shared, locks: &[String], wakeups: &Wakeups) {
    let channels: Vec<Vec<u8>> = locks.iter().map(|l| unlock_channel(l.as_bytes())).collect();
    while !shared.stop.load(Ordering::SeqCst) {
        let port = shared.primary.load(Ordering::SeqCst);
        let Ok(mut sub) = Conn::connect(port, Duration::from_millis(200)) else {
            thread::sleep(Duration::from_millis(50));
            continue;
        };
        let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
        args.extend(channels.iter().map(Vec::as_slice));
        if sub.send(&args).is_err() {
            continue;
        }
        while !shared.stop.load(Ordering::SeqCst) && shared.primary.load(Ordering::SeqCst) == port {
            match sub.read() {
                Ok(Frame::Array(Some(parts)))
                    if parts.first().and_then(Frame::text).as_deref() == Some("message") =>
                {
                    let (count, condvar) = &**wakeups;
                    *count.lock().unwrap() += 1;
                    condvar.notify_all();
                }
                Ok(_) | Err(ConnError::NoReply) => {}
                Err(_) => break,
            }
        }
    }
}
