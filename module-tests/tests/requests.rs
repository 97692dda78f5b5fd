//! Idempotent retries: `REQ id` on ACQUIRE, RELEASE, RENEW, MACQUIRE and MRELEASE.
//! The same call sent again by the same owner within the lease replies the first
//! reply and changes nothing, on the same connection or another, blocked or not, on
//! a replica after failover too (the record is a replicated key).

mod common;

use std::time::Duration;

use common::*;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

fn run(c: &mut Connection, args: &[&str]) -> Value {
    call(c, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

fn record(c: &mut Connection, key: &str, id: &str) -> Option<String> {
    let name = format!("rlock_request:{{{key}}}:{id}");
    redis::cmd("GET").arg(name).query(c).expect("GET")
}

#[test]
fn a_retried_acquire_does_not_reenter() {
    for (flavor, server, mut c) in servers() {
        let acquire = ["RLOCK.ACQUIRE", "a", "o", "LEASE", "60000", "REQ", "r1"];
        assert_eq!(run(&mut c, &acquire), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &acquire), Value::Int(1), "{flavor}: retried");
        // On a new connection too, as after a reconnect.
        let mut other = server.conn();
        assert_eq!(run(&mut other, &acquire), Value::Int(1), "{flavor}");
        assert_eq!(holders(&mut c, "a"), held_by("o", 1), "{flavor}");
        assert_eq!(record(&mut c, "a", "r1").as_deref(), Some("A:1:o"));
        let ttl = pttl(&mut c, b"rlock_request:{a}:r1");
        assert!(
            (59_000..=60_000).contains(&ttl),
            "{flavor}: record TTL {ttl}"
        );
        // Another id is another call: a re-entry.
        let reenter = ["RLOCK.ACQUIRE", "a", "o", "REQ", "r2"];
        assert_eq!(run(&mut c, &reenter), Value::Int(2), "{flavor}");
        assert_eq!(run(&mut c, &reenter), Value::Int(2), "{flavor}");
        assert_eq!(holders(&mut c, "a"), held_by("o", 2), "{flavor}");
        // A fencing token replays as it was handed out, while the hold stands.
        let fenced = ["RLOCK.ACQUIRE", "t", "o", "TOKEN", "REQ", "r3"];
        assert_eq!(run(&mut c, &fenced), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &fenced), Value::Int(1), "{flavor}: replayed");
        assert_eq!(holders(&mut c, "t"), held_by("o", 1), "{flavor}");
        // Once it is given back, the call is new: here the lock is someone else's.
        set_up(&mut c, &["RLOCK.RELEASE t o", "RLOCK.ACQUIRE t p TOKEN"]);
        assert_eq!(run(&mut c, &fenced), Value::Nil, "{flavor}: not replayed");
        assert_eq!(holders(&mut c, "t"), held_by("p", 1), "{flavor}");
        // FAIR takes the same path.
        let fair = ["RLOCK.ACQUIRE", "f", "o", "FAIR", "REQ", "r4"];
        assert_eq!(run(&mut c, &fair), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &fair), Value::Int(1), "{flavor}");
        assert_eq!(holders(&mut c, "f"), held_by("o", 1), "{flavor}");
    }
}

#[test]
fn a_retried_release_does_not_release_twice() {
    for (flavor, _server, mut c) in servers() {
        set_up(&mut c, &["RLOCK.ACQUIRE r o", "RLOCK.ACQUIRE r o"]);
        let undo = ["RLOCK.RELEASE", "r", "o", "REQ", "u1"];
        assert_eq!(run(&mut c, &undo), Value::Int(0), "{flavor}");
        assert_eq!(run(&mut c, &undo), Value::Int(0), "{flavor}: retried");
        assert_eq!(holders(&mut c, "r"), held_by("o", 1), "{flavor}");
        let last = ["RLOCK.RELEASE", "r", "o", "REQ", "u2"];
        assert_eq!(run(&mut c, &last), Value::Int(1), "{flavor}");
        // Someone else took the lock since: the retry neither errs nor touches it.
        run(&mut c, &["RLOCK.ACQUIRE", "r", "p"]);
        assert_eq!(run(&mut c, &last), Value::Int(1), "{flavor}: retried");
        assert_eq!(holders(&mut c, "r"), held_by("p", 1), "{flavor}");
        // A release that fails records nothing: a retry fails the same way.
        let r = call(&mut c, &["RLOCK.RELEASE", "r", "o", "REQ", "u3"]);
        assert!(matches!(&r, Err(e) if e.starts_with("NOTHELD")), "{r:?}");
        assert_eq!(record(&mut c, "r", "u3"), None, "{flavor}");
    }
}

