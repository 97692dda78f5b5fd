//! One file per subcommand: its arguments beside the code that uses them.

pub mod elect;
pub mod guard;
pub mod info;
pub mod lock;
pub mod ls;
pub mod release;
pub mod semaphore;
pub mod top;
pub mod waiters;

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use clap::{Arg, Args};
use rlock_client::Locks;
use serde_json::{json, Value};

use crate::child::{self, Ended, Signals};
use crate::connect::ConnectArgs;
use crate::duration;
use crate::exit;

/// How `lock`, `semaphore` and `elect` wait for what they hold and lease it. Each words the
/// help for what it holds ([`worded`]); the help texts set here are replaced.
#[derive(Debug, Args)]
pub struct WaitArgs {
    #[arg(short, long, value_name = "DUR", value_parser = duration::parse, help = "")]
    pub wait: Option<Duration>,

    #[arg(short, long, value_name = "DUR", value_parser = duration::parse, help = "")]
    pub lease: Option<Duration>,
}

impl WaitArgs {
    /// `handle` waiting as --wait says: without it, until granted (`forever`); 0, one try
    /// (the handle as it is); else up to the wait (`up_to`).
    pub fn apply<H>(&self, handle: H, forever: fn(H) -> H, up_to: fn(H, Duration) -> H) -> H {
        match self.wait {
            None => forever(handle),
            Some(d) if d.is_zero() => handle,
            Some(d) => up_to(handle, d),
        }
    }
}

/// How `lock`, `semaphore` and `elect` end: the exit status of a refusal, and how long CMD
/// has between SIGTERM and SIGKILL once what it held is lost. Worded by each as [`WaitArgs`].
#[derive(Debug, Args)]
pub struct EndArgs {
    #[arg(
        short = 'E',
        long = "conflict-exit-code",
        value_name = "CODE",
        default_value_t = exit::NOT_ACQUIRED,
        help = ""
    )]
    pub conflict_exit_code: u8,

    #[arg(long, value_name = "DUR", value_parser = duration::parse, default_value = "10s", help = "")]
    pub kill_after: Duration,
}

