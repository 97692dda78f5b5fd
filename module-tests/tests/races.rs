//! Races between a grant and everything else that can end a wait in the same
//! event-loop turn: `CLIENT UNBLOCK ... TIMEOUT|ERROR`, `CLIENT KILL`, the BLOCK
//! deadline. Every command gets exactly one reply, checked byte by byte on raw
//! sockets, and a grant its client never hears is given back to the next waiter.
//!
//! Before Redis 7.4 (Valkey 8), the server could not tell a module whether a client
//! it had just answered was unblocked by TIMEOUT or by ERROR. rlock's waits opt out
//! of `CLIENT UNBLOCK` there (it replies 0), as the server allows for module
//! commands without a timeout callback.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

/// A raw RESP2 connection, to see every byte the server sends.
struct Raw {
    stream: TcpStream,
    /// Bytes read but not yet parsed.
    buffered: Vec<u8>,
    /// `CLIENT ID`.
    id: i64,
}

fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    out
}

impl Raw {
    fn new(server: &Server) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let mut raw = Raw {
            stream,
            buffered: Vec::new(),
            id: 0,
        };
        raw.send(&[&["CLIENT", "ID"]]);
        let reply = raw.frame();
        raw.id = reply[1..].parse().expect("CLIENT ID");
        raw
    }

    /// Sends `commands` in one packet.
    fn send(&mut self, commands: &[&[&str]]) {
        let packet: Vec<u8> = commands.iter().flat_map(|c| encode(c)).collect();
        self.stream.write_all(&packet).expect("send");
    }

    fn line(&mut self) -> String {
        loop {
            if let Some(end) = self.buffered.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buffered.drain(..end + 2).collect();
                return String::from_utf8_lossy(&line[..end]).into_owned();
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).expect("no reply came");
            assert!(n > 0, "connection closed");
            self.buffered.extend_from_slice(&chunk[..n]);
        }
    }

    /// The next reply, as its first line (`:1`, `-ERR ...`, `$-1`), or the bulk's text.
    fn frame(&mut self) -> String {
        let line = self.line();
        match line.strip_prefix('$') {
            Some(len) if len != "-1" => self.line(),
            _ => line,
        }
    }

    /// Asserts nothing was sent beyond the replies read so far: the next reply is
    /// the one to an `ECHO` sent now.
    fn assert_no_extra_reply(&mut self, what: &str) {
        let marker = format!("marker-{}", self.id);
        self.send(&[&["ECHO", &marker]]);
        assert_eq!(self.frame(), marker, "{what}: an extra reply was sent");
    }
}