#[test]
fn a_retried_renew_replies_the_same() {
    for (flavor, _server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "n", "o", "LEASE", "1000"]);
        let renew = ["RLOCK.RENEW", "n", "o", "LEASE", "60000", "REQ", "n1"];
        assert_eq!(run(&mut c, &renew), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &renew), Value::Int(1), "{flavor}: retried");
        assert_eq!(record(&mut c, "n", "n1").as_deref(), Some("N:1:o"));
        // Not held: 0, and nothing recorded.
        let other = ["RLOCK.RENEW", "n", "p", "REQ", "n2"];
        assert_eq!(run(&mut c, &other), Value::Int(0), "{flavor}");
        assert_eq!(record(&mut c, "n", "n2"), None, "{flavor}");
    }
}

/// A record key `record_key` that is not a string: each of `calls` (using its id) is
/// refused with `WRONGTYPE` and changes nothing; the key is deleted again after.
fn a_record_not_a_string_is_wrongtype(
    flavor: Flavor,
    c: &mut Connection,
    record_key: &str,
    calls: &[&[&str]],
) {
    run(c, &["RPUSH", record_key, "junk"]);
    let before = keyspace(c);
    for args in calls {
        let r = call(c, args);
        assert!(
            matches!(&r, Err(e) if e.starts_with("WRONGTYPE")),
            "{flavor}: {args:?} gave {r:?}"
        );
    }
    assert_eq!(keyspace(c), before, "{flavor}");
    run(c, &["DEL", record_key]);
}

/// Each call of `cases` gets its error, and nothing is written to the (empty) keyspace.
fn refused_writing_nothing(flavor: Flavor, c: &mut Connection, cases: &[(Vec<&str>, &str)]) {
    for (args, error) in cases {
        assert_eq!(call(c, args), Err(error.to_string()), "{flavor}: {args:?}");
    }
    assert!(keyspace(c).is_empty(), "{flavor}: nothing written");
}

#[test]
fn an_id_used_for_another_call_is_refused_and_changes_nothing() {
    for (flavor, _server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "c", "o", "REQ", "x"]);
        let before = keyspace(&mut c);
        for args in [
            &["RLOCK.ACQUIRE", "c", "other", "REQ", "x"][..],
            &["RLOCK.RELEASE", "c", "o", "REQ", "x"],
            &["RLOCK.RENEW", "c", "o", "REQ", "x"],
        ] {
            let r = call(&mut c, args);
            assert!(
                matches!(&r, Err(e) if e.contains("REQ id already used")),
                "{flavor}: {args:?} gave {r:?}"
            );
        }
        let calls = [&["RLOCK.RELEASE", "c", "o", "REQ", "y"][..]];
        a_record_not_a_string_is_wrongtype(flavor, &mut c, "rlock_request:{c}:y", &calls);
        assert_eq!(keyspace(&mut c), before, "{flavor}: nothing changed");
    }
}

#[test]
fn bad_request_ids_are_refused_and_change_nothing() {
    for (flavor, _server, mut c) in servers() {
        let calls = ["RLOCK.ACQUIRE b o", "RLOCK.RELEASE b o", "RLOCK.RENEW b o"];
        refuses_bad_request_ids(flavor, &mut c, &calls);
        let not_an_option = (
            words("RLOCK.RELEASE b o LEASE 10"),
            "ERR unknown option 'LEASE'",
        );
        refused_writing_nothing(flavor, &mut c, &[not_an_option]);
    }
}

/// Each bad request id, after each of `calls` (words split at spaces), is refused alike
/// and writes nothing.
fn refuses_bad_request_ids(flavor: Flavor, c: &mut Connection, calls: &[&str]) {
    let long = "x".repeat(65);
    let bad_ids: [(&[&str], &str); 8] = [
        (&["REQ"], "ERR option REQ needs a request id"),
        (&["REQ", ""], "ERR REQ id must be 1 to 64 bytes"),
        (&["REQ", &long], "ERR REQ id must be 1 to 64 bytes"),
        (&["REQ", "a{b}"], "ERR REQ id must not contain '{' or '}'"),
        (&["REQ", "a}"], "ERR REQ id must not contain '{' or '}'"),
        (&["REQ", "{a"], "ERR REQ id must not contain '{' or '}'"),
        (
            &["REQ", "a", "REQ", "b"],
            "ERR option REQ given more than once",
        ),
        (
            &["REQ", "a", "REQ", "a"],
            "ERR option REQ given more than once",
        ),
    ];
    let mut cases = Vec::new();
    for call in calls {
        for (bad_id, error) in bad_ids {
            cases.push(([&words(call)[..], bad_id].concat(), error));
        }
    }
    refused_writing_nothing(flavor, c, &cases);
}

