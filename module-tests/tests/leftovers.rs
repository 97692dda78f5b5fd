//! What the module leaves behind: once every client has gone and every deadline has
//! passed, or after `FLUSHALL`, it tracks nothing (`INFO rlock`: `rlock_tracked_locks`
//! and `rlock_blocked` at 0), and a fair queue left by callers that polled and stopped
//! is gone from the keyspace by its last deadline.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

fn run(con: &mut Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

fn exists(con: &mut Connection, key: &[u8]) -> bool {
    call_bytes(con, &[b"EXISTS", key]) == Ok(Value::Int(1))
}

fn queue_keys(key: &str) -> [Vec<u8>; 2] {
    [
        helper_key("redisson_lock_queue", key.as_bytes()),
        helper_key("redisson_lock_timeout", key.as_bytes()),
    ]
}

/// Waits up to `within` for `INFO rlock` to report nothing tracked and nobody blocked.
fn wait_untracked(server: &Server, within: Duration) -> (i64, i64) {
    let mut last = (-1, -1);
    wait_until(within, || {
        let stats = rstats(server);
        last = (stats["tracked_locks"], stats["blocked"]);
        last == (0, 0)
    });
    last
}

/// A FAIR caller that polls once and stops: its entry goes at its deadline, the queue
/// keys with it, and the module stops tracking the lock, whether the lock was freed
/// (the polling head was woken and never came) or stays held.
#[test]
fn a_polling_fair_caller_that_stops_leaves_nothing_behind() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["CONFIG", "SET", "rlock.fair-wait-ms", "500"]);

        // Freed: p heads the queue, is woken, and never calls again.
        run(&mut c, &["RLOCK.ACQUIRE", "L", "h", "LEASE", "60000"]);
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "L", "p", "FAIR"]);
        run(&mut c, &["RLOCK.RELEASE", "L", "h"]);
        // Held: h2 never releases; p2 polls once behind it.
        run(&mut c, &["RLOCK.ACQUIRE", "M", "h2", "LEASE", "60000"]);
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "M", "p2", "FAIR"]);
        let queued_at = Instant::now();
        for key in ["L", "M"] {
            for helper in queue_keys(key) {
                assert!(exists(&mut c, &helper), "{flavor}: {key}: queued");
            }
        }
        assert_eq!(rstat(&server, "tracked_locks"), 2, "{flavor}");

        let gone = wait_until(Duration::from_secs(3), || {
            ["L", "M"]
                .iter()
                .all(|key| queue_keys(key).iter().all(|k| !exists(&mut c, k)))
        });
        assert!(
            queued_at.elapsed() >= Duration::from_millis(450),
            "{flavor}: entries went before their deadline"
        );
        assert!(
            gone,
            "{flavor}: queue keys left 3 s after a 500 ms deadline: {:?}",
            keyspace(&mut c)
                .keys()
                .map(|k| String::from_utf8_lossy(k).to_string())
                .collect::<Vec<_>>()
        );
        assert_eq!(
            wait_untracked(&server, Duration::from_secs(1)),
            (0, 0),
            "{flavor}: (tracked_locks, blocked) once both deadlines passed"
        );
        // The hold itself stays.
        assert_eq!(holders(&mut c, "M"), held_by("h2", 1), "{flavor}");
        assert!(pttl(&mut c, b"M") > 50_000, "{flavor}: M's lease untouched");

        // A queue of several pollers behind a hold: each goes at its own deadline.
        run(&mut c, &["RLOCK.ACQUIRE", "N", "h", "LEASE", "60000"]);
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "N", "a", "FAIR"]);
        run(&mut c, &["CONFIG", "SET", "rlock.fair-wait-ms", "1500"]);
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "N", "b", "FAIR"]);
        thread::sleep(Duration::from_millis(900));
        let list = lrange(&mut c, &queue_keys("N")[0]);
        assert_eq!(
            list,
            vec![b"b".to_vec()],
            "{flavor}: a gone at its deadline, b kept"
        );
        assert_eq!(rstat(&server, "tracked_locks"), 1, "{flavor}");
        let gone = wait_until(Duration::from_secs(3), || {
            queue_keys("N").iter().all(|k| !exists(&mut c, k))
        });
        assert!(gone, "{flavor}: N's queue left after b's deadline");
        assert_eq!(
            wait_untracked(&server, Duration::from_secs(1)),
            (0, 0),
            "{flavor}: N"
        );
        // Polling callers hold up no MODULE UNLOAD: the module keeps no timer for them.
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "N", "q", "FAIR"]);
        assert_eq!(
            call(&mut c, &["MODULE", "UNLOAD", "rlock"]),
            Ok(Value::Okay),
            "{flavor}: MODULE UNLOAD with a polling FAIR caller queued"
        );
    }
}

