//! The monitoring kit in docs/monitoring/: the redis_exporter collector returns every field of
//! `INFO rlock` on every server, in the shape redis_exporter reads, and the Grafana dashboard and
//! the Prometheus rules query only names the collector returns. Then with the real tools
//! (`scripts/deps.sh monitoring`): promtool's rule unit tests, and Debian's redis_exporter and
//! Prometheus on free ports, scraping every server under contention and one without the module.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread::sleep;
use std::time::{Duration, Instant};

use common::*;
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

const FAMILIES: [&str; 8] = [
    "lock", "fair", "read", "write", "multi", "permits", "lease", "latch",
];

/// Series that go up and down; every other name the collector returns is a counter.
const GAUGES: [&str; 8] = [
    "rlock_blocked",
    "rlock_waiting_longest_ms",
    "rlock_tracked_locks",
    "rlock_allocated_bytes",
    "rlock_eviction_unsafe",
    "rlock_acl_categories_missing",
    "rlock_acl_category_rlock",
    "rlock_version_number",
];

fn is_gauge(name: &str) -> bool {
    GAUGES.contains(&name) || ["_p50", "_p99", "_p99_9"].iter().any(|p| name.ends_with(p))
}

fn kit_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/monitoring")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ok(con: &mut Connection, args: &[&str]) -> Value {
    call(con, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Blocks `blocked` on a connection of its own until `free` lets it through.
fn wait_then_grant(server: &Server, blocked: &[&str], free: &[&str]) {
    let before = rstat(server, "blocked");
    let waiting = Pending::new(server).spawn(blocked);
    wait_total_blocked(server, before + 1);
    sleep(Duration::from_millis(5));
    ok(&mut server.conn(), free);
    let reply = waiting.join().reply;
    assert!(
        matches!(reply, Ok(ref v) if *v != Value::Nil),
        "{}: {blocked:?} replied {reply:?}",
        server.flavor
    );
}

/// Activity that makes every kind of `INFO rlock` field: a granted wait in every family (so
/// `wait_usec_<family>`, `waitstat_<family>` and `handoff_usec`), a wait that times out, and
/// a call left blocked on `orders` (returned: drop it to end the wait).
fn contend(server: &Server) -> Waiting {
    let mut c = server.conn();
    let lock = |k: &'static str, o: &'static str| ["RLOCK.ACQUIRE", k, o, "BLOCK", "10000"];
    ok(&mut c, &["RLOCK.ACQUIRE", "lock", "a"]);
    wait_then_grant(server, &lock("lock", "b"), &["RLOCK.RELEASE", "lock", "a"]);
    ok(&mut c, &["RLOCK.ACQUIRE", "fair", "a", "FAIR"]);
    wait_then_grant(
        server,
        &["RLOCK.ACQUIRE", "fair", "b", "FAIR", "BLOCK", "10000"],
        &["RLOCK.RELEASE", "fair", "a"],
    );
    ok(&mut c, &["RLOCK.ACQUIRE", "rw", "w", "WRITE"]);
    wait_then_grant(
        server,
        &["RLOCK.ACQUIRE", "rw", "r", "READ", "BLOCK", "10000"],
        &["RLOCK.RELEASE", "rw", "w", "WRITE"],
    );
    wait_then_grant(
        server,
        &["RLOCK.ACQUIRE", "rw", "w2", "WRITE", "BLOCK", "10000"],
        &["RLOCK.RELEASE", "rw", "r", "READ"],
    );
    ok(&mut c, &["RLOCK.ACQUIRE", "{m}1", "a"]);
    wait_then_grant(
        server,
        &["RLOCK.MACQUIRE", "b", "2", "{m}1", "{m}2", "BLOCK", "10000"],
        &["RLOCK.RELEASE", "{m}1", "a"],
    );
    ok(&mut c, &["RSEM.TRYSETPERMITS", "sem", "0"]);
    wait_then_grant(
        server,
        &["RSEM.ACQUIRE", "sem", "BLOCK", "10000"],
        &["RSEM.RELEASE", "sem"],
    );
    ok(&mut c, &["RSEM.TRYSETPERMITS", "leased", "0"]);
    wait_then_grant(
        server,
        &["RSEM.LEASE", "leased", "LEASE", "10000", "BLOCK", "10000"],
        &["RSEM.RELEASE", "leased"],
    );
    ok(&mut c, &["RLATCH.TRYSETCOUNT", "latch", "1"]);
    wait_then_grant(
        server,
        &["RLATCH.AWAIT", "latch", "BLOCK", "10000"],
        &["RLATCH.COUNTDOWN", "latch"],
    );
    ok(
        &mut c,
        &["RLOCK.ACQUIRE", "orders", "alice", "LEASE", "60000"],
    );
    let timed_out = ok(&mut c, &["RLOCK.ACQUIRE", "orders", "erin", "BLOCK", "20"]);
    assert_eq!(
        timed_out,
        Value::Nil,
        "{}: a wait that times out",
        server.flavor
    );
    let before = rstat(server, "blocked");
    let waiting = Pending::new(server).spawn(&["RLOCK.ACQUIRE", "orders", "w2", "BLOCK", "0"]);
    wait_total_blocked(server, before + 1);
    sleep(Duration::from_millis(20));
    waiting
}

/// Runs the collector as redis_exporter does (`EVAL script 0 0`, or `EVAL_RO`) and checks the
/// reply has the shape redigo's `StringMap` accepts: a flat array of bulk strings, names unique.
fn collect(server: &Server, con: &mut Connection, eval: &str) -> Vec<(String, String)> {
    let flavor = server.flavor;
    let script = kit_file("rlock-metrics.lua");
    let reply = ok(con, &[eval, &script, "0", "0"]);
    let Value::Array(items) = reply else {
        panic!("{flavor}: {eval} replied {reply:?}, not an array");
    };
    assert!(
        items.len() % 2 == 0,
        "{flavor}: odd reply length {}",
        items.len()
    );
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).expect("utf-8"),
        other => panic!("{flavor}: {other:?} is not a bulk string: redis_exporter refuses it"),
    };
    let pairs: Vec<(String, String)> = items
        .chunks(2)
        .map(|p| (text(&p[0]), text(&p[1])))
        .collect();
    let mut seen = BTreeSet::new();
    for (name, value) in &pairs {
        assert!(seen.insert(name.clone()), "{flavor}: {name} twice");
        assert!(
            value.parse::<f64>().is_ok_and(f64::is_finite),
            "{flavor}: {name}={value:?} does not parse as a float"
        );
    }
    pairs
}

