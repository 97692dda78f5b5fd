//! The bookkeeping of blocked waiters, free of Redis: who waits on which lock, in
//! which order, from which connection. `H` is the server's handle for a blocked
//! client; the core only stores it.

use std::collections::{BTreeSet, HashMap};

use super::args::AcquireOptions;
use super::requests::RequestId;
use super::rwlock::RwMode;
use super::semaphore::PermitId;
use super::shrink_map;

/// A lock is a key in a database.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LockId {
    pub db: i32,
    pub key: Vec<u8>,
}

/// A lock in database 0, for the core's unit tests.
#[cfg(test)]
pub fn lock_in_db0(key: &str) -> LockId {
    LockId {
        db: 0,
        key: key.as_bytes().to_vec(),
    }
}

/// What a blocked client is told when its wait ends with an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockedReply {
    /// The acquire reply: hold count or fencing token.
    Granted(i64),
    /// An error line.
    Failed(String),
    /// The wait ran out: a null reply.
    TimedOut,
    /// The reply of the same request (`REQ id`) granted before; no new hold.
    Repeated(i64),
    /// Permits leased (`RSEM.LEASE`): their ids. `repeated` for a waiter on the same
    /// request (`REQ id`) as the one granted: the same ids, nothing more leased.
    Leased { ids: Vec<PermitId>, repeated: bool },
}

/// What a blocked client waits for, beside its lock's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wants {
    /// A hold on a lock (its `options` say which side, FAIR, ...).
    Hold,
    /// This many permits of a semaphore (`RSEM.ACQUIRE`).
    Permits(i64),
    /// A count-down latch at zero (`RLATCH.AWAIT`).
    LatchOpen,
}

/// Waiter ids grow with arrival, so a lock's smallest id is its longest waiter.
pub type WaiterId = u64;

#[derive(Debug)]
pub struct Waiter<H> {
    pub lock: LockId,
    /// The other locks of an all-or-nothing multi-key acquire (`RLOCK.MACQUIRE`), in the
    /// same database: the waiter stands in every one of their lines. Empty otherwise.
    pub more_locks: Vec<LockId>,
    pub wants: Wants,
    pub owner: Vec<u8>,
    pub options: AcquireOptions,
    /// The connection that waits.
    pub client: u64,
    /// When the wait runs out (unix ms); far away for `BLOCK 0`.
    pub deadline: i64,
    /// When it began to wait, in microseconds of a monotonic clock.
    pub since_us: u64,
    pub handle: H,
}

#[derive(Debug)]
pub struct WaitList<H> {
    next_id: WaiterId,
    waiters: HashMap<WaiterId, Waiter<H>>,
    by_lock: HashMap<LockId, BTreeSet<WaiterId>>,
    /// The ids of waiters without FAIR, per lock: they do not wait for the fair queue.
    plain_by_lock: HashMap<LockId, BTreeSet<WaiterId>>,
    /// The same ids by (lock, owner), so a queue entry finds its waiter in O(log n).
    by_owner: HashMap<(LockId, Vec<u8>), BTreeSet<WaiterId>>,
    /// The ids of waiters for holds by owner alone, whatever the lock: the edges out of
    /// an owner in deadlock detection's wait-for graph.
    holds_by_owner: HashMap<Vec<u8>, BTreeSet<WaiterId>>,
}

impl<H> Waiter<H> {
    /// Every lock this waiter waits for.
    pub fn locks(&self) -> impl Iterator<Item = &LockId> {
        std::iter::once(&self.lock).chain(&self.more_locks)
    }

    /// Whether it waits for several locks at once.
    pub fn is_multi(&self) -> bool {
        !self.more_locks.is_empty()
    }

    /// What it waits for, as `RLOCK.WAITERS` names it.
    pub fn kind(&self) -> &'static str {
        match self.wants {
            Wants::Permits(_) if self.options.lease.is_some() => "lease",
            Wants::Permits(_) => "permits",
            Wants::LatchOpen => "latch",
            Wants::Hold if self.is_multi() => "multi",
            Wants::Hold => match self.options.mode {
                Some(RwMode::Read) => "read",
                Some(RwMode::Write) => "write",
                None if self.options.fair => "fair",
                None => "lock",
            },
        }
    }
}

