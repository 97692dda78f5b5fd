//! Which holds were taken with `SESSION`, and by which connection, free of Redis.

use std::collections::{HashMap, HashSet};

use super::waitlist::LockId;
use super::{shrink_map, shrink_set};

/// A hold that ends when its connection closes.
pub type SessionHold = (LockId, Vec<u8>);

#[derive(Debug, Default)]
pub struct SessionTable {
    by_client: HashMap<u64, HashSet<SessionHold>>,
    by_lock: HashMap<LockId, HashMap<Vec<u8>, u64>>,
}

impl SessionTable {
    /// Ties `owner`'s hold on `lock` to connection `client`. The latest
    /// connection wins when the same hold is taken again elsewhere.
    pub fn record(&mut self, client: u64, lock: LockId, owner: Vec<u8>) {
        let previous = self
            .by_lock
            .entry(lock.clone())
            .or_default()
            .insert(owner.clone(), client);
        if let Some(previous) = previous.filter(|previous| *previous != client) {
            self.unlink_client(previous, &(lock.clone(), owner.clone()));
        }
        self.by_client
            .entry(client)
            .or_default()
            .insert((lock, owner));
    }

    /// The hold ended some other way (released, deleted, expired).
    pub fn forget_hold(&mut self, lock: &LockId, owner: &[u8]) {
        let Some(owners) = self.by_lock.get_mut(lock) else {
            return;
        };
        let client = owners.remove(owner);
        if owners.is_empty() {
            self.by_lock.remove(lock);
            shrink_map(&mut self.by_lock);
        }
        if let Some(client) = client {
            self.unlink_client(client, &(lock.clone(), owner.to_vec()));
        }
    }

    /// Every hold on `lock` ended at once (deleted, expired, flushed).
    pub fn forget_lock(&mut self, lock: &LockId) {
        for (owner, client) in self.by_lock.remove(lock).unwrap_or_default() {
            self.unlink_client(client, &(lock.clone(), owner));
        }
        shrink_map(&mut self.by_lock);
    }

    /// Every hold in database `db`, or everywhere with `None`.
    pub fn forget_db(&mut self, db: Option<i32>) {
        let locks: Vec<LockId> = self
            .by_lock
            .keys()
            .filter(|lock| db.is_none_or(|db| lock.db == db))
            .cloned()
            .collect();
        for lock in locks {
            self.forget_lock(&lock);
        }
    }

    /// Connection `client` closed: the holds to release.
    pub fn disconnected(&mut self, client: u64) -> Vec<SessionHold> {
        let holds: Vec<SessionHold> = self
            .by_client
            .remove(&client)
            .unwrap_or_default()
            .into_iter()
            .collect();
        for (lock, owner) in &holds {
            if let Some(owners) = self.by_lock.get_mut(lock) {
                owners.remove(owner);
                if owners.is_empty() {
                    self.by_lock.remove(lock);
                }
            }
        }
        shrink_map(&mut self.by_lock);
        shrink_map(&mut self.by_client);
        holds
    }

    pub fn is_empty(&self) -> bool {
        self.by_lock.is_empty()
    }

    pub fn has_lock(&self, lock: &LockId) -> bool {
        self.by_lock.contains_key(lock)
    }

    pub fn locks(&self) -> impl Iterator<Item = &LockId> {
        self.by_lock.keys()
    }

    pub fn clear(&mut self) {
        self.by_client.clear();
        self.by_lock.clear();
    }

    fn unlink_client(&mut self, client: u64, hold: &SessionHold) {
        if let Some(holds) = self.by_client.get_mut(&client) {
            holds.remove(hold);
            if holds.is_empty() {
                self.by_client.remove(&client);
                shrink_map(&mut self.by_client);
            } else {
                shrink_set(holds);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::core::waitlist::lock_in_db0 as lock;

    #[test]
    fn disconnect_returns_the_connections_holds_once() {
        let mut table = SessionTable::default();
        table.record(7, lock("a"), b"o".to_vec());
        table.record(7, lock("b"), b"o".to_vec());
        table.record(8, lock("c"), b"p".to_vec());
        let mut holds = table.disconnected(7);
        holds.sort();
        assert_eq!(
            holds,
            vec![(lock("a"), b"o".to_vec()), (lock("b"), b"o".to_vec())]
        );
        assert!(table.disconnected(7).is_empty());
        assert!(table.has_lock(&lock("c")) && !table.has_lock(&lock("a")));
    }

    #[test]
    fn released_holds_are_not_released_again() {
        let mut table = SessionTable::default();
        table.record(7, lock("a"), b"o".to_vec());
        table.forget_hold(&lock("a"), b"o");
        assert!(table.disconnected(7).is_empty());
        table.record(7, lock("a"), b"o".to_vec());
        table.forget_lock(&lock("a"));
        assert!(table.disconnected(7).is_empty());
    }

    #[test]
    fn the_latest_connection_owns_a_hold() {
        let mut table = SessionTable::default();
        table.record(7, lock("a"), b"o".to_vec());
        table.record(9, lock("a"), b"o".to_vec());
        assert!(table.disconnected(7).is_empty());
        assert_eq!(table.disconnected(9).len(), 1);
    }

    #[test]
    fn flushing_a_database_forgets_its_holds() {
        let mut table = SessionTable::default();
        table.record(7, lock("a"), b"o".to_vec());
        let mut elsewhere = lock("a");
        elsewhere.db = 2;
        table.record(7, elsewhere.clone(), b"o".to_vec());
        table.forget_db(Some(0));
        assert_eq!(table.disconnected(7), vec![(elsewhere, b"o".to_vec())]);
    }
}