/// What the collector should return for an `INFO rlock` reply, worked out independently.
fn expected(info: &HashMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, value) in info {
        if name == "rlock_version" {
            let (x, y, z) = match value.split('.').collect::<Vec<_>>()[..] {
                [x, y, z] => (x, y, z),
                _ => panic!("rlock_version:{value}"),
            };
            let n = |s: &str| s.parse::<i64>().expect("x.y.z");
            let number = n(x) * 10000 + n(y) * 100 + n(z);
            out.insert("rlock_version_number".to_string(), number.to_string());
        } else if value.contains('=') {
            for kv in value.split(',') {
                let (k, v) = kv.split_once('=').expect("k=v");
                out.insert(format!("{name}_{}", k.replace('.', "_")), v.to_string());
            }
        } else {
            assert!(
                value.parse::<f64>().is_ok(),
                "a new text field {name}:{value}"
            );
            out.insert(name.clone(), value.clone());
        }
    }
    out
}

/// A `redis_script_values{...}` selector found in a query: the names its `key` matcher means,
/// and whether it is a range (`[5m]`), as `rate()` and `increase()` need.
#[derive(Debug)]
struct Selector {
    text: String,
    names: Vec<String>,
    range: bool,
}

/// The names a `key=~` regex means. Only literal names and `(a|b)` alternations: so each name
/// can be checked against the collector's, where `.*` would match a typo silently.
fn expand(regex: &str) -> Vec<String> {
    let mut names = vec![String::new()];
    let mut rest = regex;
    while let Some(c) = rest.chars().next() {
        if c == '(' {
            let end = rest.find(')').unwrap_or_else(|| panic!("{regex}: no ')'"));
            let alternatives: Vec<&str> = rest[1..end].split('|').collect();
            names = names
                .iter()
                .flat_map(|n| alternatives.iter().map(move |a| format!("{n}{a}")))
                .collect();
            rest = &rest[end + 1..];
        } else {
            assert!(
                c.is_ascii_alphanumeric() || c == '_',
                "key regex {regex:?}: only literal names and (a|b) alternations"
            );
            names.iter_mut().for_each(|n| n.push(c));
            rest = &rest[1..];
        }
    }
    for n in &names {
        assert!(
            n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "key regex {regex:?}: only literal names and (a|b) alternations"
        );
    }
    names
}

