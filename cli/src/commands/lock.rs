//! `rlock lock NAME -- CMD`: run CMD while holding a lock.

use clap::Args;
use rlock_client::{Error, Lock};

use super::{leased_client, worded, EndArgs, Holding, WaitArgs, Worded};
use crate::child::{self, GivenBack};
use crate::connect::ConnectArgs;

const AFTER: &str = "\
CMD runs in a process group of its own with RLOCK_KEY (the lock's name), RLOCK_OWNER (this run's
owner id) and RLOCK_TOKEN (the fencing token: it grows each time the lock changes hands; pass it
to what CMD writes, so a stale holder's writes can be refused) in its environment.

The lease (30 s unless --lease) is renewed every third of it while CMD runs. The lock counts as
lost when the server refuses a renewal (force-released, deleted, expired) or when renewals fail
until the lease runs out (server unreachable that long). A server that goes away and comes back,
or fails over, within the lease loses nothing. Once lost: SIGTERM to CMD's process group, SIGKILL
after --kill-after, a message on stderr, exit 70.

SIGINT, SIGTERM and SIGHUP sent to rlock go to CMD's process group; the lock is released when
CMD exits, and rlock exits with CMD's status. CMD is not in the terminal's foreground group: it
cannot read from the terminal (give it input by redirection).

Examples:
  # crontab: the nightly report runs on one host at a time; others give up at once
  0 2 * * *  rlock -u redis://locks.internal:6379 lock -w 0 nightly-report -- /opt/report.sh
  # wait up to 5 minutes for the migration lock; exit 3 if not taken in time
  rlock lock --wait 5m -E 3 db-migrate -- ./migrate.sh
  # readers share, a writer is alone
  rlock lock --read catalog -- ./export-catalog.sh
  rlock lock --write catalog -- ./rebuild-catalog.sh";

const HELP: Worded = [
    "How long to wait for the lock, in the server (arrival order). Default: forever; 0: try once",
    "The lease, renewed every third of it while CMD runs: how long the lock outlives a \
     crashed rlock. Default 30s",
    "Exit with CODE instead of 75 when the lock was not acquired within --wait",
    "After the lock is lost and CMD got SIGTERM, SIGKILL it after this long",
];

/// Run CMD while holding a lock (released when CMD exits).
#[derive(Debug, Args)]
#[command(after_help = AFTER, mut_args(|a| worded(a, &HELP)))]
pub struct LockArgs {
    /// The lock's name (its key; Redisson's RLock name).
    pub name: String,

    #[command(flatten)]
    pub waits: WaitArgs,

    /// A fair lock: waiters (Redisson's too) are served strictly in arrival order.
    #[arg(long, conflicts_with_all = ["read", "write"])]
    pub fair: bool,

    /// Take the read side of a read-write lock (Redisson's RReadWriteLock): readers share.
    #[arg(long, conflicts_with = "write")]
    pub read: bool,

    /// Take the write side of a read-write lock: alone.
    #[arg(long)]
    pub write: bool,

    #[command(flatten)]
    pub ends: EndArgs,

    /// The command to run, and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// CMD's run under the lock: `Err(status)` when `rlock` exits before CMD runs.
pub async fn run(conn: &ConnectArgs, args: LockArgs) -> Result<u8, u8> {
    let locks = leased_client(conn, args.waits.lease)?;
    let mut lock = if args.read || args.write {
        let rw = locks.read_write(args.name.as_str());
        if args.read {
            rw.read()
        } else {
            rw.write()
        }
    } else {
        locks.lock(args.name.as_str())
    };
    lock = lock.fenced();
    if args.fair {
        lock = lock.fair();
    }
    lock = args.waits.apply(lock, Lock::wait_forever, Lock::wait);
    let mut holding = Holding::start(&args.waits, &args.ends)?;
    let what = format!("lock {:?}", args.name);
    let refused = |within| format!("{what} not acquired{within}: held by someone else");
    let guard = holding.acquire(&what, lock.acquire(), refused).await?;
    let mut env = vec![
        ("RLOCK_KEY".to_owned(), args.name.clone()),
        ("RLOCK_OWNER".to_owned(), lock.owner().to_owned()),
    ];
    if let Some(token) = guard.token() {
        env.push(("RLOCK_TOKEN".to_owned(), token.to_string()));
    }
    let ended = holding.run(&args.command, &env, guard.lost()).await;
    let status = child::exit_status(ended, &what, guard, |guard| async {
        match guard.release().await {
            Ok(_) => GivenBack::Done,
            Err(e @ (Error::Lost { .. } | Error::NotHeld { .. })) => {
                GivenBack::NotHeld(format!("{what} was no longer held when CMD exited: {e}"))
            }
            Err(e) => GivenBack::Failed(format!(
                "{what}: the release failed ({e}); the lock ends with its lease"
            )),
        }
    });
    Ok(status.await)
}
