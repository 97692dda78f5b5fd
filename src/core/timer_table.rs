//! One lease timer per watched lock, as data: which timer is armed for which lock
//! and deadline, found again by the tag the timer carries.

use std::collections::HashMap;

use super::shrink_map;
use super::waitlist::LockId;

#[derive(Debug, Default)]
pub struct TimerTable {
    /// Lock -> (timer id, deadline in unix ms, tag).
    by_lock: HashMap<LockId, (u64, i64, u64)>,
    by_tag: HashMap<u64, LockId>,
    next_tag: u64,
}

impl TimerTable {
    pub fn deadline_of(&self, lock: &LockId) -> Option<i64> {
        self.by_lock.get(lock).map(|(_, deadline, _)| *deadline)
    }

    /// A tag for a timer about to be armed.
    pub fn next_tag(&mut self) -> u64 {
        self.next_tag += 1;
        self.next_tag
    }

    pub fn insert(&mut self, lock: LockId, timer: u64, deadline: i64, tag: u64) {
        self.by_tag.insert(tag, lock.clone());
        self.by_lock.insert(lock, (timer, deadline, tag));
    }

    /// Forgets `lock`'s timer; returns its id, to be stopped.
    pub fn remove(&mut self, lock: &LockId) -> Option<u64> {
        let (timer, _, tag) = self.by_lock.remove(lock)?;
        self.by_tag.remove(&tag);
        self.shrink();
        Some(timer)
    }

    /// The timer tagged `tag` fired: forgets it and returns its lock and deadline.
    pub fn fired(&mut self, tag: u64) -> Option<(LockId, i64)> {
        let lock = self.by_tag.remove(&tag)?;
        let deadline = self
            .by_lock
            .remove(&lock)
            .map_or(0, |(_, deadline, _)| deadline);
        self.shrink();
        Some((lock, deadline))
    }

    pub fn is_empty(&self) -> bool {
        self.by_lock.is_empty()
    }

    fn shrink(&mut self) {
        shrink_map(&mut self.by_lock);
        shrink_map(&mut self.by_tag);
    }

    /// Every timer id, the table emptied.
    pub fn drain(&mut self) -> Vec<u64> {
        self.by_tag.clear();
        self.by_lock
            .drain()
            .map(|(_, (timer, _, _))| timer)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fired_timer_is_forgotten() {
        let lock = LockId {
            db: 0,
            key: b"k".to_vec(),
        };
        let mut table = TimerTable::default();
        let tag = table.next_tag();
        table.insert(lock.clone(), 7, 1000, tag);
        assert_eq!(table.deadline_of(&lock), Some(1000));
        assert_eq!(table.fired(tag).map(|(lock, _)| lock), Some(lock.clone()));
        assert!(table.is_empty());
        assert_eq!(table.fired(tag), None);
        let tag = table.next_tag();
        table.insert(lock.clone(), 8, 2000, tag);
        assert_eq!(table.remove(&lock), Some(8));
        assert_eq!(table.fired(tag), None);
    }
}
