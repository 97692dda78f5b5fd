//! What acquire and release do to a lock, given what the lock hash holds.
//!
//! The hash maps owner -> hold count. A lock is held while the hash exists.

use std::fmt;

use super::integer::parse_i64;

/// What the lock key holds, as far as one owner is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// No key: the lock is free.
    Free,
    /// A hash exists. `own_count` is this owner's hold count, if it holds one;
    /// `holders` counts the fields (other owners included).
    Held {
        own_count: Option<i64>,
        holders: usize,
    },
}

/// What an acquire does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquire {
    /// The lock was free: take it with count 1.
    Take,
    /// The owner holds it: count goes up to `count`.
    Reenter { count: i64 },
    /// Someone else holds it.
    Busy,
}

/// What a release does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The owner holds nothing here.
    NotHeld,
    /// One re-entry undone; `remaining` holds are left.
    Undo { remaining: i64 },
    /// The owner's last hold goes. `lock_freed` is true when no other owner
    /// field remains, so the key is deleted and waiters may be served.
    Last { lock_freed: bool },
}

/// A lock hash whose content is not ours to interpret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldError {
    /// The owner's field is not a positive integer.
    BadCount,
    /// A re-entry would overflow the count.
    CountOverflow,
}

impl fmt::Display for HoldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoldError::BadCount => {
                write!(
                    f,
                    "ERR the lock hash holds a non-positive or non-integer count for this owner"
                )
            }
            HoldError::CountOverflow => write!(f, "ERR hold count would overflow"),
        }
    }
}

/// Reads a hold count as stored in the hash.
pub fn parse_count(stored: &[u8]) -> Result<i64, HoldError> {
    match parse_i64(stored) {
        Some(count) if count >= 1 => Ok(count),
        _ => Err(HoldError::BadCount),
    }
}

pub fn decide_acquire(state: LockState) -> Result<Acquire, HoldError> {
    match state {
        LockState::Free => Ok(Acquire::Take),
        LockState::Held {
            own_count: Some(count),
            ..
        } => count
            .checked_add(1)
            .map(|count| Acquire::Reenter { count })
            .ok_or(HoldError::CountOverflow),
        LockState::Held {
            own_count: None, ..
        } => Ok(Acquire::Busy),
    }
}

pub fn decide_release(state: LockState) -> Release {
    match state {
        LockState::Held {
            own_count: Some(count),
            ..
        } if count > 1 => Release::Undo {
            remaining: count - 1,
        },
        _ => decide_release_all(state),
    }
}

/// A release of every hold the owner has at once (a SESSION's connection closed).
pub fn decide_release_all(state: LockState) -> Release {
    match state {
        LockState::Held {
            own_count: Some(_),
            holders,
        } => Release::Last {
            lock_freed: holders <= 1,
        },
        _ => Release::NotHeld,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(own_count: Option<i64>) -> LockState {
        LockState::Held {
            own_count,
            holders: 1,
        }
    }

    #[test]
    fn free_lock_is_taken() {
        assert_eq!(decide_acquire(LockState::Free), Ok(Acquire::Take));
    }

    #[test]
    fn owner_reenters_and_others_wait() {
        assert_eq!(
            decide_acquire(held(Some(2))),
            Ok(Acquire::Reenter { count: 3 })
        );
        assert_eq!(decide_acquire(held(None)), Ok(Acquire::Busy));
        assert_eq!(
            decide_acquire(held(Some(i64::MAX))),
            Err(HoldError::CountOverflow)
        );
    }

    #[test]
    fn release_counts_down_then_frees() {
        assert_eq!(
            decide_release(held(Some(3))),
            Release::Undo { remaining: 2 }
        );
        assert_eq!(
            decide_release(held(Some(1))),
            Release::Last { lock_freed: true }
        );
        assert_eq!(decide_release(held(None)), Release::NotHeld);
        assert_eq!(decide_release(LockState::Free), Release::NotHeld);
    }

    #[test]
    fn releasing_all_holds_skips_the_count() {
        assert_eq!(
            decide_release_all(held(Some(3))),
            Release::Last { lock_freed: true }
        );
        assert_eq!(decide_release_all(held(None)), Release::NotHeld);
        let shared = LockState::Held {
            own_count: Some(2),
            holders: 2,
        };
        assert_eq!(
            decide_release_all(shared),
            Release::Last { lock_freed: false }
        );
    }

    #[test]
    fn last_hold_of_a_shared_hash_leaves_the_key() {
        let shared = LockState::Held {
            own_count: Some(1),
            holders: 2,
        };
        assert_eq!(decide_release(shared), Release::Last { lock_freed: false });
    }

    #[test]
    fn counts_must_be_positive_integers() {
        assert_eq!(parse_count(b"4"), Ok(4));
        for bad in [&b"0"[..], b"-1", b"x", b""] {
            assert_eq!(parse_count(bad), Err(HoldError::BadCount));
        }
    }
}