/// Every `redis_script_values{...}` selector in `query`; each must have one `key` matcher.
fn selectors(query: &str) -> Vec<Selector> {
    const METRIC: &str = "redis_script_values";
    let mut out = Vec::new();
    for (at, _) in query.match_indices(METRIC) {
        let after = &query[at + METRIC.len()..];
        let body = after
            .strip_prefix('{')
            .unwrap_or_else(|| panic!("{query}: {METRIC} without a key matcher"));
        let end = body.find('}').expect("a closing brace");
        let text = format!("{METRIC}{{{}}}", &body[..end]);
        let range = body[end + 1..].trim_start().starts_with('[');
        let mut names = None;
        for matcher in body[..end].split(',') {
            let matcher = matcher.trim();
            let Some(value) = matcher.strip_prefix("key") else {
                continue;
            };
            let value = value.trim_start();
            let (regex, quoted) = match value {
                v if v.starts_with("=~") => (true, &v[2..]),
                v if v.starts_with('=') => (false, &v[1..]),
                _ => panic!("{text}: key must be matched with = or =~"),
            };
            let literal = quoted
                .trim()
                .strip_prefix('"')
                .and_then(|q| q.strip_suffix('"'))
                .unwrap_or_else(|| panic!("{text}: key value in double quotes"));
            let named = if regex {
                expand(literal)
            } else {
                vec![literal.to_string()]
            };
            assert!(names.replace(named).is_none(), "{text}: two key matchers");
        }
        let names = names.unwrap_or_else(|| panic!("{text}: no key matcher"));
        out.push(Selector { text, names, range });
    }
    out
}

/// Every query in a JSON document: the strings under `expr`, `query` and `definition`, where
/// Grafana keeps what it sends to a data source (panel targets, template variables).
fn queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Array(a) => a.iter().for_each(|v| queries(v, out)),
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                match v {
                    serde_json::Value::String(s)
                        if ["expr", "query", "definition"].contains(&k.as_str()) =>
                    {
                        out.push(s.clone())
                    }
                    v => queries(v, out),
                }
            }
        }
        _ => {}
    }
}

fn dashboard() -> serde_json::Value {
    serde_json::from_str(&kit_file("grafana-dashboard.json")).expect("grafana-dashboard.json")
}

/// A PromQL expression's brackets pair up, outside its strings.
fn assert_balanced(expr: &str) {
    let mut open = Vec::new();
    let mut in_string = false;
    for c in expr.chars() {
        match c {
            '"' => in_string = !in_string,
            _ if in_string => {}
            '(' | '[' | '{' => open.push(c),
            ')' | ']' | '}' => {
                let want = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                assert_eq!(open.pop(), Some(want), "{expr}: unbalanced {c}");
            }
            _ => {}
        }
    }
    assert!(open.is_empty() && !in_string, "{expr}: unclosed {open:?}");
}

/// Every panel of the dashboard, rows' panels included.
fn panels(dashboard: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().expect("panels") {
        out.push(p.clone());
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner.iter().cloned());
        }
    }
    out
}

/// An alert rule of rlock-alerts.yml, as a line-based reading of the file sees it.
#[derive(Debug, Default)]
struct Rule {
    alert: String,
    expr: String,
    severity: String,
    summary: bool,
}

/// The rules of rlock-alerts.yml. `expr:` on one line, or a block scalar (`|`, `>`).
fn rules() -> Vec<Rule> {
    let text = kit_file("rlock-alerts.yml");
    assert!(
        text.lines().any(|l| l == "groups:"),
        "rlock-alerts.yml: the standard groups: format"
    );
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut out: Vec<Rule> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("- alert:") {
            out.push(Rule {
                alert: name.trim().to_string(),
                ..Rule::default()
            });
            continue;
        }
        let Some(rule) = out.last_mut() else { continue };
        if let Some(expr) = t.strip_prefix("expr:") {
            let expr = expr.trim();
            rule.expr = if ["|", "|-", ">", ">-"].contains(&expr) {
                lines[i + 1..]
                    .iter()
                    .take_while(|l| l.trim().is_empty() || indent(l) > indent(line))
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" ")
            } else {
                expr.to_string()
            };
        } else if let Some(s) = t.strip_prefix("severity:") {
            rule.severity = s.trim().to_string();
        } else if t.starts_with("summary:") {
            rule.summary = true;
        }
    }
    out
}

/// Every selector the dashboard and the rules query.
fn queried() -> Vec<(String, Selector)> {
    let mut texts = Vec::new();
    queries(&dashboard(), &mut texts);
    let mut out: Vec<(String, Selector)> = texts
        .iter()
        .flat_map(|t| selectors(t))
        .map(|s| ("grafana-dashboard.json".to_string(), s))
        .collect();
    for rule in rules() {
        for s in selectors(&rule.expr) {
            out.push((format!("rlock-alerts.yml {}", rule.alert), s));
        }
    }
    out
}

