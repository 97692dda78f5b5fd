//! 32 clients, each on its own connection, make random acquire / re-entry / BLOCK /
//! release calls on one lock, with leases longer than their holds. Whoever holds
//! the lock counts itself in and out of a shared counter: it must never see another.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

const CLIENTS: usize = 32;
const RUN_FOR: Duration = Duration::from_secs(6);
const KEY: &str = "mutex";

#[derive(Default)]
struct Shared {
    inside: AtomicI32,
    violations: AtomicI32,
    entries: AtomicI64,
    blocked_entries: AtomicI64,
    session_drops: AtomicI64,
    last_token: AtomicI64,
    token_errors: AtomicI64,
    stop: AtomicBool,
    /// Per client: when its current call started (ms since the run began), or -1.
    in_call: Vec<AtomicI64>,
    /// Per client: the call it is in.
    what: Vec<std::sync::Mutex<String>>,
    epoch: Option<Instant>,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            in_call: (0..CLIENTS).map(|_| AtomicI64::new(-1)).collect(),
            what: (0..CLIENTS).map(|_| Default::default()).collect(),
            epoch: Some(Instant::now()),
            ..Shared::default()
        }
    }

    fn now_ms(&self) -> i64 {
        self.epoch.expect("epoch").elapsed().as_millis() as i64
    }
}

fn int(r: &Result<Value, String>) -> Option<i64> {
    match r {
        Ok(Value::Int(i)) => Some(*i),
        _ => None,
    }
}

