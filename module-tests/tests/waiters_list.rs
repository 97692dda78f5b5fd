//! RLOCK.WAITERS key: the calls blocked on a key here, in the order they will be served,
//! with their client, owner, kind, permits, times and SESSION flag; every kind, in RESP2
//! and RESP3; an empty array when none waits; a wrong call refused.

mod common;

use common::{wait_total_blocked, Pending, Waiting};
use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

/// One entry of the reply, whichever protocol it came in.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    client_id: i64,
    client_name: String,
    kind: String,
    owner: Option<String>,
    permits: Option<i64>,
    session: i64,
    timeout_ms: i64,
    waited_ms: i64,
}

fn entry(v: &Value, resp3: bool) -> Entry {
    let names = [
        "client-id",
        "client-name",
        "kind",
        "owner",
        "permits",
        "session",
        "timeout-ms",
        "waited-ms",
    ];
    let fields = EntryFields::exactly(v, resp3, &names);
    Entry {
        client_id: fields.int("client-id"),
        client_name: fields.text("client-name"),
        kind: fields.text("kind"),
        owner: fields.text_or_nil("owner"),
        permits: fields.int_or_nil("permits"),
        session: fields.int("session"),
        timeout_ms: fields.int("timeout-ms"),
        waited_ms: fields.int("waited-ms"),
    }
}

fn waiters(con: &mut redis::Connection, key: &str, resp3: bool) -> Vec<Entry> {
    match call(con, &["RLOCK.WAITERS", key]) {
        Ok(Value::Array(entries)) => entries.iter().map(|e| entry(e, resp3)).collect(),
        other => panic!("RLOCK.WAITERS {key}: {other:?}"),
    }
}