/// The `MODULE LIST` `ver` of rlock.
fn module_ver(con: &mut Connection) -> i64 {
    let Value::Array(modules) = ok(con, &["MODULE", "LIST"]) else {
        panic!("MODULE LIST");
    };
    for m in modules {
        let Value::Array(fields) = m else { continue };
        let fields: Vec<String> = fields
            .iter()
            .map(|f| match f {
                Value::Array(_) => String::new(),
                f => reply_text(f),
            })
            .collect();
        if fields.iter().any(|f| f == "rlock") {
            let at = fields.iter().position(|f| f == "ver").expect("ver");
            return fields[at + 1].parse().expect("ver is a number");
        }
    }
    panic!("rlock not in MODULE LIST");
}

#[test]
fn the_collector_returns_every_field_of_info_rlock() {
    for (flavor, server) in each_server() {
        let mut admin = server.conn();
        let blocked = contend(&server);

        let collected = collect(&server, &mut admin, "EVAL");
        let info = server.info("rlock");
        let want = expected(&info);
        let got: BTreeMap<String, String> = collected.iter().cloned().collect();
        let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<BTreeSet<_>>();
        assert_eq!(
            names(&got),
            names(&want),
            "{flavor}: collector vs INFO rlock"
        );
        for (name, value) in &want {
            match name.as_str() {
                // Live: it grows between the two calls.
                "rlock_waiting_longest_ms" => {
                    let (g, w) = (got[name].parse::<i64>(), value.parse::<i64>());
                    let (g, w) = (g.expect("ms"), w.expect("ms"));
                    assert!(0 < g && g <= w, "{flavor}: waiting_longest_ms {g} then {w}");
                }
                // What the module holds may move a little with the calls themselves.
                "rlock_allocated_bytes" => {
                    assert!(got[name].parse::<i64>().expect("bytes") > 0, "{flavor}");
                }
                _ => assert_eq!(&got[name], value, "{flavor}: {name}"),
            }
        }
        // Every kind of field was there to see: each family's percentiles split in three,
        // its outcomes in four, the hand-offs, a live wait and a timeout.
        for family in FAMILIES {
            for p in ["p50", "p99", "p99_9"] {
                let name = format!("rlock_wait_usec_{family}_{p}");
                assert!(got.contains_key(&name), "{flavor}: {name}");
            }
            for o in ["granted", "timeouts", "cancels", "usec"] {
                let name = format!("rlock_waitstat_{family}_{o}");
                assert!(got.contains_key(&name), "{flavor}: {name}");
            }
        }
        for p in ["p50", "p99", "p99_9"] {
            assert!(
                got.contains_key(&format!("rlock_handoff_usec_{p}")),
                "{flavor}"
            );
        }
        assert_eq!(got["rlock_blocked"], "1", "{flavor}");
        assert_eq!(got["rlock_wait_timeouts"], "1", "{flavor}");
        assert_eq!(got["rlock_waitstat_lock_timeouts"], "1", "{flavor}");
        assert!(
            !got.contains_key("rlock_version"),
            "{flavor}: text left out"
        );
        assert_eq!(
            got["rlock_version_number"],
            module_ver(&mut admin).to_string(),
            "{flavor}: rlock_version_number is MODULE LIST's ver"
        );

        // --lua-script-read-only, a user allowed only the script and INFO, and a server out of
        // memory (when one most wants to see it) give the same names.
        let same = |pairs: Vec<(String, String)>, what: &str| {
            let n: BTreeSet<String> = pairs.into_iter().map(|(n, _)| n).collect();
            assert_eq!(n, names(&got), "{flavor}: {what}");
        };
        same(collect(&server, &mut admin, "EVAL_RO"), "EVAL_RO");
        let mut exporter =
            server.conn_as_user(&mut admin, "exporter", &["+eval", "+eval_ro", "+info"]);
        same(
            collect(&server, &mut exporter, "EVAL"),
            "ACL user +eval +info",
        );
        ok(&mut admin, &["CONFIG", "SET", "maxmemory", "1"]);
        let oom = call(&mut admin, &["SET", "x", "y"]);
        assert!(
            matches!(oom, Err(ref e) if e.starts_with("OOM")),
            "{flavor}: {oom:?}"
        );
        same(collect(&server, &mut admin, "EVAL"), "out of memory");
        ok(&mut admin, &["CONFIG", "SET", "maxmemory", "0"]);

        // The dashboard and the rules query only what the collector returns.
        for (file, selector) in queried() {
            for name in &selector.names {
                assert!(
                    got.contains_key(name),
                    "{flavor}: {file} queries {name} ({}), which the collector does not return",
                    selector.text
                );
            }
        }

        // The hottest-keys panel's command runs and names the key a call waits on.
        let top = dashboard_top_command();
        let args: Vec<&str> = top.split_whitespace().collect();
        let mut viewer = server.conn_as_user(&mut admin, "grafana", &["+ping", "+rlock.top"]);
        let Value::Array(entries) = ok(&mut viewer, &args) else {
            panic!("{flavor}: {top}: not an array");
        };
        let keys: Vec<String> = entries
            .iter()
            .filter_map(|e| {
                let fields = reply_fields(e, false);
                fields
                    .into_iter()
                    .find(|(k, _)| k == "key")
                    .map(|(_, v)| reply_text(&v))
            })
            .collect();
        assert!(
            keys.contains(&"orders".to_string()),
            "{flavor}: {top}: {keys:?}"
        );

        ok(&mut admin, &["RLOCK.RELEASE", "orders", "alice"]);
        assert_eq!(blocked.join().reply, Ok(Value::Int(1)), "{flavor}");

        // A replica cut off from its primary, serving no stale data, still answers the
        // collector (allow-stale): without it redis_exporter would count the server down.
        ok(
            &mut admin,
            &["CONFIG", "SET", "replica-serve-stale-data", "no"],
        );
        ok(&mut admin, &["REPLICAOF", "127.0.0.1", "1"]);
        let stale = call(&mut admin, &["GET", "x"]);
        assert!(
            matches!(stale, Err(ref e) if e.starts_with("MASTERDOWN")),
            "{flavor}: {stale:?}"
        );
        same(collect(&server, &mut admin, "EVAL"), "stale replica");
    }
}

