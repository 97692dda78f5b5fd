//! Which locks have a fencing counter, known without a keyspace lookup.
//!
//! A lock taken from free bumps its counter when the counter exists. Looking the
//! counter key up on every acquire is a hash miss in a large keyspace, which cost
//! more than the rest of the acquire. So the module remembers the counters it has
//! seen: those it wrote and those loaded from disk or restored. While it has seen
//! every counter (`exact`), a lock outside the set has none.

use std::collections::HashSet;

use super::waitlist::LockId;

#[derive(Debug)]
pub struct KnownFences {
    /// False when counters may exist that the module has not seen: loaded into a
    /// server that already held data, or once a replica, whose counters arrive by
    /// replication unseen.
    exact: bool,
    locks: HashSet<LockId>,
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
            locks: HashSet::new(),
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
        } else if self.locks.is_empty() || !self.locks.contains(&lock()) {
            FenceKnown::No
        } else {
            FenceKnown::Yes
        }
    }

    pub fn seen(&mut self, lock: LockId) {
        self.locks.insert(lock);
    }

    pub fn gone(&mut self, lock: &LockId) {
        self.locks.remove(lock);
    }

    /// Database `db` (or every one) was emptied.
    pub fn flushed(&mut self, db: Option<i32>) {
        self.locks.retain(|lock| db.is_some_and(|db| lock.db != db));
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
