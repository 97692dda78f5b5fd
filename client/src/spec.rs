//! C21: the shared vectors of `clients/spec/` (see its README), read by this crate's unit
//! tests. Each case goes through the functions the handles use: the handle built from the
//! case's options with the public builder, then the command builders, reply readers and error
//! mapping the calls use. A case this crate cannot express fails its test; a refusal goes
//! through the public call itself, on a `Locks` whose server does not exist, so that a call
//! that is not refused fails with a connection error instead.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use serde_json::{json, Value as J};

use crate::command::{self, HoldName, Renewal, Wait};
use crate::error::Error;
use crate::{keyspace, Latch, Lock, Locks, MultiLock, Semaphore};

const COMMANDS: &str = include_str!("../../clients/spec/commands.json");
const REPLIES: &str = include_str!("../../clients/spec/replies.json");
const ERRORS: &str = include_str!("../../clients/spec/errors.json");
const KEYSPACE: &str = include_str!("../../clients/spec/keyspace.json");
const REFUSALS: &str = include_str!("../../clients/spec/refusals.json");

/// A lease given to no handle: the default watchdog lease.
const WATCHDOG_LEASE: Duration = Duration::from_secs(30);

fn document(text: &str) -> J {
    let doc: J = serde_json::from_str(text).expect("a vector file is JSON");
    assert_eq!(
        doc["format"], 1,
        "a vector file of a format this test does not know"
    );
    doc
}

fn cases(doc: &J) -> &Vec<J> {
    doc["cases"].as_array().expect("cases")
}

/// An argument this crate's types cannot hold (a negative or non-numeric duration, a name
/// that is not a string): refused by the conversion, before any call.
#[derive(Debug)]
struct Refused(String);

type Arg<T> = std::result::Result<T, Refused>;

/// A case's `args`, converted as this crate's types take them.
struct Args<'a>(&'a J);

enum WaitArg {
    Forever,
    For(Duration),
}

impl Args<'_> {
    fn text(&self, k: &str) -> Arg<Option<String>> {
        match self.0.get(k) {
            None => Ok(None),
            Some(J::String(s)) => Ok(Some(s.clone())),
            Some(J::Object(o)) if o.contains_key("repeat") => {
                let unit = o["repeat"].as_str().ok_or(Refused(k.into()))?;
                let times = o["times"].as_u64().ok_or(Refused(k.into()))?;
                Ok(Some(unit.repeat(times as usize)))
            }
            Some(other) => Err(Refused(format!("{k}: {other}"))),
        }
    }

    fn string(&self, k: &str) -> Arg<String> {
        self.text(k)?.ok_or(Refused(format!("{k} missing")))
    }

    fn u64(&self, k: &str) -> Arg<Option<u64>> {
        match self.0.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or(Refused(format!("{k}: {v} is not a u64"))),
        }
    }

    fn u32(&self, k: &str) -> Arg<u32> {
        let n = self.u64(k)?.ok_or(Refused(format!("{k} missing")))?;
        u32::try_from(n).map_err(|_| Refused(format!("{k}: {n}")))
    }

    fn i32(&self, k: &str) -> Arg<i32> {
        let v = &self.0[k];
        v.as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .ok_or(Refused(format!("{k}: {v}")))
    }

    fn ms(&self, k: &str) -> Arg<Option<Duration>> {
        Ok(self.u64(k)?.map(Duration::from_millis))
    }

    fn wait(&self) -> Arg<Option<WaitArg>> {
        match self.0.get("wait_ms") {
            Some(J::String(s)) if s == "forever" => Ok(Some(WaitArg::Forever)),
            _ => Ok(self.ms("wait_ms")?.map(WaitArg::For)),
        }
    }

    /// The wait as the families' `wait`/`wait_forever` steps set it.
    fn family_wait(&self) -> Arg<Wait> {
        Ok(match self.wait()? {
            None => Wait::No,
            Some(WaitArg::Forever) => Wait::Forever,
            Some(WaitArg::For(d)) => Wait::at_most(d),
        })
    }

    fn flag(&self, k: &str) -> Arg<bool> {
        match self.0.get(k) {
            None => Ok(false),
            Some(J::Bool(b)) => Ok(*b),
            Some(other) => Err(Refused(format!("{k}: {other}"))),
        }
    }

    fn keys(&self) -> Arg<Vec<String>> {
        let list = self.0["keys"].as_array().ok_or(Refused("keys".into()))?;
        list.iter()
            .map(|k| {
                k.as_str()
                    .map(String::from)
                    .ok_or(Refused(format!("keys: {k}")))
            })
            .collect()
    }

    /// A leased permit's hold, as the watchdog renews it.
    fn permit(&self) -> Arg<HoldName> {
        Ok(HoldName {
            key: Arc::from(self.string("key")?),
            owner: Arc::from(self.string("id")?),
            side: None,
            permit: true,
        })
    }
}

