//! One file per subcommand: its arguments beside the code that uses them.

pub mod elect;
pub mod info;
pub mod lock;
pub mod ls;
pub mod release;
pub mod semaphore;
pub mod top;
pub mod waiters;

use std::fmt::Display;
use std::future::Future;

use crate::child::Signals;
use crate::exit;

/// Says what failed on stderr; the exit status for a server that failed us.
pub fn unavailable(what: impl Display) -> u8 {
    eprintln!("rlock: {what}");
    exit::UNAVAILABLE
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