/// The command of the dashboard's Redis data source panel (RLOCK.TOP).
fn dashboard_top_command() -> String {
    let redis: Vec<serde_json::Value> = panels(&dashboard())
        .into_iter()
        .filter(|p| p["datasource"]["type"] == "redis-datasource")
        .collect();
    assert_eq!(redis.len(), 1, "one panel on the Redis data source");
    let target = &redis[0]["targets"][0];
    assert_eq!(target["type"], "cli", "{target}");
    let query = target["query"].as_str().expect("query").to_string();
    assert!(query.starts_with("RLOCK.TOP"), "{query}");
    query
}

#[test]
fn the_dashboard_and_the_rules_are_well_formed() {
    let dash = dashboard();
    let vars: Vec<&str> = dash["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for var in ["datasource", "instance", "redis"] {
        assert!(vars.contains(&var), "variable ${var} in {vars:?}");
    }
    let mut titles = Vec::new();
    for panel in panels(&dash) {
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().expect("title").to_string();
        let ds = &panel["datasource"];
        match ds["type"].as_str() {
            Some("prometheus") => {
                assert_eq!(
                    ds["uid"], "${datasource}",
                    "{title}: the data source variable"
                );
                for target in panel["targets"].as_array().expect("targets") {
                    let expr = target["expr"].as_str().expect("expr");
                    assert_balanced(expr);
                    assert!(expr.contains("instance=~\"$instance\""), "{title}: {expr}");
                    let found = selectors(expr);
                    assert!(!found.is_empty(), "{title}: {expr}");
                    for s in found {
                        let counter = s.names.iter().any(|n| !is_gauge(n));
                        assert_eq!(
                            counter, s.range,
                            "{title}: {}: counters through rate() (a range), gauges as they are",
                            s.text
                        );
                    }
                }
            }
            Some("redis-datasource") => assert_eq!(ds["uid"], "${redis}", "{title}"),
            other => panic!("{title}: data source {other:?}"),
        }
        titles.push(title);
    }
    for want in [
        "Acquire rate",
        "Hand-off rate",
        "Timeout rate",
        "Deadlock rate",
        "Wait p99 per family",
        "Calls blocked now",
        "Longest wait",
        "Hottest keys",
    ] {
        assert!(
            titles.iter().any(|t| t.starts_with(want)),
            "no panel {want:?} in {titles:?}"
        );
    }
    dashboard_top_command();

    let rules = rules();
    for rule in &rules {
        assert!(!rule.expr.is_empty(), "{}: expr", rule.alert);
        assert_balanced(&rule.expr);
        assert!(
            ["warning", "critical"].contains(&rule.severity.as_str()),
            "{}: severity {:?}",
            rule.alert,
            rule.severity
        );
        assert!(rule.summary, "{}: annotations.summary", rule.alert);
        for s in selectors(&rule.expr) {
            let counter = s.names.iter().any(|n| !is_gauge(n));
            assert_eq!(counter, s.range, "{}: {}", rule.alert, s.text);
        }
    }
    let alerting_on = |name: &str, also: &str| {
        rules.iter().any(|r| {
            r.expr.contains(also)
                && selectors(&r.expr)
                    .iter()
                    .any(|s| s.names.iter().any(|n| n == name))
        })
    };
    assert!(
        alerting_on("rlock_wait_timeouts", "rate("),
        "waits timing out"
    );
    assert!(
        alerting_on("rlock_wait_usec_lock_p99", ">"),
        "p99 wait over a threshold"
    );
    assert!(alerting_on("rlock_deadlocks", "increase("), "any deadlock");
    assert!(
        rules
            .iter()
            .any(|r| r.expr.contains("rlock_deadlocks") && r.expr.ends_with("> 0")),
        "any deadlock: > 0"
    );
    assert!(
        alerting_on("rlock_waiting_longest_ms", ">"),
        "a call blocked long"
    );

    // The parser of this test: a regex beyond alternations is refused, not trusted.
    assert_eq!(expand("a_(b|c)_d"), ["a_b_d", "a_c_d"]);
    assert!(std::panic::catch_unwind(|| expand("rlock_.*")).is_err());
    assert!(queried().len() > 10);
}

