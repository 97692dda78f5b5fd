//! Deadlock detection, free of Redis: the wait-for graph among the calls blocked on
//! this server and the holders of the locks they wait for, and a bounded search for a
//! cycle in it.
//!
//! The graph's nodes are owners. An owner with a call blocked on a lock waits for
//! every other holder of that lock (a multi-key call: of each of its locks). A new
//! wait closes a cycle when one of the holders it would wait for reaches its owner
//! again; a new hold closes one when its owner, blocked elsewhere, reaches itself.
//!
//! A free lock kept for a multi-key call at the head of its line (`RLOCK.MACQUIRE`
//! waits to take all its locks at once) is held by that call's owner as far as the
//! waiters behind it go: a soft hold. A cycle through a soft hold is broken by giving
//! the lock to the waiter behind instead, never by refusing anyone.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use super::waitlist::{LockId, WaiterId};

/// How many locks one search reads at most. A search that would read more gives up
/// and refuses nothing: one check is bounded, whatever the number of blocked calls.
pub const MAX_LOCKS_READ: usize = 100;

/// What the search needs of the server: who holds a lock, and what an owner waits for.
pub trait WaitGraph {
    /// The owners holding `lock` now (a read-write lock's writer by its owner, without
    /// `:write`), and whether theirs is a soft hold (a free lock kept for a multi-key
    /// call). Empty for a free lock or a key that is no lock.
    fn holders(&mut self, lock: &LockId) -> (Vec<Vec<u8>>, bool);
    /// The calls of `owner` blocked here: each call's id and the locks it waits for.
    fn blocked_calls(&self, owner: &[u8]) -> Vec<(WaiterId, Vec<LockId>)>;
    /// Whether an owner other than `owner` has a call blocked here. Without one, no cycle
    /// can pass through `owner` (its holders would have to wait): nothing is read.
    fn others_wait(&self, owner: &[u8]) -> bool;
}

/// One wait of a cycle: `owner`'s call (`None` for the call being made) waits for
/// `lock`, which `holder` holds (`soft`: keeps free for its multi-key call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitEdge {
    pub owner: Vec<u8>,
    pub call: Option<WaiterId>,
    pub lock: LockId,
    pub holder: Vec<u8>,
    pub soft: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Search {
    /// The waits of a cycle, from the start owner's round to it.
    Cycle(Vec<WaitEdge>),
    NoCycle,
    /// The search read `MAX_LOCKS_READ` locks without an answer.
    GaveUp,
}

/// A call `owner` is making, blocked on `locks`: the cycle it would close, if any.
pub fn cycle_of_new_wait(
    graph: &mut impl WaitGraph,
    owner: &[u8],
    locks: &[LockId],
    budget: usize,
) -> Search {
    find_cycle(graph, owner, vec![(None, locks.to_vec())], budget)
}

/// `owner` was just given a hold: the cycle through its blocked calls back to it, if
/// any.
pub fn cycle_through_owner(graph: &mut impl WaitGraph, owner: &[u8], budget: usize) -> Search {
    let calls = graph
        .blocked_calls(owner)
        .into_iter()
        .map(|(id, locks)| (Some(id), locks))
        .collect();
    find_cycle(graph, owner, calls, budget)
}

/// The waits of a cycle on soft holds: giving one's lock to its call breaks the cycle.
pub fn soft_waits(cycle: &[WaitEdge]) -> impl Iterator<Item = &WaitEdge> {
    cycle.iter().filter(|edge| edge.soft)
}

/// The youngest blocked call of a cycle (waiter ids grow with arrival): the one to
/// refuse when a grant closed it.
pub fn youngest_call(cycle: &[WaitEdge]) -> Option<WaiterId> {
    cycle.iter().filter_map(|edge| edge.call).max()
}