/// `h` holds `key`; `args` (with a `REQ` id) blocks on it, and again on a second
/// connection (a retry). `h` releases and the first connection is killed in the same
/// turn: the retry gets `reply`, and the module has had time to give back what the
/// dead connection never heard.
fn the_retry_is_granted_as_the_first_dies(
    server: &Server,
    c: &mut Connection,
    args: &[&str],
    key: &str,
    reply: i64,
) {
    let flavor = server.flavor;
    run(c, &["RLOCK.ACQUIRE", key, "h"]);
    let first = Pending::blocked_on(server, c, args, (key, 1));
    let mut second = Pending::blocked_on(server, c, args, (key, 2));
    let mut tx = redis::pipe();
    tx.cmd("RLOCK.RELEASE").arg(key).arg("h");
    tx.cmd("CLIENT").arg("KILL").arg("ID").arg(first.id);
    let replies: Vec<Value> = tx.query(c).expect("pipeline");
    assert_eq!(replies, vec![Value::Int(1), Value::Int(1)], "{flavor}");
    assert_eq!(second.reply(), Ok(Value::Int(reply)), "{flavor}");
    std::thread::sleep(Duration::from_millis(100));
}

/// `args` (with a `REQ` id) blocks on `key`; the client times out and sends it again on
/// a new connection, blocked behind it; `release` frees `key`. Both get `1` at once, and
/// nobody is left blocked: one grant, two replies.
fn sent_twice_granted_once(
    server: &Server,
    c: &mut Connection,
    args: &[&str],
    key: &str,
    release: &[&str],
) {
    let flavor = server.flavor;
    let mut first = Pending::blocked_on(server, c, args, (key, 1));
    let mut second = Pending::blocked_on(server, c, args, (key, 2));
    run(c, release);
    assert_eq!(first.reply(), Ok(Value::Int(1)), "{flavor}");
    assert_eq!(
        second.reply(),
        Ok(Value::Int(1)),
        "{flavor}: the same reply at once"
    );
    assert_eq!(rstat(server, "blocked"), 0, "{flavor}");
}

#[test]
fn a_blocked_acquire_sent_twice_is_granted_once() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "w", "h"]);
        let acquire = ["RLOCK.ACQUIRE", "w", "o", "BLOCK", "10000", "REQ", "b1"];
        sent_twice_granted_once(&server, &mut c, &acquire, "w", &["RLOCK.RELEASE", "w", "h"]);
        assert_eq!(holders(&mut c, "w"), held_by("o", 1), "{flavor}");
        // One release frees it.
        assert_int(&mut c, &["RLOCK.RELEASE", "w", "o"], 1);
        assert!(holders(&mut c, "w").is_empty(), "{flavor}");
    }
}

#[test]
fn records_replicate_and_answer_after_failover() {
    for (flavor, primary) in each_server() {
        let replica = Server::builder(flavor).replica_of(primary.port).start();
        sync_replica(&primary, &replica);
        let mut c = primary.conn();
        let acquire = ["RLOCK.ACQUIRE", "p", "o", "LEASE", "60000", "REQ", "f1"];
        assert_eq!(run(&mut c, &acquire), Value::Int(1));
        assert_int(&mut c, &["WAIT", "1", "2000"], 1);
        let mut r = replica.conn();
        run(&mut r, &["REPLICAOF", "NO", "ONE"]);
        // The retry reaches the promoted replica: the same reply, no re-entry.
        assert_eq!(run(&mut r, &acquire), Value::Int(1), "{flavor}");
        assert_eq!(holders(&mut r, "p"), held_by("o", 1), "{flavor}");
        let ttl = pttl(&mut r, b"rlock_request:{p}:f1");
        assert!(ttl > 50_000, "{flavor}: record TTL on the replica {ttl}");
    }
}

#[test]
fn records_expire_with_the_lease() {
    for (flavor, _server, mut c) in servers() {
        let acquire = ["RLOCK.ACQUIRE", "e", "o", "LEASE", "100", "REQ", "e1"];
        assert_eq!(run(&mut c, &acquire), Value::Int(1));
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(record(&mut c, "e", "e1"), None, "{flavor}");
        // Past the lease the call is new again: the lock expired, so it is a new hold.
        assert_eq!(run(&mut c, &acquire), Value::Int(1), "{flavor}");
    }
}

#[test]
fn a_fair_blocked_acquire_sent_twice_is_granted_once() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "fw", "h", "FAIR"]);
        let acquire = words("RLOCK.ACQUIRE fw o FAIR BLOCK 5000 REQ q1");
        let release = ["RLOCK.RELEASE", "fw", "h"];
        sent_twice_granted_once(&server, &mut c, &acquire, "fw", &release);
        assert_eq!(holders(&mut c, "fw"), held_by("o", 1), "{flavor}");
    }
}