fn run(c: &mut redis::Connection, args: &[&str]) -> Value {
    call(c, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

/// Sends, in one packet on `holder`, `h`'s release of `key` and then `other`, to run in
/// the same turn; first a 250 ms `DEBUG SLEEP` when `near_deadline`, so that a 150 ms
/// BLOCK runs out while the server sleeps. Reads the replies up to the release's.
fn release_with(holder: &mut Raw, near_deadline: bool, key: &str, other: &[&str], case: &str) {
    let sleep: &[&str] = &["DEBUG", "SLEEP", "0.25"];
    let release: &[&str] = &["RLOCK.RELEASE", key, "h"];
    let mut packet = if near_deadline { vec![sleep] } else { vec![] };
    packet.extend([release, other]);
    holder.send(&packet);
    if near_deadline {
        assert_eq!(holder.frame(), "+OK", "{case}: DEBUG SLEEP");
    }
    assert_eq!(holder.frame(), ":1", "{case}: RELEASE");
}

fn blocked_raw(
    flavor: Flavor,
    c: &mut redis::Connection,
    server: &Server,
    key: &str,
    owner: &str,
    block: &str,
    n: i64,
) -> Raw {
    let mut w = Raw::new(server);
    w.send(&[&["RLOCK.ACQUIRE", key, owner, "BLOCK", block]]);
    wait_blocked(flavor, c, key, n);
    w
}

#[test]
fn a_grant_and_client_unblock_in_one_turn_get_exactly_one_reply() {
    for (flavor, mut server, mut c) in servers() {
        for reason in ["TIMEOUT", "ERROR"] {
            // Near the deadline: the BLOCK runs out while the server sleeps, and the
            // grant, the unblock and the deadline all land in one turn.
            for near_deadline in [false, true] {
                let case = format!("{flavor} {reason} near_deadline={near_deadline}");
                let key = format!("race-{reason}-{near_deadline}");
                let key = key.as_str();
                run(&mut c, &["RLOCK.ACQUIRE", key, "h", "LEASE", "60000"]);
                let block = if near_deadline { "150" } else { "0" };
                let mut w = blocked_raw(flavor, &mut c, &server, key, "w", block, 1);
                let mut next = blocked_raw(flavor, &mut c, &server, key, "next", "0", 2);
                let mut holder = Raw::new(&server);
                let id = w.id.to_string();
                let unblock = ["CLIENT", "UNBLOCK", &id, reason];
                release_with(&mut holder, near_deadline, key, &unblock, &case);
                let unblocked = holder.frame();
                let w_reply = w.frame();
                if unblock_supported(flavor) && reason == "ERROR" {
                    assert_eq!(unblocked, ":1", "{case}: CLIENT UNBLOCK");
                    assert!(
                        w_reply.starts_with("-UNBLOCKED"),
                        "{case}: waiter got {w_reply}"
                    );
                    // Its grant is given back, and the next in line gets the lock.
                    assert_eq!(next.frame(), ":1", "{case}: the next waiter");
                    assert_eq!(holders(&mut c, key), held_by("next", 1), "{case}");
                } else {
                    let expected = if unblock_supported(flavor) {
                        ":1"
                    } else {
                        ":0"
                    };
                    assert_eq!(unblocked, expected, "{case}: CLIENT UNBLOCK");
                    assert_eq!(w_reply, ":1", "{case}: the grant stands");
                    assert_eq!(holders(&mut c, key), held_by("w", 1), "{case}");
                    run(&mut c, &["RLOCK.RELEASE", key, "w"]);
                    assert_eq!(next.frame(), ":1", "{case}: the next waiter");
                }
                w.assert_no_extra_reply(&case);
                next.assert_no_extra_reply(&case);
                holder.assert_no_extra_reply(&case);
                assert_eq!(rstat(&server, "blocked"), 0, "{case}");
                run(&mut c, &["RLOCK.FORCERELEASE", key]);
            }
        }
        server.assert_alive("races");
    }
}

#[test]
fn a_waiter_killed_in_the_turn_it_is_granted_holds_nothing() {
    for (flavor, server, mut c) in servers() {
        for session in [false, true] {
            for near_deadline in [false, true] {
                let case = format!("{flavor} session={session} near_deadline={near_deadline}");
                let key = format!("kill-{session}-{near_deadline}");
                let key = key.as_str();
                run(&mut c, &["RLOCK.ACQUIRE", key, "h", "LEASE", "60000"]);
                let mut w = Raw::new(&server);
                let block = if near_deadline { "150" } else { "0" };
                let mut acquire = vec!["RLOCK.ACQUIRE", key, "w", "BLOCK", block];
                if session {
                    acquire.push("SESSION");
                }
                w.send(&[&acquire]);
                wait_blocked(flavor, &mut c, key, 1);
                let mut next = blocked_raw(flavor, &mut c, &server, key, "next", "0", 2);
                let mut holder = Raw::new(&server);
                let id = w.id.to_string();
                let kill = ["CLIENT", "KILL", "ID", &id];
                release_with(&mut holder, near_deadline, key, &kill, &case);
                assert_eq!(holder.frame(), ":1", "{case}: CLIENT KILL");
                // The killed waiter's grant goes to the next in line, not for a lease.
                assert_eq!(next.frame(), ":1", "{case}: the next waiter");
                assert_eq!(holders(&mut c, key), held_by("next", 1), "{case}");
                next.assert_no_extra_reply(&case);
                holder.assert_no_extra_reply(&case);
                assert_eq!(rstat(&server, "blocked"), 0, "{case}");
                run(&mut c, &["RLOCK.FORCERELEASE", key]);
            }
        }
    }
}

#[test]
fn a_block_that_runs_out_in_the_turn_of_a_grant_gets_the_grant_once() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "d", "h", "LEASE", "60000"]);
        let mut w = blocked_raw(flavor, &mut c, &server, "d", "w", "100", 1);
        let mut holder = Raw::new(&server);
        // The deadline passes during the sleep; the release comes before the module's
        // timer, in the same turn.
        holder.send(&[&["DEBUG", "SLEEP", "0.25"], &["RLOCK.RELEASE", "d", "h"]]);
        assert_eq!(holder.frame(), "+OK");
        assert_eq!(holder.frame(), ":1");
        assert_eq!(w.frame(), ":1", "{flavor}: granted before its timer ran");
        w.assert_no_extra_reply(&format!("{flavor}"));
        assert_eq!(holders(&mut c, "d"), held_by("w", 1), "{flavor}");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
    }
}