/// Sends `commands` in one packet: the server runs them in one turn of its event loop,
/// before any timer (the module's deferred work) fires in between.
fn send_all(con: &mut Connection, commands: &[&[&str]]) {
    let mut packet = Vec::new();
    for args in commands {
        let mut cmd = redis::Cmd::new();
        for a in *args {
            cmd.arg(*a);
        }
        packet.extend(cmd.get_packed_command());
    }
    con.send_packed_command(&packet).expect("send pipeline");
}

/// `send_all`, then every reply.
fn pipeline(con: &mut Connection, commands: &[&[&str]]) -> Vec<Result<Value, String>> {
    send_all(con, commands);
    commands
        .iter()
        .map(|_| con.recv_response().map_err(|e| error_text(&e)))
        .collect()
}

/// A lock `key` handed by a release to a blocked client: its hand-off round is tracked
/// while the new holder's lease runs.
fn hand_off_once(server: &Server, c: &mut Connection, key: &str) {
    let flavor = server.flavor;
    run(c, &["RLOCK.ACQUIRE", key, "h", "LEASE", "60000"]);
    let waiter = Pending::new(server).spawn(&["RLOCK.ACQUIRE", key, "w", "BLOCK", "5000"]);
    wait_blocked(flavor, c, key, 1);
    run(c, &["RLOCK.RELEASE", key, "h"]);
    assert_eq!(
        waiter.join().reply,
        Ok(Value::Int(1)),
        "{flavor}: w granted"
    );
    assert_eq!(holders(c, key), held_by("w", 1), "{flavor}");
    assert_eq!(
        rstat(server, "tracked_locks"),
        1,
        "{flavor}: the round, while held"
    );
}

/// The lock of a hand-off round is deleted, and in the same turn, before the module's
/// deferred serve of it runs, the free name is waited on as a semaphore: that serve finds
/// a semaphore's waiter, and the round must end there (the key is no lock any more),
/// not stay tracked once the semaphore's waiter has gone too.
#[test]
fn a_round_ends_when_its_lock_is_waited_on_as_a_semaphore() {
    for (flavor, server, mut c) in servers() {
        hand_off_once(&server, &mut c, "L");
        let replies = pipeline(
            &mut c,
            &[&["DEL", "L"], &["RSEM.ACQUIRE", "L", "BLOCK", "100"]],
        );
        assert_eq!(replies, vec![Ok(Value::Int(1)), Ok(Value::Nil)], "{flavor}");
        assert_eq!(
            wait_untracked(&server, Duration::from_secs(1)),
            (0, 0),
            "{flavor}: (tracked_locks, blocked) once the semaphore's waiter left"
        );
        // Granted rather than timed out: the same.
        hand_off_once(&server, &mut c, "M");
        let mut sem = Pending::new(&server);
        send_all(
            &mut sem.con,
            &[&["DEL", "M"], &["RSEM.ACQUIRE", "M", "BLOCK", "5000"]],
        );
        assert_eq!(sem.recv(), Ok(Value::Int(1)), "{flavor}: DEL");
        wait_blocked(flavor, &mut c, "M", 1);
        run(&mut c, &["RSEM.RELEASE", "M"]);
        assert_eq!(sem.recv(), Ok(Value::Int(1)), "{flavor}: permit granted");
        assert_eq!(
            wait_untracked(&server, Duration::from_secs(1)),
            (0, 0),
            "{flavor}: (tracked_locks, blocked) once the semaphore's waiter was served"
        );
    }
}

