//! `RLOCK.GUARD`: a command runs only while its owner holds the lock, checked in the
//! same turn (docs/COMMANDS.md, RLOCK.GUARD; issue 41).

mod common;

use common::rstat;
use rlock_module_tests::cluster::Cluster;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

fn ok(n: i64) -> Result<Value, String> {
    Ok(Value::Int(n))
}

fn get(con: &mut Connection, key: &str) -> Result<Value, String> {
    call(con, &["GET", key])
}

/// An array reply of bulk strings.
fn bulks(items: &[&str]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|item| Value::BulkString(item.as_bytes().to_vec()))
            .collect(),
    )
}

fn bulk(text: &str) -> Result<Value, String> {
    Ok(Value::BulkString(text.as_bytes().to_vec()))
}

/// `RLOCK.GUARD lock owner` and the rest of the call: its options, CALL and the
/// inner command.
fn guard<'a>(lock: &'a str, owner: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    [&["RLOCK.GUARD", lock, owner][..], rest].concat()
}

/// `owner`'s guard on `lock` with fencing token `token`, setting `key` to `value`.
fn fenced_set<'a>(
    lock: &'a str,
    owner: &'a str,
    token: &'a str,
    key: &'a str,
    value: &'a str,
) -> Vec<&'a str> {
    guard(lock, owner, &["TOKEN", token, "CALL", "SET", key, value])
}

/// `a`'s guard on lock `k`, running `script` on its one key `key`.
fn guarded_script<'a>(script: &'a str, key: &'a str) -> Vec<&'a str> {
    guard("k", "a", &["CALL", "EVAL", script, "1", key])
}

/// The error of `guard(lock, owner, rest)`, which must be refused.
fn guard_refusal(con: &mut Connection, lock: &str, owner: &str, rest: &[&str]) -> String {
    refusal(con, &guard(lock, owner, rest))
}

/// The guard's error, or a panic naming the reply that was not one.
fn refusal(con: &mut Connection, args: &[&str]) -> String {
    match call(con, args) {
        Err(e) => e,
        Ok(v) => panic!("{args:?} ran and replied {v:?}"),
    }
}

