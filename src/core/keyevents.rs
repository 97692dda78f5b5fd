//! The module's own keyspace events, of class module (`d`): their names, and whether
//! the server's `notify-keyspace-events` flags publish them at all.

use std::ffi::CStr;

/// `notify-keyspace-events` flags as `RedisModule_GetNotifyKeyspaceEvents` gives them
/// (redismodule.h: `K`, `E`, `d`).
const KEYSPACE: i32 = 1 << 0;
const KEYEVENT: i32 = 1 << 1;
const MODULE: i32 = 1 << 13;

/// Whether the server publishes class-module events with these flags: `d`, and `K` or
/// `E` (the server checks the same before publishing anything).
pub fn published(flags: i32) -> bool {
    flags & MODULE != 0 && flags & (KEYSPACE | KEYEVENT) != 0
}

/// What happened to a lock, semaphore or latch, as subscribers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyEvent {
    /// A lock hold granted, at once or after `BLOCK`, re-entries included.
    Acquire,
    /// An owner's last hold on the key released by `RLOCK.RELEASE` / `RLOCK.MRELEASE`.
    Release,
    /// The module ended a hold because its lease ran out, where it watched the lock.
    Expire,
    /// `RLOCK.FORCERELEASE` removed a held lock.
    ForceRelease,
    /// Holds released because their `SESSION` connection closed.
    SessionEnd,
    /// A blocked call's `BLOCK` ran out, on each key it waited on.
    Timeout,
    /// Permits taken (`RSEM.ACQUIRE`).
    PermitAcquire,
    /// Permits given back (`RSEM.RELEASE`).
    PermitRelease,
    /// Permits leased (`RSEM.LEASE`).
    PermitLease,
    /// A leased permit given back (`RSEM.RETURN`, or its `SESSION` connection closed).
    PermitReturn,
    /// Leased permits taken back at the end of their lease.
    PermitReclaim,
    /// A latch counted down.
    LatchCountdown,
    /// A latch reached zero.
    LatchOpen,
    /// A call refused with `DEADLOCK`, on the key it asked for.
    Deadlock,
}

impl KeyEvent {
    /// The event's name, as `__keyevent@<db>__:<name>` carries it.
    pub const fn name(self) -> &'static CStr {
        match self {
            KeyEvent::Acquire => c"rlock.acquire",
            KeyEvent::Release => c"rlock.release",
            KeyEvent::Expire => c"rlock.expire",
            KeyEvent::ForceRelease => c"rlock.forcerelease",
            KeyEvent::SessionEnd => c"rlock.sessionend",
            KeyEvent::Timeout => c"rlock.timeout",
            KeyEvent::PermitAcquire => c"rsem.acquire",
            KeyEvent::PermitRelease => c"rsem.release",
            KeyEvent::PermitLease => c"rsem.lease",
            KeyEvent::PermitReturn => c"rsem.return",
            KeyEvent::PermitReclaim => c"rsem.reclaim",
            KeyEvent::LatchCountdown => c"rlatch.countdown",
            KeyEvent::LatchOpen => c"rlatch.open",
            KeyEvent::Deadlock => c"rlock.deadlock",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_with_d_and_k_or_e() {
        assert!(!published(0));
        assert!(!published(MODULE));
        assert!(!published(KEYSPACE | KEYEVENT));
        assert!(published(KEYSPACE | MODULE));
        assert!(published(KEYEVENT | MODULE));
        // `KEA`: every class, the module's included.
        assert!(published(KEYSPACE | KEYEVENT | 0x3fff));
    }

    #[test]
    fn names_are_the_documented_ones() {
        assert_eq!(KeyEvent::Acquire.name(), c"rlock.acquire");
        assert_eq!(KeyEvent::ForceRelease.name(), c"rlock.forcerelease");
        assert_eq!(KeyEvent::PermitReclaim.name(), c"rsem.reclaim");
        assert_eq!(KeyEvent::LatchOpen.name(), c"rlatch.open");
        assert_eq!(KeyEvent::Deadlock.name(), c"rlock.deadlock");
    }
}
