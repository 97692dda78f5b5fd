//! A replica WITHOUT the module ends up identical to the primary after blocking
//! hand-offs, event hand-offs, expiry hand-offs and session releases.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

fn run(con: &mut Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("`{}` failed: {e}", args.join(" ")))
}

/// Every key with its type, content (hash fields / string) and absolute expiry
/// (`PEXPIRETIME`, so the time between the two snapshots does not count).
fn snapshot(con: &mut Connection) -> BTreeMap<String, (String, String, i64)> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).expect("KEYS");
    let mut out = BTreeMap::new();
    for k in keys {
        let kind: String = redis::cmd("TYPE").arg(&k).query(con).expect("TYPE");
        let content = match kind.as_str() {
            "hash" => format!("{:?}", holders(con, &k)),
            "string" => {
                let v: Option<String> = redis::cmd("GET").arg(&k).query(con).expect("GET");
                format!("{v:?}")
            }
            other => format!("<{other}>"),
        };
        out.insert(k.clone(), (kind, content, pexpiretime(con, k.as_bytes())));
    }
    out
}

/// Queues `owner` on `key` (its reply is read later) and waits until it is blocked.
fn queue(server: &Server, c: &mut Connection, key: &str, owner: &str, extra: &[&str]) -> Pending {
    let n = lock_info(c, key).blocked;
    let mut p = Pending::new(server);
    let mut args = vec!["RLOCK.ACQUIRE", key, owner, "BLOCK", "0", "LEASE", "600000"];
    args.extend(extra);
    p.send(&args);
    wait_blocked(server.flavor, c, key, n + 1);
    p
}

#[test]
fn replica_without_module_matches_after_blocking_expiry_and_session_workload() {
    for flavor in flavors() {
        let (primary, replica) = primary_and_bare_replica(flavor);
        let mut c = primary.conn();
        let before = rstats(&primary);
        let mut keep = Vec::new(); // connections whose holds must stay
        for round in 0..6 {
            let key = |n: &str| format!("{n}:{round}");
            // RELEASE hand-off, with tokens and re-entry.
            let k = key("rel");
            run(
                &mut c,
                &["RLOCK.ACQUIRE", &k, "a", "LEASE", "600000", "TOKEN"],
            );
            run(&mut c, &["RLOCK.ACQUIRE", &k, "a", "LEASE", "600000"]);
            let mut b = queue(&primary, &mut c, &k, "b", &["TOKEN"]);
            let mut d = queue(&primary, &mut c, &k, "d", &[]);
            run(&mut c, &["RLOCK.RELEASE", &k, "a"]);
            run(&mut c, &["RLOCK.RELEASE", &k, "a"]);
            assert!(matches!(b.reply(), Ok(Value::Int(_))), "{flavor}");
            run(&mut b.con, &["RLOCK.RELEASE", &k, "b"]);
            assert_eq!(d.reply(), Ok(Value::Int(1)), "{flavor}");
            keep.push(d);

            // DEL / FORCERELEASE / Lua unlock hand-offs.
            for (name, free) in [
                ("del", vec!["DEL"]),
                ("force", vec!["RLOCK.FORCERELEASE"]),
                ("unlink", vec!["UNLINK"]),
            ] {
                let k = key(name);
                run(
                    &mut c,
                    &["RLOCK.ACQUIRE", &k, "a", "LEASE", "600000", "TOKEN"],
                );
                let mut w = queue(&primary, &mut c, &k, "w", &["TOKEN"]);
                let mut args = free.clone();
                args.push(&k);
                run(&mut c, &args);
                assert_eq!(w.reply(), Ok(Value::Int(2)), "{flavor}: {name} hand-off");
                keep.push(w);
            }
            let k = key("lua");
            run(&mut c, &["RLOCK.ACQUIRE", &k, "a", "LEASE", "600000"]);
            let mut w = queue(&primary, &mut c, &k, "w", &[]);
            lua_unlock(&mut c, &k, "a").expect("lua unlock");
            assert_eq!(
                w.reply(),
                Ok(Value::Int(1)),
                "{flavor}: Lua unlock hand-off"
            );
            keep.push(w);

            // Expiry hand-off: the timer deletes the expired key and grants the waiter.
            let k = key("exp");
            run(&mut c, &["RLOCK.ACQUIRE", &k, "a", "LEASE", "60", "TOKEN"]);
            let mut w = queue(&primary, &mut c, &k, "w", &["TOKEN"]);
            assert_eq!(w.reply(), Ok(Value::Int(2)), "{flavor}: expiry hand-off");
            keep.push(w);

            // Session release: the holder's connection closes; the waiter is served.
            let k = key("sess");
            let mut s = Pending::new(&primary);
            run(
                &mut s.con,
                &["RLOCK.ACQUIRE", &k, "s", "SESSION", "LEASE", "600000"],
            );
            run(
                &mut s.con,
                &["RLOCK.ACQUIRE", &k, "s", "SESSION", "LEASE", "600000"],
            );
            let mut w = queue(&primary, &mut c, &k, "w", &["SESSION"]);
            drop(s);
            assert_eq!(w.reply(), Ok(Value::Int(1)), "{flavor}: session hand-off");
            // ... and that waiter's own session ends too, freeing the lock.
            if round % 2 == 0 {
                drop(w);
                let free = wait_until(Duration::from_secs(5), || holders(&mut c, &k).is_empty());
                assert!(
                    free,
                    "{flavor}: session hold granted by hand-off not released"
                );
            } else {
                keep.push(w);
            }
            // A session hold with no waiter.
            let k = key("lone");
            let mut s = primary.conn();
            run(
                &mut s,
                &["RLOCK.ACQUIRE", &k, "s", "SESSION", "LEASE", "600000"],
            );
            drop(s);
            let free = wait_until(Duration::from_secs(5), || holders(&mut c, &k).is_empty());
            assert!(free, "{flavor}: lone session hold not released");
        }
        let after = rstats(&primary);
        for counter in ["handoffs", "expiries", "session_releases"] {
            assert!(
                after[counter] > before[counter],
                "{flavor}: the workload did not exercise {counter}: {after:?}"
            );
        }
        sync_replica(&primary, &replica);
        let mut rc = replica.conn();
        let p = snapshot(&mut c);
        let r = snapshot(&mut rc);
        assert!(p.len() > 20, "{flavor}: primary keys {p:?}");
        let pk: Vec<_> = p.keys().collect();
        let rk: Vec<_> = r.keys().collect();
        assert_eq!(pk, rk, "{flavor}: key sets differ");
        for (k, (kind, content, pt)) in &p {
            let (rkind, rcontent, rpt) = &r[k];
            assert_eq!(
                (kind, content),
                (rkind, rcontent),
                "{flavor}: key {k} differs (primary vs replica)"
            );
            assert!(
                (pt - rpt).abs() <= 50 && (*pt >= 0) == (*rpt >= 0),
                "{flavor}: key {k}: PEXPIRETIME {pt} on the primary, {rpt} on the replica"
            );
        }
        drop(keep);
    }
}