/// A `Locks` on a server that does not exist: nothing can be sent.
fn nowhere() -> Locks {
    Locks::from_url("redis://127.0.0.1:1/").expect("a URL")
}

/// `handle` with the case's `lease_ms` and `wait` (the same two steps on every handle).
fn leased_and_waiting<H>(
    a: &Args,
    mut handle: H,
    lease: fn(H, Duration) -> H,
    forever: fn(H) -> H,
    up_to: fn(H, Duration) -> H,
) -> Arg<H> {
    if let Some(ms) = a.ms("lease_ms")? {
        handle = lease(handle, ms);
    }
    Ok(match a.wait()? {
        None => handle,
        Some(WaitArg::Forever) => forever(handle),
        Some(WaitArg::For(d)) => up_to(handle, d),
    })
}

/// The lock handle a case describes, built with the public builder.
fn lock_of(locks: &Locks, a: &Args) -> Arg<Lock> {
    let (key, owner) = (a.string("key")?, a.string("owner")?);
    let mut lock = match a.text("side")?.as_deref() {
        None => locks.lock_as(key, owner),
        Some("read") => locks.read_write_as(key, owner).read(),
        Some("write") => locks.read_write_as(key, owner).write(),
        Some(other) => return Err(Refused(format!("side {other}"))),
    };
    lock = leased_and_waiting(a, lock, Lock::lease, Lock::wait_forever, Lock::wait)?;
    if a.flag("fair")? {
        lock = lock.fair();
    }
    if a.flag("fenced")? {
        lock = lock.fenced();
    }
    if a.flag("session")? {
        lock = lock.session();
    }
    if let Some(sync) = a.0.get("sync_replicas") {
        let sync = Args(sync);
        let n = sync.u64("n")?.ok_or(Refused("sync_replicas.n".into()))?;
        let t = sync
            .ms("timeout_ms")?
            .ok_or(Refused("sync_replicas.t".into()))?;
        lock = lock.sync_replicas(n as usize, t);
    }
    Ok(lock)
}

fn multi_of(locks: &Locks, a: &Args) -> Arg<MultiLock> {
    let mut multi = locks.multi_as(a.keys()?, a.string("owner")?);
    multi = leased_and_waiting(
        a,
        multi,
        MultiLock::lease,
        MultiLock::wait_forever,
        MultiLock::wait,
    )?;
    if a.flag("session")? {
        multi = multi.session();
    }
    Ok(multi)
}

fn attached(case: &J) -> u64 {
    case["context"]["attached_replicas"].as_u64().unwrap_or(0)
}

fn argv(cmd: &redis::Cmd) -> Vec<String> {
    cmd.args_iter()
        .map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("an argument this test does not know: {other:?}"),
        })
        .collect()
}

fn argvs(pipe: &redis::Pipeline) -> Vec<Vec<String>> {
    pipe.cmd_iter().map(argv).collect()
}

