//! `rlock waiters NAME`: the calls blocked on a key, in serving order.

use clap::Args;
use rlock_client::Waiter;
use serde_json::{json, Value};

use super::{ask, print_json_array};
use crate::connect::ConnectArgs;
use crate::exit;
use crate::output;

const AFTER: &str = "\
Reads RLOCK.WAITERS: calls blocked in the server, in the order they will be served. Redisson
clients polling or listening on the unlock channel are not listed (see `rlock info`'s fair
queue). TIMEOUT is what is left of the call's wait; `forever` for none.

Examples:
  rlock waiters orders
  rlock waiters orders --json | jq '.[0].client_id'";

/// List the calls waiting for a lock, semaphore or latch, in the order they will be served.
#[derive(Debug, Args)]
#[command(after_help = AFTER)]
pub struct WaitersArgs {
    /// The key (lock, semaphore or latch).
    pub name: String,
    /// A JSON array: {client_id, client_name, kind, owner, permits, session, timeout_ms,
    /// waited_ms} in serving order.
    #[arg(long)]
    pub json: bool,
}

/// One element of `--json`'s array.
fn waiter_json(w: &Waiter) -> Value {
    json!({
        "client_id": w.client_id,
        "client_name": w.client_name,
        "kind": w.kind,
        "owner": w.owner,
        "permits": w.permits,
        "session": w.session,
        "timeout_ms": w.timeout_ms,
        "waited_ms": w.waited_ms,
    })
}

pub async fn run(conn: &ConnectArgs, args: WaitersArgs) -> u8 {
    let name = &args.name;
    let what = format!("waiters of {name:?}");
    let waiters = match ask(conn, what, |l| async move { l.waiters(name).await }).await {
        Ok(w) => w,
        Err(code) => return code,
    };
    if args.json {
        return print_json_array(waiters.iter().map(waiter_json));
    }
    if waiters.is_empty() {
        println!("nobody waits for {:?}", args.name);
        return exit::OK;
    }
    let rows: Vec<Vec<String>> = waiters
        .iter()
        .enumerate()
        .map(|(i, w)| {
            vec![
                (i + 1).to_string(),
                w.client_id.to_string(),
                if w.client_name.is_empty() {
                    "-".into()
                } else {
                    w.client_name.clone()
                },
                w.kind.clone(),
                w.owner.clone().unwrap_or_else(|| "-".into()),
                w.permits.map_or("-".into(), |p| p.to_string()),
                if w.session { "yes".into() } else { "no".into() },
                output::millis(w.waited_ms),
                if w.timeout_ms < 0 {
                    "forever".into()
                } else {
                    output::millis(w.timeout_ms as u64)
                },
            ]
        })
        .collect();
    print!(
        "{}",
        output::table(
            &["#", "CLIENT", "NAME", "KIND", "OWNER", "PERMITS", "SESSION", "WAITED", "TIMEOUT"],
            &rows
        )
    );
    exit::OK
}