/// `session` (a SESSION call of owner `o` with a `REQ` id, replying `reply`) on a
/// connection that then closes, and sent again on another: each time `keys` are held
/// for that connection alone, and its close gives them back. The retry runs again
/// rather than report the holds that went.
fn session_call_then_its_retry(
    server: &Server,
    c: &mut Connection,
    session: &[&str],
    reply: i64,
    keys: &[&str],
) {
    let flavor = server.flavor;
    for sent in ["first", "retry"] {
        let mut con = server.conn();
        assert_eq!(
            run(&mut con, session),
            Value::Int(reply),
            "{flavor}: {sent}"
        );
        for key in keys {
            assert_eq!(holders(c, key), held_by("o", 1), "{flavor}: {sent}: {key}");
        }
        drop(con);
        let gone = wait_until(Duration::from_secs(2), || {
            keys.iter().all(|key| holders(c, key).is_empty())
        });
        assert!(
            gone,
            "{flavor}: {sent}: the SESSION holds outlived their connection"
        );
    }
}

/// The record outlives a hold given back for its client; a retry then runs again
/// rather than report a hold that is gone.
#[test]
fn a_retry_after_the_hold_was_given_back_runs_again() {
    for (flavor, server, mut c) in servers() {
        let acquire = ["RLOCK.ACQUIRE", "s", "o", "SESSION", "REQ", "s1"];
        session_call_then_its_retry(&server, &mut c, &acquire, 1, &["s"]);
        // Held by someone else by the time the retry comes: not acquired.
        let mut third = server.conn();
        assert_eq!(run(&mut third, &acquire), Value::Int(1));
        drop(third);
        assert!(wait_until(Duration::from_secs(2), || holders(&mut c, "s").is_empty()));
        run(&mut c, &["RLOCK.ACQUIRE", "s", "p"]);
        let mut late = server.conn();
        assert_eq!(run(&mut late, &acquire), Value::Nil, "{flavor}");
        assert_eq!(holders(&mut c, "s"), held_by("p", 1), "{flavor}");
        // A SESSION retry while the first connection lives moves the hold to it.
        run(&mut c, &["RLOCK.FORCERELEASE", "s"]);
        let moved = ["RLOCK.ACQUIRE", "s", "o", "SESSION", "REQ", "s2"];
        let mut one = server.conn();
        let mut two = server.conn();
        assert_eq!(run(&mut one, &moved), Value::Int(1));
        assert_eq!(run(&mut two, &moved), Value::Int(1));
        drop(one);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(holders(&mut c, "s"), held_by("o", 1), "{flavor}: moved");
        drop(two);
        assert!(wait_until(Duration::from_secs(2), || holders(&mut c, "s").is_empty()));
    }
}

/// The first connection is granted and killed in the same turn; the same request
/// waiting on a second connection got the reply, so the hold stays.
#[test]
fn a_grant_delivered_to_a_retry_stays_when_the_first_connection_dies() {
    for (flavor, server, mut c) in servers() {
        let acquire = words("RLOCK.ACQUIRE g o BLOCK 5000 REQ g1");
        the_retry_is_granted_as_the_first_dies(&server, &mut c, &acquire, "g", 1);
        assert_eq!(holders(&mut c, "g"), held_by("o", 1), "{flavor}");
    }
}

fn hget(c: &mut Connection, key: &str, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(c)
        .expect("HGET")
}

/// `verb rw o mode LEASE 60000 REQ req`: owner `o`'s call on the read-write lock `rw`,
/// with the request id that makes a retry safe.
fn owner_o_on_rw<'a>(verb: &'a str, mode: &'a str, req: &'a str) -> [&'a str; 8] {
    [verb, "rw", "o", mode, "LEASE", "60000", "REQ", req]
}

#[test]
fn retries_on_a_read_write_lock_are_applied_once() {
    for (flavor, server, mut c) in servers() {
        // A write hold and a read hold by the same owner: each side has its records.
        let write = owner_o_on_rw("RLOCK.ACQUIRE", "WRITE", "w1");
        assert_eq!(run(&mut c, &write), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &write), Value::Int(1), "{flavor}: retried");
        let read = owner_o_on_rw("RLOCK.ACQUIRE", "READ", "r1");
        assert_eq!(run(&mut c, &read), Value::Int(1), "{flavor}");
        let mut other = server.conn();
        assert_eq!(run(&mut other, &read), Value::Int(1), "{flavor}: retried");
        assert_eq!(hget(&mut c, "rw", "o:write").as_deref(), Some("1"));
        assert_eq!(hget(&mut c, "rw", "o").as_deref(), Some("1"));
        assert_eq!(record(&mut c, "rw", "w1").as_deref(), Some("A:1:o:write"));
        assert_eq!(record(&mut c, "rw", "r1").as_deref(), Some("A:1:o"));
        // A renew, retried, replies the same.
        let renew = owner_o_on_rw("RLOCK.RENEW", "READ", "n1");
        assert_eq!(run(&mut c, &renew), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &renew), Value::Int(1), "{flavor}");
        // Releasing the read, retried, does not take the write's count.
        let release = ["RLOCK.RELEASE", "rw", "o", "READ", "REQ", "u1"];
        assert_eq!(run(&mut c, &release), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &release), Value::Int(1), "{flavor}: retried");
        assert_eq!(hget(&mut c, "rw", "o:write").as_deref(), Some("1"));
        assert_eq!(hget(&mut c, "rw", "o"), None, "{flavor}");
        assert_eq!(hget(&mut c, "rw", "mode").as_deref(), Some("write"));
        // A failed release records nothing.
        let again = ["RLOCK.RELEASE", "rw", "o", "READ", "REQ", "u2"];
        let r = call(&mut c, &again);
        assert!(matches!(&r, Err(e) if e.starts_with("NOTHELD")), "{r:?}");
        assert_eq!(record(&mut c, "rw", "u2"), None, "{flavor}");
        // A blocked write, sent again on another connection, is granted once.
        let blocked = words("RLOCK.ACQUIRE rw p WRITE BLOCK 10000 REQ b1");
        let release = ["RLOCK.RELEASE", "rw", "o", "WRITE"];
        sent_twice_granted_once(&server, &mut c, &blocked, "rw", &release);
        assert_eq!(hget(&mut c, "rw", "p:write").as_deref(), Some("1"));
        let done = ["RLOCK.RELEASE", "rw", "p", "WRITE"];
        assert_eq!(run(&mut c, &done), Value::Int(1), "{flavor}");
        assert_eq!(
            redis::cmd("EXISTS").arg("rw").query::<i64>(&mut c).unwrap(),
            0,
            "{flavor}"
        );
    }
}

