//! `rlock info NAME`: who holds a lock, its lease, who waits.

use clap::Args;
use rlock_client::LockKind;
use serde_json::json;

use super::{ask, holders_json};
use crate::connect::ConnectArgs;
use crate::exit;
use crate::output;

const AFTER: &str = "\
Reads RLOCK.INFO. A key that is not a plain lock is reported as what it is: a read-write lock
(with its mode), another hash, or another type.

Examples:
  rlock info nightly-report
  rlock info nightly-report --json | jq .holders";

/// Show who holds a lock, its lease, its fencing counter and who waits.
#[derive(Debug, Args)]
#[command(after_help = AFTER)]
pub struct InfoArgs {
    /// The lock's name.
    pub name: String,
    /// One JSON object: key, kind, mode, holders [{owner, count}], pttl_ms, queue, blocked,
    /// token.
    #[arg(long)]
    pub json: bool,
}

fn kind_name(kind: &LockKind) -> (&'static str, Option<String>) {
    match kind {
        LockKind::Free => ("free", None),
        LockKind::Reentrant => ("lock", None),
        LockKind::ReadWrite { mode } => ("rwlock", Some(mode.clone())),
        LockKind::OtherHash => ("other-hash", None),
        LockKind::NotALock { key_type } => ("not-a-lock", Some(key_type.clone())),
        _ => ("unknown", None),
    }
}

pub async fn run(conn: &ConnectArgs, args: InfoArgs) -> u8 {
    let name = &args.name;
    let info = match ask(conn, format!("lock {name:?}"), |l| async move {
        l.info(name).await
    })
    .await
    {
        Ok(i) => i,
        Err(code) => return code,
    };
    let (kind, detail) = kind_name(&info.kind);
    if args.json {
        let v = json!({
            "key": args.name,
            "kind": kind,
            "mode": if matches!(info.kind, LockKind::ReadWrite { .. }) { detail.clone() } else { None },
            "type": if matches!(info.kind, LockKind::NotALock { .. }) { detail.clone() } else { None },
            "holders": holders_json(&info.holders),
            "pttl_ms": info.pttl,
            "queue": info.queue,
            "blocked": info.blocked,
            "token": info.token,
        });
        println!("{v}");
        return exit::OK;
    }
    let kind_text = match (&info.kind, &detail) {
        (LockKind::ReadWrite { .. }, Some(mode)) => format!("read-write lock, {mode} mode"),
        (LockKind::NotALock { .. }, Some(t)) => format!("not a lock (a {t})"),
        (LockKind::OtherHash, _) => "not a lock (a hash of other fields)".to_owned(),
        (LockKind::Free, _) => "free (no key)".to_owned(),
        _ => "lock".to_owned(),
    };
    let mut rows = vec![
        ("key", args.name.clone()),
        ("kind", kind_text),
        ("holders", output::holders(&info.holders)),
        ("lease", output::lease_left(info.pttl)),
        ("blocked", info.blocked.to_string()),
    ];
    if !info.queue.is_empty() {
        rows.push(("fair queue", info.queue.join(", ")));
    }
    rows.push((
        "token",
        info.token.map_or("-".to_owned(), |t| t.to_string()),
    ));
    for (name, value) in rows {
        println!("{name:<11} {value}");
    }
    exit::OK
}