// The kit with the real tools: Debian's redis_exporter (1.45) and Prometheus (2.42), as
// `scripts/deps.sh monitoring` installs them.

/// A tool the kit's tests run: `$<ENV>`, else its name on `PATH`; panics with what to do.
fn tool(name: &str, env: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} not found (looked at ${env} and PATH): run `make test` or \
                 `scripts/deps.sh monitoring` (Debian: apt-get install -y prometheus \
                 prometheus-redis-exporter), or set {env}=/path/to/{name}"
            )
        })
}

fn kit_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/monitoring")
        .join(name)
        .canonicalize()
        .expect("docs/monitoring")
}

/// A process of the kit's tests (an exporter, Prometheus) on a port of its own; killed on drop,
/// a failing test included.
struct Daemon {
    name: String,
    port: u16,
    child: Child,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    /// Starts `args(port)` on a free port and waits until `ready_path` answers 200 over HTTP.
    /// Another process may take the port between probe and bind: then it tries a new one.
    fn start(
        name: &str,
        program: &Path,
        dir: &Path,
        ready_path: &str,
        args: impl Fn(u16) -> Vec<String>,
    ) -> Daemon {
        let log = dir.join(format!("{name}.log"));
        for _attempt in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let out = std::fs::File::create(&log).expect("log file");
            let child = Command::new(program)
                .args(args(port))
                .stdout(out.try_clone().expect("log"))
                .stderr(out)
                .spawn()
                .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
            let mut daemon = Daemon {
                name: name.to_string(),
                port,
                child,
                log: log.clone(),
            };
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                if daemon.child.try_wait().expect("try_wait").is_some() {
                    break;
                }
                if matches!(http_get(port, ready_path), Ok((200, _))) {
                    return daemon;
                }
                sleep(Duration::from_millis(50));
            }
            let text = std::fs::read_to_string(&daemon.log).unwrap_or_default();
            assert!(
                daemon.child.try_wait().expect("try_wait").is_some()
                    && text.contains("address already in use"),
                "{name} did not start on port {port}:\n{text}"
            );
            drop(daemon);
        }
        panic!("{name}: no free port in 5 tries")
    }

    fn get(&self, path: &str) -> String {
        match http_get(self.port, path) {
            Ok((200, body)) => body,
            other => panic!(
                "{} {path}: {other:?}\n{}",
                self.name,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            ),
        }
    }
}

/// GET over HTTP/1.0 (the server closes the connection after the body: no chunked encoding).
fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    Ok((status, body.to_string()))
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A PromQL instant query through Prometheus's HTTP API: its result vector (panics on an error,
/// naming the expression).
fn promql(prometheus: &Daemon, expr: &str) -> Vec<serde_json::Value> {
    let (status, body) = http_get(
        prometheus.port,
        &format!("/api/v1/query?query={}", url_encode(expr)),
    )
    .expect("query Prometheus");
    let reply: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{expr}: {e}: {body}"));
    assert!(
        status == 200 && reply["status"] == "success",
        "{expr} does not evaluate: {body}"
    );
    assert_eq!(reply["data"]["resultType"], "vector", "{expr}");
    reply["data"]["result"].as_array().expect("result").clone()
}

/// The `instance` label of each series of a result.
fn instances(result: &[serde_json::Value]) -> BTreeSet<String> {
    result
        .iter()
        .filter_map(|s| s["metric"]["instance"].as_str().map(str::to_string))
        .collect()
}

/// Every query of the dashboard as Grafana sends it to Prometheus, `$instance` set to All
/// and `$__rate_interval` to 1m: (title, expr).
fn dashboard_exprs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in panels(&dashboard()) {
        if panel["datasource"]["type"] != "prometheus" {
            continue;
        }
        let title = panel["title"].as_str().unwrap_or("?").to_string();
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            let expr = expr
                .replace("$instance", ".*")
                .replace("$__rate_interval", "1m");
            // `$1` in label_replace is PromQL's; any other `$name` is a Grafana variable.
            let variable = expr
                .match_indices('$')
                .any(|(at, _)| !expr[at + 1..].starts_with(|c: char| c.is_ascii_digit()));
            assert!(!variable, "{title}: a variable left in {expr}");
            out.push((title.clone(), expr));
        }
    }
    out
}