/// The first waiter is granted and killed in the same turn (the release and `CLIENT KILL`
/// in one packet): the server frees the connection before its reply goes out, so what it
/// was given goes to the next waiter, for a lock (with its `REQ` record: the request sent
/// again is not told it holds), a semaphore's permit, a leased permit and a multi-key call.
#[test]
fn a_grant_written_but_never_sent_goes_to_the_next_waiter() {
    for (flavor, server, mut c) in servers() {
        set_up(
            &mut c,
            &[
                "RLOCK.ACQUIRE g h",
                "RSEM.TRYSETPERMITS s 1",
                "RSEM.ACQUIRE s",
                "RSEM.TRYSETPERMITS l 1",
            ],
        );
        let leased = match run(&mut c, &["RSEM.LEASE", "l", "LEASE", "60000"]) {
            Value::Array(ids) => reply_text(&ids[0]),
            other => panic!("{flavor}: RSEM.LEASE replied {other:?}"),
        };
        run(&mut c, &["RLOCK.ACQUIRE", "{m}1", "h"]);
        let families: [(&str, [&str; 2], Vec<&str>); 4] = [
            (
                "g",
                ["RLOCK.RELEASE", "g h"],
                words("RLOCK.ACQUIRE g OWNER BLOCK 5000 LEASE 30000 REQ OWNER"),
            ),
            (
                "s",
                ["RSEM.RELEASE", "s"],
                words("RSEM.ACQUIRE s BLOCK 5000"),
            ),
            (
                "l",
                ["RSEM.RETURN", &format!("l {leased}")],
                words("RSEM.LEASE l LEASE 60000 BLOCK 5000"),
            ),
            (
                "{m}1",
                ["RLOCK.RELEASE", "{m}1 h"],
                words("RLOCK.MACQUIRE OWNER 2 {m}1 {m}2 BLOCK 5000"),
            ),
        ];
        for (key, [verb, rest], wait) in families {
            let with_owner = |owner: &'static str| -> Vec<&str> {
                wait.iter()
                    .map(|a| if *a == "OWNER" { owner } else { *a })
                    .collect()
            };
            let mut first = Pending::new(&server);
            first.send(&with_owner("o"));
            wait_total_blocked(&server, 1);
            let mut second = Pending::new(&server);
            second.send(&with_owner("p"));
            wait_total_blocked(&server, 2);
            let mut tx = redis::pipe();
            tx.cmd(verb);
            for a in rest.split(' ') {
                tx.arg(a);
            }
            tx.cmd("CLIENT").arg("KILL").arg("ID").arg(first.id);
            let _: Vec<Value> = tx.query(&mut c).expect("pipeline");
            let got = second.reply();
            assert!(
                matches!(got, Ok(Value::Int(1 | 2)) | Ok(Value::Array(_))),
                "{flavor} {key}: the second waiter got {got:?}"
            );
        }
        assert_eq!(holders(&mut c, "g"), held_by("p", 1), "{flavor}");
        // Its record went with the grant given back.
        assert_eq!(record(&mut c, "g", "o"), None, "{flavor}: record forgotten");
        // The killed waiter's request, sent again, is not told it holds the lock.
        let resend = ["RLOCK.ACQUIRE", "g", "o", "LEASE", "30000", "REQ", "o"];
        assert_eq!(run(&mut c, &resend), Value::Nil, "{flavor}: resent");
        assert_eq!(
            run(&mut c, &["RSEM.AVAILABLE", "s"]),
            Value::Int(0),
            "{flavor}"
        );
        assert_eq!(holders(&mut c, "{m}2"), held_by("p", 1), "{flavor}");
    }
}

