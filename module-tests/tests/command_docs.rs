//! `docs/COMMANDS.md` against what the server says about the module's commands:
//! every registered command has a section whose synopsis is the one redis-cli
//! builds from `COMMAND DOCS`, the option keywords agree both ways, every command
//! the doc names exists, and the flags table is what `COMMAND INFO` reports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

/// The synopsis the README and the doc show for the main command.
const ACQUIRE_SYNOPSIS: &str =
    "RLOCK.ACQUIRE key owner [READ|WRITE] [LEASE ms] [BLOCK ms] [FAIR] [TOKEN] [SESSION] [REQ id]";

fn doc_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/COMMANDS.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// One `### RLOCK.X …` (or `RSEM.`, `RLATCH.`) section of the doc.
#[derive(Debug)]
struct DocSection {
    /// The heading after `### `, spaces collapsed.
    synopsis: String,
    /// The lines up to the next heading.
    body: String,
}

/// The doc's command sections, by upper-case command name.
fn doc_sections(doc: &str) -> BTreeMap<String, DocSection> {
    let mut sections = BTreeMap::new();
    let mut current: Option<(String, DocSection)> = None;
    for line in doc.lines() {
        if line.starts_with('#') {
            if let Some((name, section)) = current.take() {
                assert!(
                    sections.insert(name.clone(), section).is_none(),
                    "docs/COMMANDS.md has two sections for {name}"
                );
            }
            let heading = line.strip_prefix("### ").filter(|h| {
                ["RLOCK.", "RSEM.", "RLATCH."]
                    .iter()
                    .any(|family| h.starts_with(family))
            });
            if let Some(heading) = heading {
                let synopsis = collapse(heading);
                let name = synopsis
                    .split(' ')
                    .next()
                    .expect("a word")
                    .to_ascii_uppercase();
                current = Some((
                    name,
                    DocSection {
                        synopsis,
                        body: String::new(),
                    },
                ));
            }
        } else if let Some((_, section)) = current.as_mut() {
            section.body.push_str(line);
            section.body.push('\n');
        }
    }
    if let Some((name, section)) = current {
        sections.insert(name, section);
    }
    sections
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every `RLOCK.<NAME>` the doc mentions anywhere, upper-case as written.
fn doc_mentions(doc: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = doc;
    while let Some(at) = rest.find("RLOCK.") {
        let tail = &rest[at + "RLOCK.".len()..];
        let word: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        found.insert(format!("RLOCK.{}", word.to_ascii_uppercase()));
        rest = tail;
    }
    found
}

/// The flags table: the rows under `| command | flags …`, each
/// `| \`RLOCK.X\` | \`flag\` \`flag\` | … |`.
fn doc_flags(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut table = BTreeMap::new();
    let rows = doc
        .lines()
        .skip_while(|line| !line.starts_with("| command | flags"))
        .skip(2)
        .take_while(|line| line.starts_with('|'));
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`').to_ascii_uppercase();
        let flags = cells
            .get(2)
            .map(|cell| backticked(cell).into_iter().collect())
            .unwrap_or_default();
        assert!(
            table.insert(name.clone(), flags).is_none(),
            "docs/COMMANDS.md lists {name} twice in the flags table"
        );
    }
    assert!(
        !table.is_empty(),
        "docs/COMMANDS.md has no `| command | flags …` table"
    );
    table
}

/// The words between backticks in `text`.
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

/// A map reply (RESP3) or a flat field/value array (RESP2) as pairs.
fn fields(v: &Value) -> Vec<(String, &Value)> {
    match v {
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, v)))
            .collect(),
        Value::Array(flat) => flat
            .chunks(2)
            .filter_map(|pair| Some((text(&pair[0])?, pair.get(1)?)))
            .collect(),
        _ => Vec::new(),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(items) | Value::Set(items) => items,
        _ => &[],
    }
}

fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    fields(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// One argument of a `COMMAND DOCS` entry.
#[derive(Debug)]
struct ArgSpec {
    name: String,
    kind: String,
    token: Option<String>,
    optional: bool,
    multiple: bool,
    multiple_token: bool,
    args: Vec<ArgSpec>,
}

fn arg_spec(v: &Value) -> ArgSpec {
    let get = |name: &str| field(v, name).and_then(text);
    let flags: Vec<String> = field(v, "flags")
        .map(|f| items(f).iter().filter_map(text).collect())
        .unwrap_or_default();
    ArgSpec {
        name: get("name").unwrap_or_else(|| panic!("argument without a name: {v:?}")),
        kind: get("type").unwrap_or_else(|| panic!("argument without a type: {v:?}")),
        token: get("token"),
        optional: flags.iter().any(|f| f == "optional"),
        multiple: flags.iter().any(|f| f == "multiple"),
        multiple_token: flags.iter().any(|f| f == "multiple_token"),
        args: field(v, "arguments")
            .map(|a| items(a).iter().map(arg_spec).collect())
            .unwrap_or_default(),
    }
}

/// One argument as redis-cli 7.0 shows it in `help` and in its hints
/// (`cliAddArgument`): `[`TOKEN name`]`, the name left out for a pure token.
fn render(arg: &ArgSpec) -> String {
    let repeat = match arg.kind.as_str() {
        "pure-token" => String::new(),
        "oneof" => arg.args.iter().map(render).collect::<Vec<_>>().join("|"),
        "block" => arg.args.iter().map(render).collect::<Vec<_>>().join(" "),
        _ => arg.name.clone(),
    };
    let mut token = arg.token.clone().unwrap_or_default();
    if !token.is_empty() && arg.kind != "pure-token" {
        token.push(' ');
    }
    let mut out = String::new();
    if arg.optional {
        out.push('[');
    }
    out.push_str(&token);
    out.push_str(&repeat);
    if arg.multiple {
        out.push_str(" [");
        if arg.multiple_token {
            out.push_str(&token);
        }
        out.push_str(&repeat);
        out.push_str(" ...]");
    }
    if arg.optional {
        out.push(']');
    }
    out
}

fn tokens_of(args: &[ArgSpec], out: &mut BTreeSet<String>) {
    for arg in args {
        if let Some(token) = &arg.token {
            out.insert(token.to_ascii_uppercase());
        }
        tokens_of(&arg.args, out);
    }
}

/// What the server says about one command.
#[derive(Debug)]
struct ServerCommand {
    synopsis: String,
    tokens: BTreeSet<String>,
    args: Vec<ArgSpec>,
    arity: i64,
    flags: BTreeSet<String>,
}

fn module_commands(flavor: Flavor, c: &mut Connection) -> BTreeSet<String> {
    let list = call(c, &["COMMAND", "LIST", "FILTERBY", "MODULE", "rlock"])
        .unwrap_or_else(|e| panic!("{flavor}: COMMAND LIST FILTERBY MODULE rlock: {e}"));
    items(&list)
        .iter()
        .filter_map(text)
        .map(|n| n.to_ascii_uppercase())
        .collect()
}

fn describe(flavor: Flavor, c: &mut Connection, name: &str) -> ServerCommand {
    let docs = call(c, &["COMMAND", "DOCS", name])
        .unwrap_or_else(|e| panic!("{flavor}: COMMAND DOCS {name}: {e}"));
    let entry = fields(&docs)
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("{flavor}: COMMAND DOCS {name} has no entry: {docs:?}"));
    let args: Vec<ArgSpec> = field(entry, "arguments")
        .map(|a| items(a).iter().map(arg_spec).collect())
        .unwrap_or_default();
    let mut words = vec![name.to_string()];
    words.extend(args.iter().map(render));
    let mut tokens = BTreeSet::new();
    tokens_of(&args, &mut tokens);

    let info = call(c, &["COMMAND", "INFO", name])
        .unwrap_or_else(|e| panic!("{flavor}: COMMAND INFO {name}: {e}"));
    let entry = items(&info)
        .first()
        .unwrap_or_else(|| panic!("{flavor}: COMMAND INFO {name}: {info:?}"));
    let entry = items(entry);
    let arity = match entry.get(1) {
        Some(Value::Int(n)) => *n,
        other => panic!("{flavor}: COMMAND INFO {name} arity: {other:?}"),
    };
    let flags = entry
        .get(2)
        .map(|f| items(f).iter().filter_map(text).collect())
        .unwrap_or_default();
    ServerCommand {
        synopsis: words.join(" "),
        tokens,
        args,
        arity,
        flags,
    }
}

/// Upper-case option keywords of a doc synopsis: its all-capital words after the name.
fn synopsis_tokens(synopsis: &str) -> BTreeSet<String> {
    synopsis
        .split(|c: char| c.is_whitespace() || "[]|".contains(c))
        .skip(1)
        .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase()))
        .map(str::to_string)
        .collect()
}

/// Checks the doc against one server; returns the problems found.
fn problems(flavor: Flavor, c: &mut Connection, doc: &str) -> Vec<String> {
    let mut found = Vec::new();
    let sections = doc_sections(doc);
    let flag_table = doc_flags(doc);
    let registered = module_commands(flavor, c);
    if registered.is_empty() {
        found.push("the server lists no rlock commands".to_string());
    }

    for name in &registered {
        let server = describe(flavor, c, name);
        // Arity 1: the command takes no argument (RLOCK.RESETSTAT).
        if server.args.is_empty() && server.arity != 1 {
            found.push(format!(
                "COMMAND DOCS {name} describes no arguments (did SetCommandInfo fail?)"
            ));
        }
        // Arity and COMMAND DOCS agree: required arguments, and a negative
        // arity exactly when optional ones follow.
        // A required `TOKEN value` (`RSEM.LEASE key LEASE ms`) is two words.
        let required = server
            .args
            .iter()
            .filter(|a| !a.optional)
            .map(|a| {
                if a.token.is_some() && a.kind != "pure-token" {
                    2
                } else {
                    1
                }
            })
            .sum::<i64>()
            + 1;
        let has_optional = server.args.iter().any(|a| a.optional || a.multiple);
        let want_arity = if has_optional { -required } else { required };
        if server.arity != want_arity {
            found.push(format!(
                "{name}: COMMAND INFO arity {} but COMMAND DOCS implies {want_arity}",
                server.arity
            ));
        }
        let Some(section) = sections.get(name) else {
            found.push(format!(
                "{name} is registered but docs/COMMANDS.md has no `### {}` section",
                server.synopsis
            ));
            continue;
        };
        if section.synopsis != server.synopsis {
            found.push(format!(
                "{name}: the doc's synopsis `{}` differs from COMMAND DOCS `{}`",
                section.synopsis, server.synopsis
            ));
        }
        let doc_tokens = synopsis_tokens(&section.synopsis);
        for token in server.tokens.difference(&doc_tokens) {
            found.push(format!(
                "{name}: option {token} is in COMMAND DOCS but not in the doc's synopsis"
            ));
        }
        for token in doc_tokens.difference(&server.tokens) {
            found.push(format!(
                "{name}: option {token} is in the doc's synopsis but not in COMMAND DOCS"
            ));
        }
        // Each option has its own entry: a list item that starts with the
        // option as the synopsis writes it, e.g. "- `LEASE ms`: …".
        for arg in server.args.iter().filter(|a| a.token.is_some()) {
            let form = render(arg);
            let form = form.trim_start_matches('[').trim_end_matches(']');
            let entry = format!("- `{form}`");
            if !section.body.lines().any(|l| l.starts_with(&entry)) {
                found.push(format!(
                    "{name}: the doc's section has no `{entry}…` entry describing the option"
                ));
            }
        }
        let mut server_flags = server.flags.clone();
        let doc_flags = flag_table.get(name).cloned().unwrap_or_default();
        if !flag_table.contains_key(name) {
            found.push(format!("{name} is missing from the doc's flags table"));
        } else if doc_flags != server_flags {
            found.push(format!(
                "{name}: the doc's flags {doc_flags:?} differ from COMMAND INFO {server_flags:?}"
            ));
        }
        // What lib.rs declares, whatever the doc says.
        server_flags.remove("module");
        let declared: &[&str] = match name.as_str() {
            "RLOCK.ACQUIRE" => &["write", "denyoom", "blocking"],
            // Keys counted by `numkeys`: the server finds them from the key spec.
            "RLOCK.MACQUIRE" => &["write", "denyoom", "blocking", "movablekeys"],
            "RLOCK.MRELEASE" => &["write", "movablekeys"],
            // The inner command's keys come from the command itself (`getkeys-api`).
            "RLOCK.GUARD" => &["write", "movablekeys"],
            "RLOCK.INFO" | "RLOCK.SCAN" | "RLOCK.WAITERS" | "RSEM.AVAILABLE" | "RLATCH.COUNT"
            | "RLOCK.TOP" => &["readonly"],
            "RLOCK.RESETSTAT" => &["admin"],
            "RSEM.ACQUIRE" | "RSEM.LEASE" => &["write", "denyoom", "blocking"],
            "RSEM.TRYSETPERMITS" | "RSEM.ADDPERMITS" | "RSEM.RELEASE" | "RLATCH.TRYSETCOUNT" => {
                &["write", "denyoom"]
            }
            "RLATCH.AWAIT" => &["write", "blocking"],
            _ => &["write"],
        };
        let declared: BTreeSet<String> = declared.iter().map(|f| f.to_string()).collect();
        if server_flags != declared {
            found.push(format!(
                "{name}: COMMAND INFO flags {server_flags:?}, declared {declared:?}"
            ));
        }
        if name == "RLOCK.ACQUIRE" && server.synopsis != ACQUIRE_SYNOPSIS {
            found.push(format!(
                "COMMAND DOCS gives `{}`, the README form is `{ACQUIRE_SYNOPSIS}`",
                server.synopsis
            ));
        }
    }

    for name in sections.keys() {
        if !registered.contains(name) {
            found.push(format!(
                "docs/COMMANDS.md documents {name}, which the server does not have"
            ));
        }
    }
    for name in doc_mentions(doc) {
        if !registered.contains(&name) {
            found.push(format!(
                "docs/COMMANDS.md mentions {name}, which the server does not have"
            ));
        }
    }
    for name in flag_table.keys() {
        if !registered.contains(name) {
            found.push(format!(
                "docs/COMMANDS.md's flags table lists {name}, which the server does not have"
            ));
        }
    }
    found
}