fn client(server: &Server, me: usize, seed: u64, shared: &Shared) -> Result<(), String> {
    let flavor = server.flavor;
    // A new owner after each hang-up: a re-entry by the same owner on a new connection
    // before the server saw the old one close would be swept away with the session.
    let mut generation = 0;
    let mut owner = format!("client-{me}-{generation}");
    let mut rng = StdRng::seed_from_u64(seed ^ (me as u64).wrapping_mul(0x9E37_79B9));
    let mut con = server.conn();
    con.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    while !shared.stop.load(Ordering::Relaxed) {
        let session = rng.random_bool(0.3);
        let blocking = rng.random_bool(0.6);
        let mut args = vec![
            "RLOCK.ACQUIRE".to_string(),
            KEY.into(),
            owner.clone(),
            "LEASE".into(),
            "10000".into(),
            "TOKEN".into(),
        ];
        if blocking {
            args.push("BLOCK".into());
            args.push(if rng.random_bool(0.2) {
                "0".into()
            } else {
                rng.random_range(1..60).to_string()
            });
        }
        if session {
            args.push("SESSION".into());
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        *shared.what[me].lock().expect("lock") = args.join(" ");
        shared.in_call[me].store(shared.now_ms(), Ordering::SeqCst);
        let r = call(&mut con, &refs);
        shared.in_call[me].store(-1, Ordering::SeqCst);
        let token = match &r {
            Ok(Value::Nil) => {
                if !blocking {
                    thread::sleep(Duration::from_micros(rng.random_range(0..500)));
                }
                continue;
            }
            Ok(Value::Int(t)) => *t,
            other => {
                return Err(format!(
                    "{flavor}: {owner}: `{}` -> {other:?}",
                    args.join(" ")
                ))
            }
        };
        // In: nobody else may be inside.
        let before = shared.inside.fetch_add(1, Ordering::SeqCst);
        if before != 0 {
            shared.violations.fetch_add(1, Ordering::SeqCst);
        }
        shared.entries.fetch_add(1, Ordering::Relaxed);
        if blocking {
            shared.blocked_entries.fetch_add(1, Ordering::Relaxed);
        }
        // Fencing: each hold's token is above every earlier hold's.
        let last = shared.last_token.swap(token, Ordering::SeqCst);
        if token <= last {
            shared.token_errors.fetch_add(1, Ordering::SeqCst);
        }
        let mut count = 1;
        for _ in 0..rng.random_range(0..3) {
            let r = call(&mut con, &["RLOCK.ACQUIRE", KEY, &owner, "LEASE", "10000"]);
            count += 1;
            if int(&r) != Some(count) {
                shared.violations.fetch_add(1, Ordering::SeqCst);
                return Err(format!("{flavor}: {owner}: re-entry {count} -> {r:?}"));
            }
        }
        if rng.random_bool(0.5) {
            thread::sleep(Duration::from_micros(rng.random_range(0..2000)));
        }
        let after = shared.inside.fetch_sub(1, Ordering::SeqCst);
        if after != 1 {
            shared.violations.fetch_add(1, Ordering::SeqCst);
        }
        // Out: a session holder sometimes just hangs up instead of releasing.
        if session && rng.random_bool(0.1) {
            shared.session_drops.fetch_add(1, Ordering::Relaxed);
            drop(con);
            generation += 1;
            owner = format!("client-{me}-{generation}");
            con = server.conn();
            con.set_read_timeout(Some(Duration::from_secs(5)))
                .map_err(|e| e.to_string())?;
            continue;
        }
        for n in (0..count).rev() {
            let r = call(&mut con, &["RLOCK.RELEASE", KEY, &owner]);
            let want = if n == 0 { 1 } else { 0 };
            if int(&r) != Some(want) {
                return Err(format!(
                    "{flavor}: {owner}: release with {} holds left -> {r:?}",
                    n + 1
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn thirty_two_clients_never_hold_the_lock_together() {
    let seed = test_seed();
    for (flavor, server) in each_server() {
        let shared = Arc::new(Shared::new());
        let start = Instant::now();
        let server_ref = &server;
        let (errors, stall): (Vec<String>, Option<String>) = thread::scope(|s| {
            let handles: Vec<_> = (0..CLIENTS)
                .map(|me| {
                    let shared = &shared;
                    let server = &server;
                    s.spawn(move || {
                        let r = client(server, me, seed, shared);
                        if r.is_err() {
                            shared.stop.store(true, Ordering::Relaxed);
                        }
                        r
                    })
                })
                .collect();
            // Watch for a stall, and say what the server looked like then.
            let mut stall = None;
            while start.elapsed() < RUN_FOR && !shared.stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(100));
                let now = shared.now_ms();
                let stuck: Vec<(i64, String)> = shared
                    .in_call
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (i, t.load(Ordering::SeqCst)))
                    .filter(|(_, t)| *t >= 0 && now - *t > 1500)
                    .map(|(i, t)| (now - t, shared.what[i].lock().expect("lock").clone()))
                    .collect();
                if !stuck.is_empty() && stall.is_none() {
                    let mut c = server.conn();
                    stall = Some(format!(
                        "clients {stuck:?} waited > 1.5 s on an acquire (BLOCK is at most 60 ms \
                         or 0): RLOCK.INFO {:?}; HGETALL {:?}; PTTL {}; INFO rlock {:?}; CLIENT LIST {}",
                        lock_info(&mut c, KEY),
                        holders(&mut c, KEY),
                        pttl(&mut c, KEY.as_bytes()),
                        rstats(server_ref),
                        match call(&mut c, &["CLIENT", "LIST"]) {
                            Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).to_string(),
                            other => format!("{other:?}"),
                        }
                    ));
                }
            }
            shared.stop.store(true, Ordering::Relaxed);
            let errors = handles
                .into_iter()
                .filter_map(|h| h.join().expect("client thread").err())
                .collect();
            (errors, stall)
        });
        let took = start.elapsed();
        let s = rstats(&server);
        eprintln!(
            "{flavor}: seed {seed}: {} holds ({} after BLOCK, {} session hang-ups) in {took:?}; \
             INFO rlock {s:?}",
            shared.entries.load(Ordering::Relaxed),
            shared.blocked_entries.load(Ordering::Relaxed),
            shared.session_drops.load(Ordering::Relaxed),
        );
        assert!(
            stall.is_none(),
            "{flavor}: seed {seed}: STALL: {}",
            stall.unwrap_or_default()
        );
        assert!(errors.is_empty(), "{flavor}: seed {seed}: {errors:?}");
        assert_eq!(
            shared.violations.load(Ordering::SeqCst),
            0,
            "{flavor}: seed {seed}: mutual exclusion violated"
        );
        assert_eq!(
            shared.token_errors.load(Ordering::SeqCst),
            0,
            "{flavor}: seed {seed}: a fencing token did not increase"
        );
        assert!(
            shared.entries.load(Ordering::Relaxed) >= 300,
            "{flavor}: only {} holds in {RUN_FOR:?}",
            shared.entries.load(Ordering::Relaxed)
        );
        assert!(s["handoffs"] >= 100, "{flavor}: few hand-offs: {s:?}");
        assert!(
            s["session_releases"] >= 1,
            "{flavor}: no session release: {s:?}"
        );
        assert!(
            took < RUN_FOR + Duration::from_secs(10),
            "{flavor}: clients took {took:?} to stop"
        );
        let mut c = server.conn();
        let ok = wait_until(Duration::from_secs(5), || rstat(&server, "blocked") == 0);
        assert!(ok, "{flavor}: waiters left: {:?}", rstats(&server));
        let free = wait_until(Duration::from_secs(5), || holders(&mut c, KEY).is_empty());
        assert!(
            free,
            "{flavor}: the lock is still held after every client released: {:?}",
            holders(&mut c, KEY)
        );
    }
}
