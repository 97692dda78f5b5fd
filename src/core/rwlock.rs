//! What READ and WRITE do to a read-write lock, given what its hash holds.
//!
//! Redisson's `RReadWriteLock` layout: the hash's `mode` field says `read` or
//! `write`; a reader's field is its owner -> hold count; the writer's field is
//! `<owner>:write` -> hold count. In `write` mode the writer alone may add read holds.

use std::fmt;

use super::hold::HoldError;

/// Which side of a read-write lock a call is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwMode {
    Read,
    Write,
}

impl RwMode {
    /// The hash's `mode` value, as Redisson writes it.
    pub fn word(self) -> &'static [u8] {
        match self {
            RwMode::Read => b"read",
            RwMode::Write => b"write",
        }
    }

    pub fn of_word(word: &[u8]) -> Option<RwMode> {
        match word {
            b"read" => Some(RwMode::Read),
            b"write" => Some(RwMode::Write),
            _ => None,
        }
    }

    /// The message published on `redisson_rwlock:{K}` when an unlock of this side
    /// frees the lock: Redisson's read unlock sends `0`, its write unlock `1`.
    pub fn unlock_message(self) -> &'static [u8] {
        match self {
            RwMode::Read => b"0",
            RwMode::Write => b"1",
        }
    }
}

/// The suffix of the writer's field: `<owner>:write`.
pub const WRITE_FIELD_SUFFIX: &[u8] = b":write";

/// The hash field that holds `owner`'s count on `mode`'s side.
pub fn hold_field(owner: &[u8], mode: RwMode) -> Vec<u8> {
    // Sized once: growing it would reallocate, on the hot path of every call.
    let mut field = Vec::with_capacity(owner.len() + WRITE_FIELD_SUFFIX.len());
    field.extend_from_slice(owner);
    if mode == RwMode::Write {
        field.extend_from_slice(WRITE_FIELD_SUFFIX);
    }
    field
}

/// The owner and side a hash field stands for; the inverse of `hold_field`.
pub fn field_hold(field: &[u8]) -> (&[u8], RwMode) {
    match field.strip_suffix(WRITE_FIELD_SUFFIX) {
        Some(owner) => (owner, RwMode::Write),
        None => (field, RwMode::Read),
    }
}

/// An owner whose name would collide with the layout on a read-write lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollidingOwner;

impl fmt::Display for CollidingOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ERR an owner of a read-write lock may not be named 'mode' or end in ':write': \
             Redisson's layout uses those fields"
        )
    }
}

pub fn check_rw_owner(owner: &[u8]) -> Result<(), CollidingOwner> {
    if owner == b"mode" || owner.ends_with(WRITE_FIELD_SUFFIX) {
        Err(CollidingOwner)
    } else {
        Ok(())
    }
}

/// A read-write lock as one owner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwState {
    Free,
    Held {
        mode: RwMode,
        /// This owner's read holds, if any.
        own_reads: Option<i64>,
        /// This owner's write holds, if any.
        own_writes: Option<i64>,
        /// Fields besides `mode`, this owner's included.
        fields: usize,
    },
}

/// What an acquire does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwAcquire {
    /// The lock was free: it becomes `mode`'s with count 1.
    Take,
    /// A hold added beside others: a reader joining readers, or the writer taking a
    /// read hold. `count` is this owner's count on that side afterwards.
    Join { count: i64 },
    /// The owner re-enters the side it holds.
    Reenter { count: i64 },
    /// Someone else holds the lock in a way that excludes this call.
    Busy,
    /// The owner holds read holds and asks to write: waiting would be waiting on
    /// itself, so the call gets null at once, even with BLOCK.
    OwnReadsBlockWrite,
}

/// Whether an acquire that `decision` allows comes from a newcomer, who waits behind
/// the clients blocked before it: someone holding nothing on the lock. A holder never
/// waits in line (a re-entry, the writer taking a read hold), or it would wait on the
/// waiters that wait on it.
pub fn is_newcomer(state: RwState, decision: RwAcquire) -> bool {
    match (decision, state) {
        (RwAcquire::Take, _) => true,
        (RwAcquire::Join { .. }, RwState::Held { own_writes, .. }) => own_writes.is_none(),
        _ => false,
    }
}

fn incremented(count: Option<i64>) -> Result<i64, HoldError> {
    count
        .unwrap_or(0)
        .checked_add(1)
        .ok_or(HoldError::CountOverflow)
}

