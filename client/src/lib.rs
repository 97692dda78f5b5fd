//! Thin client for the rlock Redis module: distributed locks as native commands
//! (`RLOCK.ACQUIRE`, `RLOCK.RELEASE`, ...) on Redisson-compatible keys.
//!
//! The server does the locking, waiting and queueing; this crate gives it a Rust shape:
//! guards that release on drop without blocking, re-entry through a cloneable handle, a
//! watchdog that renews leases in batches and says so when a lock is lost, cancel-safe
//! blocking waits, fencing tokens, replica acknowledgement, multi-primary quorum locks, leader
//! election ([`Locks::election`]) and Redis Cluster.
//!
//! ```no_run
//! use std::time::Duration;
//! use rlock_client::Locks;
//!
//! # async fn f() -> rlock_client::Result<()> {
//! let locks = Locks::from_url("redis://127.0.0.1/")?;
//! let lock = locks.lock("orders").wait(Duration::from_secs(5)).fenced();
//! if let Some(guard) = lock.acquire().await? {
//!     println!("token {:?}", guard.token());
//!     tokio::select! {
//!         _ = async { /* work that writes with guard.token() */ } => {}
//!         lost = guard.lost() => return Err(lost),
//!     }
//!     guard.release().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! | call | round trips |
//! |---|---|
//! | [`Lock::acquire`] | 1 on the shared connection |
//! | with [`Lock::wait`]/[`Lock::sync_replicas`] | 1 on a pooled connection (+1 `CLIENT ID` for a wait in a cluster) |
//! | [`Guard::release`], [`Guard::renew`] | 1 |
//! | [`ReadWriteLock::read`]/[`write`](ReadWriteLock::write), then acquire | as [`Lock::acquire`] |
//! | watchdog | 1 pipeline per tick for all held locks (one per slot in a cluster) |
//! | [`RedLock::acquire`] | 1 to all primaries in parallel (+1 to release on failure) |
//! | [`Semaphore::acquire`], [`Latch::await_zero`] | 1 (with a wait, on a pooled connection) |
//! | [`MultiLock::acquire`] | 1 per cluster slot of its keys (+1 per slot taken to give back on failure) |
//! | [`Election::campaign`] | as a fenced [`Lock::acquire`] with a wait (+1 to give back a grant it cannot believe) |
//! | [`Election::leader`] | 1 |
//! | [`Election::observe`] | a pub/sub connection, then 1 read per change (events) or every 50 ms (polling) |
//!
//! The [`blocking`] module has the same API for code without an async runtime.
//!
//! The `redis` crate this one is built with is re-exported as [`redis`], so an application on
//! another `redis` version can still build the [`redis::Client`], connection or cluster client
//! that [`Locks`] takes:
//!
//! ```no_run
//! use rlock_client::{redis, Locks};
//!
//! # fn f() -> rlock_client::Result<()> {
//! let client = redis::Client::open("redis://127.0.0.1/")?; // rlock_client's redis, not the app's
//! let locks = Locks::new(client);
//! # let _ = locks; Ok(()) }
//! ```
//!
//! **Nothing is sent twice behind your back.** A re-sent `RLOCK.ACQUIRE` re-enters (hold
//! count 2), a re-sent release undoes someone's re-entry. redis-rs's plain and managed
//! connections never re-send a command; its cluster client does unless built with
//! `.retries(0)`, so [`Endpoint::cluster`] builds it that way and a cluster client with
//! retries left is refused.

#![warn(missing_docs)]

#[macro_use]
mod macros;

mod blocked;
pub mod blocking;
mod command;
mod conn;
mod election;
mod error;
mod hold;
mod inspect;
mod keyspace;
mod latch;
mod lock;
mod locks;
mod lossevents;
mod multilock;
mod permits;
mod redlock;
mod replicas;
mod rwlock;
mod semaphore;
#[cfg(test)]
mod spec;
mod watchdog;

/// This crate's version, which is also the version of the module it is made for
/// (`INFO rlock` says `rlock_version`; CHANGELOG.md says what each added).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `redis` crate this crate is built with, so that callers build its types without
/// depending on the same version themselves.
pub use redis;

pub use command::{LockInfo, LockKind, Side};
pub use conn::Endpoint;
pub use election::{Election, Leader, LeaderChanges, Leadership, ObserveMode};
pub use error::{Error, Result, Wait};
pub use hold::{Guard, Hold};
pub use inspect::{ContendedKey, ScannedLock, ServerStats, Waiter};
pub use latch::Latch;
pub use lock::Lock;
pub use locks::{Locks, LocksBuilder};
pub use multilock::{MultiGuard, MultiLock};
pub use redlock::{RedLock, RedLockGuard, RedLocks, RedLocksBuilder};

/// The name of [`MultiLock`] before 4.1: the all-or-nothing lock over several keys.
#[deprecated(since = "4.1.0", note = "renamed MultiLock, Redisson's name for it")]
pub type MultiKeyLock = MultiLock;
/// The name of [`MultiGuard`] before 4.1.
#[deprecated(since = "4.1.0", note = "renamed MultiGuard")]
pub type MultiKeyGuard = MultiGuard;
/// The name of [`RedLocks`] before 4.1. (`MultiLock` and `MultiGuard`, the quorum's lock and
/// guard before 4.1, are now [`RedLock`] and [`RedLockGuard`]: their old names are the
/// multi-key lock's, so they have no alias.)
#[deprecated(
    since = "4.1.0",
    note = "renamed RedLocks: the quorum is Redisson's RedLock"
)]
pub type MultiLocks = RedLocks;
/// The name of [`RedLocksBuilder`] before 4.1.
#[deprecated(since = "4.1.0", note = "renamed RedLocksBuilder")]
pub type MultiLocksBuilder = RedLocksBuilder;
pub use permits::{LeasedPermit, PermitSemaphore};
pub use rwlock::ReadWriteLock;
pub use semaphore::{Permits, Semaphore};

/// The examples in `README.md`, compiled by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;