/// What a call sends (`commands.json`).
fn sends(case: &J) -> Arg<Vec<Vec<String>>> {
    let a = Args(&case["args"]);
    let locks = nowhere();
    let req = command::request_id();
    let one = |c: redis::Cmd| Ok(vec![argv(&c)]);
    match case["call"].as_str().unwrap_or("") {
        "lock.acquire" => Ok(argvs(&lock_of(&locks, &a)?.plan(attached(case), &req))),
        "lock.scoped" => Ok(argvs(
            &lock_of(&locks, &a)?.scoped().plan(attached(case), &req),
        )),
        "lock.release" => one(command::release(&lock_of(&locks, &a)?.hold_name())),
        "lock.renew" => {
            let lease = a.ms("lease_ms")?.unwrap_or(WATCHDOG_LEASE);
            one(command::renew(&lock_of(&locks, &a)?.hold_name(), lease))
        }
        "lock.is_locked" => one(command::exists(&a.string("key")?)),
        "lock.is_held_by" => {
            let hold = lock_of(&locks, &a)?.hold_name();
            one(command::hexists(&hold.key, &hold.field()))
        }
        "lock.hold_count" => {
            let hold = lock_of(&locks, &a)?.hold_name();
            one(command::hold_count(&hold.key, &hold.field()))
        }
        "lock.remaining_lease" => one(command::pttl(&a.string("key")?)),
        "lock.force_release" => one(command::force_release(&a.string("key")?)),
        "lock.info" | "election.leader" => one(command::info(&a.string("key")?)),
        "multi.acquire" => Ok(multi_of(&locks, &a)?.plan(&req).iter().map(argv).collect()),
        "multi.scoped" => Ok(multi_of(&locks, &a)?
            .scoped()
            .plan(&req)
            .iter()
            .map(argv)
            .collect()),
        "multi.release" => {
            let multi = multi_of(&locks, &a)?;
            Ok(multi
                .groups()
                .iter()
                .map(|keys| argv(&command::mrelease(multi.owner(), keys)))
                .collect())
        }
        "semaphore.try_set_permits" | "permits.try_set_permits" => one(command::try_set_permits(
            &a.string("key")?,
            a.u32("permits")?,
        )),
        "semaphore.add_permits" => one(command::add_permits(&a.string("key")?, a.i32("permits")?)),
        "semaphore.available" => one(command::available_permits(&a.string("key")?)),
        "semaphore.acquire" => one(command::acquire_permits(
            &a.string("key")?,
            a.u32("permits")?,
            a.family_wait()?,
        )),
        "semaphore.release" => one(command::release_permits(
            &a.string("key")?,
            a.u32("permits")?,
        )),
        "permits.acquire" => one(command::lease_permits(
            &a.string("key")?,
            a.u32("permits")?,
            a.ms("lease_ms")?.unwrap_or(WATCHDOG_LEASE),
            a.family_wait()?,
        )),
        "permits.release" => one(command::return_permit(&a.string("key")?, &a.string("id")?)),
        "permits.renew" => one(command::renew(
            &a.permit()?,
            a.ms("lease_ms")?.unwrap_or(WATCHDOG_LEASE),
        )),
        "latch.try_set_count" => {
            let count = a.u64("count")?.ok_or(Refused("count".into()))?;
            one(command::try_set_count(&a.string("key")?, count))
        }
        "latch.count_down" => one(command::count_down(&a.string("key")?)),
        "latch.count" => one(command::latch_count(&a.string("key")?)),
        "latch.await_zero" => one(command::await_latch(&a.string("key")?, a.family_wait()?)),
        "election.campaign" => {
            let election = locks.election(a.string("key")?);
            let lock = election.lock(&a.string("value")?);
            let lock = match a.wait()? {
                None | Some(WaitArg::Forever) => lock.wait_forever(),
                Some(WaitArg::For(d)) => lock.wait(d),
            };
            Ok(argvs(&lock.plan(attached(case), &req)))
        }
        "election.resign" => {
            let lock = locks.lock_as(a.string("key")?, a.string("value")?);
            one(command::release(&lock.hold_name()))
        }
        "queries.waiters" => one(command::waiters(&a.string("key")?)),
        "queries.scan" => one(command::scan_page(
            "0",
            a.text("match")?.as_deref(),
            a.text("type")?.as_deref(),
        )),
        "queries.stats" => one(command::stats()),
        "queries.top" => command::top(a.u32("count")?)
            .map(|c| vec![argv(&c)])
            .map_err(|e| Refused(e.to_string())),
        other => panic!("cannot express the call {other}"),
    }
}

