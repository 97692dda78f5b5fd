//! The keyspace churn: nothing the module keeps outlives what it was for.
//!
//! A keyspace polluted with every wrong type under the lock names and every helper name
//! (Redisson's queue, timeout and token keys, the semaphore's `{K}:timeout`, its channel
//! name), in db 0 and db 1; then random module calls from many connections at once, with
//! `CLIENT KILL` and `CLIENT UNBLOCK` aimed at each other, `MULTI`/`EXEC`, `EVAL`, RESP3,
//! `SWAPDB`, `MOVE`, `RENAME` and `FLUSHDB` among them. Then every connection closes, every
//! deadline passes and `FLUSHALL` runs: the module must track no lock, block no client,
//! and hold no more of its own memory than a little over what it held before the load.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rlock_module_tests::{Flavor, Server};

use crate::fuzz::{self, Outcome, KEYS};
use crate::resp::{Conn, Frame};
use crate::rng::Rng;

/// Connections sending at once.
const CONNECTIONS: u64 = 8;

/// How long a polling FAIR caller keeps its place: short, so every deadline has passed
/// soon after the load.
const FAIR_WAIT_MS: &str = "300";

/// Names the module reads or writes beside a lock's: Redisson's helper keys.
fn helper_names(key: &[u8]) -> Vec<Vec<u8>> {
    let braced = |prefix: &str| {
        let mut name = prefix.as_bytes().to_vec();
        name.push(b'{');
        name.extend_from_slice(key);
        name.push(b'}');
        name
    };
    let mut timeout = key.to_vec();
    timeout.extend_from_slice(b":timeout");
    let mut braced_timeout = b"{".to_vec();
    braced_timeout.extend_from_slice(key);
    braced_timeout.extend_from_slice(b"}:timeout");
    vec![
        braced("redisson_lock_queue:"),
        braced("redisson_lock_timeout:"),
        braced("redisson_lock_token:"),
        braced("redisson_sc:"),
        timeout,
        braced_timeout,
    ]
}

/// A write that leaves a value of a random type, wrong for what the module expects there.
fn pollute(rng: &mut Rng, name: &[u8]) -> Vec<Vec<u8>> {
    let words: Vec<&[u8]> = match rng.below(6) {
        0 => vec![b"SET", name, b"not a number"],
        1 => vec![b"RPUSH", name, b"x", b"y"],
        2 => vec![b"ZADD", name, b"1", b"member", b"-5", b"other"],
        3 => vec![b"XADD", name, b"*", b"f", b"v"],
        4 => vec![b"HSET", name, b"field", b"abc", b"mode", b"read"],
        _ => vec![b"SADD", name, b"a"],
    };
    words.into_iter().map(<[u8]>::to_vec).collect()
}

/// One connection of the load: its id, for the others to kill or unblock.
fn connect(port: u16, rng: &mut Rng, ids: &Mutex<Vec<i64>>) -> Option<Conn> {
    let mut c = Conn::connect(port, Duration::from_secs(10)).ok()?;
    if rng.chance(30) {
        c.call(&[b"HELLO", b"3"]).ok()?;
    }
    if rng.chance(30) {
        c.call(&[b"SELECT", b"1"]).ok()?;
    }
    ids.lock().unwrap().push(c.id);
    Some(c)
}

fn bytes(words: &[&[u8]]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.to_vec()).collect()
}

/// A call to the server beside the module's commands: a move of the keyspace, or a kill
/// or unblock of another connection.
fn disturbance(rng: &mut Rng, ids: &Mutex<Vec<i64>>) -> Vec<Vec<u8>> {
    let other = {
        let ids = ids.lock().unwrap();
        ids[rng.below(ids.len() as u64) as usize]
            .to_string()
            .into_bytes()
    };
    let key = rng.pick(&KEYS).to_vec();
    let other_key = rng.pick(&KEYS).to_vec();
    match rng.below(8) {
        0 => bytes(&[b"SWAPDB", b"0", b"1"]),
        1 => vec![b"MOVE".to_vec(), key, b"1".to_vec()],
        2 => vec![b"RENAME".to_vec(), key, other_key],
        3 if rng.chance(10) => bytes(&[b"FLUSHDB"]),
        3 if rng.chance(5) => bytes(&[b"FLUSHALL"]),
        4 => vec![b"CLIENT".to_vec(), b"KILL".to_vec(), b"ID".to_vec(), other],
        5 => vec![b"CLIENT".to_vec(), b"UNBLOCK".to_vec(), other],
        6 => vec![
            b"CLIENT".to_vec(),
            b"UNBLOCK".to_vec(),
            other,
            b"ERROR".to_vec(),
        ],
        _ => vec![b"SELECT".to_vec(), rng.pick(&[&b"0"[..], b"1"]).to_vec()],
    }
}

/// A module call whose `BLOCK` (the fuzzer's few ms) becomes up to 300 ms, so that calls
/// are still blocked when the others kill, unblock, move and flush.
fn module_call(rng: &mut Rng) -> Vec<Vec<u8>> {
    let (mut args, may_block) = fuzz::call(rng);
    if may_block {
        for i in 1..args.len() {
            if args[i - 1].eq_ignore_ascii_case(b"BLOCK") && args[i] == b"2" {
                args[i] = rng.range(1, 300).to_string().into_bytes();
            }
        }
    }
    args
}