/// A search from `start`'s calls for a way back to `start`, depth first. An owner is
/// visited once: one that did not lead back the first time never will.
fn find_cycle(
    graph: &mut impl WaitGraph,
    start: &[u8],
    first_calls: Vec<(Option<WaiterId>, Vec<LockId>)>,
    budget: usize,
) -> Search {
    if !graph.others_wait(start) {
        return Search::NoCycle;
    }
    let mut read: HashMap<LockId, (Vec<Vec<u8>>, bool)> = HashMap::new();
    let mut visited: HashSet<Vec<u8>> = HashSet::new();
    visited.insert(start.to_vec());
    // Each frame: an owner on the path and the waits left to try from it; `path` holds
    // the wait taken from each frame below the top.
    let mut frames: Vec<Vec<WaitEdge>> = Vec::new();
    let mut path: Vec<WaitEdge> = Vec::new();
    let mut gave_up = false;
    let first = match edges_from(graph, start, first_calls, &mut read, budget) {
        Some(edges) => edges,
        None => return Search::GaveUp,
    };
    frames.push(first);
    while let Some(frame) = frames.last_mut() {
        let Some(edge) = frame.pop() else {
            frames.pop();
            path.pop();
            continue;
        };
        if edge.holder == start {
            path.push(edge);
            return Search::Cycle(path);
        }
        if !visited.insert(edge.holder.clone()) {
            continue;
        }
        let calls = graph
            .blocked_calls(&edge.holder)
            .into_iter()
            .map(|(id, locks)| (Some(id), locks))
            .collect();
        match edges_from(graph, &edge.holder, calls, &mut read, budget) {
            Some(next) => {
                path.push(edge);
                frames.push(next);
            }
            None => {
                gave_up = true;
                break;
            }
        }
    }
    match gave_up {
        true => Search::GaveUp,
        false => Search::NoCycle,
    }
}

/// The waits of `owner`'s `calls`, in the order to try them (the last first); `None`
/// past the budget of locks read.
fn edges_from(
    graph: &mut impl WaitGraph,
    owner: &[u8],
    calls: Vec<(Option<WaiterId>, Vec<LockId>)>,
    read: &mut HashMap<LockId, (Vec<Vec<u8>>, bool)>,
    budget: usize,
) -> Option<Vec<WaitEdge>> {
    let mut edges = Vec::new();
    for (call, locks) in calls {
        for lock in locks {
            if !read.contains_key(&lock) {
                if read.len() >= budget {
                    return None;
                }
                let holders = graph.holders(&lock);
                read.insert(lock.clone(), holders);
            }
            // An owner does not wait for its own holds (a re-entry is granted).
            let (holders, soft) = &read[&lock];
            for holder in holders.iter().filter(|h| h.as_slice() != owner) {
                edges.push(WaitEdge {
                    owner: owner.to_vec(),
                    call,
                    lock: lock.clone(),
                    holder: holder.clone(),
                    soft: *soft,
                });
            }
        }
    }
    edges.reverse();
    Some(edges)
}

/// The error reply's text: `DEADLOCK "b" waits for "k1" held by "a"; "a" waits for
/// "k2" held by "b"`, every name quoted as redis-cli shows strings; a lock kept free
/// for a multi-key call is "kept for" its owner.
pub fn describe(cycle: &[WaitEdge]) -> String {
    let mut text = String::from("DEADLOCK ");
    for (i, edge) in cycle.iter().enumerate() {
        if i > 0 {
            text.push_str("; ");
        }
        let held = match edge.soft {
            true => "kept for",
            false => "held by",
        };
        let _ = write!(
            text,
            "{} waits for {} {held} {}",
            quoted(&edge.owner),
            quoted(&edge.lock.key),
            quoted(&edge.holder)
        );
    }
    text
}

