//! The guarded-write workload (RLOCK.GUARD, issue 41): holders take a lock with a short
//! lease and a fencing token, then append `token:owner:seq` to the lock's log list through
//! `RLOCK.GUARD ... TOKEN t CALL RPUSH`. Some holders pause past their lease (a sleep of the
//! client, as a stop-the-world pause; or the server's `DEBUG SLEEP`, from a fault thread)
//! while others take the lock and write; some write again after their own release.
//!
//! The checker reads the logs themselves: along each list the tokens never go down (a
//! deposed holder's write after its successor's would), every entry is a write its client
//! was told landed (no stray write) and came from a grant of that token to that owner, every
//! acknowledged write is there once, and no write sent later than its lease after its grant
//! was received, or after its own release, was acknowledged.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rlock_module_tests::cluster::Cluster;
use rlock_module_tests::{Flavor, Server};

use crate::resp::{Conn, Frame};
use crate::rng::Rng;

/// The lease of every hold: short, so that pauses outlive it.
const LEASE_MS: u64 = 250;
const CLIENTS: usize = 6;

/// What the clients share and report.
#[derive(Default)]
struct Tally {
    stop: AtomicBool,
    violations: Mutex<Vec<String>>,
    counts: Mutex<BTreeMap<String, u64>>,
    /// (lock, token) → owner, as the acquires replied.
    grants: Mutex<HashMap<(String, i64), String>>,
    /// Writes their client was told landed: (lock, entry).
    landed: Mutex<Vec<(String, String)>>,
    /// Writes refused (`NOTHELD`, `STALETOKEN`), or whose reply was lost: (lock, entry).
    refused: Mutex<HashSet<(String, String)>>,
}

impl Tally {
    fn count(&self, what: &str) {
        *self.counts.lock().unwrap().entry(what.into()).or_default() += 1;
    }

    fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
    }
}

/// Where each lock is served: its name, its log's name and the port of its primary.
#[derive(Clone)]
struct Lock {
    name: String,
    log: String,
    port: u16,
}

impl Lock {
    /// `VERB name owner REST...`: a command on this lock for `owner`.
    fn command<'a>(&'a self, verb: &'a [u8], owner: &'a str, rest: &[&'a [u8]]) -> Vec<&'a [u8]> {
        let head = [verb, self.name.as_bytes(), owner.as_bytes()];
        head.into_iter().chain(rest.iter().copied()).collect()
    }
}

/// The workload on a fresh server of `flavor` for `secs` seconds: violations and counts.
pub fn run(flavor: Flavor, seed: u64, secs: u64) -> (Vec<String>, BTreeMap<String, u64>) {
    let server = Server::start(flavor);
    let locks: Vec<Lock> = (0..2)
        .map(|i| Lock {
            name: format!("guarded:{i}"),
            log: format!("guardlog:{{guarded:{i}}}"),
            port: server.port,
        })
        .collect();
    run_on(&locks, &[server.port], seed, secs)
}

/// The same on a cluster of three primaries, one lock on each (their logs by hash tag in
/// the lock's slot), every client talking to the lock's primary.
pub fn run_cluster(flavor: Flavor, seed: u64, secs: u64) -> (Vec<String>, BTreeMap<String, u64>) {
    let cluster = Cluster::start(flavor, 3, 0);
    let locks: Vec<Lock> = cluster
        .primaries
        .iter()
        .map(|primary| {
            // A key without braces: `{name}:log` hashes as `name` does.
            let name = cluster.key_on(primary, "guarded:");
            Lock {
                log: format!("{{{name}}}:log"),
                name,
                port: primary.port,
            }
        })
        .collect();
    let ports: Vec<u16> = cluster.primaries.iter().map(|p| p.port).collect();
    run_on(&locks, &ports, seed, secs)
}

fn run_on(
    locks: &[Lock],
    ports: &[u16],
    seed: u64,
    secs: u64,
) -> (Vec<String>, BTreeMap<String, u64>) {
    let tally = Arc::new(Tally::default());
    let mut rng = Rng::new(seed);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (tally, rng, locks) = (tally.clone(), rng.fork(), locks.to_vec());
            thread::spawn(move || client(&tally, i, &locks, rng))
        })
        .collect();
    let sleeper = {
        let (tally, rng, ports) = (tally.clone(), rng.fork(), ports.to_vec());
        thread::spawn(move || server_pauses(&tally, &ports, rng))
    };
    thread::sleep(Duration::from_secs(secs));
    tally.stop.store(true, Ordering::SeqCst);
    for t in clients {
        if t.join().is_err() {
            tally.violation("a guard client panicked".into());
        }
    }
    let _ = sleeper.join();
    check_logs(&tally, locks);
    let violations = tally.violations.lock().unwrap().clone();
    let counts = tally.counts.lock().unwrap().clone();
    (violations, counts)
}