/// Checks `got` against `want`, a list of commands with `{req...}` placeholders (bound in
/// `bound` at their first use).
fn agree(id: &str, got: &[Vec<String>], want: &J, bound: &mut HashMap<String, String>) {
    let want: Vec<Vec<String>> = serde_json::from_value(want.clone()).expect("commands");
    assert_eq!(
        got.len(),
        want.len(),
        "{id}: commands sent {got:?}, want {want:?}"
    );
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.len(), w.len(), "{id}: sent {g:?}, want {w:?}");
        for (ga, wa) in g.iter().zip(w) {
            let placeholder = wa.starts_with("{req") && wa.ends_with('}');
            if !placeholder {
                assert_eq!(ga, wa, "{id}: sent {g:?}, want {w:?}");
                continue;
            }
            assert!(
                (1..=64).contains(&ga.len()) && !ga.contains(['{', '}']),
                "{id}: {ga:?} is not a REQ id"
            );
            match bound.get(wa) {
                Some(v) => assert_eq!(ga, v, "{id}: {wa} sent as two ids"),
                None => {
                    assert!(
                        !bound.values().any(|v| v == ga),
                        "{id}: {wa} is the id of another placeholder"
                    );
                    bound.insert(wa.clone(), ga.clone());
                }
            }
        }
    }
}

/// RESP for a reply written in JSON (see the README): null, integer, bulk string, array,
/// `{"error": line}` (parsed as the wire's error reply), `{"map": [[k, v], ...]}`.
fn reply(j: &J) -> Value {
    match j {
        J::Null => Value::Nil,
        J::Number(n) => Value::Int(n.as_i64().expect("an integer reply")),
        J::String(s) => Value::BulkString(s.as_bytes().to_vec()),
        J::Array(items) => Value::Array(items.iter().map(reply).collect()),
        J::Object(o) if o.contains_key("error") => {
            let line = o["error"].as_str().expect("an error line");
            redis::parse_redis_value(format!("-{line}\r\n").as_bytes()).expect("an error reply")
        }
        J::Object(o) if o.contains_key("map") => Value::Map(
            o["map"]
                .as_array()
                .expect("pairs")
                .iter()
                .map(|kv| (reply(&kv[0]), reply(&kv[1])))
                .collect(),
        ),
        other => panic!("not a reply: {other}"),
    }
}

/// A reply as a plain call gets it: a server error is an `Err`.
fn plain(v: Value) -> redis::RedisResult<Value> {
    match v {
        Value::ServerError(e) => Err(e.into()),
        v => Ok(v),
    }
}

/// The class of an error, as the README's table names it.
fn class(e: &Error) -> J {
    match e {
        Error::NotAcquired { .. } => json!({"error": "NotAcquired"}),
        Error::NotHeld { key, owner } => {
            json!({"error": "NotHeld", "key": key, "owner": owner})
        }
        Error::Lost { .. } => json!({"error": "Lost"}),
        Error::Deadlock { cycle } => json!({"error": "Deadlock", "cycle": cycle
            .iter()
            .map(|w| json!({"owner": w.owner, "key": w.key, "holder": w.holder, "kept": w.kept}))
            .collect::<Vec<_>>()}),
        Error::NotAcknowledged { .. } => json!({"error": "NotAcknowledged"}),
        Error::InvalidArgument { .. } | Error::InvalidValue { .. } => {
            json!({"error": "InvalidArgument"})
        }
        Error::Redis(e) if e.kind() == redis::ErrorKind::UnexpectedReturnType => {
            json!({"error": "Unexpected"})
        }
        Error::Redis(e) => json!({"error": "ServerError", "code": e.code()}),
        other => json!({"error": format!("{other:?}")}),
    }
}

fn outcome(r: crate::Result<J>) -> J {
    r.unwrap_or_else(|e| class(&e))
}

/// `{name: value}`, or the error's class.
fn field<T: serde::Serialize>(r: crate::Result<T>, name: &str) -> J {
    outcome(r.map(|v| {
        let mut m = serde_json::Map::new();
        m.insert(name.into(), json!(v));
        J::Object(m)
    }))
}

