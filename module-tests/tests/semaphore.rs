//! Redisson's semaphore and count-down latch, natively: `RSEM.*` and `RLATCH.*` on
//! Redisson's keys and channels, against Redisson's own scripts both ways, with blocked
//! callers served in arrival order, and a module-less replica ending identical.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::redisson::{
    LATCH_COUNT_DOWN, LATCH_TRY_SET_COUNT, SEMAPHORE_RELEASE, SEMAPHORE_TRY_ACQUIRE,
};
use rlock_module_tests::*;

fn run(c: &mut Connection, args: &[&str]) -> Value {
    call(c, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

fn semaphore_channel(key: &str) -> Vec<u8> {
    helper_key("redisson_sc", key.as_bytes())
}

/// Redisson's `RSemaphore.release()` of one permit on `key`, as its script sends it.
fn redisson_release_one(c: &mut Connection, key: &str) -> Value {
    let channel = text(&semaphore_channel(key));
    run(
        c,
        &[
            "EVAL",
            SEMAPHORE_RELEASE,
            "2",
            key,
            &channel,
            "1",
            "publish",
        ],
    )
}

fn latch_channel(key: &str) -> Vec<u8> {
    format!("redisson_countdownlatch__channel__{{{key}}}").into_bytes()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

#[test]
fn permits_are_counted_as_redisson_counts_them() {
    for (flavor, server, mut c) in servers() {
        let mut sub = Subscriber::new(&server, &[&semaphore_channel("s")]);
        assert_int(&mut c, &["RSEM.AVAILABLE", "s"], 0);
        assert_int(&mut c, &["RSEM.TRYSETPERMITS", "s", "3"], 1);
        assert_int(&mut c, &["RSEM.TRYSETPERMITS", "s", "9"], 0);
        assert_stored_permits(&mut c, "s", 3, format_args!("{flavor}"));
        let acquire = ["RSEM.ACQUIRE", "s", "PERMITS", "2"];
        assert_eq!(run(&mut c, &acquire), Value::Int(1), "{flavor}");
        assert_eq!(run(&mut c, &acquire), Value::Nil, "{flavor}: 1 left");
        assert_int(&mut c, &["RSEM.ACQUIRE", "s"], 1);
        assert_int(&mut c, &["RSEM.RELEASE", "s", "PERMITS", "2"], 2);
        assert_int(&mut c, &["RSEM.ADDPERMITS", "s", "-5"], -3);
        assert_int(&mut c, &["RSEM.ADDPERMITS", "s", "4"], 1);
        assert_int(&mut c, &["RSEM.RELEASE", "s"], 2);
        assert_stored_permits(&mut c, "s", 2, format_args!("{flavor}"));
        // Redisson's messages: the permits set, then each new total.
        let heard: Vec<String> = sub.drain().into_iter().map(|(_, m)| text(&m)).collect();
        assert_eq!(heard, ["3", "2", "-3", "1", "2"], "{flavor}");
        // Redisson's own scripts on the module's semaphore, and the other way round.
        let r = run(&mut c, &["EVAL", SEMAPHORE_TRY_ACQUIRE, "1", "s", "2"]);
        assert_eq!(r, Value::Int(1), "{flavor}");
        assert_int(&mut c, &["RSEM.AVAILABLE", "s"], 0);
        redisson_release_one(&mut c, "s");
        assert_int(&mut c, &["RSEM.ACQUIRE", "s"], 1);
        assert_counted(&server, &[("permit_acquires", 3), ("permit_releases", 3)]);
    }
}

#[test]
fn bad_calls_change_nothing() {
    for (flavor, _server, mut c) in servers() {
        set_up(
            &mut c,
            &[
                "RSEM.TRYSETPERMITS s 1",
                "HSET h f 1",
                "SET text abc",
                "SET big 9223372036854775807",
            ],
        );
        let cases: &[(&[&str], &str)] = &[
            (
                &["RSEM.TRYSETPERMITS", "x", "-1"],
                "ERR permits must be an integer from 0",
            ),
            (
                &["RSEM.ADDPERMITS", "s", "x"],
                "ERR permits must be an integer",
            ),
            (
                &["RSEM.ACQUIRE", "s", "PERMITS", "0"],
                "ERR PERMITS must be an integer from 1",
            ),
            (
                &["RSEM.ACQUIRE", "s", "PERMITS"],
                "ERR option PERMITS needs a count",
            ),
            (&["RSEM.ACQUIRE", "s", "BLOCK", "-1"], "ERR BLOCK must be"),
            (&["RSEM.ACQUIRE", "s", "NX"], "ERR unknown option"),
            (&["RSEM.RELEASE", "s", "BLOCK", "1"], "ERR unknown option"),
            (&["RSEM.ACQUIRE", "h"], "WRONGTYPE"),
            (
                &["RSEM.RELEASE", "text"],
                "ERR the semaphore key holds a value",
            ),
            (
                &["RSEM.RELEASE", "big"],
                "ERR the number of permits would overflow",
            ),
            (
                &["RSEM.AVAILABLE", "s", "x"],
                "ERR wrong number of arguments",
            ),
            (
                &["RLATCH.TRYSETCOUNT", "l", "0"],
                "ERR count must be an integer from 1",
            ),
            (&["RLATCH.COUNTDOWN", "h"], "WRONGTYPE"),
            (&["RLATCH.AWAIT", "text"], "ERR the latch key holds a value"),
            (&["RLATCH.AWAIT", "l", "PERMITS", "1"], "ERR unknown option"),
        ];
        assert_each_refused_unchanged(flavor, &mut c, cases);
    }
}

/// Semaphore `s` set to 0 permits, and a caller blocked (`BLOCK block_ms`) for 2 of them.
fn no_permits_and_a_wait_for_two(server: &Server, c: &mut Connection, block_ms: &str) -> Pending {
    run(c, &["RSEM.TRYSETPERMITS", "s", "0"]);
    let acquire = ["RSEM.ACQUIRE", "s", "PERMITS", "2", "BLOCK", block_ms];
    Pending::blocked(server, &acquire, 1)
}

#[test]
fn blocked_acquires_are_served_in_arrival_order() {
    for (flavor, server, mut c) in servers() {
        let mut big = no_permits_and_a_wait_for_two(&server, &mut c, "10000");
        let mut small = Pending::blocked(&server, &["RSEM.ACQUIRE", "s", "BLOCK", "10000"], 2);
        // One permit: the head wants two, and the one behind does not overtake it.
        run(&mut c, &["RSEM.RELEASE", "s"]);
        assert_eq!(
            run(&mut c, &["RSEM.ACQUIRE", "s"]),
            Value::Nil,
            "{flavor}: newcomer"
        );
        assert_stored_permits(&mut c, "s", 1, format_args!("{flavor}"));
        run(&mut c, &["RSEM.RELEASE", "s"]);
        assert_eq!(big.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_eq!(rstat(&server, "blocked"), 1, "{flavor}");
        run(&mut c, &["RSEM.RELEASE", "s"]);
        assert_eq!(small.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_stored_permits(&mut c, "s", 0, format_args!("{flavor}"));
        // A wait that runs out: null, nothing taken.
        let r = run(&mut c, &["RSEM.ACQUIRE", "s", "BLOCK", "50"]);
        assert_eq!(r, Value::Nil, "{flavor}");
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        // Scripts and transactions never block.
        let script = "return redis.call('RSEM.ACQUIRE', 's', 'BLOCK', '0')";
        assert_nil(&mut c, &["EVAL", script, "0"]);
    }
}

/// Redisson gives a permit back with `INCRBY` and a publish the module does not hear:
/// a blocked acquire is served by the module's look at the semaphore, within ms (the
/// median of five rounds), and never left to the end of its 10 s wait.
#[test]
fn a_redisson_release_wakes_a_blocked_acquire() {
    for (flavor, server, mut c) in servers() {
        let mut waiter = Pending::blocked(&server, &["RSEM.ACQUIRE", "s", "BLOCK", "10000"], 1);
        let mut served = Vec::new();
        for round in 0..5 {
            let released = Instant::now();
            redisson_release_one(&mut c, "s");
            assert_eq!(waiter.reply(), Ok(Value::Int(1)), "{flavor}: round {round}");
            served.push(released.elapsed().as_secs_f64() * 1000.0);
            if round < 4 {
                waiter.send(&["RSEM.ACQUIRE", "s", "BLOCK", "10000"]);
                wait_total_blocked(&server, 1);
            }
        }
        let median = quantile(&mut served, 0.5);
        let worst = served[served.len() - 1];
        assert!(
            median < 50.0 && worst < 2000.0,
            "{flavor}: served {median:.1} ms (median), {worst:.1} ms (worst) after Redisson's release"
        );
        assert_stored_permits(&mut c, "s", 0, format_args!("{flavor}"));
    }
}

#[test]
fn a_grant_its_client_never_heard_goes_back() {
    for (flavor, server, mut c) in servers() {
        let waiter = no_permits_and_a_wait_for_two(&server, &mut c, "0");
        // Its connection dies: the wait ends, and permits given later stay.
        run(&mut c, &["CLIENT", "KILL", "ID", &waiter.id.to_string()]);
        let gone = wait_until(Duration::from_secs(2), || rstat(&server, "blocked") == 0);
        assert!(gone, "{flavor}");
        assert_int(&mut c, &["RSEM.RELEASE", "s", "PERMITS", "2"], 2);
        assert_int(&mut c, &["RSEM.AVAILABLE", "s"], 2);
    }
}

#[test]
fn a_latch_opens_for_every_waiter_at_zero() {
    for (flavor, server, mut c) in servers() {
        let mut sub = Subscriber::new(&server, &[&latch_channel("l")]);
        assert_eq!(
            run(&mut c, &["RLATCH.AWAIT", "l"]),
            Value::Int(1),
            "{flavor}: no latch"
        );
        assert_int(&mut c, &["RLATCH.TRYSETCOUNT", "l", "2"], 1);
        assert_int(&mut c, &["RLATCH.TRYSETCOUNT", "l", "5"], 0);
        assert_int(&mut c, &["RLATCH.COUNT", "l"], 2);
        assert_nil(&mut c, &["RLATCH.AWAIT", "l"]);
        let mut first = Pending::new(&server);
        first.send(&["RLATCH.AWAIT", "l", "BLOCK", "10000"]);
        let mut second = Pending::blocked(&server, &["RLATCH.AWAIT", "l", "BLOCK", "0"], 2);
        assert_int(&mut c, &["RLATCH.COUNTDOWN", "l"], 1);
        assert_eq!(rstat(&server, "blocked"), 2, "{flavor}");
        assert_int(&mut c, &["RLATCH.COUNTDOWN", "l"], 0);
        assert_eq!(first.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_eq!(second.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_eq!(get(&mut c, "l"), None, "{flavor}: the key goes at zero");
        assert_int(&mut c, &["RLATCH.COUNTDOWN", "l"], 0);
        assert_eq!(get(&mut c, "l"), None, "{flavor}");
        let heard: Vec<String> = sub.drain().into_iter().map(|(_, m)| text(&m)).collect();
        assert_eq!(heard, ["1", "0"], "{flavor}: Redisson's messages");
        let r = run(&mut c, &["RLATCH.AWAIT", "l", "BLOCK", "50"]);
        assert_eq!(r, Value::Int(1), "{flavor}");
    }
}

#[test]
fn redisson_counting_down_to_zero_releases_waiters() {
    for (flavor, server, mut c) in servers() {
        let channel = text(&latch_channel("l"));
        let set = [
            "EVAL",
            LATCH_TRY_SET_COUNT,
            "2",
            "l",
            &channel,
            "1",
            "1",
            "publish",
        ];
        assert_eq!(run(&mut c, &set), Value::Int(1), "{flavor}");
        assert_int(&mut c, &["RLATCH.COUNT", "l"], 1);
        let mut waiter = Pending::blocked(&server, &["RLATCH.AWAIT", "l", "BLOCK", "10000"], 1);
        let counted = Instant::now();
        run(
            &mut c,
            &["EVAL", LATCH_COUNT_DOWN, "2", "l", &channel, "0", "publish"],
        );
        assert_eq!(waiter.reply(), Ok(Value::Int(1)), "{flavor}");
        // By the count-down, not the end of the 10 s wait.
        let took = counted.elapsed();
        assert!(took < Duration::from_secs(1), "{flavor}: {took:?}");
        // And the module's count-down on Redisson's latch.
        run(&mut c, &set);
        assert_int(&mut c, &["RLATCH.COUNTDOWN", "l"], 0);
        assert_eq!(get(&mut c, "l"), None, "{flavor}");
    }
}

#[test]
fn a_replica_without_the_module_ends_identical() {
    for (flavor, primary, replica, mut c) in primaries_and_bare_replicas() {
        set_up(&mut c, &["SET ttl 5", "PEXPIRE ttl 60000"]);
        for step in [
            &["RSEM.TRYSETPERMITS", "s", "4"][..],
            &["RSEM.ACQUIRE", "s", "PERMITS", "3"],
            &["RSEM.RELEASE", "s"],
            &["RSEM.ADDPERMITS", "s", "-7"],
            &["RSEM.ACQUIRE", "ttl", "PERMITS", "2"],
            &["RSEM.RELEASE", "ttl"],
            &["RLATCH.TRYSETCOUNT", "l", "3"],
            &["RLATCH.COUNTDOWN", "l"],
            &["RLATCH.TRYSETCOUNT", "m", "1"],
            &["RLATCH.COUNTDOWN", "m"],
        ] {
            run(&mut c, step);
        }
        let mut waiter = Pending::new(&primary);
        waiter.send(&["RSEM.ACQUIRE", "s", "BLOCK", "10000"]);
        wait_total_blocked(&primary, 1);
        run(&mut c, &["RSEM.ADDPERMITS", "s", "6"]);
        assert_eq!(waiter.reply(), Ok(Value::Int(1)), "{flavor}");
        sync_replica(&primary, &replica);
        let mut r = replica.conn();
        assert_eq!(keyspace(&mut c), keyspace(&mut r), "{flavor}");
        assert_stored_permits(&mut r, "s", 0, format_args!("{flavor}"));
        assert_stored_permits(&mut r, "ttl", 4, format_args!("{flavor}"));
        assert!(pttl(&mut r, b"ttl") > 50_000, "{flavor}: the TTL stays");
    }
}

#[test]
fn retried_calls_with_req_are_applied_once() {
    for (flavor, server, mut c) in servers() {
        run(&mut c, &["RSEM.TRYSETPERMITS", "s", "3"]);
        let acquire = ["RSEM.ACQUIRE", "s", "PERMITS", "2", "REQ", "a1"];
        assert_eq!(run(&mut c, &acquire), Value::Int(1), "{flavor}");
        let mut other = server.conn();
        assert_eq!(
            run(&mut other, &acquire),
            Value::Int(1),
            "{flavor}: retried"
        );
        assert_stored_permits(&mut c, "s", 1, format_args!("{flavor}: taken once"));
        let release = ["RSEM.RELEASE", "s", "PERMITS", "2", "REQ", "r1"];
        assert_eq!(run(&mut c, &release), Value::Int(3), "{flavor}");
        assert_eq!(run(&mut c, &release), Value::Int(3), "{flavor}: retried");
        assert_stored_permits(&mut c, "s", 3, format_args!("{flavor}: given once"));
        // An id used for another call is refused, and changes nothing.
        let r = call(&mut c, &["RSEM.RELEASE", "s", "REQ", "a1"]);
        assert!(
            matches!(&r, Err(e) if e.contains("REQ id already used")),
            "{r:?}"
        );
        // A blocked call sent again on another connection is granted once.
        run(&mut c, &["RSEM.ACQUIRE", "s", "PERMITS", "3"]);
        let blocked = ["RSEM.ACQUIRE", "s", "BLOCK", "10000", "REQ", "b1"];
        let mut first = Pending::blocked(&server, &blocked, 1);
        let mut second = Pending::blocked(&server, &blocked, 2);
        run(&mut c, &["RSEM.RELEASE", "s"]);
        assert_eq!(first.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_eq!(second.reply(), Ok(Value::Int(1)), "{flavor}");
        assert_stored_permits(&mut c, "s", 0, format_args!("{flavor}: one permit taken"));
        assert_eq!(rstat(&server, "blocked"), 0, "{flavor}");
        run(&mut c, &["RSEM.RELEASE", "s"]);
        assert_eq!(run(&mut c, &blocked), Value::Int(1), "{flavor}: replayed");
        assert_stored_permits(&mut c, "s", 1, format_args!("{flavor}"));
    }
}