/// `RLOCK.MACQUIRE owner 2 first second LEASE 60000 REQ req`.
fn macquire<'a>(owner: &'a str, [first, second]: [&'a str; 2], req: &'a str) -> [&'a str; 9] {
    [
        "RLOCK.MACQUIRE",
        owner,
        "2",
        first,
        second,
        "LEASE",
        "60000",
        "REQ",
        req,
    ]
}

#[test]
fn a_retried_macquire_does_not_reenter() {
    for (flavor, server, mut c) in servers() {
        let acquire = macquire("o", ["ma", "mb"], "m1");
        assert_eq!(run(&mut c, &acquire), Value::Int(2), "{flavor}");
        assert_eq!(run(&mut c, &acquire), Value::Int(2), "{flavor}: retried");
        let mut other = server.conn();
        assert_eq!(run(&mut other, &acquire), Value::Int(2), "{flavor}");
        for key in ["ma", "mb"] {
            assert_eq!(holders(&mut c, key), held_by("o", 1), "{flavor}: {key}");
        }
        // On the first key named, and there alone.
        assert_eq!(record(&mut c, "ma", "m1").as_deref(), Some("M:2:o"));
        assert_eq!(record(&mut c, "mb", "m1"), None, "{flavor}");
        let ttl = pttl(&mut c, b"rlock_request:{ma}:m1");
        assert!(
            (59_000..=60_000).contains(&ttl),
            "{flavor}: record TTL {ttl}"
        );
        // Another id is another call: a re-entry, itself applied once.
        let reenter = macquire("o", ["mb", "ma"], "m2");
        assert_eq!(run(&mut c, &reenter), Value::Int(2), "{flavor}");
        assert_eq!(run(&mut c, &reenter), Value::Int(2), "{flavor}: retried");
        for key in ["ma", "mb"] {
            assert_eq!(holders(&mut c, key), held_by("o", 2), "{flavor}: {key}");
        }
        assert_eq!(record(&mut c, "mb", "m2").as_deref(), Some("M:2:o"));
        // The default lease when none is named.
        let plain = ["RLOCK.MACQUIRE", "o", "1", "mc", "REQ", "m3"];
        assert_eq!(run(&mut c, &plain), Value::Int(1), "{flavor}");
        let ttl = pttl(&mut c, b"rlock_request:{mc}:m3");
        assert!((29_000..=30_000).contains(&ttl), "{flavor}: TTL {ttl}");
        // A null reply writes no record.
        let busy = macquire("p", ["md", "ma"], "m4");
        assert_eq!(run(&mut c, &busy), Value::Nil, "{flavor}");
        assert_eq!(record(&mut c, "md", "m4"), None, "{flavor}");
        assert!(holders(&mut c, "md").is_empty(), "{flavor}");
    }
}

#[test]
fn a_retried_mrelease_does_not_release_twice() {
    for (flavor, _server, mut c) in servers() {
        let keys = ["RLOCK.MACQUIRE", "o", "2", "ua", "ub"];
        run(&mut c, &keys);
        run(&mut c, &keys);
        let undo = ["RLOCK.MRELEASE", "o", "2", "ua", "ub", "REQ", "u1"];
        assert_eq!(run(&mut c, &undo), Value::Int(0), "{flavor}");
        assert_eq!(run(&mut c, &undo), Value::Int(0), "{flavor}: retried");
        for key in ["ua", "ub"] {
            assert_eq!(holders(&mut c, key), held_by("o", 1), "{flavor}: {key}");
        }
        assert_eq!(record(&mut c, "ua", "u1").as_deref(), Some("U:0:o"));
        let ttl = pttl(&mut c, b"rlock_request:{ua}:u1");
        assert!((29_000..=30_000).contains(&ttl), "{flavor}: TTL {ttl}");
        let last = ["RLOCK.MRELEASE", "o", "2", "ua", "ub", "REQ", "u2"];
        assert_eq!(run(&mut c, &last), Value::Int(2), "{flavor}");
        // Someone else took a lock since: the retry neither errs nor touches it.
        run(&mut c, &["RLOCK.ACQUIRE", "ua", "p"]);
        assert_eq!(run(&mut c, &last), Value::Int(2), "{flavor}: retried");
        assert_eq!(holders(&mut c, "ua"), held_by("p", 1), "{flavor}");
        assert_eq!(record(&mut c, "ua", "u2").as_deref(), Some("U:2:o"));
        // A release that fails records nothing: a retry fails the same way.
        let failed = ["RLOCK.MRELEASE", "o", "2", "ua", "ub", "REQ", "u3"];
        for _ in 0..2 {
            let r = call(&mut c, &failed);
            assert!(matches!(&r, Err(e) if e.starts_with("NOTHELD")), "{r:?}");
        }
        assert_eq!(record(&mut c, "ua", "u3"), None, "{flavor}");
        assert_eq!(holders(&mut c, "ua"), held_by("p", 1), "{flavor}");
    }
}