/// What a call makes of its replies (`replies.json`), and the commands it sends next.
fn reads(case: &J) -> Arg<(J, Vec<Vec<String>>)> {
    let a = Args(&case["args"]);
    let locks = nowhere();
    let mut replies: Vec<Value> = case["replies"]
        .as_array()
        .map(|r| r.iter().map(reply).collect())
        .unwrap_or_default();
    let first = replies.first().cloned().unwrap_or(Value::Nil);
    let call = case["call"].as_str().unwrap_or("");
    let out = match call {
        "lock.acquire" | "lock.scoped" => {
            let mut lock = lock_of(&locks, &a)?;
            if call == "lock.scoped" {
                lock = lock.scoped();
            }
            let settled = lock.settled(attached(case));
            match settled.read_grant(std::mem::take(&mut replies)) {
                Err(e) => class(&e),
                Ok(None) if call == "lock.scoped" => json!({"error": "NotAcquired"}),
                Ok(None) => json!({"granted": false}),
                Ok(Some(g)) if !settled.acknowledged(g.replicas.unwrap_or(0)) => {
                    let give_back = argv(&command::release(&settled.hold_name()));
                    return Ok((json!({"error": "NotAcknowledged"}), vec![give_back]));
                }
                Ok(Some(g)) => json!({"granted": true, "hold_count": g.count, "token": g.token,
                    "replicas_acked": g.replicas}),
            }
        }
        "lock.release" => {
            let (key, owner) = (a.string("key")?, a.string("owner")?);
            outcome(command::parse_release(first, &key, &owner).map(|b| json!({"freed": b})))
        }
        "lock.renew" => match command::renewal(plain(first)) {
            Renewal::Renewed => json!({"renewed": true}),
            Renewal::Lost => json!({"error": "Lost"}),
            Renewal::Retry(e) => json!({"error": "ServerError", "detail": e}),
        },
        "watchdog.renewal" => match command::renewal(Ok(first)) {
            Renewal::Renewed => json!({"outcome": "renewed"}),
            Renewal::Lost => json!({"outcome": "lost"}),
            Renewal::Retry(_) => json!({"outcome": "retry"}),
        },
        "multi.acquire" | "multi.scoped" => match command::parse_acquire(first) {
            Err(e) => class(&e),
            Ok(None) if call == "multi.scoped" => json!({"error": "NotAcquired"}),
            Ok(g) => json!({"granted": g.is_some()}),
        },
        "multi.release" => {
            let multi = multi_of(&locks, &a)?;
            let keys = &multi.groups()[0];
            outcome(
                command::parse_mrelease(first, keys, multi.owner()).map(|n| json!({"freed": n})),
            )
        }
        "semaphore.acquire" => {
            outcome(command::parse_acquire(first).map(|g| json!({"granted": g.is_some()})))
        }
        "semaphore.release" | "semaphore.available" => {
            field(command::parse_integer(first, "RSEM replied"), "available")
        }
        "semaphore.try_set_permits" | "permits.try_set_permits" | "latch.try_set_count" => {
            field(command::parse_flag(first, "TRYSET replied"), "set")
        }
        "permits.acquire" => outcome(command::parse_leased(first).map(|ids| match ids {
            Some(ids) => json!({"granted": true, "ids": ids}),
            None => json!({"granted": false}),
        })),
        "permits.release" => field(
            command::parse_flag(first, "RSEM.RETURN replied"),
            "returned",
        ),
        "latch.await_zero" => {
            outcome(command::parse_acquire(first).map(|g| json!({"open": g.is_some()})))
        }
        "latch.count_down" | "latch.count" => {
            field(command::parse_integer(first, "RLATCH replied"), "count")
        }
        "lock.force_release" => field(
            command::parse_flag(first, "RLOCK.FORCERELEASE replied"),
            "removed",
        ),
        "lock.is_locked" => field(command::parse_flag(first, "EXISTS replied"), "locked"),
        "lock.is_held_by" => field(command::parse_flag(first, "HEXISTS replied"), "held"),
        "lock.hold_count" => {
            outcome(command::parse_hold_count(first).map(|n| json!({"hold_count": n})))
        }
        "lock.remaining_lease" => outcome(
            command::parse_pttl(first)
                .map(|d| json!({"remaining_ms": d.map(|d| d.as_millis() as u64)})),
        ),
        "election.leader" => {
            outcome(
                command::parse_info(first).map(|r| match crate::election::leader_of(&r.info) {
                    Some(l) => json!({"leader": {"value": l.value, "term": l.term}}),
                    None => json!({"leader": null}),
                }),
            )
        }
        other => panic!("cannot express the call {other}"),
    };
    Ok((out, Vec::new()))
}

