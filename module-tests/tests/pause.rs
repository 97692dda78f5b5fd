//! While writes are paused (`CLIENT PAUSE WRITE`) the module writes nothing on its
//! own, and does the held work when the pause ends. Writing then used to crash the
//! server: a lock whose lease ran out during the pause was re-created by the grant
//! (Redis 7.0 asserts in `dbAdd`), or a replicated write asserted in `propagateNow`.
//! Each case runs on a lone primary and on a primary with a replica.

mod common;

use std::time::Duration;

use common::*;
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

fn run(con: &mut redis::Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

/// Starts a primary (with a module-less replica when `replica`), each case's setup.
fn servers(flavor: Flavor, replica: bool) -> (Server, Option<Server>) {
    if replica {
        let (primary, replica) = primary_and_bare_replica(flavor);
        let mut r = replica.conn();
        let synced = wait_until(Duration::from_secs(10), || {
            replica_info(&mut r).contains("master_link_status:up")
        });
        assert!(synced, "{flavor}: replica never synced");
        (primary, Some(replica))
    } else {
        (Server::start(flavor), None)
    }
}

fn replica_info(con: &mut redis::Connection) -> String {
    redis::cmd("INFO")
        .arg("replication")
        .query::<String>(con)
        .unwrap_or_default()
}

/// The waiter is still blocked and the server answers, `ms` into the pause.
fn hold_through_pause(flavor: Flavor, server: &mut Server, waiter: &Waiting, ms: u64, what: &str) {
    std::thread::sleep(Duration::from_millis(ms));
    server.assert_alive(&format!("{flavor} {what}: during the pause"));
    assert!(
        !waiter.is_finished(),
        "{flavor} {what}: the waiter was answered while writes were paused"
    );
}

/// After the pause, the waiter holds the lock and a replica agrees.
fn served_after(
    flavor: Flavor,
    server: &mut Server,
    replica: &Option<Server>,
    waiter: Waiting,
    key: &str,
    owner: &str,
    what: &str,
) {
    let mut c = server.conn();
    run(&mut c, &["CLIENT", "UNPAUSE"]);
    let got = waiter.join();
    assert_eq!(
        got.reply,
        Ok(Value::Int(1)),
        "{flavor} {what}: waiter after the pause"
    );
    server.assert_alive(&format!("{flavor} {what}: after the pause"));
    let held = hgetall(&mut c, key.as_bytes());
    assert_eq!(
        held.keys().cloned().collect::<Vec<_>>(),
        vec![owner.as_bytes().to_vec()],
        "{flavor} {what}: holder after the pause"
    );
    if let Some(replica) = replica {
        let mut r = replica.conn();
        let same = wait_until(Duration::from_secs(5), || {
            hgetall(&mut r, key.as_bytes()) == held
        });
        assert!(
            same,
            "{flavor} {what}: the replica disagrees after the pause"
        );
    }
}

/// Runs one case on every flavor, alone and with a replica. `setup` takes `key`'s
/// lock (and returns connections the case needs later); a waiter (`BLOCK 10000`
/// plus `waiter_options`) blocks on it; `pause` starts the pause and does what
/// happens then. The waiter must still wait `hold_ms` into the pause, the server
/// must live, and the waiter must hold the lock once the pause ends.
fn each_case(
    key: &str,
    waiter_options: &[&str],
    hold_ms: u64,
    setup: impl Fn(&Server, &mut redis::Connection) -> Vec<Pending>,
    pause: impl Fn(&mut redis::Connection, Vec<Pending>),
) {
    for flavor in flavors() {
        for (with_replica, what) in [(false, "alone"), (true, "with replica")] {
            let (mut server, replica) = servers(flavor, with_replica);
            let mut c = server.conn();
            let kept = setup(&server, &mut c);
            let mut args = vec!["RLOCK.ACQUIRE", key, "waiter", "BLOCK", "10000"];
            args.extend_from_slice(waiter_options);
            let waiter = Pending::new(&server).spawn(&args);
            wait_blocked(flavor, &mut c, key, 1);
            pause(&mut c, kept);
            hold_through_pause(flavor, &mut server, &waiter, hold_ms, what);
            served_after(flavor, &mut server, &replica, waiter, key, "waiter", what);
        }
    }
}

fn pause_writes(c: &mut redis::Connection) {
    run(c, &["CLIENT", "PAUSE", "5000", "WRITE"]);
}

#[test]
fn a_lease_that_ends_during_a_pause_passes_on_after_it() {
    each_case(
        "lease-k",
        &[],
        // The lease runs out 200 ms in; its timer fires during the pause.
        600,
        |_, c| {
            run(c, &["RLOCK.ACQUIRE", "lease-k", "holder", "LEASE", "200"]);
            Vec::new()
        },
        |c, _| pause_writes(c),
    );
}

#[test]
fn a_session_holder_that_leaves_during_a_pause_releases_after_it() {
    each_case(
        "session-k",
        &[],
        400,
        |server, _| {
            let mut holder = Pending::new(server);
            holder.send(&[
                "RLOCK.ACQUIRE",
                "session-k",
                "holder",
                "SESSION",
                "LEASE",
                "100",
            ]);
            assert_eq!(holder.reply(), Ok(Value::Int(1)));
            vec![holder]
        },
        |c, holder| {
            pause_writes(c);
            // The lease ends during the pause too: the grant must not re-create the key.
            drop(holder);
        },
    );
}

#[test]
fn a_fair_deadline_that_passes_during_a_pause_is_purged_after_it() {
    each_case(
        "fair-k",
        &["FAIR"],
        600,
        |_, c| {
            run(c, &["CONFIG", "SET", "rlock.fair-wait-ms", "300"]);
            run(
                c,
                &[
                    "RLOCK.ACQUIRE",
                    "fair-k",
                    "holder",
                    "FAIR",
                    "LEASE",
                    "60000",
                ],
            );
            // A polling caller takes the head of the queue, then goes silent.
            assert_eq!(
                run(c, &["RLOCK.ACQUIRE", "fair-k", "poller", "FAIR"]),
                Value::Nil
            );
            Vec::new()
        },
        |c, _| {
            // Freed: the poller is woken and keeps its turn until its deadline,
            // which passes during the pause.
            assert_eq!(
                run(c, &["RLOCK.RELEASE", "fair-k", "holder"]),
                Value::Int(1)
            );
            pause_writes(c);
        },
    );
}

#[test]
fn work_queued_just_before_a_pause_waits_for_its_end() {
    each_case(
        "del-k",
        &[],
        300,
        |_, c| {
            run(c, &["RLOCK.ACQUIRE", "del-k", "holder", "LEASE", "60000"]);
            Vec::new()
        },
        |c, _| {
            // The DEL's keyspace event queues the hand-off for the next turn, which
            // comes after the pause has begun.
            let mut tx = redis::pipe();
            tx.atomic()
                .cmd("DEL")
                .arg("del-k")
                .cmd("CLIENT")
                .arg("PAUSE")
                .arg(5000)
                .arg("WRITE");
            let _: Vec<Value> = tx.query(c).expect("MULTI DEL + CLIENT PAUSE");
        },
    );
}

/// `FAILOVER` pauses writes while the replica catches up. A lease that ends then is
/// not passed on (the server is about to become a replica); the waiter gets the
/// demotion error, and both servers live.
#[test]
fn a_lease_that_ends_during_failover_does_not_crash_the_server() {
    for flavor in flavors() {
        let (mut server, replica) = servers(flavor, true);
        let mut replica = replica.expect("replica");
        let mut c = server.conn();
        run(&mut c, &["RLOCK.ACQUIRE", "fo-k", "holder", "LEASE", "100"]);
        let waiter =
            Pending::new(&server).spawn(&["RLOCK.ACQUIRE", "fo-k", "waiter", "BLOCK", "10000"]);
        wait_blocked(flavor, &mut c, "fo-k", 1);
        // Keep the replica from acknowledging, so the pause outlasts the lease.
        let mut r = replica.conn();
        run(&mut r, &["DEBUG", "SLEEP", "0"]);
        let mut sleeper = Pending::new(&replica);
        sleeper.send(&["DEBUG", "SLEEP", "0.5"]);
        run(&mut c, &["FAILOVER", "TIMEOUT", "3000"]);
        let got = waiter.join();
        assert!(
            matches!(&got.reply, Err(e) if e.starts_with("UNBLOCKED")),
            "{flavor}: the waiter after FAILOVER: {:?}",
            got.reply
        );
        let _ = sleeper.recv();
        server.assert_alive(&format!("{flavor}: old primary after FAILOVER"));
        replica.assert_alive(&format!("{flavor}: new primary after FAILOVER"));
        let demoted = wait_until(Duration::from_secs(5), || {
            replica_info(&mut c).contains("role:slave")
        });
        assert!(demoted, "{flavor}: the old primary never became a replica");
    }
}

fn node_id(con: &mut redis::Connection) -> String {
    match run(con, &["CLUSTER", "MYID"]) {
        Value::BulkString(id) => String::from_utf8_lossy(&id).into_owned(),
        Value::SimpleString(id) => id,
        other => panic!("CLUSTER MYID replied {other:?}"),
    }
}

/// A cluster manual failover (`CLUSTER FAILOVER` on the replica) pauses the primary's
/// writes until the replica has caught up. A lease that ends then is not passed on
/// by a write of the module's own; the waiter gets the demotion error, and both
/// nodes live.
#[test]
fn a_lease_that_ends_during_a_cluster_manual_failover_does_not_crash_the_server() {
    for flavor in flavors() {
        let cluster = |b: ServerBuilder| {
            b.config("cluster-enabled", "yes")
                .config("cluster-node-timeout", "5000")
        };
        let mut primary = cluster(Server::builder(flavor)).start();
        let mut replica = cluster(Server::builder(flavor)).start();
        let mut p = primary.conn();
        let mut r = replica.conn();
        run(&mut p, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
        run(
            &mut r,
            &["CLUSTER", "MEET", "127.0.0.1", &primary.port.to_string()],
        );
        let primary_id = node_id(&mut p);
        let known = wait_until(Duration::from_secs(10), || {
            call(&mut r, &["CLUSTER", "REPLICATE", &primary_id]).is_ok()
        });
        assert!(known, "{flavor}: the replica never learned of the primary");
        let synced = wait_until(Duration::from_secs(10), || {
            replica_info(&mut r).contains("master_link_status:up")
        });
        assert!(synced, "{flavor}: the replica never synced");
        let ok = wait_until(Duration::from_secs(10), || {
            matches!(call(&mut p, &["CLUSTER", "INFO"]), Ok(Value::BulkString(info))
                if String::from_utf8_lossy(&info).contains("cluster_state:ok"))
        });
        assert!(ok, "{flavor}: the cluster never came up");
        run(
            &mut p,
            &["RLOCK.ACQUIRE", "{mf}k", "holder", "LEASE", "200"],
        );
        let waiter =
            Pending::new(&primary).spawn(&["RLOCK.ACQUIRE", "{mf}k", "waiter", "BLOCK", "10000"]);
        wait_blocked(flavor, &mut p, "{mf}k", 1);
        // The replica starts the failover, then sleeps: the primary stays paused while
        // it waits for the replica's offset, and the lease runs out meanwhile.
        let mut sleeper = Pending::new(&replica);
        let mut packet = redis::pipe();
        packet.cmd("CLUSTER").arg("FAILOVER");
        packet.cmd("DEBUG").arg("SLEEP").arg("0.6");
        sleeper
            .con
            .send_packed_command(&packet.get_packed_pipeline())
            .expect("send");
        let got = waiter.join();
        assert!(
            matches!(&got.reply, Err(e) if e.starts_with("UNBLOCKED"))
                || got.reply == Ok(Value::Int(1)),
            "{flavor}: the waiter after the manual failover: {:?}",
            got.reply
        );
        primary.assert_alive(&format!("{flavor}: old primary after CLUSTER FAILOVER"));
        replica.assert_alive(&format!("{flavor}: new primary after CLUSTER FAILOVER"));
        let demoted = wait_until(Duration::from_secs(10), || {
            replica_info(&mut p).contains("role:slave")
        });
        assert!(demoted, "{flavor}: the old primary never became a replica");
    }
}
