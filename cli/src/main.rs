//! `rlock`: run a command under a distributed lock, look at locks and waiters, watch
//! contention. Argument parsing and terminal output only: every lock verb goes through the
//! `rlock_client` crate, so the tool and the library never disagree.

mod child;
mod commands;
mod connect;
mod duration;
mod exit;
mod output;
mod top;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use commands::{elect, guard, info, lock, ls, release, semaphore, top as top_cmd, waiters};
use connect::ConnectArgs;

const ABOUT: &str = "Distributed locks from a shell, on an rlock server (Redis or Valkey with the \
rlock module).";

const EXAMPLES: &str = "\
Examples:
  # a cron job that never runs twice at once, on any host; gives up after 10 s
  rlock lock -w 10s nightly-report -- /usr/local/bin/report.sh
  # at most 4 renders at a time
  rlock semaphore render-slots --permits 4 -- ./render.sh scene.blend
  # one scheduler at a time among the hosts; the others take over when it stops
  rlock elect scheduler \"$(hostname)\" -- /opt/scheduler/run
  # who holds it, who waits
  rlock info nightly-report; rlock waiters nightly-report --json
  # every lock under app:, then a live view of contention
  rlock ls 'app:*'; rlock top
  # one write that lands only while the lock is held (inside a CMD of rlock lock)
  rlock guard nightly-report -- SET report:{nightly-report} done";

#[derive(Debug, Parser)]
#[command(
    name = "rlock",
    version,
    about = ABOUT,
    after_help = format!("{EXAMPLES}\n\n{}", exit::HELP),
    propagate_version = true
)]
struct Cli {
    #[command(flatten)]
    conn: ConnectArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Lock(lock::LockArgs),
    Semaphore(semaphore::SemaphoreArgs),
    Elect(elect::ElectArgs),
    Info(info::InfoArgs),
    Waiters(waiters::WaitersArgs),
    Ls(ls::LsArgs),
    Release(release::ReleaseArgs),
    Top(top_cmd::TopArgs),
    Guard(guard::GuardArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            });
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rlock: cannot start: {e}");
            return ExitCode::from(exit::UNAVAILABLE);
        }
    };
    let code = runtime.block_on(run(cli));
    // Lets a cancelled wait finish its clean-up; never waits long for anything else.
    runtime.shutdown_timeout(Duration::from_millis(300));
    ExitCode::from(code)
}

async fn run(cli: Cli) -> u8 {
    let conn = &cli.conn;
    if let Err(e) = conn.check() {
        eprintln!("rlock: {e}");
        return exit::USAGE;
    }
    match cli.command {
        // These return `Err(status)` when rlock exits before CMD runs.
        Command::Lock(args) => lock::run(conn, args).await.unwrap_or_else(|early| early),
        Command::Semaphore(args) => semaphore::run(conn, args)
            .await
            .unwrap_or_else(|early| early),
        Command::Elect(args) => elect::run(conn, args).await.unwrap_or_else(|early| early),
        Command::Info(args) => info::run(conn, args).await,
        Command::Waiters(args) => waiters::run(conn, args).await,
        Command::Ls(args) => ls::run(conn, args).await,
        Command::Release(args) => release::run(conn, args).await,
        Command::Top(args) => top_cmd::run(conn, args).await,
        Command::Guard(args) => guard::run(conn, args).await,
    }
}