impl<H> Default for WaitList<H> {
    fn default() -> Self {
        WaitList {
            next_id: 1,
            waiters: HashMap::new(),
            by_lock: HashMap::new(),
            plain_by_lock: HashMap::new(),
            by_owner: HashMap::new(),
            holds_by_owner: HashMap::new(),
        }
    }
}

impl<H> WaitList<H> {
    /// Queues a waiter at the tail of its locks' lines.
    pub fn push(&mut self, waiter: Waiter<H>) -> WaiterId {
        let id = self.next_id;
        self.next_id += 1;
        for lock in waiter.locks() {
            self.by_lock.entry(lock.clone()).or_default().insert(id);
            if !waiter.options.fair {
                self.plain_by_lock
                    .entry(lock.clone())
                    .or_default()
                    .insert(id);
            }
            self.by_owner
                .entry((lock.clone(), waiter.owner.clone()))
                .or_default()
                .insert(id);
        }
        if waiter.wants == Wants::Hold {
            self.holds_by_owner
                .entry(waiter.owner.clone())
                .or_default()
                .insert(id);
        }
        self.waiters.insert(id, waiter);
        id
    }

    /// Takes a waiter out of line, wherever it stands.
    pub fn remove(&mut self, id: WaiterId) -> Option<Waiter<H>> {
        let waiter = self.waiters.remove(&id)?;
        for lock in waiter.locks() {
            for lines in [&mut self.by_lock, &mut self.plain_by_lock] {
                if let Some(line) = lines.get_mut(lock) {
                    line.remove(&id);
                    if line.is_empty() {
                        lines.remove(lock);
                    }
                }
            }
            let owner_key = (lock.clone(), waiter.owner.clone());
            if let Some(same_owner) = self.by_owner.get_mut(&owner_key) {
                same_owner.remove(&id);
                if same_owner.is_empty() {
                    self.by_owner.remove(&owner_key);
                }
            }
        }
        if waiter.wants == Wants::Hold {
            if let Some(calls) = self.holds_by_owner.get_mut(&waiter.owner) {
                calls.remove(&id);
                if calls.is_empty() {
                    self.holds_by_owner.remove(&waiter.owner);
                }
            }
        }
        shrink_map(&mut self.waiters);
        shrink_map(&mut self.by_lock);
        shrink_map(&mut self.holds_by_owner);
        shrink_map(&mut self.plain_by_lock);
        shrink_map(&mut self.by_owner);
        Some(waiter)
    }

    /// The longest waiter on `lock`.
    pub fn head(&self, lock: &LockId) -> Option<(WaiterId, &Waiter<H>)> {
        let id = *self.by_lock.get(lock)?.first()?;
        self.waiters.get(&id).map(|waiter| (id, waiter))
    }

    /// The longest waiter on `lock` that did not ask for FAIR.
    pub fn first_plain(&self, lock: &LockId) -> Option<WaiterId> {
        self.plain_by_lock.get(lock)?.first().copied()
    }

    /// The longest waiter on `lock` that asked for FAIR. Walks past plain waiters.
    pub fn first_fair(&self, lock: &LockId) -> Option<WaiterId> {
        let line = self.by_lock.get(lock)?;
        if self.plain_by_lock.get(lock).map_or(0, BTreeSet::len) == line.len() {
            return None;
        }
        line.iter()
            .copied()
            .find(|id| self.waiters.get(id).is_some_and(|w| w.options.fair))
    }

    /// Other waiters blocked on the same request (`REQ id`) as `like`: the same locks,
    /// owner and call (an `RSEM.ACQUIRE` and an `RSEM.LEASE` never answer each other, nor
    /// an `RLOCK.ACQUIRE` and an `RLOCK.MACQUIRE`).
    pub fn same_request(&self, like: &Waiter<H>, req: &RequestId) -> Vec<WaiterId> {
        let (lock, owner) = (&like.lock, &like.owner);
        self.by_owner
            .get(&(lock.clone(), owner.to_vec()))
            .into_iter()
            .flatten()
            .copied()
            .filter(|id| {
                self.waiters.get(id).is_some_and(|w| {
                    w.options.req.as_ref() == Some(req)
                        && w.wants == like.wants
                        && w.more_locks == like.more_locks
                        && w.options.lease.is_some() == like.options.lease.is_some()
                })
            })
            .collect()
    }