#[test]
fn the_holder_runs_the_command_and_gets_its_reply() {
    let as_alice = |rest: &[&'static str]| guard("orders", "alice", rest);
    for (flavor, server, mut con) in servers() {
        assert_int(&mut con, &["RLOCK.ACQUIRE", "orders", "alice", "TOKEN"], 1);
        assert_okay(&mut con, &as_alice(&["CALL", "SET", "o{orders}", "paid"]));
        assert_reply(
            &mut con,
            &as_alice(&["TOKEN", "1", "call", "get", "o{orders}"]),
            Value::BulkString(b"paid".into()),
            flavor,
        );
        // Another owner: nothing runs.
        let refused = guard_refusal(
            &mut con,
            "orders",
            "bob",
            &["CALL", "SET", "o{orders}", "void"],
        );
        assert_eq!(
            refused, "NOTHELD the lock is not held by this owner",
            "{flavor}"
        );
        assert_eq!(get(&mut con, "o{orders}"), bulk("paid"), "{flavor}");
        // The inner command's own errors are its reply: a list is not a string.
        call(&mut con, &["RPUSH", "l{orders}", "x"]).unwrap();
        let wrong = refusal(&mut con, &as_alice(&["CALL", "GET", "l{orders}"]));
        assert!(wrong.starts_with("WRONGTYPE"), "{flavor}: {wrong}");
        // Replies of every shape pass through.
        assert_reply(
            &mut con,
            &as_alice(&["CALL", "LRANGE", "l{orders}", "0", "-1"]),
            Value::Array(vec![Value::BulkString(b"x".to_vec())]),
            flavor,
        );
        assert_reply(
            &mut con,
            &as_alice(&["CALL", "GET", "none{orders}"]),
            Value::Nil,
            flavor,
        );
        // A free lock guards nothing.
        call(&mut con, &["RLOCK.RELEASE", "orders", "alice"]).unwrap();
        let refused = refusal(&mut con, &as_alice(&["CALL", "DEL", "o{orders}"]));
        assert!(refused.starts_with("NOTHELD"), "{flavor}: {refused}");
        assert_eq!(get(&mut con, "o{orders}"), bulk("paid"), "{flavor}");
        assert_eq!(rstat(&server, "guard_calls"), 5, "{flavor}");
        assert_eq!(rstat(&server, "guard_refusals"), 2, "{flavor}");
        assert_eq!(rstat(&server, "guard_stale_tokens"), 0, "{flavor}");
    }
}

#[test]
fn a_token_taken_since_is_stale() {
    for (flavor, server, mut con) in servers() {
        assert_int(&mut con, &["RLOCK.ACQUIRE", "t", "a", "TOKEN"], 1);
        call(&mut con, &["RLOCK.RELEASE", "t", "a"]).unwrap();
        assert_int(&mut con, &["RLOCK.ACQUIRE", "t", "a", "TOKEN"], 2);
        let stale = refusal(&mut con, &fenced_set("t", "a", "1", "x{t}", "1"));
        assert_eq!(
            stale, "STALETOKEN the lock's fencing token is now 2, not 1",
            "{flavor}"
        );
        let ahead = refusal(&mut con, &fenced_set("t", "a", "3", "x{t}", "1"));
        assert!(ahead.starts_with("STALETOKEN"), "{flavor}: {ahead}");
        assert_eq!(get(&mut con, "x{t}"), Ok(Value::Nil), "{flavor}");
        assert_okay(&mut con, &fenced_set("t", "a", "2", "x{t}", "2"));
        // NOTHELD comes before the token.
        let other = refusal(&mut con, &fenced_set("t", "b", "1", "x{t}", "1"));
        assert!(other.starts_with("NOTHELD"), "{flavor}: {other}");
        // A lock without a counter has no token to match.
        call(&mut con, &["RLOCK.ACQUIRE", "plain", "a"]).unwrap();
        let none = refusal(&mut con, &fenced_set("plain", "a", "1", "x{plain}", "1"));
        assert_eq!(
            none, "STALETOKEN the lock has no fencing token, not 1",
            "{flavor}"
        );
        assert_eq!(rstat(&server, "guard_stale_tokens"), 3, "{flavor}");
        assert_eq!(rstat(&server, "guard_refusals"), 4, "{flavor}");
    }
}

/// The lease is compared with the clock at the call: a lease that ran out while the
/// server slept is over, though no timer has run since (one packet: the sleep and the
/// guard in the same turn).
#[test]
fn a_lease_that_ran_out_during_debug_sleep_is_refused() {
    for (flavor, _server, mut con) in servers() {
        for (lock, owner, side, lease_ms) in [
            ("s", "a", None, "200"),
            ("rw", "r", Some("READ"), "200"),
            ("rw", "r2", Some("READ"), "30000"),
            ("w", "a", Some("WRITE"), "200"),
        ] {
            let acquire = ["RLOCK.ACQUIRE", lock, owner, "LEASE", lease_ms];
            call(&mut con, &[&acquire[..], side.as_slice()].concat()).unwrap();
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        pipe.cmd("DEBUG").arg("SLEEP").arg("0.4");
        for (lock, owner, side) in [
            ("s", "a", None),
            ("rw", "r", Some("READ")),
            ("w", "a", Some("WRITE")),
        ] {
            let cmd = pipe.cmd("RLOCK.GUARD").arg(lock).arg(owner);
            if let Some(side) = side {
                cmd.arg(side);
            }
            cmd.arg("CALL").arg("INCR").arg(format!("n{{{lock}}}"));
        }
        let replies: Vec<redis::RedisResult<Value>> = pipe.query(&mut con).unwrap();
        for (i, reply) in replies.iter().enumerate().skip(1) {
            assert!(
                matches!(reply, Err(e) if error_text(e).starts_with("NOTHELD")),
                "{flavor}: guard {i} after the sleep: {reply:?}"
            );
        }
        for lock in ["s", "rw", "w"] {
            assert_eq!(
                get(&mut con, &format!("n{{{lock}}}")),
                Ok(Value::Nil),
                "{flavor}: {lock}"
            );
        }
        // r2's read lease still runs.
        assert_int(
            &mut con,
            &guard("rw", "r2", &["READ", "CALL", "INCR", "n{rw}"]),
            1,
        );
    }
}

#[test]
fn each_side_of_a_read_write_lock_is_guarded() {
    for (flavor, _server, mut con) in servers() {
        // `owner` increments c{rw} under the `side` it names (none: a plain lock's guard).
        let incr = |owner, side: &[&'static str]| {
            guard("rw", owner, &[side, &["CALL", "INCR", "c{rw}"]].concat())
        };
        call(&mut con, &["RLOCK.ACQUIRE", "rw", "r", "READ"]).unwrap();
        assert_int(&mut con, &incr("r", &["READ"]), 1);
        let not_writer = refusal(&mut con, &incr("r", &["WRITE"]));
        assert!(not_writer.starts_with("NOTHELD"), "{flavor}: {not_writer}");
        let no_side = refusal(&mut con, &incr("r", &[]));
        assert!(
            no_side.starts_with("WRONGTYPE the key holds a read-write lock"),
            "{flavor}: {no_side}"
        );
        call(&mut con, &["RLOCK.RELEASE", "rw", "r", "READ"]).unwrap();
        call(&mut con, &["RLOCK.ACQUIRE", "rw", "w", "WRITE"]).unwrap();
        assert_int(&mut con, &incr("w", &["WRITE"]), 2);
        let reader = refusal(&mut con, &incr("w", &["READ"]));
        assert!(reader.starts_with("NOTHELD"), "{flavor}: {reader}");
        call(&mut con, &["RLOCK.ACQUIRE", "plain", "a"]).unwrap();
        let plain = guard_refusal(&mut con, "plain", "a", &["READ", "CALL", "GET", "x"]);
        assert!(
            plain.starts_with("WRONGTYPE the key holds a reentrant lock"),
            "{flavor}: {plain}"
        );
    }
}

#[test]
fn bad_calls_and_unsafe_commands_are_refused_and_change_nothing() {
    for (flavor, _server, mut con) in servers() {
        call(&mut con, &["RLOCK.ACQUIRE", "k", "a", "TOKEN"]).unwrap();
        call(&mut con, &["SET", "str", "v"]).unwrap();
        let long_owner = "o".repeat(1025);
        let cases: &[(&[&str], &str)] = &[
            (&guard("k", "a", &["SET", "x"]), "ERR unknown option 'SET'"),
            (&guard("k", "a", &["READ", "x"]), "ERR unknown option"),
            (
                &guard("k", "a", &["TOKEN", "1", "READ"]),
                "ERR RLOCK.GUARD needs CALL",
            ),
            (
                &guard("k", "a", &["READ", "CALL"]),
                "ERR RLOCK.GUARD needs CALL",
            ),
            (&guard("k", "a", &["CALL"]), "ERR wrong number of arguments"),
            (
                &guard("k", "a", &["TOKEN", "x", "CALL", "SET", "x", "1"]),
                "ERR TOKEN must be an integer",
            ),
            (
                &guard("k", "a", &["TOKEN", "1", "TOKEN", "1", "CALL", "SET", "x"]),
                "ERR option TOKEN given more than once",
            ),
            (
                &guard("k", "a", &["READ", "WRITE", "CALL", "SET", "x", "1"]),
                "ERR give one of READ or WRITE",
            ),
            (
                &guard("k", "", &["CALL", "SET", "x", "1"]),
                "ERR owner must not be empty",
            ),
            (
                &guard("k", &long_owner, &["CALL", "SET", "x", "1"]),
                "ERR owner must be at most 1024 bytes",
            ),
            (
                &guard("k", "a", &["CALL", "NOSUCH", "x"]),
                "ERR unknown command 'NOSUCH' inside RLOCK.GUARD",
            ),
            (
                &guard("k", "a", &["CALL", "SET", "x"]),
                "ERR wrong number of arguments for 'set' inside RLOCK.GUARD",
            ),
            (
                &guard("k", "a", &["CALL", "GET", "x", "y"]),
                "ERR wrong number of arguments for 'get'",
            ),
            (
                &guard(
                    "k",
                    "a",
                    &["CALL", "EVAL", "redis.call('set','x','1')", "0"],
                ),
                "ERR RLOCK.GUARD runs a script only with its keys declared",
            ),
            (
                &guard("k", "a", &["CALL", "FCALL", "f", "0"]),
                "ERR RLOCK.GUARD runs a script only with its keys declared",
            ),
            // The lock key's type, held or not, and the counter's.
            (&guard("str", "a", &["CALL", "SET", "x", "1"]), "WRONGTYPE"),
            (
                &guard("str", "a", &["READ", "CALL", "SET", "x", "1"]),
                "WRONGTYPE",
            ),
        ];
        assert_each_refused_unchanged(flavor, &mut con, cases);
        // Commands the guard never runs inside itself, and why.
        let cannot_run: &[(&[&str], &str)] = &[
            (&["BLPOP", "x", "0"], "'blpop': a blocking command"),
            (
                &["BLMOVE", "x", "y", "LEFT", "LEFT", "0"],
                "'blmove': a blocking command",
            ),
            (
                &["XREAD", "STREAMS", "s", "0"],
                "'xread': a blocking command",
            ),
            (&["WAIT", "1", "0"], "'wait': a blocking command"),
            (&["MULTI"], "'multi': a transaction command"),
            (&["EXEC"], "'exec': a transaction command"),
            (&["WATCH", "x"], "'watch': a transaction command"),
            (&["SUBSCRIBE", "c"], "'subscribe': a pub/sub command"),
            (&["PUBLISH", "c", "m"], "'publish': a pub/sub command"),
            (
                &["RLOCK.GUARD", "k", "a", "CALL", "SET", "x", "1"],
                "'rlock.guard': a command of the rlock module",
            ),
            (&["RLOCK.RELEASE", "k", "a"], "'rlock.release'"),
            (&["MONITOR"], "'monitor': not allowed in a module call"),
        ];
        for (inner, why) in cannot_run {
            let args = guard("k", "a", &[&["CALL"][..], inner].concat());
            let refusal = format!("ERR RLOCK.GUARD cannot run {why}");
            assert_refused_unchanged(flavor, &mut con, &args, &refusal);
        }
        call(&mut con, &["SET", "redisson_lock_token:{k}", "nan"]).unwrap();
        assert_refused_unchanged(
            flavor,
            &mut con,
            &fenced_set("k", "a", "1", "x", "1"),
            "ERR the fencing counter key holds a value that is not a non-negative integer",
        );
    }
}

#[test]
fn scripts_run_with_their_keys_declared() {
    for (flavor, _server, mut con) in servers() {
        call(&mut con, &["RLOCK.ACQUIRE", "k", "a"]).unwrap();
        assert_int(
            &mut con,
            &guarded_script("return redis.call('incr', KEYS[1])", "n{k}"),
            1,
        );
        // A guard from a script runs its command; a script from a guard from a script
        // does not.
        assert_eq!(
            call(
                &mut con,
                &[
                    "EVAL",
                    "return redis.call('rlock.guard', KEYS[1], 'a', 'CALL', 'INCR', KEYS[2])",
                    "2",
                    "k",
                    "n{k}"
                ]
            ),
            ok(2),
            "{flavor}"
        );
        let nested = refusal(
            &mut con,
            &["EVAL", "return redis.call('rlock.guard', KEYS[1], 'a', 'CALL', 'EVAL', 'return 1', '1', KEYS[2])", "2", "k", "n{k}"],
        );
        assert!(
            nested.contains("cannot run a script inside a script"),
            "{flavor}: {nested}"
        );
        // In MULTI, the guard runs at EXEC, as every command.
        let mut pipe = redis::pipe();
        pipe.atomic().ignore_errors();
        pipe.cmd("RLOCK.GUARD")
            .arg("k")
            .arg("a")
            .arg("CALL")
            .arg("INCR")
            .arg("n{k}");
        pipe.cmd("RLOCK.GUARD")
            .arg("k")
            .arg("b")
            .arg("CALL")
            .arg("INCR")
            .arg("n{k}");
        let replies: Vec<redis::RedisResult<Value>> = pipe.query(&mut con).unwrap();
        assert!(
            matches!(replies[0], Ok(Value::Int(3))),
            "{flavor}: {replies:?}"
        );
        assert!(
            matches!(&replies[1], Err(e) if error_text(e).starts_with("NOTHELD")),
            "{flavor}: {replies:?}"
        );
        assert_eq!(get(&mut con, "n{k}"), bulk("3"), "{flavor}");
    }
}

#[test]
fn command_getkeys_names_the_lock_and_the_inner_keys() {
    for (flavor, _server, mut con) in servers() {
        let keys = call(
            &mut con,
            &words("COMMAND GETKEYS RLOCK.GUARD lock me TOKEN 3 CALL MSET a 1 b 2"),
        );
        assert_eq!(keys, Ok(bulks(&["lock", "a", "b"])), "{flavor}");
        let keys = call(
            &mut con,
            &words("COMMAND GETKEYS RLOCK.GUARD lock me CALL EVAL s 1 k1"),
        );
        assert_eq!(keys, Ok(bulks(&["lock", "k1"])), "{flavor}");
    }
}

/// The inner command runs as the caller: its ACL user's commands and key patterns.
#[test]
fn the_inner_command_is_checked_against_the_callers_acl() {
    for (flavor, server, mut admin) in servers() {
        call(&mut admin, &["RLOCK.ACQUIRE", "app:lock", "me"]).unwrap();
        let mut app = server.conn_as_user(
            &mut admin,
            "app",
            &["~app:*", "+rlock.guard", "+get", "+set"],
        );
        assert_okay(
            &mut app,
            &guard("app:lock", "me", &["CALL", "SET", "app:x", "1"]),
        );
        // A command the user may not run.
        refused_as_user(
            flavor,
            &mut app,
            &mut admin,
            &guard("app:lock", "me", &["CALL", "DEL", "app:x"]),
            "NOPERM",
        );
        // A key outside the user's patterns.
        refused_as_user(
            flavor,
            &mut app,
            &mut admin,
            &guard("app:lock", "me", &["CALL", "SET", "other", "1"]),
            "NOPERM",
        );
        // A lock outside them.
        call(&mut admin, &["RLOCK.ACQUIRE", "other:lock", "me"]).unwrap();
        refused_as_user(
            flavor,
            &mut app,
            &mut admin,
            &guard("other:lock", "me", &["CALL", "SET", "app:x", "2"]),
            "NOPERM",
        );
        // Read-only patterns allow a guarded read, not a guarded write.
        let mut reader = server.conn_as_user(
            &mut admin,
            "reader",
            &["%R~app:*", "+rlock.guard", "+get", "+set"],
        );
        assert_eq!(
            call(
                &mut reader,
                &guard("app:lock", "me", &["CALL", "GET", "app:x"])
            ),
            bulk("1"),
            "{flavor}"
        );
        refused_as_user(
            flavor,
            &mut reader,
            &mut admin,
            &guard("app:lock", "me", &["CALL", "SET", "app:x", "3"]),
            "NOPERM",
        );
        assert_eq!(get(&mut admin, "app:x"), bulk("1"), "{flavor}");
    }
}

/// `args` sent by a user is refused with an error starting with `prefix`, and the
/// keyspace (read by `admin`) is as it was.
#[track_caller]
fn refused_as_user(
    flavor: Flavor,
    user: &mut Connection,
    admin: &mut Connection,
    args: &[&str],
    prefix: &str,
) {
    assert_keyspace_kept(admin, format!("{flavor}: {args:?}"), |_| {
        assert_refused_with(user, args, prefix, flavor)
    });
}

/// A replica without the module, and a restart from the AOF, see the inner command as
/// itself.
#[test]
fn guarded_writes_replicate_and_persist_as_themselves() {
    for flavor in flavors() {
        let (primary, replica) = primary_and_bare_replica(flavor);
        let mut con = primary.conn();
        call(&mut con, &["RLOCK.ACQUIRE", "k", "a", "TOKEN"]).unwrap();
        assert_okay(&mut con, &fenced_set("k", "a", "1", "v{k}", "1"));
        call(
            &mut con,
            &guard("k", "a", &["CALL", "HSET", "h{k}", "f", "x"]),
        )
        .unwrap();
        call(
            &mut con,
            &guarded_script("return redis.call('rpush', KEYS[1], 'e')", "l{k}"),
        )
        .unwrap();
        let _ = guard_refusal(&mut con, "k", "b", &["CALL", "SET", "v{k}", "stray"]);
        assert_int(&mut con, &["WAIT", "1", "5000"], 1);
        let mut r = replica.conn();
        assert_eq!(get(&mut r, "v{k}"), bulk("1"), "{flavor}");
        assert_eq!(call(&mut r, &["HGET", "h{k}", "f"]), bulk("x"), "{flavor}");
        assert_int(&mut r, &["LLEN", "l{k}"], 1);
        // Guards are refused on a replica: the lock is checked where it is written.
        let on_replica = guard_refusal(&mut r, "k", "a", &["CALL", "GET", "v{k}"]);
        assert!(
            on_replica.starts_with("READONLY") || on_replica.contains("unknown command"),
            "{flavor}: {on_replica}"
        );

        let mut aof = Server::builder(flavor)
            .config("appendonly", "yes")
            .config("appendfsync", "always")
            .start();
        let mut con = aof.conn();
        call(&mut con, &["RLOCK.ACQUIRE", "k", "a", "LEASE", "600000"]).unwrap();
        call(&mut con, &guard("k", "a", &["CALL", "INCRBY", "n{k}", "5"])).unwrap();
        let _ = guard_refusal(&mut con, "k", "b", &["CALL", "INCRBY", "n{k}", "100"]);
        let logged = aof_text(aof.dir());
        assert!(
            !logged.to_ascii_lowercase().contains("rlock.guard"),
            "{flavor}: the AOF holds RLOCK.GUARD"
        );
        assert!(
            logged.contains("INCRBY") || logged.contains("incrby"),
            "{flavor}: the AOF lacks the INCRBY"
        );
        aof.restart();
        let mut con = aof.conn();
        assert_eq!(
            get(&mut con, "n{k}"),
            bulk("5"),
            "{flavor}: after the AOF reload"
        );
    }
}

/// Every AOF file under `dir` (Redis 7's multi-part `appendonlydir`, or one file), as text.
fn aof_text(dir: &std::path::Path) -> String {
    let mut text = String::new();
    let mut paths = vec![dir.to_path_buf()];
    while let Some(path) = paths.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                paths.push(path);
            } else if path.to_string_lossy().contains(".aof") {
                text.push_str(&String::from_utf8_lossy(
                    &std::fs::read(&path).unwrap_or_default(),
                ));
            }
        }
    }
    text
}

