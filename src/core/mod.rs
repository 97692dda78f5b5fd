//! The lock semantics, free of Redis: argument grammar, hold decisions, lease
//! arithmetic, helper key names. Everything here is tested with plain `cargo test`.

pub mod args;
pub mod cluster;
pub mod deadlock;
pub mod deferred;
pub mod fair;
pub mod fences;
pub mod guard;
pub mod hold;
pub mod integer;
pub mod keyevents;
pub mod keys;
pub mod latch;
pub mod lease;
pub mod requests;
pub mod rwlock;
pub mod scan;
pub mod semaphore;
pub mod sessions;
pub mod sharing;
pub mod timer_table;
pub mod wait_stats;
pub mod waitlist;

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// Gives memory back once a table has mostly emptied: a map otherwise keeps the
/// capacity of its busiest moment for as long as the module is loaded. Halving
/// only below a quarter full keeps the cost amortised.
pub fn shrink_map<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 32 && map.len() * 4 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

/// A command's words as the server hands them over, for the unit tests.
#[cfg(test)]
pub fn words<'a>(words: &[&'a str]) -> Vec<&'a [u8]> {
    words.iter().map(|w| w.as_bytes()).collect()
}

/// `shrink_map` for a set.
pub fn shrink_set<T: Eq + Hash>(set: &mut HashSet<T>) {
    if set.capacity() > 32 && set.len() * 4 < set.capacity() {
        set.shrink_to(set.len() * 2);
    }
}
