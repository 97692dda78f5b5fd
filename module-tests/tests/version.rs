//! The module's version, as users read it: `ver` in `MODULE LIST` (x*10000 + y*100 + z),
//! `version:x.y.z` in `INFO rlock`, `since` in `COMMAND DOCS`, and CHANGELOG.md.

use std::collections::BTreeMap;
use std::path::Path;

use rlock_module_tests::redis::Value;
use rlock_module_tests::{call, servers};

/// The workspace version in the root Cargo.toml, which the module crate takes.
fn workspace_version() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let text = std::fs::read_to_string(&path).expect("read Cargo.toml");
    let section = text
        .split("[workspace.package]")
        .nth(1)
        .expect("Cargo.toml has [workspace.package]");
    let line = section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .find(|l| l.trim_start().starts_with("version"))
        .expect("[workspace.package] has a version");
    line.split('"').nth(1).expect("version = \"x.y.z\"").into()
}

fn parts(version: &str) -> (i64, i64, i64) {
    let p: Vec<i64> = version
        .split('.')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("{version} is not x.y.z"))
        })
        .collect();
    assert_eq!(p.len(), 3, "{version} is not x.y.z");
    (p[0], p[1], p[2])
}

/// CHANGELOG.md: each `## x.y.z` heading and the backticked words under it.
fn changelog() -> BTreeMap<String, String> {
    changelog_sections()
        .into_iter()
        .map(|(v, (_, body))| (v, body))
        .collect()
}

/// The versions whose CHANGELOG.md heading says `(unreleased)`: work on the next version,
/// which commands may already give as their `since`.
fn unreleased() -> Vec<String> {
    changelog_sections()
        .into_iter()
        .filter(|(_, (heading, _))| heading.contains("(unreleased)"))
        .map(|(v, _)| v)
        .collect()
}

/// CHANGELOG.md: version -> (its whole heading, the text under it).
fn changelog_sections() -> BTreeMap<String, (String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../CHANGELOG.md");
    let text = std::fs::read_to_string(&path).expect("read CHANGELOG.md");
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("## ") {
            let version = rest.split_whitespace().next().unwrap_or("").to_string();
            current = Some(version.clone());
            out.insert(version, (rest.to_string(), String::new()));
        } else if let Some(v) = &current {
            let (_, body) = out.get_mut(v).expect("section");
            body.push_str(line);
            body.push('\n');
        }
    }
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        other => panic!("not text: {other:?}"),
    }
}

/// Field/value pairs of a RESP2 map-as-array (or a RESP3 map).
fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .map(|kv| (text(&kv[0]), kv[1].clone()))
            .collect(),
        Value::Map(kv) => kv.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        other => panic!("not a map: {other:?}"),
    }
}

#[test]
fn module_list_and_info_give_the_crate_version() {
    let version = workspace_version();
    let (x, y, z) = parts(&version);
    for (flavor, server, mut c) in servers() {
        let Ok(Value::Array(modules)) = call(&mut c, &["MODULE", "LIST"]) else {
            panic!("{flavor}: MODULE LIST");
        };
        let rlock = modules
            .iter()
            .map(pairs)
            .find(|m| m.iter().any(|(k, v)| k == "name" && text(v) == "rlock"))
            .unwrap_or_else(|| panic!("{flavor}: rlock not in MODULE LIST"));
        let ver = rlock
            .iter()
            .find(|(k, _)| k == "ver")
            .map(|(_, v)| text(v))
            .expect("ver");
        assert_eq!(ver, (x * 10000 + y * 100 + z).to_string(), "{flavor}: ver");
        assert_eq!(
            server.info("rlock").get("rlock_version"),
            Some(&version),
            "{flavor}: INFO rlock version"
        );
    }
}

/// Every command's `since` is a version CHANGELOG.md has, whose section names the command,
/// and none is newer than the module unless CHANGELOG.md marks its version `(unreleased)`.
#[test]
fn command_docs_since_matches_the_changelog() {
    let log = changelog();
    let unreleased = unreleased();
    let current = parts(&workspace_version());
    assert!(
        log.contains_key(&workspace_version()),
        "CHANGELOG.md has no section for {}",
        workspace_version()
    );
    for (flavor, _server, mut c) in servers() {
        let Ok(Value::Array(list)) =
            call(&mut c, &["COMMAND", "LIST", "FILTERBY", "MODULE", "rlock"])
        else {
            panic!("{flavor}: COMMAND LIST FILTERBY MODULE rlock");
        };
        assert!(list.len() >= 19, "{flavor}: {} commands", list.len());
        for name in list.iter().map(text) {
            let docs = call(&mut c, &["COMMAND", "DOCS", &name]).expect("COMMAND DOCS");
            let doc = pairs(&docs)
                .into_iter()
                .next()
                .map(|(_, d)| pairs(&d))
                .unwrap_or_else(|| panic!("{flavor}: no docs for {name}"));
            let since = doc
                .iter()
                .find(|(k, _)| k == "since")
                .map(|(_, v)| text(v))
                .unwrap_or_else(|| panic!("{flavor}: {name} has no since"));
            assert!(
                parts(&since) <= current || unreleased.contains(&since),
                "{flavor}: {name} since {since}, newer than the module and not `(unreleased)` in CHANGELOG.md"
            );
            let section = log
                .get(&since)
                .unwrap_or_else(|| panic!("{flavor}: {name} since {since}: not in CHANGELOG.md"));
            assert!(
                section.to_ascii_lowercase().contains(&format!("`{name}")),
                "{flavor}: CHANGELOG.md's {since} section does not name `{name}`"
            );
        }
    }
}