#[test]
fn command_reference_matches_the_server() {
    let doc = doc_text();
    for (flavor, _server, mut c) in servers() {
        let found = problems(flavor, &mut c, &doc);
        assert!(
            found.is_empty(),
            "{flavor}: docs/COMMANDS.md and the server disagree:\n  {}",
            found.join("\n  ")
        );
    }
}

/// The checks above catch a doc that drifts: each edit below must be reported.
#[test]
fn drifted_docs_are_caught() {
    let doc = doc_text();
    let synopsis = &format!("### {ACQUIRE_SYNOPSIS}");
    assert!(
        doc.contains(synopsis.as_str()),
        "docs/COMMANDS.md lacks `{synopsis}`"
    );
    let edits: [(&str, String); 7] = [
        (
            "an option left out of the synopsis",
            doc.replace(synopsis.as_str(), &synopsis.replace(" [FAIR]", "")),
        ),
        (
            "an argument named differently",
            doc.replace(
                synopsis.as_str(),
                &synopsis.replace("[LEASE ms]", "[LEASE lease]"),
            ),
        ),
        (
            "an option no longer optional",
            doc.replace(synopsis.as_str(), &synopsis.replace("[TOKEN]", "TOKEN")),
        ),
        (
            "an option the server lacks",
            doc.replace(synopsis.as_str(), &format!("{synopsis} [NX]")),
        ),
        (
            "an option never described",
            doc.replace("- `SESSION`: the hold ends", "- the hold ends"),
        ),
        (
            "a command the server lacks",
            format!("{doc}\n### RLOCK.UPGRADE key owner\n"),
        ),
        (
            "a flag missing",
            doc.replace(
                "| `RLOCK.ACQUIRE` | `write` `denyoom` `module` `blocking` |",
                "| `RLOCK.ACQUIRE` | `write` `denyoom` `module` |",
            ),
        ),
    ];
    let flavor = flavors()[0];
    let server = Server::start(flavor);
    let mut c = server.conn();
    assert!(
        problems(flavor, &mut c, &doc).is_empty(),
        "{flavor}: the doc as it is must pass"
    );
    for (what, edited) in edits {
        assert_ne!(
            edited, doc,
            "the edit `{what}` changed nothing: update this test"
        );
        assert!(
            !problems(flavor, &mut c, &edited).is_empty(),
            "{flavor}: a doc with {what} passed the checks"
        );
    }
}
