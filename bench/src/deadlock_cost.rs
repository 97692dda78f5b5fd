//! What deadlock detection costs a blocked hand-off (`rlock-cost --deadlock`): server
//! instructions (callgrind, as the cost check counts them) per hand-off with the check on and
//! off, with 10, 1,000 and 10,000 other calls blocked on the server, in two shapes:
//!
//! - `apart`: each other call waits for a lock whose holder waits for nothing. The hand-off's
//!   waiter waits for a holder that waits for nothing: the check reads one lock.
//! - `chain`: the hand-off's holder also waits, for the first of a chain of the other calls
//!   (`c0` holds `d0` and waits for `d1`, held by `c1`, who waits for `d2`...). The check
//!   follows the chain until its end or its bound (`MAX_LOCKS_READ`, 100 locks).
//!
//! Every blocked call needs a connection of its own: 10,000 connections to the server.

use redis::Value;
use rlock_module_tests::Flavor;

use crate::cost::Counted;

/// The shapes measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Apart,
    Chain,
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Apart => "apart",
            Shape::Chain => "chain",
        }
    }
}

/// One measurement: instructions per blocked hand-off, check off and on.
#[derive(Debug)]
pub struct CheckCost {
    pub shape: Shape,
    pub blocked: usize,
    pub off: u64,
    pub on: u64,
}

impl CheckCost {
    /// What the check adds to a hand-off, in instructions.
    pub fn added(&self) -> i64 {
        self.on as i64 - self.off as i64
    }
}

/// Every shape at every count of other blocked calls, on one server; `handoffs` hand-offs
/// per window (windows of N and 2N, as the cost check).
pub fn measure_checks(
    flavor: Flavor,
    handoffs: usize,
    counts: &[usize],
) -> Result<Vec<CheckCost>, String> {
    let most = counts.iter().copied().max().unwrap_or(0) + 100;
    let maxclients = most.to_string();
    let mut c = Counted::start_with(flavor, &[("maxclients", &maxclients)])?;
    let mut out = Vec::new();
    for &shape in &[Shape::Apart, Shape::Chain] {
        for &blocked in counts {
            let _: Value = c.call(redis::cmd("FLUSHALL").arg("SYNC"))?;
            let others = block_others(&mut c, shape, blocked)?;
            let mut per = [0u64; 2];
            for (i, on) in ["no", "yes"].iter().enumerate() {
                let mut config = redis::cmd("CONFIG");
                config.arg("SET").arg("rlock.deadlock-detection").arg(*on);
                c.call(&config)?;
                let small = window(&mut c, shape, handoffs, blocked, on)?;
                let large = window(&mut c, shape, 2 * handoffs, blocked, on)?;
                per[i] = large.saturating_sub(small) / handoffs as u64;
            }
            drop(others);
            out.push(CheckCost {
                shape,
                blocked,
                off: per[0],
                on: per[1],
            });
        }
    }
    c.server.stop();
    Ok(out)
}

/// Instructions of `n` hand-offs, each on a fresh key; in the chain shape the holder `a`
/// waits (on a connection of its own, set up by `block_others`) for the chain's head.
fn window(
    c: &mut Counted,
    shape: Shape,
    n: usize,
    blocked: usize,
    on: &str,
) -> Result<u64, String> {
    // An empty contention history each window, as the cost check does.
    let _ = c.call(&redis::cmd("RLOCK.RESETSTAT"));
    for i in 0..4 {
        c.handoff(
            &format!("warm:{}:{blocked}:{on}:{n}:{i}", shape.name()),
            "a",
            "b",
        )?;
    }
    c.mark()?;
    for i in 0..n {
        c.handoff(
            &format!("k:{}:{blocked}:{on}:{n}:{i}", shape.name()),
            "a",
            "b",
        )?;
    }
    c.mark()
}

/// Blocks `blocked` calls on the server, in `shape`, each on a connection of its own
/// (returned: dropping them ends the waits).
fn block_others(
    c: &mut Counted,
    shape: Shape,
    blocked: usize,
) -> Result<Vec<redis::Connection>, String> {
    // Holders first, pipelined: dN is held by cN (apart: by `z`, who waits for nothing).
    for start in (0..=blocked).step_by(1000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 1000).min(blocked + 1) {
            let holder = match shape {
                Shape::Apart => "z".to_string(),
                Shape::Chain => format!("c{i}"),
            };
            pipe.cmd("RLOCK.ACQUIRE")
                .arg(format!("d{i}"))
                .arg(holder)
                .arg("LEASE")
                .arg(3_600_000);
        }
        pipe.query::<Vec<Value>>(&mut c.con)
            .map_err(|e| format!("holders: {e}"))?;
    }
    let mut conns = Vec::with_capacity(blocked + 1);
    // The waits: cI waits for d(I+1) (apart: owner wI waits for dI, held by z).
    for i in 0..blocked {
        let (key, owner) = match shape {
            Shape::Apart => (format!("d{i}"), format!("w{i}")),
            Shape::Chain => (format!("d{}", i + 1), format!("c{i}")),
        };
        conns.push(block_one(c, &key, &owner)?);
    }
    // In the chain, the hand-off's holder `a` waits for d0, held by c0: its waiter's check
    // follows the chain.
    if shape == Shape::Chain {
        conns.push(block_one(c, "d0", "a")?);
    }
    let expected = conns.len() as i64;
    let started = std::time::Instant::now();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("rlock")
            .query(&mut c.con)
            .map_err(|e| e.to_string())?;
        let now = crate::cost::info_field(&info, "rlock_blocked").unwrap_or(-1);
        if now == expected {
            return Ok(conns);
        }
        if started.elapsed() > std::time::Duration::from_secs(300) {
            return Err(format!(
                "{expected} calls sent to block, INFO rlock says {now} blocked"
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn block_one(c: &mut Counted, key: &str, owner: &str) -> Result<redis::Connection, String> {
    let mut con = c.server.conn();
    let mut cmd = redis::cmd("RLOCK.ACQUIRE");
    cmd.arg(key).arg(owner).arg("BLOCK").arg(0);
    con.send_packed_command(&cmd.get_packed_command())
        .map_err(|e| format!("block {owner} on {key}: {e}"))?;
    Ok(con)
}
