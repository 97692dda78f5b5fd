//! ACL categories come from the command table, on servers that take them from
//! modules (Redis 7.2+, Valkey): a user without `@write` cannot take, release or
//! force-release a lock, and `RLOCK.FORCERELEASE` is `@dangerous`. Redis 7.0 has no
//! such API; there the commands are in no category and are granted by name.

use rlock_module_tests::redis::Value;
use rlock_module_tests::*;

/// The call was refused by the ACL.
fn assert_refused(reply: Result<Value, String>, what: &str) {
    assert!(
        matches!(&reply, Err(e) if e.starts_with("NOPERM")),
        "{what}: {reply:?}"
    );
}

/// Whether the server puts module commands in ACL categories (`SetCommandACLCategories`):
/// Redis 7.2+ and Valkey.
fn takes_module_categories(flavor: Flavor) -> bool {
    flavor == Flavor::Valkey || flavor.version() >= (7, 2, 0)
}

/// Whether a module may add a category of its own (`AddACLCategory`): Redis 7.4+, Valkey 8+.
fn takes_own_category(flavor: Flavor) -> bool {
    flavor == Flavor::Valkey || flavor.version() >= (7, 4, 0)
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
    for (flavor, server) in each_server() {
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
            "rlock.macquire",
            "rlock.mrelease",
            "rsem.trysetpermits",
            "rsem.addpermits",
            "rsem.acquire",
            "rsem.release",
            "rsem.lease",
            "rsem.return",
            "rsem.renew",
            "rlatch.trysetcount",
            "rlatch.countdown",
            "rlatch.await",
        ] {
            assert!(has(&write, cmd), "{flavor}: {cmd} in @write");
            assert!(!has(&read, cmd), "{flavor}: {cmd} not in @read");
        }
        for cmd in [
            "rlock.info",
            "rlock.waiters",
            "rsem.available",
            "rlatch.count",
        ] {
            assert!(has(&read, cmd), "{flavor}: {cmd} in @read");
            assert!(!has(&write, cmd), "{flavor}: {cmd} not in @write");
        }
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
        // RLOCK.TOP names keys, as SCAN does; RLOCK.RESETSTAT is an operator's tool.
        let keyspace = category(&mut admin, "keyspace");
        let admin_cat = category(&mut admin, "admin");
        assert!(has(&read, "rlock.top") && has(&keyspace, "rlock.top"));
        assert!(!has(&write, "rlock.top") && !has(&dangerous, "rlock.top"));
        assert!(has(&admin_cat, "rlock.resetstat") && has(&dangerous, "rlock.resetstat"));
        assert!(!has(&read, "rlock.resetstat") && !has(&write, "rlock.resetstat"));
        for cmd in [
            "rlock.macquire",
            "rsem.acquire",
            "rsem.lease",
            "rlatch.await",
        ] {
            assert!(has(&blocking, cmd), "{flavor}: {cmd} @blocking");
        }

        // A user without @write may look, not lock.
        assert_int(&mut admin, &["RLOCK.ACQUIRE", "orders", "admin"], 1);
        let mut reader = server.conn_as_user(&mut admin, "reader", &["~*", "+@all", "-@write"]);
        for args in [
            &["RLOCK.ACQUIRE", "orders", "reader"][..],
            &["RLOCK.RELEASE", "orders", "admin"][..],
            &["RLOCK.RENEW", "orders", "admin"][..],
            &["RLOCK.FORCERELEASE", "orders"][..],
            &["RLOCK.MACQUIRE", "reader", "1", "orders"][..],
            &["RLOCK.MRELEASE", "admin", "1", "orders"][..],
        ] {
            assert_refused(
                call(&mut reader, args),
                &format!("{flavor}: {args:?} by a user without @write"),
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

/// Where the server takes module categories, `fast` and `slow` follow what each command
/// costs: `ACQUIRE` may block and `FORCERELEASE` is an operator's tool.
#[test]
fn fast_and_slow_follow_the_table() {
    for (flavor, server) in each_server() {
        let mut admin = server.conn();
        let fast = category(&mut admin, "fast");
        let slow = category(&mut admin, "slow");
        if !takes_module_categories(flavor) {
            // Redis 7.0: a module command sits in no category at all.
            for cmd in [
                "rlock.acquire",
                "rlock.release",
                "rsem.acquire",
                "rlatch.count",
            ] {
                assert!(
                    !fast.contains(&cmd.to_string()) && !slow.contains(&cmd.to_string()),
                    "{flavor}: {cmd} in no category"
                );
            }
            continue;
        }
        for cmd in [
            "rlock.release",
            "rlock.renew",
            "rlock.info",
            "rsem.trysetpermits",
            "rsem.addpermits",
            "rsem.release",
            "rsem.available",
            "rsem.return",
            "rlatch.trysetcount",
            "rlatch.countdown",
            "rlatch.count",
        ] {
            assert!(fast.contains(&cmd.to_string()), "{flavor}: {cmd} @fast");
            assert!(
                !slow.contains(&cmd.to_string()),
                "{flavor}: {cmd} not @slow"
            );
        }
        // The multi-key commands cost one step per key.
        for cmd in [
            "rlock.acquire",
            "rlock.forcerelease",
            "rlock.macquire",
            "rlock.mrelease",
            "rlock.scan",
            "rlock.waiters",
            "rsem.acquire",
            "rsem.lease",
            "rsem.renew",
            "rlatch.await",
            "rlock.top",
            "rlock.resetstat",
        ] {
            assert!(slow.contains(&cmd.to_string()), "{flavor}: {cmd} @slow");
            assert!(
                !fast.contains(&cmd.to_string()),
                "{flavor}: {cmd} not @fast"
            );
        }
    }
}

/// The module's own category, where the server takes one (Redis 7.4+, Valkey 8+):
/// `+@rlock` grants the module's commands and nothing else.
#[test]
fn the_rlock_category_grants_the_lock_commands_and_nothing_else() {
    for (flavor, server) in each_server() {
        let mut admin = server.conn();
        let info = server.info("rlock");
        let all: Vec<String> = redis::cmd("ACL").arg("CAT").query(&mut admin).unwrap();
        let has_own = all.contains(&"rlock".to_string());
        assert_eq!(
            has_own,
            takes_own_category(flavor),
            "{flavor}: @rlock exists from Redis 7.4 and on Valkey"
        );
        assert_eq!(
            info.get("rlock_acl_category_rlock").map(String::as_str),
            Some(if has_own { "1" } else { "0" }),
            "{flavor}: INFO says whether @rlock exists"
        );
        if !has_own {
            continue;
        }
        let mut listed = category(&mut admin, "rlock");
        listed.sort();
        assert_eq!(
            listed,
            [
                "rlatch.await",
                "rlatch.count",
                "rlatch.countdown",
                "rlatch.trysetcount",
                "rlock.acquire",
                "rlock.forcerelease",
                "rlock.guard",
                "rlock.info",
                "rlock.macquire",
                "rlock.mrelease",
                "rlock.release",
                "rlock.renew",
                "rlock.resetstat",
                "rlock.scan",
                "rlock.top",
                "rlock.waiters",
                "rsem.acquire",
                "rsem.addpermits",
                "rsem.available",
                "rsem.lease",
                "rsem.release",
                "rsem.renew",
                "rsem.return",
                "rsem.trysetpermits"
            ],
            "{flavor}: ACL CAT rlock"
        );
        let mut locker = server.conn_as_user(&mut admin, "locker", &["~*", "-@all", "+@rlock"]);
        assert_eq!(
            call(
                &mut locker,
                &["RLOCK.ACQUIRE", "job", "w1", "FAIR", "TOKEN"]
            ),
            Ok(Value::Int(1))
        );
        assert!(call(&mut locker, &["RLOCK.INFO", "job"]).is_ok());
        assert_int(&mut locker, &["RLOCK.RENEW", "job", "w1"], 1);
        // RLOCK.GUARD is in the category, but its inner command is checked as the caller:
        // +@rlock alone runs no SET through it either.
        assert_refused(
            call(
                &mut locker,
                &["RLOCK.GUARD", "job", "w1", "CALL", "SET", "{job}x", "1"],
            ),
            &format!("{flavor}: +@rlock grants no other command through RLOCK.GUARD"),
        );
        assert_eq!(
            call(&mut admin, &["EXISTS", "{job}x"]),
            Ok(Value::Int(0)),
            "{flavor}: the refused guarded SET wrote nothing"
        );
        assert_int(&mut locker, &["RLOCK.RELEASE", "job", "w1"], 1);
        assert_refused(
            call(&mut locker, &["SET", "job", "x"]),
            &format!("{flavor}: +@rlock grants no other command"),
        );
    }
}

/// Redis 7.0 cannot put module commands in categories: one warning in the log, an
/// `INFO rlock` field, and per-command rules work instead.
#[test]
fn without_the_category_api_the_server_says_so_and_per_command_rules_work() {
    for (flavor, server) in each_server() {
        let mut admin = server.conn();
        let missing = !takes_module_categories(flavor);
        let info = server.info("rlock");
        assert_eq!(
            info.get("rlock_acl_categories_missing").map(String::as_str),
            Some(if missing { "1" } else { "0" }),
            "{flavor}: INFO rlock"
        );
        let warnings = server
            .log()
            .matches("cannot put module commands in ACL categories")
            .count();
        assert_eq!(
            warnings, missing as usize,
            "{flavor}: one warning line at load"
        );
        // What the docs tell operators to do on any server.
        let mut worker = server.conn_as_user(
            &mut admin,
            "worker",
            &["~*", "+@all", "-rlock.forcerelease"],
        );
        assert_int(&mut worker, &["RLOCK.ACQUIRE", "batch", "w"], 1);
        assert_refused(
            call(&mut worker, &["RLOCK.FORCERELEASE", "batch"]),
            &format!("{flavor}: -rlock.forcerelease"),
        );
        assert_eq!(
            hgetall(&mut admin, b"batch").len(),
            1,
            "{flavor}: still held"
        );
    }
}

/// Without `@dangerous` a user may lock but not force a release.
#[test]
fn a_user_without_dangerous_cannot_force_a_release() {
    for flavor in flavors() {
        if !takes_module_categories(flavor) {
            continue;
        }
        let server = Server::start(flavor);
        let mut admin = server.conn();
        let mut app = server.conn_as_user(&mut admin, "app", &["~*", "+@all", "-@dangerous"]);
        assert_int(&mut app, &["RLOCK.ACQUIRE", "door", "a"], 1);
        assert_refused(
            call(&mut app, &["RLOCK.FORCERELEASE", "door"]),
            &format!("{flavor}: FORCERELEASE without @dangerous"),
        );
        assert_int(&mut app, &["RLOCK.RELEASE", "door", "a"], 1);
    }
}

/// Key patterns apply through the key specs: a user limited to `app:*` locks there
/// and nowhere else, with every option (the fair queue, the fencing counter and the
/// request records are the module's own bookkeeping, not checked against the
/// pattern); a user with read-only access to the keys may `RLOCK.INFO` but not lock.
#[test]
fn key_patterns_and_read_only_access_apply() {
    for (flavor, server) in each_server() {
        let mut admin = server.conn();
        let mut tenant = server.conn_as_user(&mut admin, "tenant", &["~app:*", "+@all"]);
        assert_eq!(
            call(
                &mut tenant,
                &["RLOCK.ACQUIRE", "app:1", "t", "FAIR", "TOKEN", "REQ", "r1"]
            ),
            Ok(Value::Int(1))
        );
        for args in [
            &["RLOCK.ACQUIRE", "other:1", "t"][..],
            &["RLOCK.INFO", "other:1"][..],
            &["RLOCK.RELEASE", "other:1", "t"][..],
            // Every key of a multi-key call is checked.
            &["RLOCK.MACQUIRE", "t", "2", "app:2", "other:1"][..],
        ] {
            assert_refused(
                call(&mut tenant, args),
                &format!("{flavor}: {args:?} outside ~app:*"),
            );
        }
        assert!(!keyspace(&mut admin).contains_key(&b"other:1"[..]));
        assert!(!keyspace(&mut admin).contains_key(&b"app:2"[..]));
        let both = ["RLOCK.MACQUIRE", "t", "2", "app:2", "app:3"];
        assert_eq!(call(&mut tenant, &both), Ok(Value::Int(2)), "{flavor}");
        let both = ["RLOCK.MRELEASE", "t", "2", "app:2", "app:3"];
        assert_eq!(call(&mut tenant, &both), Ok(Value::Int(2)), "{flavor}");

        let mut auditor = server.conn_as_user(&mut admin, "auditor", &["%R~*", "+@all"]);
        assert!(
            call(&mut auditor, &["RLOCK.INFO", "app:1"]).is_ok(),
            "{flavor}: RLOCK.INFO only reads its key"
        );
        for args in [
            &["RLOCK.ACQUIRE", "app:2", "a"][..],
            &["RLOCK.RELEASE", "app:1", "t"][..],
            &["RLOCK.RENEW", "app:1", "t"][..],
            &["RLOCK.FORCERELEASE", "app:1"][..],
        ] {
            assert_refused(
                call(&mut auditor, args),
                &format!("{flavor}: {args:?} with read-only key access"),
            );
        }
        assert_int(&mut tenant, &["RLOCK.RELEASE", "app:1", "t"], 1);
    }
}