/// A semaphore with a running permit lease shares its name with a held lock that a
/// client waits on in another database, and `SWAPDB` swaps them: the waiter's serve
/// (a lock's) must not stop the timer that watches the lease. The lease is taken back
/// at its end without a call touching the semaphore, and nothing stays tracked.
#[test]
fn a_lease_swapped_under_a_locks_waiter_is_still_taken_back() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["SELECT", "1"]);
        run(&mut c, &["RSEM.TRYSETPERMITS", "S", "1"]);
        run(&mut c, &["RSEM.LEASE", "S", "LEASE", "400"]);
        run(&mut c, &["SELECT", "0"]);
        run(&mut c, &["RLOCK.ACQUIRE", "S", "h", "LEASE", "60000"]);
        let mut waiter = Pending::blocked_acquire(&server, &mut c, ("S", "w"), "3000", 1);
        let leased_at = Instant::now();
        run(&mut c, &["SWAPDB", "0", "1"]);
        // The waiter now waits on a semaphore's name in database 0: told so, or timed out.
        let _ = waiter.recv();
        wait_total_blocked(&server, 0);
        let reclaimed = wait_until(Duration::from_secs(3), || {
            rstat(&server, "permit_reclaims") == 1
        });
        assert!(
            reclaimed,
            "{flavor}: the lease not taken back {:?} after it was made (400 ms)",
            leased_at.elapsed()
        );
        assert_eq!(
            wait_untracked(&server, Duration::from_secs(1)),
            (0, 0),
            "{flavor}: (tracked_locks, blocked) once the lease was taken back"
        );
        assert_eq!(
            run(&mut c, &["RSEM.AVAILABLE", "S"]),
            Value::Int(1),
            "{flavor}"
        );
    }
}

/// A lock left free for Redisson clients (`core::sharing`'s window) whose last blocked
/// client leaves before the window ends: nobody takes it, and the round ends with it.
#[test]
fn a_round_ends_when_its_last_waiter_leaves_during_a_window() {
    for (flavor, server, mut c) in servers() {
        let _listener = Subscriber::new(&server, &[&unlock_channel(b"L")]);
        // Two hand-offs with one client blocked: the next release opens a window.
        hand_off_once(&server, &mut c, "L");
        let w2 = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "L", "w2", "BLOCK", "5000"]);
        wait_blocked(flavor, &mut c, "L", 1);
        run(&mut c, &["RLOCK.RELEASE", "L", "w"]);
        assert_eq!(w2.join().reply, Ok(Value::Int(1)), "{flavor}: w2 granted");
        let w3 = Pending::new(&server);
        let w3_id = w3.id.to_string();
        let w3 = w3.spawn(&["RLOCK.ACQUIRE", "L", "w3", "BLOCK", "5000"]);
        wait_blocked(flavor, &mut c, "L", 1);
        // The release leaves L to the listener for 5 ms; w3 goes in the same turn.
        let replies = pipeline(
            &mut c,
            &[
                &["RLOCK.RELEASE", "L", "w2"],
                &["CLIENT", "KILL", "ID", &w3_id],
            ],
        );
        assert_eq!(
            replies,
            vec![Ok(Value::Int(1)), Ok(Value::Int(1))],
            "{flavor}"
        );
        assert!(w3.join().reply.is_err(), "{flavor}: w3 killed");
        assert!(!exists(&mut c, b"L"), "{flavor}: L left free");
        assert_eq!(
            wait_untracked(&server, Duration::from_secs(1)),
            (0, 0),
            "{flavor}: (tracked_locks, blocked) once the window's last waiter left"
        );
    }
}

/// Names the random calls use: lock, semaphore and latch names alike.
const NAMES: [&str; 6] = ["k0", "k1", "k2", "{k3}a", "{k3}b", "k4"];

/// The helper keys of lock `name` that the pre-fill pollutes.
fn helpers_of(name: &str) -> Vec<Vec<u8>> {
    let mut keys = vec![name.as_bytes().to_vec()];
    for prefix in [
        "redisson_lock_queue",
        "redisson_lock_timeout",
        "redisson_lock_token",
        "redisson_sc",
    ] {
        keys.push(helper_key(prefix, name.as_bytes()));
    }
    keys.push(format!("{{{name}}}:timeout").into_bytes());
    keys
}

/// Fills db 0 and 1 with keys of every type under lock and helper names: strings,
/// lists, zsets, streams and hashes with non-integer fields.
fn pollute(con: &mut Connection, rng: &mut StdRng) {
    for db in ["0", "1"] {
        run(con, &["SELECT", db]);
        for name in NAMES {
            for key in helpers_of(name) {
                if rng.random_bool(0.4) {
                    continue;
                }
                let key = &key[..];
                let _ = match rng.random_range(0..5) {
                    0 => call_bytes(con, &[b"SET", key, b"junk"]),
                    1 => call_bytes(con, &[b"RPUSH", key, b"x", b"y"]),
                    2 => call_bytes(con, &[b"ZADD", key, b"1", b"x", b"99999999999999", b"y"]),
                    3 => call_bytes(con, &[b"XADD", key, b"*", b"f", b"v"]),
                    _ => call_bytes(
                        con,
                        &[b"HSET", key, b"x", b"not-a-number", b"mode", b"junk"],
                    ),
                };
            }
        }
    }
    run(con, &["SELECT", "0"]);
}

