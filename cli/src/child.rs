//! Running CMD while a lock, permit or leadership is held: CMD in a process group of its own,
//! SIGINT/SIGTERM/SIGHUP to `rlock` passed on to that group, and the group stopped (SIGTERM,
//! then SIGKILL after `--kill-after`) when the hold is lost.

use std::future::Future;
use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::signal::unix::{signal, Signal as Stream, SignalKind};

use crate::duration;
use crate::exit;

/// How CMD's run ended.
pub enum Ended {
    /// CMD exited (or was killed by a signal that was not ours): `rlock` exits with this.
    Exited(u8),
    /// The hold was lost while CMD ran; CMD was stopped. The reason, for the message.
    Lost(String),
    /// CMD could not be started: the exit code and the message.
    NotStarted(u8, String),
}

/// How giving the hold back went once CMD exited.
pub enum GivenBack {
    Done,
    /// The hold had ended already: this message, and `rlock` exits 70.
    NotHeld(String),
    /// The give-back itself failed (the hold ends with its lease): this message, and CMD's
    /// status stands.
    Failed(String),
}

/// `rlock`'s exit status once CMD's run `ended` under `hold` (named `held` in messages, e.g.
/// `lock "x"`): 70 when the hold was lost while CMD ran (the hold is dropped), else CMD's
/// status, or 70 when `give_back` finds the hold ended before CMD did.
pub async fn exit_status<H, Back>(
    ended: Ended,
    held: &str,
    hold: H,
    give_back: impl FnOnce(H) -> Back,
) -> u8
where
    Back: Future<Output = GivenBack>,
{
    match ended {
        Ended::Lost(why) => {
            eprintln!("rlock: {held} was lost while CMD ran: {why}");
            drop(hold);
            exit::LOST
        }
        Ended::NotStarted(code, msg) => {
            eprintln!("rlock: {msg}");
            let _ = give_back(hold).await;
            code
        }
        Ended::Exited(code) => match give_back(hold).await {
            GivenBack::Done => code,
            GivenBack::NotHeld(msg) => {
                eprintln!("rlock: {msg}");
                exit::LOST
            }
            GivenBack::Failed(msg) => {
                eprintln!("rlock: {msg}");
                code
            }
        },
    }
}

/// SIGINT, SIGTERM and SIGHUP, caught from the moment `rlock` starts to wait, so that none of
/// them ends `rlock` while it holds a lock it must release.
pub struct Signals {
    int: Stream,
    term: Stream,
    hup: Stream,
}

impl Signals {
    pub fn catch() -> std::io::Result<Signals> {
        Ok(Signals {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next of them to arrive.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.int.recv() => Signal::SIGINT,
            _ = self.term.recv() => Signal::SIGTERM,
            _ = self.hup.recv() => Signal::SIGHUP,
        }
    }
}

/// The status `rlock` exits with for CMD's `status`: its code, or 128 + the signal that
/// killed it, as shells do.
pub fn code_of(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(s)) => exit::SIGNAL_BASE.saturating_add(s as u8),
        (None, None) => exit::LOST,
    }
}

fn to_group(pgid: Pid, sig: Signal) {
    // ESRCH: the group is gone already; nothing else can go wrong for our own child's group.
    let _ = killpg(pgid, sig);
}

/// Runs `argv` with `env` added to its environment until it exits, passing on the signals
/// `rlock` gets, and stops it if `lost` completes first: SIGTERM to its process group, then
/// SIGKILL after `kill_after`.
pub async fn run(
    argv: &[String],
    env: &[(String, String)],
    signals: &mut Signals,
    lost: impl Future<Output = rlock_client::Error>,
    kill_after: Duration,
) -> Ended {
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .envs(env.iter().cloned())
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let code = match e.kind() {
                ErrorKind::NotFound => exit::NOT_FOUND,
                _ => exit::CANNOT_RUN,
            };
            return Ended::NotStarted(code, format!("{}: {e}", argv[0]));
        }
    };
    let pgid = Pid::from_raw(child.id().expect("not yet waited for") as i32);
    tokio::pin!(lost);
    let mut lost_reason: Option<String> = None;
    let mut kill_at: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = match status {
                    Ok(s) => s,
                    Err(e) => return Ended::NotStarted(exit::CANNOT_RUN, format!("waiting for {}: {e}", argv[0])),
                };
                return match lost_reason {
                    Some(reason) => Ended::Lost(reason),
                    None => Ended::Exited(code_of(status)),
                };
            }
            sig = signals.recv() => to_group(pgid, sig),
            err = &mut lost, if lost_reason.is_none() => {
                to_group(pgid, Signal::SIGTERM);
                kill_at = Some(tokio::time::Instant::now() + kill_after);
                let why = match err {
                    rlock_client::Error::Lost { reason, .. } => reason,
                    other => other.to_string(),
                };
                lost_reason = Some(format!(
                    "{why}; {} (process group {pgid}) was sent SIGTERM, and SIGKILL if still \
                     running after {}",
                    argv[0],
                    duration::show(kill_after)
                ));
            }
            _ = sleep_until(kill_at) => {
                to_group(pgid, Signal::SIGKILL);
                kill_at = None;
            }
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