/// The error a call raises for the server error line of the case (`errors.json`).
fn raises(case: &J) -> Arg<J> {
    let a = Args(&case["args"]);
    let line = case["error"].as_str().expect("error");
    let value = reply(&json!({ "error": line }));
    let Value::ServerError(server) = value.clone() else {
        panic!("{line} is not an error reply");
    };
    let e = redis::RedisError::from(server);
    let error = match case["call"].as_str().unwrap_or("") {
        "lock.release" => command::release_error(e, &a.string("key")?, &a.string("owner")?),
        "multi.release" => {
            let multi = multi_of(&nowhere(), &a)?;
            match command::parse_mrelease(value, &multi.groups()[0], multi.owner()) {
                Err(e) => e,
                Ok(n) => panic!("{line} read as {n}"),
            }
        }
        _ => Error::from(e),
    };
    let mut got = class(&error);
    // The README's `class` key.
    let obj = got.as_object_mut().expect("an object");
    let class = obj.remove("error").expect("a class");
    obj.insert("class".into(), class);
    Ok(got)
}

/// Whether `got` has every key of `want`, with the same value.
fn has(got: &J, want: &J) -> bool {
    match (got, want) {
        (J::Object(g), J::Object(w)) => w.iter().all(|(k, v)| g.get(k) == Some(v)),
        (g, w) => g == w,
    }
}

/// Runs `check` on each case of the vector file `text`, with its id, inside a runtime (the
/// handles a case builds need one to exist).
fn each_case(text: &str, mut check: impl FnMut(&str, &J)) {
    let doc = document(text);
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let _in = rt.enter();
    for case in cases(&doc) {
        check(case["id"].as_str().expect("id"), case);
    }
}

#[test]
fn c21_commands() {
    each_case(COMMANDS, |id, case| {
        let got = sends(case).unwrap_or_else(|r| panic!("{id}: cannot express: {r:?}"));
        agree(id, &got, &case["expect"], &mut HashMap::new());
    });
}

#[test]
fn c21_replies() {
    each_case(REPLIES, |id, case| {
        let (got, next) = reads(case).unwrap_or_else(|r| panic!("{id}: cannot express: {r:?}"));
        let mut want = case["expect"].clone();
        let then = want.as_object_mut().and_then(|o| o.remove("then_sends"));
        assert!(has(&got, &want), "{id}: got {got}, want {want}");
        match then {
            Some(then) => agree(id, &next, &then, &mut HashMap::new()),
            None => assert!(next.is_empty(), "{id}: sends {next:?} next, and should not"),
        }
    });
}

#[test]
fn c21_errors() {
    each_case(ERRORS, |id, case| {
        let got = raises(case).unwrap_or_else(|r| panic!("{id}: cannot express: {r:?}"));
        let want = &case["expect"];
        assert!(has(&got, want), "{id}: got {got}, want {want}");
    });
}

#[test]
fn c21_keyspace() {
    let doc = document(KEYSPACE);
    let list: Vec<&str> = doc["loss_events"]
        .as_array()
        .expect("loss_events")
        .iter()
        .map(|e| e.as_str().expect("an event"))
        .collect();
    assert_eq!(
        keyspace::LOSS_EVENTS.as_slice(),
        list.as_slice(),
        "the one list of loss events"
    );
    let mode_name = |m: Option<keyspace::Mode>| match m {
        Some(keyspace::Mode::Keyspace) => json!("keyspace"),
        Some(keyspace::Mode::Keyevent) => json!("keyevent"),
        None => J::Null,
    };
    for case in cases(&doc) {
        let id = case["id"].as_str().expect("id");
        let a = Args(&case["args"]);
        let got = match case["call"].as_str().unwrap_or("") {
            "keyspace.mode" => mode_name(keyspace::mode(&a.string("flags").expect("flags"))),
            "keyspace.channels" => {
                let mode = match a.string("mode").expect("mode").as_str() {
                    "keyspace" => keyspace::Mode::Keyspace,
                    _ => keyspace::Mode::Keyevent,
                };
                let keys = a.keys().expect("keys");
                let db = case["args"]["db"].as_i64().expect("db");
                json!(keyspace::channels(
                    mode,
                    db,
                    keys.iter().map(String::as_str)
                ))
            }
            "keyspace.lost_key" => {
                let db = case["args"]["db"].as_i64().expect("db");
                let (channel, message) =
                    (a.string("channel").unwrap(), a.string("message").unwrap());
                json!(keyspace::lost_key(db, &channel, message.as_bytes()))
            }
            other => panic!("{id}: cannot express the call {other}"),
        };
        assert_eq!(got, case["expect"], "{id}");
    }
}

