//! Every exit status `rlock` uses, in one place (docs/CLI.md, "Exit codes", says the same).
//!
//! `rlock lock` and `rlock semaphore` exit with CMD's own status when CMD ran to its end, so
//! these codes are chosen where CMDs rarely go: the BSD `sysexits.h` values, and the shells'
//! 126, 127 and 128+N.

/// Done: a query answered, or CMD exited 0.
pub const OK: u8 = 0;
/// The answer is no: `release --force` declined at the prompt.
pub const NO: u8 = 1;
/// Bad arguments, `release --force` without `--yes` when stdin is not a terminal, or the full
/// screen of `top` without a terminal (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// The server could not be reached, or refused a command (`EX_UNAVAILABLE`).
pub const UNAVAILABLE: u8 = 69;
/// The lock (or permit, or leadership) was lost while CMD ran; CMD was stopped (`EX_SOFTWARE`).
pub const LOST: u8 = 70;
/// Not acquired (not elected, or the election value already leads) within `--wait`; CMD did
/// not run (`EX_TEMPFAIL`). `-E CODE` replaces it.
pub const NOT_ACQUIRED: u8 = 75;
/// CMD was found but could not be run (as shells say it).
pub const CANNOT_RUN: u8 = 126;
/// CMD was not found (as shells say it).
pub const NOT_FOUND: u8 = 127;
/// CMD was ended by signal N, or `rlock` by signal N while it waited: 128 + N.
pub const SIGNAL_BASE: u8 = 128;

/// The text of `--help`'s "Exit status" section.
pub const HELP: &str = "\
Exit status:
  CMD's own     lock/semaphore/elect: CMD ran and exited; 128+N if CMD was killed by signal N
  0             a query answered
  1             release --force: declined at the prompt
  64            bad arguments, an empty or too long election value; release --force without
                --yes when stdin is not a terminal;
                top without --stat when stdout is not a terminal
  69            the server could not be reached or refused a command
  70            the lock (permit, leadership) was lost while CMD ran: CMD was sent SIGTERM,
                SIGKILL after --kill-after
  75            not acquired (not elected) within --wait, CMD did not run; -E CODE changes it;
                guard: the lock is not held, or the token is stale: the command did not run
  126, 127      CMD could not be run, CMD not found
  128+N         rlock got signal N while it waited for the lock";