    /// Whether `owner` has a call blocked here for a hold, on any lock.
    pub fn owner_waits(&self, owner: &[u8]) -> bool {
        self.holds_by_owner.contains_key(owner)
    }

    /// Whether an owner other than `owner` has a call blocked here for a hold.
    pub fn others_wait(&self, owner: &[u8]) -> bool {
        match self.holds_by_owner.len() {
            0 => false,
            1 => !self.holds_by_owner.contains_key(owner),
            _ => true,
        }
    }

    /// The calls of `owner` blocked here for holds, oldest first: each call's id and
    /// every lock it waits for.
    pub fn hold_calls_of(&self, owner: &[u8]) -> Vec<(WaiterId, Vec<LockId>)> {
        self.holds_by_owner
            .get(owner)
            .into_iter()
            .flatten()
            .filter_map(|id| {
                let waiter = self.waiters.get(id)?;
                Some((*id, waiter.locks().cloned().collect()))
            })
            .collect()
    }

    pub fn get(&self, id: WaiterId) -> Option<&Waiter<H>> {
        self.waiters.get(&id)
    }

    /// The longest waiter on `lock` for `owner`, if any waits.
    pub fn find_owner(&self, lock: &LockId, owner: &[u8]) -> Option<(WaiterId, &Waiter<H>)> {
        let id = *self
            .by_owner
            .get(&(lock.clone(), owner.to_vec()))?
            .first()?;
        self.waiters.get(&id).map(|waiter| (id, waiter))
    }

    /// The fair waiters on `lock`, oldest first: (owner, deadline).
    pub fn fair_on(&self, lock: &LockId) -> Vec<(Vec<u8>, i64)> {
        let Some(line) = self.by_lock.get(lock) else {
            return Vec::new();
        };
        line.iter()
            .filter_map(|id| self.waiters.get(id))
            .filter(|w| w.options.fair)
            .map(|w| (w.owner.clone(), w.deadline))
            .collect()
    }

    /// The waiters on `lock`, in arrival order: the order they are served in.
    pub fn line(&self, lock: &LockId) -> impl Iterator<Item = &Waiter<H>> {
        self.by_lock
            .get(lock)
            .into_iter()
            .flatten()
            .filter_map(|id| self.waiters.get(id))
    }

    pub fn waiting_on(&self, lock: &LockId) -> usize {
        self.by_lock.get(lock).map_or(0, BTreeSet::len)
    }

    pub fn has_waiters(&self, lock: &LockId) -> bool {
        self.by_lock.contains_key(lock)
    }

    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// The waiter that has waited longest, on any lock.
    pub fn oldest(&self) -> Option<&Waiter<H>> {
        let id = self.by_lock.values().filter_map(BTreeSet::first).min()?;
        self.waiters.get(id)
    }

    /// Every lock that has waiters.
    pub fn lock_ids(&self) -> impl Iterator<Item = &LockId> {
        self.by_lock.keys()
    }

    /// Locks that have waiters, in `db` or (with `None`) in every database.
    pub fn locks_in(&self, db: Option<i32>) -> Vec<LockId> {
        self.by_lock
            .keys()
            .filter(|lock| db.is_none_or(|db| lock.db == db))
            .cloned()
            .collect()
    }

    /// Every waiter, oldest first; the list is left empty.
    pub fn drain(&mut self) -> Vec<Waiter<H>> {
        self.by_lock.clear();
        self.plain_by_lock.clear();
        self.by_owner.clear();
        self.holds_by_owner.clear();
        let mut all: Vec<(WaiterId, Waiter<H>)> = self.waiters.drain().collect();
        all.sort_by_key(|(id, _)| *id);
        all.into_iter().map(|(_, waiter)| waiter).collect()
    }
}

#[cfg(test)]
mod tests;