/// `MODULE UNLOAD` is refused while the module holds a timer. A fair queue whose
/// members poll (nobody blocked here) needs none, so it must not hold one.
#[test]
fn module_unload_is_not_held_up_by_a_fair_queue_with_nobody_blocked() {
    for (flavor, mut server, mut c) in servers() {
        hold_with_a_polling_fair_head(&mut c, "f");
        assert_eq!(
            call(&mut c, &["MODULE", "UNLOAD", "rlock"]),
            Ok(Value::Okay),
            "{flavor}: held lock, polling fair waiter"
        );
        let path = module_path().display().to_string();
        run(&mut c, &["MODULE", "LOAD", &path]);
        // Free lock, woken poller heading the queue.
        run(&mut c, &["RLOCK.FORCERELEASE", "f"]);
        run(
            &mut c,
            &["RLOCK.ACQUIRE", "g", "h", "FAIR", "LEASE", "60000"],
        );
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "g", "p", "FAIR"]);
        run(&mut c, &["RLOCK.RELEASE", "g", "h"]);
        assert_eq!(
            call(&mut c, &["MODULE", "UNLOAD", "rlock"]),
            Ok(Value::Okay),
            "{flavor}: free lock, polling head"
        );
        run(&mut c, &["MODULE", "LOAD", &path]);
        // Held lock, polling head, and a FAIR waiter that timed out behind it.
        run(
            &mut c,
            &["RLOCK.ACQUIRE", "t", "h", "FAIR", "LEASE", "60000"],
        );
        assert_nil(&mut c, &["RLOCK.ACQUIRE", "t", "p", "FAIR"]);
        let mut w = Raw::new(&server);
        w.send(&[&["RLOCK.ACQUIRE", "t", "w", "FAIR", "BLOCK", "100"]]);
        assert_eq!(w.frame(), "$-1", "{flavor}: timed out");
        // Its queue entry leaves on the module's next turn (a 0 ms timer); then no timer
        // is left, though the lease runs for a minute more.
        let unloaded = wait_until(Duration::from_secs(1), || {
            call(&mut c, &["MODULE", "UNLOAD", "rlock"]) == Ok(Value::Okay)
        });
        assert!(unloaded, "{flavor}: after the only waiter timed out");
        server.assert_alive("MODULE UNLOAD");
    }
}

/// A blocked `RSEM.ACQUIRE ... REQ id` granted in the turn its client is killed: the
/// permits go back, and so does the record of its id, so the same call sent again is a new
/// call that must find permits; sent again before the give-back has run, it keeps the grant
/// instead. Either way the semaphore never holds more permits than it has.
#[test]
fn a_permit_grant_lost_with_its_client_is_not_replayed_by_its_request_id() {
    for (flavor, server, mut c) in servers() {
        for retry_in_same_turn in [false, true] {
            let case = format!("{flavor} retry_in_same_turn={retry_in_same_turn}");
            let key = format!("sem-{retry_in_same_turn}");
            let key = key.as_str();
            run(&mut c, &["RSEM.TRYSETPERMITS", key, "3"]);
            run(&mut c, &["RSEM.ACQUIRE", key, "PERMITS", "3"]);
            let mut w = Raw::new(&server);
            w.send(&[&[
                "RSEM.ACQUIRE",
                key,
                "PERMITS",
                "2",
                "BLOCK",
                "5000",
                "REQ",
                "x",
            ]]);
            wait_total_blocked(&server, 1);
            let mut holder = Raw::new(&server);
            let id = w.id.to_string();
            let release: &[&str] = &["RSEM.RELEASE", key, "PERMITS", "2"];
            let kill: &[&str] = &["CLIENT", "KILL", "ID", &id];
            let retry: &[&str] = &["RSEM.ACQUIRE", key, "PERMITS", "2", "REQ", "x"];
            if retry_in_same_turn {
                holder.send(&[release, kill, retry]);
            } else {
                holder.send(&[release, kill]);
            }
            let released = holder.frame();
            assert!(
                released.starts_with(':'),
                "{case}: RELEASE replied {released}"
            );
            assert_eq!(holder.frame(), ":1", "{case}: CLIENT KILL");
            if retry_in_same_turn {
                // The grant still waiting to be given back stands, for this call.
                assert_eq!(holder.frame(), ":1", "{case}: the retry");
            } else {
                // The give-back has run: 2 of 3 available (1 still held), no record left.
                assert!(
                    wait_until(Duration::from_secs(5), || {
                        run(&mut c, &["RSEM.AVAILABLE", key]) == Value::Int(2)
                    }),
                    "{case}: the lost grant went back"
                );
                holder.send(&[retry]);
                assert_eq!(holder.frame(), ":1", "{case}: the retry takes permits anew");
            }
            // 1 held from the start, 2 by the retried call: none left, whatever runs later.
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(
                run(&mut c, &["RSEM.AVAILABLE", key]),
                Value::Int(0),
                "{case}: permits held 3 of 3"
            );
            holder.assert_no_extra_reply(&case);
        }
    }
}
