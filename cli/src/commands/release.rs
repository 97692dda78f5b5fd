//! `rlock release --force NAME`: free a lock whoever holds it.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;
use serde_json::json;

use super::{client, unavailable};
use crate::connect::ConnectArgs;
use crate::exit;
use crate::output;

const AFTER: &str = "\
RLOCK.FORCERELEASE: the lock is freed whatever its holders think, and the next waiter gets it at
once. A holder running under `rlock lock` notices at its next renewal (a third of its lease) and
stops its command (exit 70); other holders may go on, believing they hold it. The last resort
for a holder that is gone with a long lease.

It asks for confirmation on a terminal; --yes does not ask. Without --yes and without a terminal
on stdin it refuses (exit 64), so a script never frees a lock by accident.

Examples:
  rlock release --force nightly-report
  rlock release --force --yes nightly-report   # from a script";

/// Free a lock whoever holds it (RLOCK.FORCERELEASE).
#[derive(Debug, Args)]
#[command(after_help = AFTER)]
pub struct ReleaseArgs {
    /// The lock's name.
    pub name: String,
    /// Required: this frees a lock someone else holds.
    #[arg(long, required = true)]
    pub force: bool,
    /// Do not ask for confirmation.
    #[arg(short, long)]
    pub yes: bool,
    /// One JSON object: {key, released}.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(conn: &ConnectArgs, args: ReleaseArgs) -> u8 {
    let locks = match client(conn, None) {
        Ok(l) => l,
        Err(code) => return code,
    };
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            eprintln!(
                "rlock: release --force {:?}: stdin is not a terminal, so nobody can confirm; \
                 add --yes to release it anyway",
                args.name
            );
            return exit::USAGE;
        }
        let info = match locks.info(&args.name).await {
            Ok(i) => i,
            Err(e) => return unavailable(format!("lock {:?}: {e}", args.name)),
        };
        eprint!(
            "Force-release {:?} (held by {}, {}, {} waiting)? [y/N] ",
            args.name,
            output::holders(&info.holders),
            output::lease_left(info.pttl),
            info.blocked
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            eprintln!("rlock: not released");
            return exit::NO;
        }
    }
    let released = match locks.force_release(&args.name).await {
        Ok(r) => r,
        Err(e) => return unavailable(format!("lock {:?}: {e}", args.name)),
    };
    if args.json {
        println!("{}", json!({"key": args.name, "released": released}));
    } else if released {
        println!("released {:?}", args.name);
    } else {
        println!("{:?} was not locked", args.name);
    }
    exit::OK
}