/// The help of --wait, --lease, -E and --kill-after (in that order) worded for what a command
/// holds.
pub type Worded = [&'static str; 4];

/// `arg` with the help `help` gives it, when it is one of [`WaitArgs`] or [`EndArgs`]: each
/// command applies it to all its arguments (`#[command(mut_args(...))]`).
pub fn worded(arg: Arg, help: &Worded) -> Arg {
    let ids = ["wait", "lease", "conflict_exit_code", "kill_after"];
    match ids.iter().position(|id| arg.get_id() == *id) {
        Some(at) => arg.help(help[at]),
        None => arg,
    }
}

/// Says what failed on stderr; the exit status for a server that failed us.
pub fn unavailable(what: impl Display) -> u8 {
    eprintln!("rlock: {what}");
    exit::UNAVAILABLE
}

/// The client for the server `conn` names (leases of `lease`, the client's default without),
/// or the exit status when it names none.
pub fn client(conn: &ConnectArgs, lease: Option<Duration>) -> Result<Locks, u8> {
    conn.locks(lease).map_err(unavailable)
}

/// A lease too short to renew in time is refused before anything is sent.
pub fn check_lease(lease: Option<Duration>) -> Result<(), u8> {
    match lease {
        Some(l) if l < Duration::from_millis(100) => {
            eprintln!("rlock: --lease must be at least 100ms");
            Err(exit::USAGE)
        }
        _ => Ok(()),
    }
}

/// The client for a run of CMD that holds something with `lease` (refused when too short to
/// renew in time), or the exit status.
pub fn leased_client(conn: &ConnectArgs, lease: Option<Duration>) -> Result<Locks, u8> {
    check_lease(lease)?;
    client(conn, lease)
}

/// One question to the server `conn` names: the answer, or the exit status once a message
/// said what failed (`what` names the thing asked about).
pub async fn ask<T, E: Display, F: Future<Output = Result<T, E>>>(
    conn: &ConnectArgs,
    what: impl Display,
    question: impl FnOnce(Locks) -> F,
) -> Result<T, u8> {
    question(client(conn, None)?)
        .await
        .map_err(|e| unavailable(format!("{what}: {e}")))
}

/// A run of CMD while something is held: the signals caught for it (SIGINT, SIGTERM and
/// SIGHUP), and how it waits and ends. Its calls return `Err(status)` when `rlock` exits
/// before CMD runs, once a message said why.
pub struct Holding {
    signals: Signals,
    wait: Option<Duration>,
    conflict: u8,
    kill_after: Duration,
}

impl Holding {
    /// Catches the signals for CMD.
    pub fn start(waits: &WaitArgs, ends: &EndArgs) -> Result<Holding, u8> {
        let signals =
            Signals::catch().map_err(|e| unavailable(format!("cannot catch signals: {e}")))?;
        Ok(Holding {
            signals,
            wait: waits.wait,
            conflict: ends.conflict_exit_code,
            kill_after: ends.kill_after,
        })
    }

    /// Waits for `acquire` (`what` is acquired) as [`acquire_or_signal`] does. Nothing
    /// acquired within --wait is -E's status, once `refused` (given ` within WAIT`, or nothing
    /// without a wait) said why; an error is the caller's to read.
    pub async fn acquire_or_refuse<T, E>(
        &mut self,
        what: &str,
        acquire: impl Future<Output = Result<Option<T>, E>>,
        refused: impl FnOnce(String) -> String,
    ) -> Result<Result<T, E>, u8> {
        match acquire_or_signal(&mut self.signals, what, acquire).await? {
            Ok(Some(held)) => Ok(Ok(held)),
            Ok(None) => {
                let within = self
                    .wait
                    .map_or("".to_owned(), |w| format!(" within {}", duration::show(w)));
                eprintln!("rlock: {}; CMD not run", refused(within));
                Err(self.conflict)
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// [`Holding::acquire_or_refuse`] where an error means the server failed us.
    pub async fn acquire<T, E: Display>(
        &mut self,
        what: &str,
        acquire: impl Future<Output = Result<Option<T>, E>>,
        refused: impl FnOnce(String) -> String,
    ) -> Result<T, u8> {
        let acquired = self.acquire_or_refuse(what, acquire, refused).await?;
        acquired.map_err(|e| unavailable(format!("{what}: {e}")))
    }

    /// Runs CMD (`command`, with `env`) until it exits or `lost` completes: see [`child::run`].
    pub async fn run(
        &mut self,
        command: &[String],
        env: &[(String, String)],
        lost: impl Future<Output = rlock_client::Error>,
    ) -> Ended {
        child::run(command, env, &mut self.signals, lost, self.kill_after).await
    }
}

/// Prints `list` as one JSON array: the exit status of a `--json` listing.
pub fn print_json_array(list: impl Iterator<Item = Value>) -> u8 {
    println!("{}", Value::Array(list.collect()));
    exit::OK
}

/// A lock's holders as JSON: `[{owner, count}]`.
pub fn holders_json(holders: &[(String, u64)]) -> Value {
    holders
        .iter()
        .map(|(owner, count)| json!({"owner": owner, "count": count}))
        .collect()
}

/// Waits for `acquire` unless SIGINT/SIGTERM/SIGHUP comes first: then the wait is given up
/// (the client ends it in the server) and the status is 128 + the signal.
pub async fn acquire_or_signal<T>(
    signals: &mut Signals,
    what: &str,
    acquire: impl Future<Output = T>,
) -> Result<T, u8> {
    tokio::select! {
        r = acquire => Ok(r),
        sig = signals.recv() => {
            eprintln!("rlock: {sig} while waiting for {what}; gave up the wait");
            Err(exit::SIGNAL_BASE + sig as u8)
        }
    }
}
