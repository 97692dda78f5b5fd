//! `rlock semaphore NAME --permits N -- CMD`: run CMD while holding one permit of N.

use clap::Args;

use rlock_client::PermitSemaphore;

use super::{check_lease, client, unavailable, worded, EndArgs, Holding, WaitArgs, Worded};
use crate::child::{self, GivenBack};
use crate::connect::ConnectArgs;
use crate::exit;

const AFTER: &str = "\
One leased permit of Redisson's permit-expiring semaphore (RPermitExpirableSemaphore) NAME is
held while CMD runs, its lease renewed every third of it; the semaphore is given N permits if it
has none yet (an existing count is kept: change it with RSEM.ADDPERMITS). CMD gets RLOCK_KEY and
RLOCK_PERMIT (the permit's id) in its environment. Signals, a lost permit (lease ran out,
permit given back by someone else, semaphore deleted) and the exit status are as for `rlock lock`.

Examples:
  # at most 4 renders at once across the farm
  rlock semaphore render-slots --permits 4 -- ./render.sh scene.blend
  # at most 2 backups at once; give up after a minute
  rlock semaphore backups --permits 2 --wait 1m -- ./backup.sh";

const HELP: Worded = [
    "How long to wait for a permit, in the server (arrival order). Default: forever; 0: try \
     once",
    "The permit's lease, renewed every third of it while CMD runs. Default 30s",
    "Exit with CODE instead of 75 when no permit came within --wait",
    "After the permit is lost and CMD got SIGTERM, SIGKILL it after this long",
];

/// Run CMD while holding one permit of a semaphore of N permits.
#[derive(Debug, Args)]
#[command(after_help = AFTER, mut_args(|a| worded(a, &HELP)))]
pub struct SemaphoreArgs {
    /// The semaphore's name (its key).
    pub name: String,

    /// The number of permits, set if the semaphore has none yet.
    #[arg(short, long, value_name = "N")]
    pub permits: u32,

    #[command(flatten)]
    pub waits: WaitArgs,

    #[command(flatten)]
    pub ends: EndArgs,

    /// The command to run, and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// CMD's run under a permit: `Err(status)` when `rlock` exits before CMD runs.
pub async fn run(conn: &ConnectArgs, args: SemaphoreArgs) -> Result<u8, u8> {
    check_lease(args.waits.lease)?;
    if args.permits == 0 {
        eprintln!("rlock: --permits must be at least 1");
        return Err(exit::USAGE);
    }
    let locks = client(conn, args.waits.lease)?;
    let what = format!("a permit of semaphore {:?}", args.name);
    let mut sem = locks.permit_semaphore(args.name.as_str());
    if let Err(e) = sem.try_set_permits(args.permits).await {
        return Err(unavailable(format!("semaphore {:?}: {e}", args.name)));
    }
    sem = args
        .waits
        .apply(sem, PermitSemaphore::wait_forever, PermitSemaphore::wait);
    let mut holding = Holding::start(&args.waits, &args.ends)?;
    let refused = |within| format!("no permit of semaphore {:?}{within}: all taken", args.name);
    let permit = holding.acquire(&what, sem.acquire(), refused).await?;
    let env = vec![
        ("RLOCK_KEY".to_owned(), args.name.clone()),
        ("RLOCK_PERMIT".to_owned(), permit.id().to_owned()),
    ];
    let ended = holding.run(&args.command, &env, permit.lost()).await;
    let status = child::exit_status(ended, &what, permit, |permit| async {
        match permit.release().await {
            Ok(true) => GivenBack::Done,
            Ok(false) => GivenBack::NotHeld(format!(
                "{what} was no longer held when CMD exited (its lease ended or someone gave it \
                 back)"
            )),
            Err(e) if e.is_lost() => GivenBack::NotHeld(format!("{what} was lost: {e}")),
            Err(e) => GivenBack::Failed(format!(
                "{what}: giving it back failed ({e}); it returns with its lease"
            )),
        }
    });
    Ok(status.await)
}