/// The record outlives a hold given back; a retry then runs again rather than report
/// holds that are gone, and runs again if one of its locks alone was given back.
#[test]
fn a_macquire_retried_after_a_hold_was_given_back_runs_again() {
    for (flavor, server, mut c) in servers() {
        let session = words("RLOCK.MACQUIRE o 2 sa sb SESSION REQ s1");
        session_call_then_its_retry(&server, &mut c, &session, 2, &["sa", "sb"]);
        // Released, then sent again: taken again.
        let acquire = macquire("o", ["ra", "rb"], "r1");
        assert_eq!(run(&mut c, &acquire), Value::Int(2), "{flavor}");
        assert_int(&mut c, &["RLOCK.MRELEASE", "o", "2", "ra", "rb"], 2);
        assert_eq!(run(&mut c, &acquire), Value::Int(2), "{flavor}: again");
        assert_eq!(holders(&mut c, "rb"), held_by("o", 1), "{flavor}");
        // One of its locks given back: the call runs again (a re-entry on the other).
        assert_int(&mut c, &["RLOCK.RELEASE", "rb", "o"], 1);
        assert_eq!(run(&mut c, &acquire), Value::Int(2), "{flavor}: again");
        assert_eq!(holders(&mut c, "ra"), held_by("o", 2), "{flavor}");
        assert_eq!(holders(&mut c, "rb"), held_by("o", 1), "{flavor}");
        // Held by someone else by the time the retry comes: not acquired.
        set_up(&mut c, &["RLOCK.FORCERELEASE rb", "RLOCK.ACQUIRE rb p"]);
        assert_eq!(run(&mut c, &acquire), Value::Nil, "{flavor}");
        assert_eq!(holders(&mut c, "ra"), held_by("o", 2), "{flavor}");
        assert_eq!(holders(&mut c, "rb"), held_by("p", 1), "{flavor}");
        // Past its lease the record is gone with the holds: the call is new again.
        let short = words("RLOCK.MACQUIRE o 2 ea eb LEASE 100 REQ e1");
        assert_eq!(run(&mut c, &short), Value::Int(2), "{flavor}");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(record(&mut c, "ea", "e1"), None, "{flavor}");
        assert_eq!(run(&mut c, &short), Value::Int(2), "{flavor}");
        assert_eq!(holders(&mut c, "ea"), held_by("o", 1), "{flavor}");
    }
}

#[test]
fn a_multi_key_id_used_for_another_call_is_refused_and_changes_nothing() {
    for (flavor, _server, mut c) in servers() {
        run(&mut c, &macquire("o", ["ca", "cb"], "x"));
        set_up(
            &mut c,
            &[
                "RLOCK.ACQUIRE ca o REQ y",
                "RLOCK.MRELEASE o 1 cb REQ z",
                "RLOCK.ACQUIRE cb o",
            ],
        );
        let before = keyspace(&mut c);
        for args in [
            &macquire("other", ["ca", "cb"], "x")[..],
            &["RLOCK.MRELEASE", "o", "2", "ca", "cb", "REQ", "x"],
            &["RLOCK.ACQUIRE", "ca", "o", "REQ", "x"],
            &["RLOCK.RELEASE", "ca", "o", "REQ", "x"],
            &macquire("o", ["ca", "cb"], "y"),
            &["RLOCK.MRELEASE", "o", "2", "ca", "cb", "REQ", "y"],
            &macquire("o", ["cb", "ca"], "z"),
            &["RLOCK.MRELEASE", "other", "1", "cb", "REQ", "z"],
            &["RLOCK.RELEASE", "cb", "o", "REQ", "z"],
        ] {
            let r = call(&mut c, args);
            assert!(
                matches!(&r, Err(e) if e == "ERR REQ id already used by another owner or command on this lock"),
                "{flavor}: {args:?} gave {r:?}"
            );
        }
        let calls = [
            &macquire("o", ["ca", "cb"], "w")[..],
            &["RLOCK.MRELEASE", "o", "2", "ca", "cb", "REQ", "w"],
        ];
        a_record_not_a_string_is_wrongtype(flavor, &mut c, "rlock_request:{ca}:w", &calls);
        assert_eq!(keyspace(&mut c), before, "{flavor}: nothing changed");
    }
}

#[test]
fn bad_multi_key_request_ids_are_refused_and_change_nothing() {
    for (flavor, _server, mut c) in servers() {
        let calls = [
            "RLOCK.MACQUIRE o 1 b",
            "RLOCK.MACQUIRE o 2 b c",
            "RLOCK.MRELEASE o 1 b",
        ];
        refuses_bad_request_ids(flavor, &mut c, &calls);
        let not_an_option = (
            words("RLOCK.MRELEASE o 1 b LEASE 10"),
            "ERR unknown option 'LEASE'",
        );
        refused_writing_nothing(flavor, &mut c, &[not_an_option]);
    }
}

