//! Deadlock detection on this server: the wait-for graph as the keys and the blocked
//! calls have it, searched (see `core::deadlock`) when a call is about to block, when
//! an owner that waits here is given a hold, and when a free lock is served and kept
//! for the multi-key call at the head of its line. The verdicts are acted on by the hand-off, the one path by
//! which locks pass. Costs nothing while no call waits: a call granted at once, with
//! nobody blocked on its lock, looks at nothing.

use redis_module::Context;

use crate::core::deadlock::{
    cycle_of_new_wait, cycle_through_owner, describe, soft_waits, youngest_call, Search, WaitEdge,
    WaitGraph, MAX_LOCKS_READ,
};
use crate::core::keyevents::KeyEvent;
use crate::core::waitlist::{LockId, WaiterId};
use crate::{config, keyevents, stats, store, waiters};

/// What to do about the waits around a call or an owner.
#[derive(Debug)]
pub enum Verdict {
    /// No cycle (or none found within the search's bound).
    Clear,
    /// A cycle through free locks kept for multi-key calls: give one of them to a call
    /// waiting behind (the first of `to`, lock and call, that can take it), instead; when
    /// none can, `otherwise`. `None` when a multi-key call of the cycle waits on a kept
    /// lock: it takes that lock with its others once they are free (see
    /// `handoff::multi::grant_all`), so the cycle ends by itself and nobody is refused.
    Yield {
        to: Vec<(LockId, WaiterId)>,
        otherwise: Option<Refusal>,
    },
    /// A cycle of holds.
    Refuse(Refusal),
}

/// A call to refuse: `call` (`None`: the call being made) with `error`, notified on `lock`,
/// the key it asked for.
#[derive(Debug)]
pub struct Refusal {
    pub call: Option<WaiterId>,
    pub error: String,
    pub lock: LockId,
}

/// The wait-for graph as this server has it.
struct ServerGraph<'a> {
    ctx: &'a Context,
}

impl WaitGraph for ServerGraph<'_> {
    fn holders(&mut self, lock: &LockId) -> (Vec<Vec<u8>>, bool) {
        let holders = store::holding_owners(self.ctx, lock);
        if !holders.is_empty() {
            return (holders, false);
        }
        // Free, and its longest waiter a multi-key call: kept for that call.
        match waiters::multi_head_owner(lock) {
            Some(owner) => (vec![owner], true),
            None => (Vec::new(), false),
        }
    }

    fn blocked_calls(&self, owner: &[u8]) -> Vec<(WaiterId, Vec<LockId>)> {
        waiters::hold_calls_of(owner)
    }

    fn others_wait(&self, owner: &[u8]) -> bool {
        waiters::others_wait(owner)
    }
}

/// `owner` is about to block on `locks`.
pub fn judge_new_wait(ctx: &Context, owner: &[u8], locks: &[LockId]) -> Verdict {
    if !config::deadlock_detection() {
        return Verdict::Clear;
    }
    let mut graph = ServerGraph { ctx };
    match cycle_of_new_wait(&mut graph, owner, locks, MAX_LOCKS_READ) {
        Search::Cycle(cycle) => verdict(cycle, None, locks.len() > 1),
        Search::NoCycle | Search::GaveUp => Verdict::Clear,
    }
}

/// Whether `owner` waiting for `lock` would close a cycle (through a soft hold or not).
pub fn wait_closes_a_cycle(ctx: &Context, owner: &[u8], lock: &LockId) -> bool {
    let mut graph = ServerGraph { ctx };
    let locks = std::slice::from_ref(lock);
    config::deadlock_detection()
        && matches!(
            cycle_of_new_wait(&mut graph, owner, locks, MAX_LOCKS_READ),
            Search::Cycle(_)
        )
}

/// `owner`, which has calls blocked here, was given a hold or has a lock kept for its
/// multi-key call: the cycle through it, if any. A cycle of holds refuses its youngest
/// blocked call.
pub fn judge_owner(ctx: &Context, owner: &[u8]) -> Verdict {
    if !config::deadlock_detection() || !waiters::owner_waits(owner) {
        return Verdict::Clear;
    }
    let mut graph = ServerGraph { ctx };
    match cycle_through_owner(&mut graph, owner, MAX_LOCKS_READ) {
        Search::Cycle(cycle) => match youngest_call(&cycle) {
            Some(youngest) => verdict(cycle, Some(youngest), false),
            None => Verdict::Clear,
        },
        Search::NoCycle | Search::GaveUp => Verdict::Clear,
    }
}

/// A cycle's verdict: yield a soft hold to a call waiting on it that may take it, else
/// refuse `refused` (`None`: the call being made, whose wait comes first in the cycle;
/// `new_is_multi`: that call is a multi-key one).
fn verdict(cycle: Vec<WaitEdge>, refused: Option<WaiterId>, new_is_multi: bool) -> Verdict {
    // The refused call's own wait first, so the message reads from it.
    let at = cycle
        .iter()
        .position(|edge| edge.call == refused)
        .unwrap_or(0);
    let mut from_refused = cycle[at..].to_vec();
    from_refused.extend_from_slice(&cycle[..at]);
    let refusal = Refusal {
        call: refused,
        error: describe(&from_refused),
        lock: from_refused[0].lock.clone(),
    };
    // Calls for one lock first: a multi-key call takes a kept lock only with all its others.
    let mut to: Vec<(LockId, WaiterId)> = soft_waits(&cycle)
        .filter_map(|edge| {
            let call = edge.call.filter(|id| waiters::may_take_kept_lock(*id))?;
            Some((edge.lock.clone(), call))
        })
        .collect();
    to.sort_by_key(|(_, call)| waiters::is_multi(*call));
    let multi_waits_on_kept = soft_waits(&cycle).any(|edge| match edge.call {
        Some(call) => waiters::is_multi(call),
        None => new_is_multi,
    });
    match (to.is_empty(), multi_waits_on_kept) {
        (_, true) => Verdict::Yield {
            to,
            otherwise: None,
        },
        (false, false) => Verdict::Yield {
            to,
            otherwise: Some(refusal),
        },
        (true, false) => Verdict::Refuse(refusal),
    }
}

/// A refusal: counted in `deadlocks` and notified as `rlock.deadlock` on `lock`.
pub fn count_refusal(ctx: &Context, lock: &LockId) {
    stats::DEADLOCKS.incr();
    keyevents::lock_in_its_db(ctx, KeyEvent::Deadlock, lock);
}