/// One random call of the module's commands, or of what moves keys and databases.
fn random_call(rng: &mut StdRng, ids: &[i64], unblock: bool) -> Vec<String> {
    let name = |rng: &mut StdRng| NAMES[rng.random_range(0..NAMES.len())].to_string();
    let owner = |rng: &mut StdRng| format!("o{}", rng.random_range(0..4));
    let block = |rng: &mut StdRng| match rng.random_range(0..10) {
        0 => "0".to_string(),
        _ => rng.random_range(1..250).to_string(),
    };
    let mut args: Vec<String> = Vec::new();
    let push = |args: &mut Vec<String>, words: &[&str]| {
        args.extend(words.iter().map(|w| w.to_string()));
    };
    match rng.random_range(0..100) {
        0..=29 => {
            push(&mut args, &["RLOCK.ACQUIRE"]);
            args.push(name(rng));
            args.push(owner(rng));
            match rng.random_range(0..8) {
                0 => push(&mut args, &["READ"]),
                1 => push(&mut args, &["WRITE"]),
                _ => {}
            }
            for (p, word) in [(0.5, "FAIR"), (0.15, "TOKEN"), (0.2, "SESSION")] {
                if rng.random_bool(p) {
                    push(&mut args, &[word]);
                }
            }
            if rng.random_bool(0.6) {
                push(&mut args, &["LEASE"]);
                args.push(rng.random_range(20..3000).to_string());
            }
            if rng.random_bool(0.5) {
                push(&mut args, &["BLOCK"]);
                args.push(block(rng));
            }
            if rng.random_bool(0.1) {
                push(&mut args, &["REQ"]);
                args.push(format!("r{}", rng.random_range(0..20)));
            }
        }
        30..=41 => {
            push(&mut args, &["RLOCK.RELEASE"]);
            args.push(name(rng));
            args.push(owner(rng));
            if rng.random_bool(0.1) {
                push(&mut args, &["READ"]);
            }
        }
        42..=44 => {
            push(&mut args, &["RLOCK.RENEW"]);
            args.push(name(rng));
            args.push(owner(rng));
        }
        45..=47 => {
            push(&mut args, &["RLOCK.FORCERELEASE"]);
            args.push(name(rng));
        }
        48..=51 => {
            push(&mut args, &["RLOCK.MACQUIRE"]);
            args.push(owner(rng));
            push(&mut args, &["2", "{k3}a", "{k3}b"]);
            if rng.random_bool(0.5) {
                push(&mut args, &["BLOCK"]);
                args.push(block(rng));
            }
            if rng.random_bool(0.3) {
                push(&mut args, &["SESSION"]);
            }
        }
        52..=53 => {
            push(&mut args, &["RLOCK.MRELEASE"]);
            args.push(owner(rng));
            push(&mut args, &["2", "{k3}a", "{k3}b"]);
        }
        54..=55 => {
            push(&mut args, &["RLOCK.INFO"]);
            args.push(name(rng));
        }
        56..=58 => {
            push(&mut args, &["RSEM.TRYSETPERMITS"]);
            args.push(name(rng));
            args.push(rng.random_range(0..3).to_string());
        }
        59..=60 => {
            push(&mut args, &["RSEM.ADDPERMITS"]);
            args.push(name(rng));
            args.push(rng.random_range(1..3).to_string());
        }
        61..=64 => {
            push(&mut args, &["RSEM.ACQUIRE"]);
            args.push(name(rng));
            if rng.random_bool(0.6) {
                push(&mut args, &["BLOCK"]);
                args.push(block(rng));
            }
        }
        65..=66 => {
            push(&mut args, &["RSEM.RELEASE"]);
            args.push(name(rng));
        }
        67..=70 => {
            push(&mut args, &["RSEM.LEASE"]);
            args.push(name(rng));
            push(&mut args, &["LEASE"]);
            args.push(rng.random_range(20..2000).to_string());
            if rng.random_bool(0.5) {
                push(&mut args, &["BLOCK"]);
                args.push(block(rng));
            }
            if rng.random_bool(0.3) {
                push(&mut args, &["SESSION"]);
            }
        }
        71..=72 => {
            push(&mut args, &["RLATCH.TRYSETCOUNT"]);
            args.push(name(rng));
            args.push(rng.random_range(1..3).to_string());
        }
        73..=74 => {
            push(&mut args, &["RLATCH.COUNTDOWN"]);
            args.push(name(rng));
        }
        75..=77 => {
            push(&mut args, &["RLATCH.AWAIT"]);
            args.push(name(rng));
            push(&mut args, &["BLOCK"]);
            args.push(block(rng));
        }
        78..=81 if !ids.is_empty() => {
            let id = ids[rng.random_range(0..ids.len())].to_string();
            if unblock && rng.random_bool(0.5) {
                push(&mut args, &["CLIENT", "UNBLOCK"]);
                args.push(id);
                if rng.random_bool(0.5) {
                    push(&mut args, &["ERROR"]);
                }
            } else {
                push(&mut args, &["CLIENT", "KILL", "ID"]);
                args.push(id);
            }
        }
        82..=83 => push(&mut args, &["SWAPDB", "0", "1"]),
        84..=85 => {
            push(&mut args, &["MOVE"]);
            args.push(name(rng));
            args.push(rng.random_range(0..2).to_string());
        }
        86..=87 => {
            push(&mut args, &["RENAME"]);
            args.push(name(rng));
            args.push(name(rng));
        }
        88 => push(&mut args, &["FLUSHDB"]),
        89..=90 => {
            push(&mut args, &["SELECT"]);
            args.push(rng.random_range(0..2).to_string());
        }
        91..=93 => {
            // A script: FAIR and BLOCK try once there.
            push(&mut args, &["EVAL"]);
            args.push(
                "return redis.pcall('RLOCK.ACQUIRE', KEYS[1], ARGV[1], 'FAIR', 'BLOCK', '100')"
                    .to_string(),
            );
            push(&mut args, &["1"]);
            args.push(name(rng));
            args.push(owner(rng));
        }
        _ => push(&mut args, &["MULTI"]), // Followed by a few calls and EXEC.
    }
    args
}

