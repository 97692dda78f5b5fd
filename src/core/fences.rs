//! Which token the module last handed out on each fenced lock, and to whom.
//!
//! A token is greater than every token handed out before to anyone else. A `TOKEN`
//! re-entry may reply the hold's token again only if the module granted that token
//! to this owner and the counter still holds it; otherwise the re-entry takes a new
//! one. Someone else's `INCR` (a Redisson fenced lock) moves the counter, so it is
//! caught by the comparison; a counter loaded, restored, renamed or copied in, or
//! any loss of track (AOF load, SWAPDB, demotion), forgets the grant.
//!
//! Whether a lock has a counter at all is looked up in the keyspace on each take
//! from free. Remembering counters instead would need the module to hear every
//! string write in the server (a Redisson `INCR` creates one), and that costs every
//! other client's `SET` and `INCR` a module callback: measured +13% server
//! instructions per `SET` on Redis 7.0, against +4.6% per rlock acquire/release pair
//! for the lookup.

use std::collections::HashMap;

use super::shrink_map;
use super::waitlist::LockId;

#[derive(Debug, Default)]
pub struct FenceGrants {
    locks: HashMap<LockId, Grant>,
}

/// A token the module handed out, and to whom.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    owner: Vec<u8>,
    token: i64,
}

/// What a `TOKEN` re-entry replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReentryToken {
    /// The hold's token, still the counter's value.
    Same(i64),
    /// A new token: the counter's value went to someone else, or may have.
    Next,
}

impl FenceGrants {
    /// The module set the counter to `token` for `owner`'s hold.
    pub fn granted(&mut self, lock: LockId, owner: &[u8], token: i64) {
        let grant = Grant {
            owner: owner.to_vec(),
            token,
        };
        self.locks.insert(lock, grant);
    }

    /// What a `TOKEN` re-entry by `owner` replies when the counter holds `current`.
    pub fn reentry_token(&self, lock: &LockId, owner: &[u8], current: Option<i64>) -> ReentryToken {
        match (current, self.locks.get(lock)) {
            (Some(current), Some(grant)) if grant.token == current && grant.owner == owner => {
                ReentryToken::Same(current)
            }
            _ => ReentryToken::Next,
        }
    }

    /// The counter was deleted, or replaced by someone else's.
    pub fn forget(&mut self, lock: &LockId) {
        self.locks.remove(lock);
        shrink_map(&mut self.locks);
    }

    /// Database `db` (or every one) was emptied.
    pub fn flushed(&mut self, db: Option<i32>) {
        self.locks
            .retain(|lock, _| db.is_some_and(|db| lock.db != db));
        shrink_map(&mut self.locks);
    }

    /// Counters may have been written unseen (AOF load, SWAPDB, demotion).
    pub fn clear(&mut self) {
        self.locks = HashMap::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(db: i32, key: &str) -> LockId {
        LockId {
            db,
            key: key.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_reentry_keeps_its_token_only_while_nobody_else_took_one() {
        let mut grants = FenceGrants::default();
        let a = lock(0, "a");
        // Nothing known: a new token.
        assert_eq!(grants.reentry_token(&a, b"x", Some(4)), ReentryToken::Next);
        assert_eq!(grants.reentry_token(&a, b"x", None), ReentryToken::Next);
        grants.granted(a.clone(), b"x", 5);
        assert_eq!(
            grants.reentry_token(&a, b"x", Some(5)),
            ReentryToken::Same(5)
        );
        // Another owner, a counter moved by someone else's INCR, a deleted one,
        // another database.
        assert_eq!(grants.reentry_token(&a, b"y", Some(5)), ReentryToken::Next);
        assert_eq!(grants.reentry_token(&a, b"x", Some(6)), ReentryToken::Next);
        assert_eq!(grants.reentry_token(&a, b"x", None), ReentryToken::Next);
        assert_eq!(
            grants.reentry_token(&lock(1, "a"), b"x", Some(5)),
            ReentryToken::Next
        );
        // A counter replaced from elsewhere, even with the same value.
        grants.forget(&a);
        assert_eq!(grants.reentry_token(&a, b"x", Some(5)), ReentryToken::Next);
        grants.granted(a.clone(), b"x", 6);
        grants.clear();
        assert_eq!(grants.reentry_token(&a, b"x", Some(6)), ReentryToken::Next);
    }

    #[test]
    fn flushes_forget_their_databases() {
        let mut grants = FenceGrants::default();
        grants.granted(lock(0, "a"), b"x", 1);
        grants.granted(lock(2, "b"), b"x", 1);
        grants.flushed(Some(0));
        assert_eq!(
            grants.reentry_token(&lock(0, "a"), b"x", Some(1)),
            ReentryToken::Next
        );
        assert_eq!(
            grants.reentry_token(&lock(2, "b"), b"x", Some(1)),
            ReentryToken::Same(1)
        );
        grants.flushed(None);
        assert_eq!(
            grants.reentry_token(&lock(2, "b"), b"x", Some(1)),
            ReentryToken::Next
        );
    }
}
