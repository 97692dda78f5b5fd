//! Clients blocked on a lock, per key, first come first served.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};

use redis_module::RedisString;

/// Waiter ids per lock key, oldest first.
#[derive(Default)]
struct Registry {
    by_key: HashMap<Vec<u8>, VecDeque<u64>>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

/// How many clients wait on `key`.
pub fn blocked_on(key: &RedisString) -> usize {
    REGISTRY.with(|registry| {
        registry
            .borrow()
            .by_key
            .get(key.as_slice())
            .map_or(0, VecDeque::len)
    })
}

/// How many clients wait, on every key.
pub fn blocked_total() -> usize {
    REGISTRY.with(|registry| registry.borrow().by_key.values().map(VecDeque::len).sum())
}

/// How many locks have waiters.
pub fn tracked_locks() -> usize {
    REGISTRY.with(|registry| registry.borrow().by_key.len())
}