/// `DEBUG SLEEP` of a server now and then, past the lease: the holders' leases run out
/// while it sleeps, and their next writes come after.
fn server_pauses(tally: &Tally, ports: &[u16], mut rng: Rng) {
    let mut conns: Vec<Conn> = ports
        .iter()
        .filter_map(|p| Conn::connect(*p, Duration::from_secs(10)).ok())
        .collect();
    while !tally.stop.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(rng.range(300, 900)));
        if conns.is_empty() {
            return;
        }
        let at = rng.below(conns.len() as u64) as usize;
        let secs = format!("0.{}", rng.range(3, 5));
        if conns[at]
            .call(&[b"DEBUG", b"SLEEP", secs.as_bytes()])
            .is_ok()
        {
            tally.count("server pauses (DEBUG SLEEP past the lease)");
        }
    }
}

fn client(tally: &Tally, index: usize, locks: &[Lock], mut rng: Rng) {
    let owner = format!("guard-client-{index}");
    let mut conns: HashMap<u16, Conn> = HashMap::new();
    let mut seq = 0u64;
    while !tally.stop.load(Ordering::SeqCst) {
        let lock = rng.pick(locks).clone();
        let conn = match conns.entry(lock.port) {
            std::collections::hash_map::Entry::Occupied(c) => c.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                match Conn::connect(lock.port, Duration::from_secs(10)) {
                    Ok(c) => v.insert(c),
                    Err(e) => {
                        tally.violation(format!("{owner}: connect: {e}"));
                        return;
                    }
                }
            }
        };
        let lease = LEASE_MS.to_string();
        let waits = [b"LEASE", lease.as_bytes(), b"BLOCK", b"500", b"TOKEN"];
        let acquire = lock.command(b"RLOCK.ACQUIRE", &owner, &waits);
        let token = match conn.call(&acquire) {
            Ok(Frame::Int(t)) => t,
            Ok(f) if f.is_null() => continue,
            Ok(f) => {
                tally.violation(format!("{owner}: acquire of {} replied {f:?}", lock.name));
                continue;
            }
            Err(e) => {
                tally.violation(format!("{owner}: acquire: {e}"));
                return;
            }
        };
        let granted = Instant::now();
        tally.count("holds");
        let earlier = tally
            .grants
            .lock()
            .unwrap()
            .insert((lock.name.clone(), token), owner.clone());
        if let Some(other) = earlier {
            tally.violation(format!(
                "token {token} of {} granted to {other} and to {owner}",
                lock.name
            ));
        }
        for _ in 0..rng.range(1, 4) {
            if rng.chance(15) {
                // A stop-the-world pause of this holder, past its lease.
                thread::sleep(Duration::from_millis(LEASE_MS + rng.range(50, 300)));
                tally.count("client pauses past the lease");
            }
            seq += 1;
            let late = granted.elapsed() > Duration::from_millis(LEASE_MS);
            write(tally, conn, &lock, &owner, token, seq, late, "lease");
        }
        let release = lock.command(b"RLOCK.RELEASE", &owner, &[]);
        match conn.call(&release) {
            Ok(Frame::Int(1)) => tally.count("releases"),
            Ok(Frame::Error(e)) if e.starts_with("NOTHELD") => {
                tally.count("releases after the lease ran out (NOTHELD)")
            }
            Ok(f) => tally.violation(format!("{owner}: release replied {f:?}")),
            Err(e) => {
                tally.violation(format!("{owner}: release: {e}"));
                return;
            }
        }
        if rng.chance(20) {
            // A write after its own release: never lands.
            seq += 1;
            write(tally, conn, &lock, &owner, token, seq, true, "release");
        }
    }
}