/// A worker's connection, re-made when a `CLIENT KILL` (or its read timeout) ends it.
struct Worker {
    con: Connection,
    id: i64,
    resp3: bool,
}

fn connect(server: &Server, resp3: bool, ids: &Mutex<Vec<i64>>) -> Worker {
    let mut con = if resp3 {
        server.conn_resp3()
    } else {
        server.conn()
    };
    con.set_read_timeout(Some(Duration::from_secs(2)))
        .expect("read timeout");
    let id = match call(&mut con, &["CLIENT", "ID"]) {
        Ok(Value::Int(id)) => id,
        other => panic!("CLIENT ID: {other:?}"),
    };
    ids.lock().unwrap().push(id);
    Worker { con, id, resp3 }
}

fn send(con: &mut Connection, args: &[String]) -> redis::RedisResult<Value> {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(a.as_str());
    }
    cmd.query::<Value>(con)
}

/// Thousands of random calls from `WORKERS` connections (blocked ones among them, killed
/// and unblocked clients, MULTI, EVAL, RESP3, SWAPDB, MOVE, RENAME, FLUSHDB) on a keyspace
/// polluted first; returns once every connection is closed and nobody is blocked.
fn drive(server: &mut Server, seed: u64, calls: usize) {
    const WORKERS: usize = 8;
    let flavor = server.flavor;
    let mut rng = StdRng::seed_from_u64(seed);
    pollute(&mut server.conn(), &mut rng);
    let ids = Mutex::new(Vec::new());
    let done = AtomicUsize::new(0);
    let unblock = unblock_supported(flavor);
    let started = Instant::now();
    let shared: &Server = server;
    thread::scope(|scope| {
        for w in 0..WORKERS {
            let (ids, done) = (&ids, &done);
            let mut rng = StdRng::seed_from_u64(seed ^ (w as u64 + 1));
            scope.spawn(move || {
                let mut worker = connect(shared, w % 3 == 0, ids);
                while done.fetch_add(1, Ordering::Relaxed) < calls {
                    let known: Vec<i64> = ids
                        .lock()
                        .unwrap()
                        .iter()
                        .copied()
                        .filter(|id| *id != worker.id)
                        .collect();
                    let args = random_call(&mut rng, &known, unblock);
                    let result = if args[0] == "MULTI" {
                        let mut r = send(&mut worker.con, &args);
                        for _ in 0..rng.random_range(1..4) {
                            if r.is_err() {
                                break;
                            }
                            let inner = random_call(&mut rng, &[], false);
                            if matches!(inner[0].as_str(), "MULTI" | "SELECT") {
                                continue;
                            }
                            r = send(&mut worker.con, &inner);
                        }
                        if r.is_ok() {
                            r = send(&mut worker.con, &["EXEC".to_string()]);
                        }
                        r
                    } else {
                        send(&mut worker.con, &args)
                    };
                    if let Err(e) = result {
                        if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                            let resp3 = worker.resp3;
                            ids.lock().unwrap().retain(|id| *id != worker.id);
                            worker = connect(shared, resp3, ids);
                        }
                    }
                }
                ids.lock().unwrap().retain(|id| *id != worker.id);
            });
        }
    });
    println!("{flavor}: {calls} calls in {:?}", started.elapsed());
    server.assert_alive("random calls");
    // Every worker's connection is closed: nobody is blocked once the server saw it.
    wait_total_blocked(server, 0);
}

