//! ACL categories come from the command table, on servers that take them from
//! modules (Redis 7.2+, Valkey): a user without `@write` cannot take, release or
//! force-release a lock, and `RLOCK.FORCERELEASE` is `@dangerous`. Redis 7.0 has no
//! such API; there the commands are in no category and are granted by name.

use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

fn takes_module_categories(flavor: Flavor) -> bool {
    flavor == Flavor::Valkey || flavor.version() >= (7, 2, 0)
}

fn category(con: &mut redis::Connection, name: &str) -> Vec<String> {
    redis::cmd("ACL")
        .arg("CAT")
        .arg(name)
        .query::<Vec<String>>(con)
        .unwrap_or_else(|e| panic!("ACL CAT {name}: {e}"))
}

#[test]
fn commands_sit_in_the_acl_categories_of_the_table() {
    for flavor in flavors() {
        let server = Server::start(flavor);
        let mut admin = server.conn();
        let write = category(&mut admin, "write");
        let read = category(&mut admin, "read");
        let dangerous = category(&mut admin, "dangerous");
        let blocking = category(&mut admin, "blocking");
        let has = |cat: &[String], cmd: &str| cat.iter().any(|c| c == cmd);
        if !takes_module_categories(flavor) {
            assert!(
                !has(&write, "rlock.acquire"),
                "{flavor}: no module categories expected on this server"
            );
            continue;
        }
        for cmd in [
            "rlock.acquire",
            "rlock.release",
            "rlock.renew",
            "rlock.forcerelease",
        ] {
            assert!(has(&write, cmd), "{flavor}: {cmd} in @write");
            assert!(!has(&read, cmd), "{flavor}: {cmd} not in @read");
        }
        assert!(has(&read, "rlock.info"), "{flavor}: rlock.info in @read");
        assert!(
            !has(&write, "rlock.info"),
            "{flavor}: rlock.info not in @write"
        );
        assert!(
            has(&dangerous, "rlock.forcerelease"),
            "{flavor}: FORCERELEASE @dangerous"
        );
        assert!(
            !has(&dangerous, "rlock.acquire"),
            "{flavor}: ACQUIRE not @dangerous"
        );
        assert!(
            has(&blocking, "rlock.acquire"),
            "{flavor}: ACQUIRE @blocking"
        );

        // A user without @write may look, not lock.
        assert_eq!(
            call(
                &mut admin,
                &["ACL", "SETUSER", "reader", "on", "nopass", "~*", "+@all", "-@write"]
            ),
            Ok(Value::Okay)
        );
        assert_eq!(
            call(&mut admin, &["RLOCK.ACQUIRE", "orders", "admin"]),
            Ok(Value::Int(1))
        );
        let mut reader = server.conn();
        assert_eq!(call(&mut reader, &["AUTH", "reader", "x"]), Ok(Value::Okay));
        for args in [
            &["RLOCK.ACQUIRE", "orders", "reader"][..],
            &["RLOCK.RELEASE", "orders", "admin"][..],
            &["RLOCK.RENEW", "orders", "admin"][..],
            &["RLOCK.FORCERELEASE", "orders"][..],
        ] {
            let reply = call(&mut reader, args);
            assert!(
                matches!(&reply, Err(e) if e.starts_with("NOPERM")),
                "{flavor}: {args:?} by a user without @write: {reply:?}"
            );
        }
        assert!(call(&mut reader, &["RLOCK.INFO", "orders"]).is_ok());
        // Nothing changed.
        assert_eq!(
            hgetall(&mut admin, b"orders").get(&b"admin"[..]),
            Some(&b"1".to_vec())
        );
    }
}