pub fn decide_rw_acquire(state: RwState, asked: RwMode) -> Result<RwAcquire, HoldError> {
    let RwState::Held {
        mode,
        own_reads,
        own_writes,
        ..
    } = state
    else {
        return Ok(RwAcquire::Take);
    };
    Ok(match (asked, mode) {
        // Readers share a read-mode lock; the writer alone adds reads in write mode.
        (RwMode::Read, RwMode::Read) => join_or_reenter(own_reads)?,
        (RwMode::Read, RwMode::Write) if own_writes.is_some() => join_or_reenter(own_reads)?,
        (RwMode::Read, RwMode::Write) => RwAcquire::Busy,
        (RwMode::Write, RwMode::Write) if own_writes.is_some() => RwAcquire::Reenter {
            count: incremented(own_writes)?,
        },
        (RwMode::Write, RwMode::Read) if own_reads.is_some() => RwAcquire::OwnReadsBlockWrite,
        (RwMode::Write, _) => RwAcquire::Busy,
    })
}

fn join_or_reenter(own_reads: Option<i64>) -> Result<RwAcquire, HoldError> {
    let count = incremented(own_reads)?;
    Ok(match own_reads {
        Some(_) => RwAcquire::Reenter { count },
        None => RwAcquire::Join { count },
    })
}

/// What a release of one side does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwRelease {
    /// The owner holds nothing on that side.
    NotHeld,
    /// Holds `remaining..` stay; the ones above go (one, or all with SESSION).
    Undo { remaining: i64, released: i64 },
    /// The owner's last hold on that side goes (`released` of them).
    Last { released: i64 },
}

pub fn decide_rw_release(state: RwState, side: RwMode, all: bool) -> RwRelease {
    let RwState::Held {
        own_reads,
        own_writes,
        ..
    } = state
    else {
        return RwRelease::NotHeld;
    };
    let own = match side {
        RwMode::Read => own_reads,
        RwMode::Write => own_writes,
    };
    match own {
        None => RwRelease::NotHeld,
        Some(count) if all || count == 1 => RwRelease::Last { released: count },
        Some(count) => RwRelease::Undo {
            remaining: count - 1,
            released: 1,
        },
    }
}

/// What becomes of the lock once a hold has gone and what is left is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Someone still holds it; its expiry moves to `deadline` (unix ms), or stays.
    Keep { deadline: Option<i64> },
    /// Nobody holds it any more: delete it, and publish `freed_by`'s message.
    Free { freed_by: RwMode },
}