/// One guarded append; `late`: its hold is surely over (its lease ran out, or it released),
/// so it must be refused.
#[allow(clippy::too_many_arguments)]
fn write(
    tally: &Tally,
    conn: &mut Conn,
    lock: &Lock,
    owner: &str,
    token: i64,
    seq: u64,
    late: bool,
    after: &str,
) {
    let entry = format!("{token}:{owner}:{seq}");
    let token_text = token.to_string();
    let rest = [
        b"TOKEN".as_slice(),
        token_text.as_bytes(),
        b"CALL",
        b"RPUSH",
        lock.log.as_bytes(),
        entry.as_bytes(),
    ];
    let guard = lock.command(b"RLOCK.GUARD", owner, &rest);
    match conn.call(&guard) {
        Ok(Frame::Int(_)) => {
            tally.count("guarded writes landed");
            if late {
                tally.violation(format!(
                    "{entry} on {} landed after its hold ended (its {after})",
                    lock.name
                ));
            }
            tally
                .landed
                .lock()
                .unwrap()
                .push((lock.name.clone(), entry));
        }
        Ok(Frame::Error(e)) if e.starts_with("NOTHELD") || e.starts_with("STALETOKEN") => {
            tally.count(match late {
                true => "guarded writes refused after the hold ended",
                false => "guarded writes refused within the client's lease (a server pause)",
            });
            tally
                .refused
                .lock()
                .unwrap()
                .insert((lock.name.clone(), entry));
        }
        Ok(f) => tally.violation(format!(
            "{entry} on {}: RLOCK.GUARD replied {f:?}",
            lock.name
        )),
        Err(e) => {
            tally
                .refused
                .lock()
                .unwrap()
                .insert((lock.name.clone(), entry.clone()));
            tally.violation(format!("{entry} on {}: {e}", lock.name));
        }
    }
}

/// The check from the data: each lock's log, read back.
fn check_logs(tally: &Tally, locks: &[Lock]) {
    let grants = tally.grants.lock().unwrap().clone();
    let landed: Vec<(String, String)> = tally.landed.lock().unwrap().clone();
    let refused = tally.refused.lock().unwrap().clone();
    for lock in locks {
        let mut conn = match Conn::connect(lock.port, Duration::from_secs(10)) {
            Ok(c) => c,
            Err(e) => {
                tally.violation(format!("reading {}: connect: {e}", lock.log));
                continue;
            }
        };
        let entries: Vec<String> = match conn.call(&[b"LRANGE", lock.log.as_bytes(), b"0", b"-1"]) {
            Ok(Frame::Array(Some(items))) => items.iter().filter_map(Frame::text).collect(),
            Ok(f) => {
                tally.violation(format!("LRANGE {} replied {f:?}", lock.log));
                continue;
            }
            Err(e) => {
                tally.violation(format!("LRANGE {}: {e}", lock.log));
                continue;
            }
        };
        let mut last_token = 0;
        let mut seen = HashSet::new();
        for entry in &entries {
            tally.count("log entries checked");
            let mut parts = entry.splitn(3, ':');
            let (Some(token), Some(owner)) = (parts.next(), parts.next()) else {
                tally.violation(format!(
                    "{}: entry {entry:?} is not token:owner:seq",
                    lock.log
                ));
                continue;
            };
            let token: i64 = token.parse().unwrap_or(-1);
            if token < last_token {
                tally.violation(format!(
                    "{}: {entry} after a write of token {last_token}: a deposed holder wrote",
                    lock.log
                ));
            }
            last_token = last_token.max(token);
            if grants.get(&(lock.name.clone(), token)).map(String::as_str) != Some(owner) {
                tally.violation(format!(
                    "{}: {entry}: token {token} was not granted to {owner}",
                    lock.log
                ));
            }
            let key = (lock.name.clone(), entry.clone());
            if refused.contains(&key) {
                tally.violation(format!(
                    "{}: {entry} is there, its client was refused",
                    lock.log
                ));
            }
            if !seen.insert(entry.clone()) {
                tally.violation(format!("{}: {entry} is there twice", lock.log));
            }
        }
        for (name, entry) in landed.iter().filter(|(name, _)| *name == lock.name) {
            if !seen.contains(entry) {
                tally.violation(format!(
                    "{name}: {entry} was acknowledged and is not in the log"
                ));
            }
        }
    }
}
