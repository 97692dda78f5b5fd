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

/// `a` takes `key`; `b1`, `b2` and `b3` block on it in that order; `a`, then `b1`,
/// release, each serving the next. A round of hand-offs: `b2` holds, and `b3`, whose
/// wait this returns, is still blocked.
fn hand_off_round(server: &Server, con: &mut redis::Connection, key: &str) -> Waiting {
    let flavor = server.flavor;
    assert_reply(con, &["RLOCK.ACQUIRE", key, "a"], Value::Int(1), flavor);
    let mut waits = Vec::new();
    for (n, owner) in (1..).zip(["b1", "b2", "b3"]) {
        waits.push(Pending::new(server).spawn(&["RLOCK.ACQUIRE", key, owner, "BLOCK", "5000"]));
        wait_blocked(flavor, con, key, n);
    }
    let third = waits.pop().expect("b3");
    for (releasing, next) in ["a", "b1"].into_iter().zip(waits) {
        assert_reply(
            con,
            &["RLOCK.RELEASE", key, releasing],
            Value::Int(1),
            flavor,
        );
        assert_eq!(next.join().reply, Ok(Value::Int(1)), "{flavor}");
    }
    third
}

#[test]
fn a_lock_passed_to_a_blocked_client_is_not_announced() {
    for (flavor, server) in each_server() {
        let mut con = server.conn();
        let mut listener = Subscriber::new(&server, &[&unlock_channel(b"door")]);
        assert_int(&mut con, &["RLOCK.ACQUIRE", "door", "a"], 1);
        let waiter = Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "door", "b", "BLOCK", "5000"]);
        wait_blocked(flavor, &mut con, "door", 1);
        assert_int(&mut con, &["RLOCK.RELEASE", "door", "a"], 1);
        assert_eq!(waiter.join().reply, Ok(Value::Int(1)), "{flavor}");
        assert_eq!(
            listener.drain(),
            vec![],
            "{flavor}: no message for a lock that went straight on"
        );
        // Freed with nobody blocked: announced.
        assert_int(&mut con, &["RLOCK.RELEASE", "door", "b"], 1);
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
        // Three clients blocked. A round is a hand-off to each client blocked at a
        // release and to the one releasing: at `b1`'s release, `b2` and `b3` wait, with
        // one hand-off made; at `b2`'s, `b3` waits, with two made: Redisson's turn.
        let third = hand_off_round(&server, &mut con, "gate");
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
        let third = hand_off_round(&server, &mut con, "idle");
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
