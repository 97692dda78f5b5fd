//! One lock shared by clients blocked in the server and Redisson clients, which wait on
//! the unlock channel. A lock passed straight to a blocked client is not announced (a
//! Redisson client would wake to find it taken); while Redisson clients listen, the
//! lock is left free for them once per round of the blocked clients.

mod common;

use std::time::Duration;

use common::*;
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

/// Sends `commands` in one packet on `con` and reads their replies: the server runs
/// them in one go, with no timer or other client in between.
fn pipelined(con: &mut redis::Connection, commands: &[&[&str]]) -> Vec<Value> {
    let mut pipe = redis::pipe();
    for args in commands {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        pipe.add_command(cmd);
    }
    pipe.query(con).expect("pipeline")
}

#[test]
fn a_lock_passed_to_a_blocked_client_is_not_announced() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        let mut listener = Subscriber::new(&server, &[&unlock_channel(b"door")]);
        assert_eq!(
            call(&mut con, &["RLOCK.ACQUIRE", "door", "a"]),
            Ok(Value::Int(1))
        );
        let waiter = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "door", "b", "BLOCK", "5000"]);
        wait_blocked(flavor, &mut con, "door", 1);
        assert_eq!(
            call(&mut con, &["RLOCK.RELEASE", "door", "a"]),
            Ok(Value::Int(1))
        );
        assert_eq!(waiter.join().reply, Ok(Value::Int(1)), "{flavor}");
        assert_eq!(
            listener.drain(),
            vec![],
            "{flavor}: no message for a lock that went straight on"
        );
        // Freed with nobody blocked: announced.
        assert_eq!(
            call(&mut con, &["RLOCK.RELEASE", "door", "b"]),
            Ok(Value::Int(1))
        );
        assert_eq!(
            listener.drain(),
            vec![(unlock_channel(b"door"), b"0".to_vec())],
            "{flavor}"
        );
    }
}

/// After a round of direct hand-offs (one per blocked client), a release with Redisson
/// clients listening leaves the lock free for them: the message is published, a
/// Redisson tryLock takes the lock, a newcomer here does not, and the blocked client
/// gets it when the Redisson client unlocks.
#[test]
fn listening_redisson_clients_get_the_lock_once_per_round() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        let mut listener = Subscriber::new(&server, &[&unlock_channel(b"gate")]);
        assert_eq!(
            call(&mut con, &["RLOCK.ACQUIRE", "gate", "a"]),
            Ok(Value::Int(1))
        );
        // Three clients blocked. A round is a hand-off to each client blocked at a
        // release and to the one releasing: at `b1`'s release, `b2` and `b3` wait, with
        // one hand-off made; at `b2`'s, `b3` waits, with two made: Redisson's turn.
        let spawn = |owner: &str| {
            Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "gate", owner, "BLOCK", "5000"])
        };
        let first = spawn("b1");
        wait_blocked(flavor, &mut con, "gate", 1);
        let second = spawn("b2");
        wait_blocked(flavor, &mut con, "gate", 2);
        let third = spawn("b3");
        wait_blocked(flavor, &mut con, "gate", 3);
        for (releasing, next) in [("a", first), ("b1", second)] {
            assert_eq!(
                call(&mut con, &["RLOCK.RELEASE", "gate", releasing]),
                Ok(Value::Int(1))
            );
            assert_eq!(next.join().reply, Ok(Value::Int(1)), "{flavor}");
        }
        assert_eq!(listener.drain(), vec![], "{flavor}");

        // Redisson's turn: in one packet, the release, a newcomer here, Redisson's tryLock.
        let replies = pipelined(
            &mut con,
            &[
                &["RLOCK.RELEASE", "gate", "b2"],
                &["RLOCK.ACQUIRE", "gate", "newcomer"],
                &["RLOCK.ACQUIRE", "gate", "fair-newcomer", "FAIR"],
                &["EVAL", REDISSON_LOCK, "1", "gate", "30000", "java:1"],
            ],
        );
        assert_eq!(
            replies,
            vec![Value::Int(1), Value::Nil, Value::Nil, Value::Nil],
            "{flavor}: released; the newcomers, FAIR or not, wait their turn; Redisson took it"
        );
        assert_eq!(
            listener.drain(),
            vec![(unlock_channel(b"gate"), b"0".to_vec())],
            "{flavor}: the unlock message went out"
        );
        assert_eq!(holders(&mut con, "gate"), held_by("java:1", 1), "{flavor}");
        assert!(!third.is_finished(), "{flavor}: b3 still waits");
        // Redisson unlocks: the blocked client is next.
        assert_eq!(lua_unlock(&mut con, "gate", "java:1"), Ok(Value::Int(1)));
        assert_eq!(third.join().reply, Ok(Value::Int(1)), "{flavor}");
        assert_eq!(holders(&mut con, "gate"), held_by("b3", 1), "{flavor}");
    }
}

/// A window nobody uses costs a few milliseconds: then the blocked client gets the lock.
#[test]
fn an_unused_window_ends_with_the_blocked_client_served() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        let _listener = Subscriber::new(&server, &[&unlock_channel(b"idle")]);
        assert_eq!(
            call(&mut con, &["RLOCK.ACQUIRE", "idle", "a"]),
            Ok(Value::Int(1))
        );
        let spawn = |owner: &str| {
            Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "idle", owner, "BLOCK", "5000"])
        };
        let first = spawn("b1");
        wait_blocked(flavor, &mut con, "idle", 1);
        let second = spawn("b2");
        wait_blocked(flavor, &mut con, "idle", 2);
        let third = spawn("b3");
        wait_blocked(flavor, &mut con, "idle", 3);
        for (releasing, next) in [("a", first), ("b1", second)] {
            call(&mut con, &["RLOCK.RELEASE", "idle", releasing]).expect("release");
            assert_eq!(next.join().reply, Ok(Value::Int(1)), "{flavor}");
        }
        let released = std::time::Instant::now();
        call(&mut con, &["RLOCK.RELEASE", "idle", "b2"]).expect("release");
        let served = third.join();
        assert_eq!(served.reply, Ok(Value::Int(1)), "{flavor}");
        let waited = served.at - released;
        assert!(
            waited >= Duration::from_millis(4) && waited < Duration::from_millis(500),
            "{flavor}: served {waited:?} after the release, once the window ran out"
        );
        call(&mut con, &["RLOCK.RELEASE", "idle", "b3"]).expect("release");
        assert_eq!(rstat(&server, "tracked_locks"), 0, "{flavor}: nothing kept");
    }
}
