//! The work the module starts by itself, as data: what timers, keyspace and server
//! events and disconnects ask for. Kept in arrival order; a lock asked to be
//! served twice is served once, after every other piece of work on it.

use super::requests::RequestId;
use super::semaphore::PermitId;
use super::waitlist::LockId;

/// One piece of self-started work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// Blocked fair waiters left: their queue entries go, all in one pass.
    Leave { lock: LockId, owners: Vec<Vec<u8>> },
    /// Someone else removed fair queue entries: waiters still blocked here go back in line.
    Requeue { lock: LockId },
    /// A hold to give back: a SESSION connection closed (`all`, every re-entry), or
    /// a grant whose client left before hearing it (one hold).
    Release {
        lock: LockId,
        /// The hold's hash field: its owner, or a read-write lock's `owner:write`.
        field: Vec<u8>,
        all: bool,
        /// The `REQ` id of the grant given back, whose record beside `lock` goes with it
        /// (a retry is a new call); on the first lock of a multi-key grant only.
        req: Option<RequestId>,
    },
    /// A grant of `n` semaphore permits whose client left before hearing it: they go back,
    /// and the record of its `REQ` id goes with them (a retry is a new call).
    ReturnPermits {
        lock: LockId,
        n: i64,
        req: Option<RequestId>,
    },
    /// Leased permits to give back to semaphore `lock` if they are still leased: their
    /// SESSION connection closed, or their grant never reached its client.
    ReturnLeases { lock: LockId, ids: Vec<PermitId> },
    /// The lease deadline of a watched lock passed: expire it and pass it on.
    LeaseDeadline { lock: LockId },
    /// The lock may have freed or its lease moved: pass it on, re-arm its timer.
    Serve { lock: LockId },
    /// A tracked fair queue's next look is due: entries past their deadline go, and
    /// the queue, once empty, is no longer tracked.
    LookAtQueue { lock: LockId },
}

/// Work waiting for the next safe moment to write.
#[derive(Debug, Default)]
pub struct DeferredWork {
    work: Vec<Work>,
}

impl DeferredWork {
    pub fn push(&mut self, work: Work) {
        match work {
            // Many waiters of one lock leave together when their clients die together:
            // one pass over the queue for all of them, not one each.
            Work::Leave { lock, owners } => {
                let same_lock = self.work.iter_mut().find_map(|w| match w {
                    Work::Leave { lock: l, owners } if *l == lock => Some(owners),
                    _ => None,
                });
                match same_lock {
                    Some(queued) => queued.extend(owners),
                    None => self.work.push(Work::Leave { lock, owners }),
                }
            }
            // Asking twice to serve or requeue a lock is asking once.
            Work::Serve { .. } | Work::Requeue { .. } | Work::LookAtQueue { .. }
                if self.work.contains(&work) => {}
            work => self.work.push(work),
        }
    }

    /// Everything queued, in the order it should run: departed waiters leave the
    /// queue and removed ones rejoin it before holds are given back, so a freed lock
    /// goes to a waiter still there; serves come last. Arrival order within a kind.
    pub fn take(&mut self) -> Vec<Work> {
        let mut work = std::mem::take(&mut self.work);
        work.sort_by_key(|w| match w {
            Work::Leave { .. } => 0,
            Work::Requeue { .. } => 1,
            Work::Release { .. } | Work::ReturnPermits { .. } | Work::ReturnLeases { .. } => 2,
            Work::LeaseDeadline { .. } | Work::Serve { .. } | Work::LookAtQueue { .. } => 3,
        });
        work
    }

    pub fn is_empty(&self) -> bool {
        self.work.is_empty()
    }

    /// Takes back the queued give-back of permits granted to the call `req` on `lock`: the
    /// same call sent again keeps them. Their count, if one was queued.
    pub fn take_permit_return(&mut self, lock: &LockId, req: &RequestId) -> Option<i64> {
        let at = self.work.iter().position(|w| {
            matches!(w, Work::ReturnPermits { lock: l, req: Some(r), .. } if l == lock && r == req)
        })?;
        match self.work.remove(at) {
            Work::ReturnPermits { n, .. } => Some(n),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.work.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::core::waitlist::lock_in_db0 as lock;

    #[test]
    fn work_runs_by_kind_and_merges_per_lock() {
        let mut deferred = DeferredWork::default();
        deferred.push(Work::Serve { lock: lock("a") });
        deferred.push(Work::Release {
            lock: lock("a"),
            field: b"o".to_vec(),
            all: true,
            req: None,
        });
        deferred.push(Work::Serve { lock: lock("a") });
        deferred.push(Work::Requeue { lock: lock("b") });
        deferred.push(Work::Requeue { lock: lock("b") });
        deferred.push(Work::Leave {
            lock: lock("b"),
            owners: vec![b"p".to_vec()],
        });
        deferred.push(Work::Leave {
            lock: lock("b"),
            owners: vec![b"q".to_vec()],
        });
        assert_eq!(deferred.len(), 4);
        let work = deferred.take();
        assert_eq!(
            work[0],
            Work::Leave {
                lock: lock("b"),
                owners: vec![b"p".to_vec(), b"q".to_vec()],
            }
        );
        assert_eq!(work[1], Work::Requeue { lock: lock("b") });
        assert!(matches!(work[2], Work::Release { .. }));
        assert_eq!(work[3], Work::Serve { lock: lock("a") });
        assert!(deferred.is_empty());
    }
}