/// Each refused call goes through the public call; on a server that does not exist, a call
/// that is not refused fails with a connection error, not `InvalidArgument`.
#[tokio::test]
async fn c21_refusals() {
    let doc = document(REFUSALS);
    for case in cases(&doc) {
        let id = case["id"].as_str().expect("id");
        let outcome = refuse(case).await;
        match outcome {
            Err(Refused(why)) => eprintln!("{id}: refused by the conversion ({why})"),
            Ok(got) => assert_eq!(
                got,
                json!({"error": case["expect"]["class"]}),
                "{id}: the call was not refused before anything was sent"
            ),
        }
    }
}

/// What a refusal case reads of a call's outcome: the class of its error.
fn error<T>(outcome: crate::Result<T>) -> J {
    match outcome {
        Ok(_) => json!({"error": "none: the call went through"}),
        Err(e) => json!({"error": class(&e)["error"]}),
    }
}

/// `handle` with a semaphore's or latch's `wait` (the cases' own word for it).
fn family_waiting<H>(
    a: &Args,
    handle: H,
    forever: fn(H) -> H,
    up_to: fn(H, Duration) -> H,
) -> Arg<H> {
    Ok(match a.family_wait()? {
        Wait::For(d) => up_to(handle, d),
        Wait::Forever => forever(handle),
        Wait::No => handle,
    })
}

/// The outcome of a call whose arguments should be refused: `Err` when the conversion of an
/// argument into this crate's types refused it.
async fn refuse(case: &J) -> Arg<J> {
    let a = Args(&case["args"]);
    let locks = nowhere();
    Ok(match case["call"].as_str().unwrap_or("") {
        // A renewal's lease is its handle's: the handle is refused at its acquire.
        "lock.acquire" | "lock.renew" => error(lock_of(&locks, &a)?.acquire().await),
        "lock.scoped" => error(lock_of(&locks, &a)?.with_lock(|_| async {}).await),
        "multi.acquire" => error(multi_of(&locks, &a)?.acquire().await),
        "semaphore.acquire" => {
            let sem = locks.semaphore(a.string("key")?);
            let sem = family_waiting(&a, sem, Semaphore::wait_forever, Semaphore::wait)?;
            error(sem.acquire(a.u32("permits")?).await)
        }
        "semaphore.release" => {
            let sem = locks.semaphore(a.string("key")?);
            error(sem.release(a.u32("permits")?).await)
        }
        "semaphore.try_set_permits" => {
            let sem = locks.semaphore(a.string("key")?);
            error(sem.try_set_permits(a.u32("permits")?).await)
        }
        "permits.acquire" => {
            let mut sem = locks.permit_semaphore(a.string("key")?);
            if let Some(lease) = a.ms("lease_ms")? {
                sem = sem.lease(lease);
            }
            error(sem.acquire_many(a.u32("permits")?).await)
        }
        "permits.release" => {
            let sem = locks.permit_semaphore(a.string("key")?);
            error(sem.release(&a.string("id")?).await)
        }
        "latch.count_down" => error(locks.latch(a.string("key")?).count_down().await),
        "latch.try_set_count" => {
            let count = a.u64("count")?.ok_or(Refused("count".into()))?;
            error(
                locks
                    .latch(a.string("key")?)
                    .try_set_count(count)
                    .await
                    .map(drop),
            )
        }
        "latch.await_zero" => {
            let latch = locks.latch(a.string("key")?);
            let latch = family_waiting(&a, latch, Latch::wait_forever, Latch::wait)?;
            error(latch.await_zero().await)
        }
        "election.campaign" => {
            let election = locks.election(a.string("key")?);
            error(
                election
                    .campaign_for(a.string("value")?, Duration::ZERO)
                    .await
                    .map(drop),
            )
        }
        "queries.top" => error(locks.contended_keys(a.u32("count")?).await),
        other => panic!("cannot express the call {other}"),
    })
}
