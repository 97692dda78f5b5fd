//! Module lifecycle with blocked clients: MODULE UNLOAD is refused while clients wait,
//! pending timers do not outlive the module, and 10,000 waits leak nothing.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::*;
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

fn run(con: &mut redis::Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

#[test]
fn module_unload_refused_while_clients_are_blocked() {
    for (flavor, mut server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "u", "h", "LEASE", "60000"]);
        let mut w = Pending::blocked_acquire(&server, &mut c, ("u", "w"), "0", 1);
        let r = call(&mut c, &["MODULE", "UNLOAD", "rlock"]);
        assert!(
            r.is_err(),
            "{flavor}: MODULE UNLOAD with a blocked client replied {r:?}"
        );
        // Still loaded and working: the waiter is served.
        run(&mut c, &["RLOCK.RELEASE", "u", "h"]);
        assert_eq!(w.reply(), Ok(Value::Int(1)), "{flavor}");

        assert_eq!(
            call(&mut c, &["MODULE", "UNLOAD", "rlock"]),
            Ok(Value::Okay),
            "{flavor}: MODULE UNLOAD once nobody is blocked"
        );
        let r = call(&mut c, &["RLOCK.ACQUIRE", "u", "x"]);
        assert!(
            matches!(&r, Err(e) if e.contains("unknown command")),
            "{flavor}: after unload: {r:?}"
        );
        server.assert_alive("MODULE UNLOAD");
        let path = module_path().display().to_string();
        assert_eq!(
            call(&mut c, &["MODULE", "LOAD", &path]),
            Ok(Value::Okay),
            "{flavor}: MODULE LOAD again"
        );
        assert_int(&mut c, &["RLOCK.ACQUIRE", "again", "o"], 1);
    }
}

/// A waiter that timed out (or left) leaves no lease timer behind that would
/// refuse MODULE UNLOAD, or fire into unloaded code.
#[test]
fn module_unload_works_after_waiters_time_out_or_leave() {
    for (flavor, mut server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "t", "h", "LEASE", "1500"]);
        let mut t = Pending::new(&server);
        t.send(&["RLOCK.ACQUIRE", "t", "w", "BLOCK", "50"]);
        assert_eq!(t.reply(), Ok(Value::Nil), "{flavor}: BLOCK 50 ran out");
        run(&mut c, &["RLOCK.ACQUIRE", "t2", "h", "LEASE", "1500"]);
        let k = Pending::blocked_acquire(&server, &mut c, ("t2", "w"), "0", 1);
        drop(k);
        wait_blocked(flavor, &mut c, "t2", 0);
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        let unloaded_at = Instant::now();
        assert_reply(
            &mut c,
            &["MODULE", "UNLOAD", "rlock"],
            Value::Okay,
            format_args!(
                "{flavor}: MODULE UNLOAD with nobody blocked, after one waiter timed out \
             and one closed, while their locks' leases (1500 ms) run"
            ),
        );
        // Past the lease deadlines: a timer firing into unloaded code would crash.
        let wait = Duration::from_millis(1700).saturating_sub(unloaded_at.elapsed());
        thread::sleep(wait);
        server.assert_alive("MODULE UNLOAD with leases running");
    }
}

/// Sends `cmds` (already packed) in one write on a fresh connection and reads every reply.
fn pipelined(server: &Server, cmds: &[u8], n: usize) -> Vec<Result<Value, String>> {
    let mut p = Pending::new(server);
    p.con
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    p.con.send_packed_command(cmds).expect("send");
    (0..n).map(|_| p.reply()).collect()
}

fn packed(args: &[&str]) -> Vec<u8> {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    cmd.get_packed_command()
}

/// In one buffer, the commands `each` packs for owners `{prefix}-0` to `{prefix}-{n - 1}`.
fn packed_per_owner(prefix: &str, n: usize, each: impl Fn(&str) -> Vec<Vec<u8>>) -> Vec<u8> {
    (0..n)
        .flat_map(|i| each(&format!("{prefix}-{i}")))
        .flatten()
        .collect()
}