/// Polluted keyspace, thousands of random calls, every connection closed, then
/// FLUSHALL: nothing stays tracked, and nothing is written after the flush.
#[test]
fn nothing_stays_tracked_after_flushall_on_a_polluted_keyspace() {
    for flavor in flavors() {
        let seed = test_seed();
        println!("{flavor}: seed {seed} (RLOCK_SEED={seed} replays it)");
        let mut server = Server::start(flavor);
        let mut c = server.conn();
        // Long fair deadlines: what goes must go by the flush, not by a deadline.
        run(&mut c, &["CONFIG", "SET", "rlock.fair-wait-ms", "600000"]);
        drive(&mut server, seed, 4000);
        run(&mut c, &["FLUSHALL"]);
        assert_eq!(
            wait_untracked(&server, Duration::from_secs(3)),
            (0, 0),
            "{flavor}: (tracked_locks, blocked) after FLUSHALL, seed {seed}"
        );
        assert_eq!(
            run(&mut c, &["DBSIZE"]),
            Value::Int(0),
            "{flavor}: keys written after FLUSHALL, seed {seed}"
        );
    }
}

/// The same, without the flush: once every client has gone and every deadline has
/// passed (leases of up to 3 s, 1 s by default; fair deadlines of 300 ms), nothing stays tracked.
#[test]
fn nothing_stays_tracked_once_clients_left_and_deadlines_passed() {
    for flavor in flavors() {
        let seed = test_seed();
        println!("{flavor}: seed {seed} (RLOCK_SEED={seed} replays it)");
        let mut server = Server::start(flavor);
        let mut c = server.conn();
        run(&mut c, &["CONFIG", "SET", "rlock.fair-wait-ms", "300"]);
        run(&mut c, &["CONFIG", "SET", "rlock.lease-ms", "1000"]);
        drive(&mut server, seed, 4000);
        let left = wait_untracked(&server, Duration::from_secs(6));
        let mut keys = Vec::new();
        for db in ["0", "1"] {
            run(&mut c, &["SELECT", db]);
            for name in NAMES {
                let kind = call(&mut c, &["TYPE", name]);
                let ttl = call(&mut c, &["PTTL", name]);
                keys.push(format!("{db}:{name} {kind:?} {ttl:?}"));
            }
        }
        assert_eq!(
            left,
            (0, 0),
            "{flavor}: (tracked_locks, blocked) once every deadline passed, seed {seed}: {keys:?}"
        );
        // No fair queue keeps an entry long past its deadline.
        let stale_before = (unix_ms_f64() as i64 - 2000).to_string();
        for db in ["0", "1"] {
            run(&mut c, &["SELECT", db]);
            for name in NAMES {
                let zset = &queue_keys(name)[1];
                if call_bytes(&mut c, &[b"TYPE", zset]) != Ok(Value::SimpleString("zset".into())) {
                    continue;
                }
                let stale = call_bytes(
                    &mut c,
                    &[b"ZRANGEBYSCORE", zset, b"-inf", stale_before.as_bytes()],
                );
                assert_eq!(
                    stale,
                    Ok(Value::Array(vec![])),
                    "{flavor}: db {db}: {} keeps entries past their deadline, seed {seed}",
                    String::from_utf8_lossy(zset)
                );
            }
        }
    }
}