/// The same call run from a script: `EVAL "return redis.call(unpack(ARGV))" 0 ...`.
fn in_script(args: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let mut out = bytes(&[b"EVAL", b"return redis.call(unpack(ARGV))", b"0"]);
    out.extend(args);
    out
}

/// One connection's share of the calls. Returns what it counted and what went wrong.
fn client(port: u16, mut rng: Rng, calls: u64, ids: Arc<Mutex<Vec<i64>>>) -> Outcome {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut violations = Vec::new();
    let mut c = connect(port, &mut rng, &ids);
    let mut count = |name: &str| *counts.entry(name.into()).or_default() += 1;
    for _ in 0..calls {
        let Some(conn) = c.as_mut() else {
            c = connect(port, &mut rng, &ids);
            count("reconnects");
            continue;
        };
        let roll = rng.below(100);
        let reply = if roll < 8 {
            count("disturbances");
            let args = disturbance(&mut rng, &ids);
            conn.call(&args.iter().map(Vec::as_slice).collect::<Vec<_>>())
        } else if roll < 14 {
            count("in MULTI");
            let args = module_call(&mut rng);
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            conn.call(&[b"MULTI"])
                .and_then(|_| conn.call(&args))
                .and_then(|_| conn.call(&[b"EXEC"]))
        } else if roll < 20 {
            count("in EVAL");
            let args = in_script(module_call(&mut rng));
            conn.call(&args.iter().map(Vec::as_slice).collect::<Vec<_>>())
        } else {
            count("calls");
            let args = module_call(&mut rng);
            conn.call(&args.iter().map(Vec::as_slice).collect::<Vec<_>>())
        };
        match reply {
            Ok(Frame::Error(e)) if e.contains("internal error") => {
                violations.push(format!("a caught panic: {e}"));
            }
            Ok(_) => {}
            // Killed by another connection (or its reply lost with it): a new one.
            Err(_) => {
                count("connections lost");
                c = None;
            }
        }
    }
    Outcome { violations, counts }
}

fn info_field(c: &mut Conn, name: &str) -> Result<i64, String> {
    let text = c
        .call(&[b"INFO", b"rlock"])
        .map_err(|e| format!("INFO rlock: {e}"))?
        .text()
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("INFO rlock has no {name}"))
}

/// The churn on one server: `calls` calls in all. Violations: anything the module still
/// tracks or holds once the keyspace is flushed, a panic, a dead server.
pub fn run(flavor: Flavor, seed: u64, calls: u64) -> Outcome {
    let mut server = Server::builder(flavor)
        .module_args(&["fair-wait-ms", FAIR_WAIT_MS])
        .start();
    let port = server.port;
    let mut rng = Rng::new(seed);
    let mut violations = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut admin = match Conn::connect(port, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                violations: vec![format!("connect: {e}")],
                counts,
            }
        }
    };
    let at_rest = info_field(&mut admin, "rlock_allocated_bytes").unwrap_or(0);
    for db in [&b"0"[..], b"1"] {
        let _ = admin.call(&[b"SELECT", db]);
        for key in KEYS {
            for name in std::iter::once(key.to_vec()).chain(helper_names(key)) {
                if rng.chance(60) {
                    let write = pollute(&mut rng, &name);
                    let _ = admin.call(&write.iter().map(Vec::as_slice).collect::<Vec<_>>());
                    *counts.entry("polluted keys".into()).or_default() += 1;
                }
            }
        }
    }
    let _ = admin.call(&[b"SELECT", b"0"]);

    // The admin connection is not among them: nobody kills it.
    let ids = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (rng, ids) = (rng.fork(), ids.clone());
            thread::spawn(move || client(port, rng, calls / CONNECTIONS, ids))
        })
        .collect();
    for t in threads {
        match t.join() {
            Ok(outcome) => {
                violations.extend(outcome.violations);
                for (name, n) in outcome.counts {
                    *counts.entry(name).or_default() += n;
                }
            }
            Err(_) => violations.push("a churn client panicked".into()),
        }
    }
    // Every connection of the load is closed; every BLOCK (a few ms) and every polling
    // FAIR caller's place (FAIR_WAIT_MS) has run out by now, or soon.
    thread::sleep(Duration::from_millis(500));
    let _ = admin.call(&[b"FLUSHALL"]);
    // The wait statistics keep their bounded histograms: not what is checked here.
    let _ = admin.call(&[b"RLOCK.RESETSTAT"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let left = loop {
        let tracked = info_field(&mut admin, "rlock_tracked_locks");
        let blocked = info_field(&mut admin, "rlock_blocked");
        let allocated = info_field(&mut admin, "rlock_allocated_bytes");
        match (tracked, blocked, allocated) {
            (Ok(0), Ok(0), Ok(bytes)) if bytes <= at_rest + (16 << 10) => break None,
            (t, b, a) if Instant::now() > deadline => {
                break Some(format!(
                    "after every connection closed and FLUSHALL: tracked_locks {t:?}, \
                     blocked {b:?}, allocated_bytes {a:?} (at rest {at_rest})"
                ))
            }
            _ => thread::sleep(Duration::from_millis(50)),
        }
    };
    violations.extend(left);
    violations.extend(crate::evidence::dead_or_panicked(&mut server));
    Outcome { violations, counts }
}
