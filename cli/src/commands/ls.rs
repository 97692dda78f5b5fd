//! `rlock ls [PATTERN]`: the locks of the database.

use clap::{Args, ValueEnum};
use rlock_client::ScannedLock;
use serde_json::{json, Value};

use super::{ask, holders_json, print_json_array};
use crate::connect::ConnectArgs;
use crate::exit;
use crate::output;

const AFTER: &str = "\
Follows RLOCK.SCAN to the end (on every primary with --cluster): locks laid out as Redisson's
reentrant or read-write lock. Semaphores and latches are not locks and are not listed. Like SCAN,
it walks the whole database in steps: on a large one it takes a while, never long at a time.

Examples:
  rlock ls
  rlock ls 'jobs:*' --type rwlock
  rlock ls --json | jq -r '.[] | select(.pttl_ms == -1) | .key'";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Kind {
    /// Reentrant locks.
    Lock,
    /// Read-write locks.
    Rwlock,
}

/// List the locks whose names match PATTERN, with holders, leases and waiters.
#[derive(Debug, Args)]
#[command(after_help = AFTER)]
pub struct LsArgs {
    /// A glob, as SCAN's MATCH takes it (`app:*`, `job-?`). Default: every lock.
    pub pattern: Option<String>,
    /// Only locks of this type.
    #[arg(long = "type", value_enum)]
    pub kind: Option<Kind>,
    /// A JSON array: {key, type, mode, holders [{owner, count}], pttl_ms, waiters}.
    #[arg(long)]
    pub json: bool,
}

/// One element of `--json`'s array.
fn lock_json(l: &ScannedLock) -> Value {
    json!({
        "key": l.key,
        "type": l.kind,
        "mode": l.mode,
        "holders": holders_json(&l.holders),
        "pttl_ms": l.pttl,
        "waiters": l.waiters,
    })
}

pub async fn run(conn: &ConnectArgs, args: LsArgs) -> u8 {
    let kind = args.kind.map(|k| match k {
        Kind::Lock => "lock",
        Kind::Rwlock => "rwlock",
    });
    let pattern = args.pattern.as_deref();
    let mut found = match ask(conn, "listing locks", |l| async move {
        l.scan(pattern, kind).await
    })
    .await
    {
        Ok(f) => f,
        Err(code) => return code,
    };
    found.sort_by(|a, b| a.key.cmp(&b.key));
    if args.json {
        return print_json_array(found.iter().map(lock_json));
    }
    if found.is_empty() {
        println!("no locks");
        return exit::OK;
    }
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|l| {
            vec![
                l.key.clone(),
                match &l.mode {
                    Some(mode) => format!("{} ({mode})", l.kind),
                    None => l.kind.clone(),
                },
                output::lease_left(l.pttl),
                l.waiters.to_string(),
                output::holders(&l.holders),
            ]
        })
        .collect();
    print!(
        "{}",
        output::table(&["KEY", "TYPE", "LEASE", "WAITERS", "HOLDERS"], &rows)
    );
    exit::OK
}
