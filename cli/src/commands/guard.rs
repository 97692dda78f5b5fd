//! `rlock guard NAME -- COMMAND [ARG...]`: run one Redis command only while the lock is held
//! (RLOCK.GUARD), from a shell, typically from the CMD that `rlock lock` or `rlock elect` runs.

use clap::Args;
use rlock_client::redis::{self, Value};
use rlock_client::Endpoint;
use serde_json::{json, Value as Json};

use super::unavailable;
use crate::connect::ConnectArgs;
use crate::exit;

const AFTER: &str = "\
Sends RLOCK.GUARD NAME OWNER [READ|WRITE] [TOKEN N] CALL COMMAND ARG...: the server runs COMMAND
only if OWNER holds NAME at that moment (and, with --token, N is still the lock's newest fencing
token), in the same turn as the check. A holder that paused past its lease is refused, and its
write never lands. COMMAND runs as the connecting user (ACL), and replicates as itself.

Inside a CMD of `rlock lock` the owner and token come from RLOCK_OWNER and RLOCK_TOKEN; inside
`rlock elect` pass --owner \"$RLOCK_VALUE\" (the token is RLOCK_TOKEN, the term).

The reply is printed as redis-cli prints it with --no-raw off: integers and strings as they are,
(nil) for null, one line per element of an array. Exit 75 when the lock is not held or the token
is stale (COMMAND did not run); 69 when the server refuses COMMAND (its error on stderr).

Examples:
  rlock lock nightly -- sh -c 'rlock guard nightly -- SET report:{nightly} done'
  rlock guard orders --owner alice --token 7 -- HSET order:{orders}:1 state paid
  rlock elect leader -- sh -c 'rlock guard leader --owner \"$RLOCK_VALUE\" -- SET config:{leader} v2'";

/// Run one Redis command only while a lock is held (RLOCK.GUARD).
#[derive(Debug, Args)]
#[command(after_help = AFTER)]
pub struct GuardArgs {
    /// The lock's name.
    pub name: String,
    /// The holder's owner id (as `rlock lock` gives its CMD in RLOCK_OWNER).
    #[arg(long, env = "RLOCK_OWNER")]
    pub owner: String,
    /// The hold's fencing token: refused unless still the lock's newest.
    #[arg(long, env = "RLOCK_TOKEN")]
    pub token: Option<u64>,
    /// A read hold of a read-write lock.
    #[arg(long, conflicts_with = "write")]
    pub read: bool,
    /// The write hold of a read-write lock.
    #[arg(long)]
    pub write: bool,
    /// One JSON object: {key, owner, ran, reply} (reply as JSON; null for a null reply).
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The RLOCK.GUARD call `args` make.
pub fn guard_command(args: &GuardArgs) -> redis::Cmd {
    let mut cmd = redis::cmd("RLOCK.GUARD");
    cmd.arg(&args.name).arg(&args.owner);
    if args.read {
        cmd.arg("READ");
    } else if args.write {
        cmd.arg("WRITE");
    }
    if let Some(token) = args.token {
        cmd.arg("TOKEN").arg(token);
    }
    cmd.arg("CALL").arg(&args.command);
    cmd
}

pub async fn run(conn: &ConnectArgs, args: GuardArgs) -> u8 {
    if args.owner.is_empty() || args.owner.len() > 1024 {
        eprintln!("rlock: --owner must be 1 to 1024 bytes");
        return exit::USAGE;
    }
    let endpoint = match conn.endpoint() {
        Ok(e) => e,
        Err(e) => return unavailable(e),
    };
    let cmd = guard_command(&args);
    let reply: redis::RedisResult<Value> = match endpoint {
        Endpoint::Server(client) => match client.get_multiplexed_async_connection().await {
            Ok(mut c) => cmd.query_async(&mut c).await,
            Err(e) => Err(e),
        },
        Endpoint::Cluster(cluster) => match cluster.get_async_connection().await {
            Ok(mut c) => cmd.query_async(&mut c).await,
            Err(e) => Err(e),
        },
        #[allow(unreachable_patterns)]
        _ => return unavailable("this kind of endpoint is not supported by rlock guard"),
    };
    match reply {
        Ok(value) => {
            if args.json {
                let v = json!({"key": args.name, "owner": args.owner, "ran": true, "reply": to_json(&value)});
                println!("{v}");
            } else {
                for line in lines(&value) {
                    println!("{line}");
                }
            }
            exit::OK
        }
        Err(e) if matches!(e.code(), Some("NOTHELD") | Some("STALETOKEN")) => {
            if args.json {
                let v = json!({"key": args.name, "owner": args.owner, "ran": false, "error": error_line(&e)});
                println!("{v}");
            }
            eprintln!(
                "rlock: guard {:?}: {}; the command did not run",
                args.name,
                error_line(&e)
            );
            exit::NOT_ACQUIRED
        }
        Err(e) => unavailable(format!("guard {:?}: {}", args.name, error_line(&e))),
    }
}

/// `CODE detail`, as the server sent it.
fn error_line(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => e.to_string(),
    }
}

/// The reply as lines: one per scalar, arrays flattened in order.
pub fn lines(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) | Value::Set(items) => items.iter().flat_map(lines).collect(),
        Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| lines(k).into_iter().chain(lines(v)))
            .collect(),
        other => vec![scalar(other)],
    }
}

fn scalar(value: &Value) -> String {
    match value {
        Value::Nil => "(nil)".into(),
        Value::Int(n) => n.to_string(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Double(d) => d.to_string(),
        Value::Boolean(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

fn to_json(value: &Value) -> Json {
    match value {
        Value::Nil => Json::Null,
        Value::Int(n) => json!(n),
        Value::Array(items) | Value::Set(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Map(pairs) => Json::Array(
            pairs
                .iter()
                .map(|(k, v)| Json::Array(vec![to_json(k), to_json(v)]))
                .collect(),
        ),
        other => Json::String(scalar(other)),
    }
}