#[test]
fn the_rule_unit_tests_pass_in_promtool() {
    let promtool = tool("promtool", "PROMTOOL");
    let run = |args: &[&str]| {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(kit_path("."))
            .output()
            .expect("promtool");
        let text = output_text(&out);
        assert!(out.status.success(), "promtool {args:?}:\n{text}");
        text
    };
    let checked = run(&["check", "rules", "rlock-alerts.yml"]);
    let count = rules().len();
    assert!(
        checked.contains(&format!("SUCCESS: {count} rules found")),
        "{checked}"
    );
    run(&["test", "rules", "rlock-alerts.test.yml"]);

    // Every alert has a case where it fires and one where it stays silent.
    let tests = kit_file("rlock-alerts.test.yml");
    for rule in rules() {
        let name = &rule.alert;
        let silent = format!("alertname: {name}, exp_alerts: [] }}");
        let fires = format!("alertname: {name}\n        exp_alerts:\n          - exp_labels:");
        assert!(
            tests.contains(&silent),
            "rlock-alerts.test.yml: no case where {name} stays silent"
        );
        assert!(
            tests.contains(&fires),
            "rlock-alerts.test.yml: no case where {name} fires"
        );
    }
}

#[test]
fn the_real_exporter_and_prometheus_serve_the_kit() {
    let exporter_bin = tool("prometheus-redis-exporter", "REDIS_EXPORTER");
    let prometheus_bin = tool("prometheus", "PROMETHEUS");
    let dir = tempfile::Builder::new()
        .prefix("rlock-monitoring-")
        .tempdir()
        .expect("temp dir");
    let script = kit_path("rlock-metrics.lua");
    let exporter = |name: &str, server: &Server| {
        let addr = format!("redis://127.0.0.1:{}", server.port);
        let script = script.display().to_string();
        Daemon::start(name, &exporter_bin, dir.path(), "/metrics", |port| {
            [
                "-redis.addr",
                &addr,
                "-script",
                &script,
                "-web.listen-address",
                &format!("127.0.0.1:{port}"),
            ]
            .map(str::to_string)
            .to_vec()
        })
    };

    // Per server: one under contention in every family, with a timeout and a call still
    // blocked, and one without the module; an exporter on each.
    let mut kept = Vec::new();
    let mut with_module = BTreeMap::new();
    let mut without_module = BTreeMap::new();
    for (flavor, server) in each_server() {
        let blocked = contend(&server);
        let bare = Server::builder(flavor).module(false).start();
        let e = exporter(&format!("exporter-{flavor}"), &server);
        let bare_e = exporter(&format!("exporter-{flavor}-bare"), &bare);
        let metrics = e.get("/metrics");
        assert!(
            metrics.contains("redis_script_values{key=\"rlock_blocked\"} 1"),
            "{flavor}: the exporter serves the collector's values:\n{metrics}"
        );
        let bare_metrics = bare_e.get("/metrics");
        assert!(
            bare_metrics.contains("\nredis_up 1\n") && !bare_metrics.contains("rlock_"),
            "{flavor}: a server without the module is up, without rlock series:\n{bare_metrics}"
        );
        with_module.insert(format!("127.0.0.1:{}", e.port), flavor);
        without_module.insert(format!("127.0.0.1:{}", bare_e.port), flavor);
        kept.push((server, bare, blocked, e, bare_e));
    }

    let config = dir.path().join("prometheus.yml");
    let targets: Vec<String> = with_module
        .keys()
        .chain(without_module.keys())
        .map(|t| format!("\"{t}\""))
        .collect();
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: redis\n    static_configs:\n      - targets: [{}]\n",
            kit_path("rlock-alerts.yml").display(),
            targets.join(", ")
        ),
    )
    .expect("prometheus.yml");
    let data = dir.path().join("data");
    let prometheus = Daemon::start(
        "prometheus",
        &prometheus_bin,
        dir.path(),
        "/-/ready",
        |port| {
            vec![
                format!("--config.file={}", config.display()),
                format!("--storage.tsdb.path={}", data.display()),
                format!("--web.listen-address=127.0.0.1:{port}"),
            ]
        },
    );

    // Three scrapes of every server with the module, so that rate() has points.
    let all: BTreeSet<String> = with_module.keys().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let scraped = promql(
            &prometheus,
            "count_over_time(redis_script_values{key=\"rlock_acquires\"}[1m]) >= 3",
        );
        if instances(&scraped) == all {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped {all:?}"
        );
        sleep(Duration::from_millis(250));
    }

    // Every dashboard query evaluates and has a series for every server with the module.
    for (title, expr) in dashboard_exprs() {
        let got = instances(&promql(&prometheus, &expr));
        assert_eq!(got, all, "{title}: {expr}");
    }
    let vars = prometheus.get(&format!(
        "/api/v1/label/instance/values?match[]={}",
        url_encode("redis_script_values{key=\"rlock_acquires\"}")
    ));
    let vars: serde_json::Value = serde_json::from_str(&vars).expect("label values");
    let vars: BTreeSet<String> = vars["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|v| v.as_str().expect("instance").to_string())
        .collect();
    assert_eq!(vars, all, "the dashboard's $instance variable");

    // Every family's series, as Prometheus stored them, with the contention's figures.
    let ver = module_ver(&mut kept[0].0.conn()).to_string();
    for (instance, flavor) in &with_module {
        let value = |key: &str| {
            let got = promql(
                &prometheus,
                &format!("redis_script_values{{instance=\"{instance}\", key=\"{key}\"}}"),
            );
            assert_eq!(got.len(), 1, "{flavor}: {key}: {got:?}");
            got[0]["value"][1].as_str().expect("value").to_string()
        };
        for family in FAMILIES {
            for key in [
                format!("rlock_wait_usec_{family}_p50"),
                format!("rlock_wait_usec_{family}_p99"),
                format!("rlock_wait_usec_{family}_p99_9"),
                format!("rlock_waitstat_{family}_timeouts"),
                format!("rlock_waitstat_{family}_usec"),
            ] {
                value(&key);
            }
            let granted = value(&format!("rlock_waitstat_{family}_granted"));
            assert!(
                granted.parse::<f64>().expect("granted") >= 1.0,
                "{flavor}: {family}"
            );
        }
        assert_eq!(
            value("rlock_blocked"),
            "1",
            "{flavor}: the call still blocked"
        );
        assert_eq!(value("rlock_wait_timeouts"), "1", "{flavor}: the timeout");
        assert_eq!(value("rlock_waitstat_lock_timeouts"), "1", "{flavor}");
        assert_eq!(
            value("rlock_version_number"),
            ver,
            "{flavor}: MODULE LIST's ver"
        );
    }

    // Every rule evaluates, healthy, and each rule's expression evaluates through the API.
    let deadline = Instant::now() + Duration::from_secs(60);
    let rule_names: BTreeSet<String> = rules().into_iter().map(|r| r.alert).collect();
    loop {
        let reply: serde_json::Value =
            serde_json::from_str(&prometheus.get("/api/v1/rules")).expect("rules");
        let evaluated: Vec<&serde_json::Value> = reply["data"]["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .flat_map(|g| g["rules"].as_array().expect("rules").iter())
            .collect();
        let names: BTreeSet<String> = evaluated
            .iter()
            .map(|r| r["name"].as_str().expect("name").to_string())
            .collect();
        assert_eq!(names, rule_names, "the rules Prometheus loaded");
        for r in &evaluated {
            assert!(r["health"] != "err", "{}: {}", r["name"], r["lastError"]);
        }
        if evaluated.iter().all(|r| r["health"] == "ok") {
            break;
        }
        assert!(Instant::now() < deadline, "rules never evaluated: {reply}");
        sleep(Duration::from_millis(250));
    }
    for rule in rules() {
        promql(&prometheus, &rule.expr);
    }

    // The only alert: the collector failing, for each server without the module (pending for
    // its 5 minutes, then firing). The servers with the module are healthy: no alert.
    let want: BTreeSet<String> = without_module.keys().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let reply: serde_json::Value =
            serde_json::from_str(&prometheus.get("/api/v1/alerts")).expect("alerts");
        let alerts = reply["data"]["alerts"].as_array().expect("alerts").clone();
        for a in &alerts {
            assert_eq!(
                a["labels"]["alertname"], "RlockCollectorFailing",
                "an alert on a healthy server: {a}"
            );
        }
        let alerting: BTreeSet<String> = alerts
            .iter()
            .filter_map(|a| a["labels"]["instance"].as_str().map(str::to_string))
            .collect();
        if alerting == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "RlockCollectorFailing for {want:?}: {reply}"
        );
        sleep(Duration::from_millis(250));
    }

    drop(prometheus);
    for (server, _bare, blocked, _e, _bare_e) in kept {
        ok(&mut server.conn(), &["RLOCK.RELEASE", "orders", "alice"]);
        drop(blocked);
    }
}