/// One round: `timeouts` waits that run out, `served` waits that are served (each
/// holder releases to the next), `killed` waits whose connection is killed or closed.
fn waits_round(server: &Server, timeouts: usize, served: usize, killed: usize) {
    let flavor = server.flavor;
    const TIMEOUT_CONNS: usize = 40;
    const SERVED_CONNS: usize = 25;
    const KILL_BATCH: usize = 250;
    let mut c = server.conn();
    // Held while the served connections queue up, so each of their waits is a hand-off.
    run(&mut c, &["RLOCK.ACQUIRE", "srv", "gate", "LEASE", "60000"]);
    thread::scope(|s| {
        let mut jobs = Vec::new();
        for t in 0..TIMEOUT_CONNS {
            let n = timeouts / TIMEOUT_CONNS;
            jobs.push(s.spawn(move || {
                let buf = packed_per_owner(&format!("t{t}"), n, |owner| {
                    vec![packed(&["RLOCK.ACQUIRE", "busy", owner, "BLOCK", "1"])]
                });
                for (i, r) in pipelined(server, &buf, n).into_iter().enumerate() {
                    assert_eq!(r, Ok(Value::Nil), "{flavor}: timed wait {t}/{i}");
                }
            }));
        }
        for t in 0..SERVED_CONNS {
            let n = served / SERVED_CONNS;
            jobs.push(s.spawn(move || {
                let buf = packed_per_owner(&format!("s{t}"), n, |owner| {
                    let acquire = [
                        "RLOCK.ACQUIRE",
                        "srv",
                        owner,
                        "BLOCK",
                        "0",
                        "LEASE",
                        "60000",
                    ];
                    vec![packed(&acquire), packed(&["RLOCK.RELEASE", "srv", owner])]
                });
                for (i, r) in pipelined(server, &buf, 2 * n).into_iter().enumerate() {
                    assert_eq!(r, Ok(Value::Int(1)), "{flavor}: served wait {t}/{}", i / 2);
                }
            }));
        }
        wait_blocked(flavor, &mut c, "srv", SERVED_CONNS as i64);
        run(&mut c, &["RLOCK.RELEASE", "srv", "gate"]);
        for j in jobs {
            j.join().expect("worker");
        }
    });
    let mut left = killed;
    let mut batch_no = 0;
    while left > 0 {
        let n = left.min(KILL_BATCH);
        left -= n;
        batch_no += 1;
        let waiters: Vec<Pending> = thread::scope(|s| {
            let parts: Vec<_> = (0..4)
                .map(|part| {
                    s.spawn(move || {
                        (part..n)
                            .step_by(4)
                            .map(|i| {
                                let mut p = Pending::new(server);
                                p.send(&[
                                    "RLOCK.ACQUIRE",
                                    "busy",
                                    &format!("k{batch_no}-{i}"),
                                    "BLOCK",
                                    "0",
                                ]);
                                p
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            parts
                .into_iter()
                .flat_map(|h| h.join().expect("connect"))
                .collect()
        });
        wait_blocked(flavor, &mut c, "busy", n as i64);
        if batch_no % 2 == 0 {
            let mut buf = Vec::new();
            for w in &waiters {
                buf.extend(packed(&["CLIENT", "KILL", "ID", &w.id.to_string()]));
            }
            c.send_packed_command(&buf).expect("send");
            for _ in &waiters {
                assert_eq!(c.recv_response().expect("kill"), Value::Int(1), "{flavor}");
            }
        }
        drop(waiters);
        wait_blocked(flavor, &mut c, "busy", 0);
    }
    assert_eq!(rstat(server, "blocked"), 0, "{flavor}");
    assert_eq!(holders(&mut c, "busy"), held_by("h", 1), "{flavor}");
    assert!(holders(&mut c, "srv").is_empty(), "{flavor}");
}

fn used_memory(server: &Server) -> i64 {
    server.info("memory")["used_memory"]
        .parse()
        .expect("used_memory")
}

/// Waits until only `n` clients are connected (the one asking included), so client
/// buffers do not count.
fn wait_clients(server: &Server, n: i64) {
    let ok = wait_until(Duration::from_secs(10), || {
        server.info("clients")["connected_clients"].parse::<i64>() == Ok(n)
    });
    assert!(ok, "{}: connections did not close", server.flavor);
}

#[test]
fn ten_thousand_waits_leave_no_blocked_client_and_flat_memory() {
    for flavor in flavors() {
        let mut server = Server::builder(flavor).config("hz", "100").start();
        let mut c = server.conn();
        run(&mut c, &["RLOCK.ACQUIRE", "busy", "h", "LEASE", "600000"]);
        let start = Instant::now();
        // Warm-up at the same concurrency, so pools and tables reach their size.
        waits_round(&server, 400, 250, 500);
        wait_clients(&server, 2);
        let before = used_memory(&server);
        let handoffs = rstat(&server, "handoffs");
        waits_round(&server, 4000, 3000, 3000);
        wait_clients(&server, 2);
        let after = used_memory(&server);
        let s = rstats(&server);
        eprintln!(
            "{flavor}: 10,000 waits in {:?}; used_memory {before} -> {after} ({:+} bytes)",
            start.elapsed(),
            after - before
        );
        assert_eq!(s["blocked"], 0, "{flavor}: INFO rlock blocked");
        assert_eq!(s["tracked_locks"], 0, "{flavor}: INFO rlock tracked_locks");
        assert!(
            s["handoffs"] - handoffs >= 3000,
            "{flavor}: too few hand-offs ({}) for the served waits",
            s["handoffs"] - handoffs
        );
        assert!(
            after - before < 256 * 1024,
            "{flavor}: used_memory grew by {} bytes over 10,000 waits ({before} -> {after})",
            after - before
        );
        server.assert_alive("10,000 waits");
    }
}