/// After `side` lost a hold: `writer_left` is whether a write hold remains, `fields`
/// how many owner fields remain, and `read_deadline` the latest deadline among the
/// read holds still alive (each read hold's timeout key), if any.
///
/// A write-mode lock keeps its expiry (the writer's lease). A read-mode lock lives as
/// long as its longest read hold, and is free once none is alive: fields whose timeout
/// key lapsed are holds that ended (their owner stopped renewing), as in Redisson's
/// read unlock.
pub fn settle(
    side: RwMode,
    writer_left: bool,
    fields: usize,
    read_deadline: Option<i64>,
) -> Settle {
    if writer_left {
        return Settle::Keep { deadline: None };
    }
    match read_deadline {
        Some(deadline) if fields > 0 => Settle::Keep {
            deadline: Some(deadline),
        },
        _ => Settle::Free { freed_by: side },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(mode: RwMode, own_reads: Option<i64>, own_writes: Option<i64>) -> RwState {
        RwState::Held {
            mode,
            own_reads,
            own_writes,
            fields: 1,
        }
    }

    #[test]
    fn readers_share_and_writers_exclude() {
        use RwMode::*;
        assert_eq!(decide_rw_acquire(RwState::Free, Read), Ok(RwAcquire::Take));
        assert_eq!(decide_rw_acquire(RwState::Free, Write), Ok(RwAcquire::Take));
        assert_eq!(
            decide_rw_acquire(held(Read, None, None), Read),
            Ok(RwAcquire::Join { count: 1 })
        );
        assert_eq!(
            decide_rw_acquire(held(Read, Some(2), None), Read),
            Ok(RwAcquire::Reenter { count: 3 })
        );
        assert_eq!(
            decide_rw_acquire(held(Read, None, None), Write),
            Ok(RwAcquire::Busy)
        );
        assert_eq!(
            decide_rw_acquire(held(Write, None, None), Read),
            Ok(RwAcquire::Busy)
        );
        assert_eq!(
            decide_rw_acquire(held(Write, None, None), Write),
            Ok(RwAcquire::Busy)
        );
    }

    #[test]
    fn the_writer_reenters_and_takes_reads() {
        use RwMode::*;
        assert_eq!(
            decide_rw_acquire(held(Write, None, Some(1)), Write),
            Ok(RwAcquire::Reenter { count: 2 })
        );
        assert_eq!(
            decide_rw_acquire(held(Write, None, Some(1)), Read),
            Ok(RwAcquire::Join { count: 1 })
        );
        assert_eq!(
            decide_rw_acquire(held(Write, Some(4), Some(1)), Read),
            Ok(RwAcquire::Reenter { count: 5 })
        );
        assert_eq!(
            decide_rw_acquire(held(Write, None, Some(i64::MAX)), Write),
            Err(HoldError::CountOverflow)
        );
    }

    #[test]
    fn a_reader_asking_to_write_never_waits_on_itself() {
        let decision = decide_rw_acquire(held(RwMode::Read, Some(1), None), RwMode::Write);
        assert_eq!(decision, Ok(RwAcquire::OwnReadsBlockWrite));
        // Once the writer's write hold went, its reads are a reader's like any other.
        let decision = decide_rw_acquire(held(RwMode::Read, Some(1), Some(1)), RwMode::Write);
        assert_eq!(decision, Ok(RwAcquire::OwnReadsBlockWrite));
    }

    #[test]
    fn only_those_holding_nothing_wait_in_line() {
        use RwMode::*;
        assert!(is_newcomer(RwState::Free, RwAcquire::Take));
        let reader = held(Read, None, None);
        assert!(is_newcomer(reader, RwAcquire::Join { count: 1 }));
        // The writer taking its first read hold is no newcomer.
        let writer = held(Write, None, Some(1));
        assert!(!is_newcomer(writer, RwAcquire::Join { count: 1 }));
        assert!(!is_newcomer(writer, RwAcquire::Reenter { count: 2 }));
        assert!(!is_newcomer(reader, RwAcquire::Busy));
    }

    #[test]
    fn releases_count_down_per_side() {
        use RwMode::*;
        let both = held(Write, Some(2), Some(1));
        assert_eq!(
            decide_rw_release(both, Read, false),
            RwRelease::Undo {
                remaining: 1,
                released: 1
            }
        );
        assert_eq!(
            decide_rw_release(both, Read, true),
            RwRelease::Last { released: 2 }
        );
        assert_eq!(
            decide_rw_release(both, Write, false),
            RwRelease::Last { released: 1 }
        );
        assert_eq!(
            decide_rw_release(held(Read, Some(1), None), Write, false),
            RwRelease::NotHeld
        );
        assert_eq!(
            decide_rw_release(RwState::Free, Read, false),
            RwRelease::NotHeld
        );
    }

    #[test]
    fn a_lock_is_free_once_no_hold_is_alive() {
        use RwMode::*;
        assert_eq!(
            settle(Write, false, 0, None),
            Settle::Free { freed_by: Write }
        );
        assert_eq!(
            settle(Read, false, 0, None),
            Settle::Free { freed_by: Read }
        );
        // Only fields whose timeout lapsed: nobody holds it.
        assert_eq!(
            settle(Read, false, 2, None),
            Settle::Free { freed_by: Read }
        );
        assert_eq!(
            settle(Read, false, 2, Some(900)),
            Settle::Keep {
                deadline: Some(900)
            }
        );
        assert_eq!(settle(Read, true, 2, None), Settle::Keep { deadline: None });
    }

    #[test]
    fn fields_name_their_side() {
        assert_eq!(hold_field(b"a:1", RwMode::Write), b"a:1:write");
        assert_eq!(hold_field(b"a:1", RwMode::Read), b"a:1");
        assert_eq!(field_hold(b"a:1:write"), (&b"a:1"[..], RwMode::Write));
        assert_eq!(field_hold(b"a:1"), (&b"a:1"[..], RwMode::Read));
    }

    #[test]
    fn owners_that_collide_with_the_layout_are_refused() {
        assert_eq!(check_rw_owner(b"mode"), Err(CollidingOwner));
        assert_eq!(check_rw_owner(b"x:write"), Err(CollidingOwner));
        assert_eq!(check_rw_owner(b"modes"), Ok(()));
        assert_eq!(check_rw_owner(b"write"), Ok(()));
    }

    #[test]
    fn messages_are_redissons() {
        assert_eq!(RwMode::Read.unlock_message(), b"0");
        assert_eq!(RwMode::Write.unlock_message(), b"1");
        assert_eq!(RwMode::of_word(b"read"), Some(RwMode::Read));
        assert_eq!(RwMode::of_word(b"READ"), None);
    }
}