fn ok(con: &mut redis::Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// A connection, named `name` if given, blocked on `args`.
fn blocked(server: &Server, name: Option<&str>, args: &[&str], total: i64) -> Waiting {
    let mut p = Pending::new(server);
    if let Some(name) = name {
        ok(&mut p.con, &["CLIENT", "SETNAME", name]);
    }
    let waiting = p.spawn(args);
    wait_total_blocked(server, total);
    waiting
}

/// What every entry must show for the call it lists.
#[allow(clippy::too_many_arguments)]
fn check(
    flavor: Flavor,
    e: &Entry,
    id: i64,
    name: &str,
    kind: &str,
    owner: Option<&str>,
    permits: Option<i64>,
    session: i64,
    block_ms: Option<i64>,
) {
    let what = format!("{flavor}: {e:?}");
    assert_eq!(e.client_id, id, "{what}: client-id");
    assert_eq!(e.client_name, name, "{what}: client-name");
    assert_eq!(e.kind, kind, "{what}: kind");
    assert_eq!(e.owner.as_deref(), owner, "{what}: owner");
    assert_eq!(e.permits, permits, "{what}: permits");
    assert_eq!(e.session, session, "{what}: session");
    assert!(
        (0..20_000).contains(&e.waited_ms),
        "{what}: waited-ms within the test"
    );
    match block_ms {
        None => assert_eq!(e.timeout_ms, -1, "{what}: BLOCK 0 is -1"),
        Some(ms) => assert!(
            e.timeout_ms > 0 && e.timeout_ms <= ms && e.timeout_ms + e.waited_ms >= ms - 50,
            "{what}: timeout-ms is what is left of BLOCK {ms}"
        ),
    }
}

#[test]
fn every_kind_in_serving_order_in_resp2_and_resp3() {
    for (flavor, server, mut c) in servers() {
        let mut c3 = server.conn_resp3();
        // Locks: a plain waiter named and waiting forever, one with SESSION, a FAIR one, and
        // a multi-key one that stands in two lines.
        ok(&mut c, &["RLOCK.ACQUIRE", "orders", "holder"]);
        let w1 = blocked(
            &server,
            Some("billing-7"),
            &["RLOCK.ACQUIRE", "orders", "o1", "BLOCK", "0"],
            1,
        );
        let w2 = blocked(
            &server,
            None,
            &["RLOCK.ACQUIRE", "orders", "o2", "BLOCK", "30000", "SESSION"],
            2,
        );
        let w3 = blocked(
            &server,
            None,
            &["RLOCK.ACQUIRE", "orders", "o3", "FAIR", "BLOCK", "30000"],
            3,
        );
        let w4 = blocked(
            &server,
            None,
            &[
                "RLOCK.MACQUIRE",
                "o4",
                "2",
                "orders",
                "stock",
                "BLOCK",
                "30000",
            ],
            4,
        );
        // A read-write lock: a reader and a writer behind the writer that holds it.
        ok(&mut c, &["RLOCK.ACQUIRE", "catalog", "holder", "WRITE"]);
        let w5 = blocked(
            &server,
            None,
            &["RLOCK.ACQUIRE", "catalog", "r1", "READ", "BLOCK", "30000"],
            5,
        );
        let w6 = blocked(
            &server,
            None,
            &["RLOCK.ACQUIRE", "catalog", "w1", "WRITE", "BLOCK", "30000"],
            6,
        );
        // A semaphore without permits: an acquire and a lease with SESSION.
        ok(&mut c, &["RSEM.TRYSETPERMITS", "pool", "0"]);
        let w7 = blocked(
            &server,
            None,
            &["RSEM.ACQUIRE", "pool", "PERMITS", "2", "BLOCK", "30000"],
            7,
        );
        let w8 = blocked(
            &server,
            Some("leaser"),
            &[
                "RSEM.LEASE",
                "pool",
                "LEASE",
                "1000",
                "PERMITS",
                "3",
                "BLOCK",
                "30000",
                "SESSION",
            ],
            8,
        );
        // A latch, waited on forever.
        ok(&mut c, &["RLATCH.TRYSETCOUNT", "gate", "1"]);
        let w9 = blocked(&server, None, &["RLATCH.AWAIT", "gate", "BLOCK", "0"], 9);

        for (con, resp3) in [(&mut c, false), (&mut c3, true)] {
            let orders = waiters(con, "orders", resp3);
            assert_eq!(orders.len(), 4, "{flavor}: {orders:?}");
            let t = Some(30000);
            check(
                flavor,
                &orders[0],
                w1.id,
                "billing-7",
                "lock",
                Some("o1"),
                None,
                0,
                None,
            );
            check(
                flavor,
                &orders[1],
                w2.id,
                "",
                "lock",
                Some("o2"),
                None,
                1,
                t,
            );
            check(
                flavor,
                &orders[2],
                w3.id,
                "",
                "fair",
                Some("o3"),
                None,
                0,
                t,
            );
            check(
                flavor,
                &orders[3],
                w4.id,
                "",
                "multi",
                Some("o4"),
                None,
                0,
                t,
            );
            assert!(
                orders[0].waited_ms >= orders[3].waited_ms,
                "{flavor}: the oldest has waited longest: {orders:?}"
            );
            let stock = waiters(con, "stock", resp3);
            assert_eq!(stock.len(), 1, "{flavor}: {stock:?}");
            check(
                flavor,
                &stock[0],
                w4.id,
                "",
                "multi",
                Some("o4"),
                None,
                0,
                t,
            );
            let catalog = waiters(con, "catalog", resp3);
            assert_eq!(catalog.len(), 2, "{flavor}: {catalog:?}");
            check(
                flavor,
                &catalog[0],
                w5.id,
                "",
                "read",
                Some("r1"),
                None,
                0,
                t,
            );
            check(
                flavor,
                &catalog[1],
                w6.id,
                "",
                "write",
                Some("w1"),
                None,
                0,
                t,
            );
            let pool = waiters(con, "pool", resp3);
            assert_eq!(pool.len(), 2, "{flavor}: {pool:?}");
            check(flavor, &pool[0], w7.id, "", "permits", None, Some(2), 0, t);
            check(
                flavor,
                &pool[1],
                w8.id,
                "leaser",
                "lease",
                None,
                Some(3),
                1,
                t,
            );
            let gate = waiters(con, "gate", resp3);
            assert_eq!(gate.len(), 1, "{flavor}: {gate:?}");
            check(flavor, &gate[0], w9.id, "", "latch", None, None, 0, None);
            // Nobody waits: an empty array, whatever the key holds.
            assert_eq!(waiters(con, "nothing", resp3), vec![]);
            ok(con, &["SET", "plain", "x"]);
            assert_eq!(waiters(con, "plain", resp3), vec![]);
        }

        // Served in the order shown: the first leaves the line when it gets the lock.
        ok(&mut c, &["RLOCK.RELEASE", "orders", "holder"]);
        assert_eq!(
            w1.join().reply,
            Ok(Value::Int(1)),
            "{flavor}: o1 served first"
        );
        let orders = waiters(&mut c, "orders", false);
        let owners: Vec<Option<&str>> = orders.iter().map(|e| e.owner.as_deref()).collect();
        assert_eq!(owners, [Some("o2"), Some("o3"), Some("o4")], "{flavor}");
        // The latch opens: its line empties.
        ok(&mut c, &["RLATCH.COUNTDOWN", "gate"]);
        assert_eq!(w9.join().reply, Ok(Value::Int(1)), "{flavor}: latch open");
        assert_eq!(waiters(&mut c, "gate", false), vec![], "{flavor}");
        drop((w2, w3, w4, w5, w6, w7, w8));
    }
}

#[test]
fn a_waiter_that_leaves_leaves_the_list() {
    for (flavor, server, mut c) in servers() {
        ok(&mut c, &["RLOCK.ACQUIRE", "k", "holder"]);
        let short = blocked(
            &server,
            None,
            &["RLOCK.ACQUIRE", "k", "a", "BLOCK", "200"],
            1,
        );
        let long = blocked(&server, None, &["RLOCK.ACQUIRE", "k", "b", "BLOCK", "0"], 2);
        assert_eq!(waiters(&mut c, "k", false).len(), 2, "{flavor}");
        assert_eq!(
            short.join().reply,
            Ok(Value::Nil),
            "{flavor}: BLOCK ran out"
        );
        let left = waiters(&mut c, "k", false);
        assert_eq!(left.len(), 1, "{flavor}: {left:?}");
        assert_eq!(left[0].client_id, long.id, "{flavor}");
        ok(&mut c, &["CLIENT", "KILL", "ID", &long.id.to_string()]);
        wait_total_blocked(&server, 0);
        assert_eq!(waiters(&mut c, "k", false), vec![], "{flavor}");
        drop(long);
    }
}

#[test]
fn a_wrong_call_is_refused() {
    for (flavor, _server, mut c) in servers() {
        for args in [&["RLOCK.WAITERS"][..], &["RLOCK.WAITERS", "a", "b"]] {
            let error = call(&mut c, args).expect_err("wrong arity");
            assert!(
                error.contains("wrong number of arguments"),
                "{flavor}: {args:?}: {error}"
            );
        }
    }
}
