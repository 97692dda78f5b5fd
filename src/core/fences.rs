//! Which locks have a fencing counter, known without a keyspace lookup, and which
//! hold the module last gave a token to.
//!
//! A lock taken from free bumps its counter when the counter exists. Looking the
//! counter key up on every acquire is a hash miss in a large keyspace, which cost
//! more than the rest of the acquire. So the module remembers the counters it has
//! seen: those it wrote, those other clients wrote (a Redisson fenced lock's `INCR`,
//! heard as a string event), and those loaded from disk or restored. While it has
//! seen every counter (`exact`), a lock outside the set has none.
//!
//! A token is greater than every token handed out before to anyone else. A
//! re-entry may reply the hold's token again only if that value is still the
//! counter's and went to this owner alone: rlock granted it to this owner and
//! nobody wrote the counter since. Otherwise the re-entry takes a new token.

use std::collections::HashMap;

use super::waitlist::LockId;

#[derive(Debug)]
pub struct KnownFences {
    /// False when counters may exist that the module has not seen: loaded into a
    /// server that already held data, or once a replica, whose counters arrive by
    /// replication unseen.
    exact: bool,
    /// Lock -> the token the module last handed out from its counter, while
    /// nobody else has written the counter since.
    locks: HashMap<LockId, Option<Grant>>,
}

/// A token the module handed out, and to whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub owner: Vec<u8>,
    pub token: i64,
}

/// What a `TOKEN` re-entry replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReentryToken {
    /// The hold's token, still the counter's value.
    Same(i64),
    /// A new token: the counter's value went to someone else, or may have.
    Next,
}

/// Whether a lock has a fencing counter, as far as the module knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceKnown {
    Yes,
    No,
    /// Look at the keyspace.
    Unknown,
}

impl KnownFences {
    pub fn new(exact: bool) -> KnownFences {
        KnownFences {
            exact,
            locks: HashMap::new(),
        }
    }

    /// Whether `lookup` will need the lock's id.
    pub fn needs_id(&self) -> bool {
        self.exact && !self.locks.is_empty()
    }

    /// Cheap when no lock is fenced: no id is built.
    pub fn lookup(&self, lock: impl FnOnce() -> LockId) -> FenceKnown {
        if !self.exact {
            FenceKnown::Unknown
        } else if self.locks.is_empty() || !self.locks.contains_key(&lock()) {
            FenceKnown::No
        } else {
            FenceKnown::Yes
        }
    }

    /// The counter exists and someone else may have handed out its value.
    pub fn seen(&mut self, lock: LockId) {
        self.locks.insert(lock, None);
    }

    /// The module set the counter to `token` for `owner`'s hold.
    pub fn granted(&mut self, lock: LockId, owner: &[u8], token: i64) {
        let grant = Grant {
            owner: owner.to_vec(),
            token,
        };
        self.locks.insert(lock, Some(grant));
    }

    /// What a `TOKEN` re-entry by `owner` replies when the counter holds `current`.
    pub fn reentry_token(&self, lock: &LockId, owner: &[u8], current: Option<i64>) -> ReentryToken {
        match (current, self.locks.get(lock)) {
            (Some(current), Some(Some(grant)))
                if grant.token == current && grant.owner == owner =>
            {
                ReentryToken::Same(current)
            }
            _ => ReentryToken::Next,
        }
    }

    pub fn gone(&mut self, lock: &LockId) {
        self.locks.remove(lock);
    }

    /// Database `db` (or every one) was emptied.
    pub fn flushed(&mut self, db: Option<i32>) {
        self.locks
            .retain(|lock, _| db.is_some_and(|db| lock.db != db));
    }

    /// Counters may now exist unseen; stay on keyspace lookups.
    pub fn lose_track(&mut self) {
        self.exact = false;
        self.locks.clear();
    }

    pub fn is_exact(&self) -> bool {
        self.exact
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
    fn an_exact_registry_answers_without_the_keyspace() {
        let mut fences = KnownFences::new(true);
        assert_eq!(
            fences.lookup(|| panic!("no id needed while empty")),
            FenceKnown::No
        );
        fences.seen(lock(0, "a"));
        assert_eq!(fences.lookup(|| lock(0, "a")), FenceKnown::Yes);
        assert_eq!(fences.lookup(|| lock(1, "a")), FenceKnown::No);
        fences.gone(&lock(0, "a"));
        assert_eq!(fences.lookup(|| lock(0, "a")), FenceKnown::No);
    }

    #[test]
    fn an_inexact_registry_defers_to_the_keyspace() {
        let mut fences = KnownFences::new(true);
        fences.seen(lock(0, "a"));
        fences.lose_track();
        assert!(!fences.is_exact());
        assert_eq!(fences.lookup(|| lock(0, "a")), FenceKnown::Unknown);
        assert_eq!(
            KnownFences::new(false).lookup(|| lock(0, "b")),
            FenceKnown::Unknown
        );
    }

    #[test]
    fn a_reentry_keeps_its_token_only_while_nobody_else_took_one() {
        let mut fences = KnownFences::new(true);
        let a = lock(0, "a");
        // Nothing known: a new token.
        assert_eq!(fences.reentry_token(&a, b"x", Some(4)), ReentryToken::Next);
        assert_eq!(fences.reentry_token(&a, b"x", None), ReentryToken::Next);
        fences.granted(a.clone(), b"x", 5);
        assert_eq!(fences.lookup(|| a.clone()), FenceKnown::Yes);
        assert_eq!(
            fences.reentry_token(&a, b"x", Some(5)),
            ReentryToken::Same(5)
        );
        // Another owner, a moved counter, a deleted one.
        assert_eq!(fences.reentry_token(&a, b"y", Some(5)), ReentryToken::Next);
        assert_eq!(fences.reentry_token(&a, b"x", Some(6)), ReentryToken::Next);
        assert_eq!(fences.reentry_token(&a, b"x", None), ReentryToken::Next);
        assert_eq!(
            fences.reentry_token(&lock(1, "a"), b"x", Some(5)),
            ReentryToken::Next
        );
        // Someone else wrote the counter, even back to the same value.
        fences.seen(a.clone());
        assert_eq!(fences.reentry_token(&a, b"x", Some(5)), ReentryToken::Next);
        fences.granted(a.clone(), b"x", 6);
        fences.lose_track();
        assert_eq!(fences.reentry_token(&a, b"x", Some(6)), ReentryToken::Next);
        // Grants made while inexact are still remembered.
        fences.granted(a.clone(), b"x", 7);
        assert_eq!(
            fences.reentry_token(&a, b"x", Some(7)),
            ReentryToken::Same(7)
        );
        assert_eq!(fences.lookup(|| a.clone()), FenceKnown::Unknown);
    }

    #[test]
    fn flushes_forget_their_databases() {
        let mut fences = KnownFences::new(true);
        fences.seen(lock(0, "a"));
        fences.seen(lock(2, "b"));
        fences.flushed(Some(0));
        assert_eq!(fences.lookup(|| lock(0, "a")), FenceKnown::No);
        assert_eq!(fences.lookup(|| lock(2, "b")), FenceKnown::Yes);
        fences.flushed(None);
        assert_eq!(fences.lookup(|| lock(2, "b")), FenceKnown::No);
    }
}