/// `bytes` in double quotes, `"` and `\` escaped, other bytes outside printable
/// ASCII as `\xNN`: a name with spaces or semicolons still reads back unambiguously.
pub fn quoted(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() + 2);
    text.push('"');
    for &b in bytes {
        match b {
            b'"' => text.push_str("\\\""),
            b'\\' => text.push_str("\\\\"),
            0x20..=0x7e => text.push(b as char),
            _ => {
                let _ = write!(text, "\\x{b:02x}");
            }
        }
    }
    text.push('"');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph of locks held by owners and calls blocked on locks.
    #[derive(Default)]
    struct Graph {
        held: HashMap<LockId, Vec<Vec<u8>>>,
        kept: HashMap<LockId, Vec<u8>>,
        calls: Vec<(WaiterId, Vec<u8>, Vec<LockId>)>,
        reads: usize,
    }

    use crate::core::waitlist::lock_in_db0 as lock;

    impl Graph {
        fn hold(&mut self, key: &str, owner: &str) -> &mut Self {
            let holders = self.held.entry(lock(key)).or_default();
            holders.push(owner.as_bytes().to_vec());
            self
        }
        fn wait(&mut self, owner: &str, keys: &[&str]) -> WaiterId {
            let id = self.calls.len() as WaiterId + 1;
            let locks = keys.iter().map(|k| lock(k)).collect();
            self.calls.push((id, owner.as_bytes().to_vec(), locks));
            id
        }
    }

    impl WaitGraph for Graph {
        fn holders(&mut self, lock: &LockId) -> (Vec<Vec<u8>>, bool) {
            self.reads += 1;
            match (self.held.get(lock), self.kept.get(lock)) {
                (Some(held), _) => (held.clone(), false),
                (None, Some(multi)) => (vec![multi.clone()], true),
                (None, None) => (Vec::new(), false),
            }
        }
        fn blocked_calls(&self, owner: &[u8]) -> Vec<(WaiterId, Vec<LockId>)> {
            self.calls
                .iter()
                .filter(|(_, o, _)| o == owner)
                .map(|(id, _, locks)| (*id, locks.clone()))
                .collect()
        }
        fn others_wait(&self, owner: &[u8]) -> bool {
            self.calls.iter().any(|(_, o, _)| o != owner)
        }
    }

    fn owners(cycle: &[WaitEdge]) -> Vec<String> {
        cycle
            .iter()
            .map(|e| {
                format!(
                    "{}>{}>{}",
                    String::from_utf8_lossy(&e.owner),
                    String::from_utf8_lossy(&e.lock.key),
                    String::from_utf8_lossy(&e.holder)
                )
            })
            .collect()
    }

    #[test]
    fn two_owners_in_opposite_order_close_a_cycle() {
        let mut g = Graph::default();
        g.hold("k1", "a").hold("k2", "b");
        g.wait("a", &["k2"]);
        let Search::Cycle(cycle) = cycle_of_new_wait(&mut g, b"b", &[lock("k1")], 100) else {
            panic!("no cycle");
        };
        assert_eq!(owners(&cycle), ["b>k1>a", "a>k2>b"]);
        assert_eq!(cycle[0].call, None);
        assert_eq!(youngest_call(&cycle), Some(1));
        assert_eq!(
            describe(&cycle),
            r#"DEADLOCK "b" waits for "k1" held by "a"; "a" waits for "k2" held by "b""#
        );
    }

    #[test]
    fn three_owners_close_a_cycle_and_a_chain_does_not() {
        let mut g = Graph::default();
        g.hold("k1", "a").hold("k2", "b").hold("k3", "c");
        g.wait("a", &["k2"]);
        g.wait("b", &["k3"]);
        assert_eq!(
            cycle_of_new_wait(&mut g, b"d", &[lock("k1")], 100),
            Search::NoCycle
        );
        let Search::Cycle(cycle) = cycle_of_new_wait(&mut g, b"c", &[lock("k1")], 100) else {
            panic!("no cycle");
        };
        assert_eq!(owners(&cycle), ["c>k1>a", "a>k2>b", "b>k3>c"]);
    }

    #[test]
    fn an_owner_does_not_wait_for_its_own_hold() {
        let mut g = Graph::default();
        g.hold("k1", "a").hold("k1", "b").hold("k2", "b");
        // a holds k1 with b (readers); a waits for k2 and k1: only b's holds count.
        assert_eq!(
            cycle_of_new_wait(&mut g, b"a", &[lock("k1"), lock("k2")], 100),
            Search::NoCycle
        );
        g.wait("b", &["k1"]);
        assert!(matches!(
            cycle_of_new_wait(&mut g, b"a", &[lock("k2")], 100),
            Search::Cycle(_)
        ));
    }

    #[test]
    fn a_multi_key_wait_waits_for_the_holders_of_each_key() {
        let mut g = Graph::default();
        g.hold("k1", "a").hold("k2", "b").hold("k3", "c");
        g.wait("c", &["k1"]);
        let Search::Cycle(cycle) = cycle_of_new_wait(&mut g, b"a", &[lock("k2"), lock("k3")], 100)
        else {
            panic!("no cycle");
        };
        assert_eq!(owners(&cycle), ["a>k3>c", "c>k1>a"]);
    }

    #[test]
    fn a_grant_that_closes_a_cycle_names_its_youngest_call() {
        let mut g = Graph::default();
        // a waits for k2 (held by b); b waits for k1, just granted to a.
        g.hold("k2", "b");
        let a_wait = g.wait("a", &["k2"]);
        let b_wait = g.wait("b", &["k1"]);
        assert_eq!(cycle_through_owner(&mut g, b"a", 100), Search::NoCycle);
        g.hold("k1", "a");
        let Search::Cycle(cycle) = cycle_through_owner(&mut g, b"a", 100) else {
            panic!("no cycle");
        };
        assert_eq!(owners(&cycle), ["a>k2>b", "b>k1>a"]);
        assert_eq!(cycle[0].call, Some(a_wait));
        assert_eq!(youngest_call(&cycle), Some(b_wait));
        assert_eq!(cycle_through_owner(&mut g, b"c", 100), Search::NoCycle);
    }

    #[test]
    fn a_cycle_through_a_lock_kept_for_a_multi_key_call_is_soft() {
        let mut g = Graph::default();
        // m waits for k1 (held by a) and k4 (free, kept for m); c holds k3 and waits
        // behind m for k4; a, holding k1, now waits for k3.
        g.hold("k1", "a").hold("k3", "c");
        g.wait("m", &["k1", "k4"]);
        g.kept.insert(lock("k4"), b"m".to_vec());
        let c_wait = g.wait("c", &["k4"]);
        let Search::Cycle(cycle) = cycle_of_new_wait(&mut g, b"a", &[lock("k3")], 100) else {
            panic!("no cycle");
        };
        assert_eq!(owners(&cycle), ["a>k3>c", "c>k4>m", "m>k1>a"]);
        let soft: Vec<_> = soft_waits(&cycle).collect();
        assert_eq!(soft.len(), 1);
        assert_eq!((soft[0].call, &soft[0].lock), (Some(c_wait), &lock("k4")));
        assert!(soft_waits(&cycle[..1]).next().is_none());
    }

    #[test]
    fn a_long_chain_is_searched_within_the_budget() {
        let mut g = Graph::default();
        for i in 0..50 {
            g.hold(&format!("k{i}"), &format!("o{i}"));
            if i > 0 {
                g.wait(&format!("o{i}"), &[&format!("k{}", i - 1)]);
            }
        }
        // o0 closing the chain: a cycle of 50.
        let Search::Cycle(cycle) = cycle_of_new_wait(&mut g, b"o0", &[lock("k49")], 100) else {
            panic!("no cycle");
        };
        assert_eq!(cycle.len(), 50);
        assert_eq!(
            cycle_of_new_wait(&mut g, b"o0", &[lock("k49")], 10),
            Search::GaveUp
        );
    }

    #[test]
    fn nothing_is_read_while_nobody_else_waits() {
        let mut g = Graph::default();
        g.hold("k1", "a").hold("k2", "b");
        g.wait("b", &["k3"]);
        assert_eq!(
            cycle_of_new_wait(&mut g, b"b", &[lock("k1")], 100),
            Search::NoCycle
        );
        assert_eq!(cycle_through_owner(&mut g, b"b", 100), Search::NoCycle);
        assert_eq!(g.reads, 0);
        assert_eq!(
            cycle_of_new_wait(&mut g, b"a", &[lock("k2")], 100),
            Search::NoCycle
        );
        assert_eq!(g.reads, 2);
    }

    #[test]
    fn every_lock_is_read_once_per_search() {
        let mut g = Graph::default();
        g.hold("shared", "h");
        for i in 0..20 {
            g.hold(&format!("own{i}"), &format!("w{i}"));
            g.wait(&format!("w{i}"), &["shared"]);
        }
        g.wait("h", &["own0", "own1", "own2"]);
        // x waits for own0..own19: each of their holders waits for "shared", held by h,
        // who waits for own0..2 again; x is never reached.
        let keys: Vec<LockId> = (0..20).map(|i| lock(&format!("own{i}"))).collect();
        assert_eq!(cycle_of_new_wait(&mut g, b"x", &keys, 100), Search::NoCycle);
        assert_eq!(g.reads, 21);
    }

    #[test]
    fn names_are_quoted_unambiguously() {
        assert_eq!(quoted(b"plain:1"), r#""plain:1""#);
        assert_eq!(quoted(b"a \"b\"; c\\"), r#""a \"b\"; c\\""#);
        assert_eq!(quoted(&[0, 0xff, b'\n']), r#""\x00\xff\x0a""#);
    }
}