/// A blocked `RLOCK.MACQUIRE` with `REQ`, granted by hand-off, records its grant in that
/// turn; sent again on a new connection while the first waits, it is granted once: both
/// get the reply at once, and the holds stay if the first connection dies unanswered.
#[test]
fn a_blocked_macquire_is_recorded_at_hand_off_and_granted_once() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "bb", "h"]);
        let blocked = words("RLOCK.MACQUIRE o 2 ba bb BLOCK 10000 LEASE 60000 REQ b1");
        let mut first = Pending::blocked_on(&server, &mut c, &blocked, ("bb", 1));
        let mut second = Pending::blocked_on(&server, &mut c, &blocked, ("bb", 2));
        run(&mut c, &["RLOCK.RELEASE", "bb", "h"]);
        assert_eq!(first.reply(), Ok(Value::Int(2)), "{flavor}");
        assert_eq!(second.reply(), Ok(Value::Int(2)), "{flavor}: at once");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        for key in ["ba", "bb"] {
            assert_eq!(holders(&mut c, key), held_by("o", 1), "{flavor}: {key}");
        }
        assert_eq!(record(&mut c, "ba", "b1").as_deref(), Some("M:2:o"));
        let ttl = pttl(&mut c, b"rlock_request:{ba}:b1");
        assert!(
            (59_000..=60_000).contains(&ttl),
            "{flavor}: record TTL {ttl}"
        );
        // Sent again once granted: replayed, no re-entry.
        assert_eq!(run(&mut c, &blocked), Value::Int(2), "{flavor}");
        assert_eq!(holders(&mut c, "ba"), held_by("o", 1), "{flavor}");
        assert_int(&mut c, &["RLOCK.MRELEASE", "o", "2", "ba", "bb"], 2);
        // The first connection granted and killed in one turn: the retry heard the
        // reply, so the holds and the record stay.
        let again = words("RLOCK.MACQUIRE o 2 ba bb BLOCK 10000 REQ b2");
        the_retry_is_granted_as_the_first_dies(&server, &mut c, &again, "bb", 2);
        for key in ["ba", "bb"] {
            assert_eq!(holders(&mut c, key), held_by("o", 1), "{flavor}: {key}");
        }
        assert_eq!(record(&mut c, "ba", "b2").as_deref(), Some("M:2:o"));
    }
}

/// A blocked `RLOCK.MACQUIRE` with `REQ` is granted and killed in the same turn (the
/// release and `CLIENT KILL` in one packet): its holds go to the next waiter and its
/// record goes, so the request sent again is not told it holds the locks.
#[test]
fn a_multi_key_grant_never_sent_is_given_back_with_its_record() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RLOCK.ACQUIRE", "kb", "h"]);
        let wait = |owner: &'static str, req: &'static str| {
            [
                "RLOCK.MACQUIRE",
                owner,
                "2",
                "ka",
                "kb",
                "BLOCK",
                "5000",
                "LEASE",
                "30000",
                "REQ",
                req,
            ]
        };
        let first = Pending::blocked_on(&server, &mut c, &wait("o", "k1"), ("kb", 1));
        let mut second = Pending::blocked_on(&server, &mut c, &wait("p", "k2"), ("kb", 2));
        let mut tx = redis::pipe();
        tx.cmd("RLOCK.RELEASE").arg("kb").arg("h");
        tx.cmd("CLIENT").arg("KILL").arg("ID").arg(first.id);
        let replies: Vec<Value> = tx.query(&mut c).expect("pipeline");
        assert_eq!(replies, vec![Value::Int(1), Value::Int(1)], "{flavor}");
        assert_eq!(second.reply(), Ok(Value::Int(2)), "{flavor}");
        for key in ["ka", "kb"] {
            assert_eq!(holders(&mut c, key), held_by("p", 1), "{flavor}: {key}");
        }
        assert_eq!(
            record(&mut c, "ka", "k1"),
            None,
            "{flavor}: record forgotten"
        );
        assert_eq!(record(&mut c, "ka", "k2").as_deref(), Some("M:2:p"));
        // Sent again: runs again, and finds the locks taken.
        let resend = macquire("o", ["ka", "kb"], "k1");
        assert_eq!(run(&mut c, &resend), Value::Nil, "{flavor}: resent");
        assert_int(&mut c, &["RLOCK.MRELEASE", "p", "2", "ka", "kb"], 2);
        assert_eq!(run(&mut c, &resend), Value::Int(2), "{flavor}: resent");
        assert_eq!(holders(&mut c, "ka"), held_by("o", 1), "{flavor}");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
    }
}