/// The leader of an election is the holder `value`, its term the token: a guard with
/// both writes only while that leader of that term leads.
#[test]
fn an_elected_leader_writes_only_in_its_term() {
    // `owner`, leader of term `token`, sets the config to `value`.
    let write = |owner, token, value| fenced_set("leader", owner, token, "config{leader}", value);
    for (flavor, _server, mut con) in servers() {
        assert_int(
            &mut con,
            &["RLOCK.ACQUIRE", "leader", "node-a", "LEASE", "200", "TOKEN"],
            1,
        );
        assert_okay(&mut con, &write("node-a", "1", "a"));
        // node-a's lease runs out unseen; node-b wins term 2.
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert_int(&mut con, &["RLOCK.ACQUIRE", "leader", "node-b", "TOKEN"], 2);
        let deposed = refusal(&mut con, &write("node-a", "1", "stale"));
        assert!(deposed.starts_with("NOTHELD"), "{flavor}: {deposed}");
        assert_okay(&mut con, &write("node-b", "2", "b"));
        // node-a campaigns again with the same value after node-b resigns: term 3; its
        // old term's token is stale.
        call(&mut con, &["RLOCK.RELEASE", "leader", "node-b"]).unwrap();
        assert_int(&mut con, &["RLOCK.ACQUIRE", "leader", "node-a", "TOKEN"], 3);
        let old_term = refusal(&mut con, &write("node-a", "1", "stale"));
        assert!(old_term.starts_with("STALETOKEN"), "{flavor}: {old_term}");
        assert_eq!(get(&mut con, "config{leader}"), bulk("b"), "{flavor}");
    }
}

