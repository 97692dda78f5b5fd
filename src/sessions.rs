//! SESSION holds: released, every re-entry included, when their connection closes.

use std::cell::RefCell;

use redis_module::{Context, RedisString};

use crate::core::hold::{decide_release, decide_release_all, Release};
use crate::core::sessions::SessionTable;
use crate::core::waitlist::LockId;
use crate::store::LockKey;
use crate::{ffi, stats, waiters};

thread_local! {
    static TABLE: RefCell<SessionTable> = RefCell::new(SessionTable::default());
}

fn with_table<T>(f: impl FnOnce(&mut SessionTable) -> T) -> T {
    TABLE.with(|table| f(&mut table.borrow_mut()))
}

pub fn record(client: u64, lock: LockId, owner: Vec<u8>) {
    with_table(|t| t.record(client, lock, owner));
}

/// `owner` released its hold on `key` in the current database.
pub fn forget_hold(ctx: &Context, key: &RedisString, owner: &[u8]) {
    if with_table(|t| t.is_empty()) {
        return;
    }
    let lock = waiters::lock_id(ctx, key);
    with_table(|t| t.forget_hold(&lock, owner));
}

pub fn is_empty() -> bool {
    with_table(|t| t.is_empty())
}

pub fn forget_lock(lock: &LockId) {
    with_table(|t| t.forget_lock(lock));
}

pub fn forget_db(db: Option<i32>) {
    with_table(|t| t.forget_db(db));
}

pub fn forget_all() {
    with_table(SessionTable::clear);
}

pub fn has_lock(lock: &LockId) -> bool {
    with_table(|t| t.has_lock(lock))
}

pub fn locks() -> Vec<LockId> {
    with_table(|t| t.locks().cloned().collect())
}

/// Connection `client` closed: the holds it took with SESSION.
pub fn disconnected(client: u64) -> Vec<(LockId, Vec<u8>)> {
    with_table(|t| t.disconnected(client))
}

/// Gives back `owner`'s hold on `lock`: every re-entry when `all`, else one.
/// `ctx` must have `lock.db` selected. Serves waiters if the lock frees.
pub fn release_hold(ctx: &Context, lock: &LockId, owner: &[u8], all: bool) {
    let key = ffi::string(ctx, &lock.key);
    let owner_string: RedisString = ffi::string(ctx, owner);
    let freed = {
        let Ok(lock_key) = LockKey::open(ctx, &key) else {
            return;
        };
        let Ok(state) = lock_key.state(&owner_string) else {
            return;
        };
        let release = if all {
            decide_release_all(state)
        } else {
            decide_release(state)
        };
        if release == Release::NotHeld {
            return;
        }
        lock_key.apply_release(&owner_string, release);
        release == Release::Last { lock_freed: true }
    };
    if all {
        stats::SESSION_RELEASES.incr();
    } else if freed {
        stats::RELEASES.incr();
    }
    if freed {
        forget_lock(lock);
        waiters::serve(ctx, lock);
    }
}