#[test]
fn in_a_cluster_the_inner_keys_must_share_the_locks_slot() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 2, 0);
        let primary = cluster.primary_for("{g}lock");
        let mut con = primary.conn();
        call(&mut con, &["RLOCK.ACQUIRE", "{g}lock", "me", "TOKEN"]).unwrap();
        assert_okay(
            &mut con,
            &guard(
                "{g}lock",
                "me",
                &["TOKEN", "1", "CALL", "MSET", "{g}a", "1", "{g}b", "2"],
            ),
        );
        let crossed = guard_refusal(
            &mut con,
            "{g}lock",
            "me",
            &["CALL", "MSET", "{g}a", "3", "{other}b", "4"],
        );
        assert!(crossed.starts_with("CROSSSLOT"), "{flavor}: {crossed}");
        let elsewhere = guard_refusal(&mut con, "{g}lock", "me", &["CALL", "SET", "{zz}x", "1"]);
        assert!(elsewhere.starts_with("CROSSSLOT"), "{flavor}: {elsewhere}");
        assert_eq!(get(&mut con, "{g}a"), bulk("1"), "{flavor}");
        // The other primary redirects, by the lock key.
        let other = cluster.other_primary(primary);
        let moved = refusal(
            &mut other.conn(),
            &guard("{g}lock", "me", &["CALL", "GET", "{g}a"]),
        );
        assert!(moved.starts_with("MOVED"), "{flavor}: {moved}");
        // Inside a script the server does not route: the guard checks the slot itself.
        let in_script = refusal(
            &mut con,
            &[
                "EVAL",
                "return redis.call('rlock.guard', KEYS[1], 'me', 'CALL', 'SET', ARGV[1], '1')",
                "1",
                "{g}lock",
                "{other}y",
            ],
        );
        assert!(!in_script.is_empty(), "{flavor}");
    }
}
