//! Count-down latch load: per latch, a coordinator that runs rounds (a `TRYSETCOUNT` of 1
//! to 4, then that many count-downs with pauses between, each by the module's
//! `RLATCH.COUNTDOWN` or Redisson's script) and two waiters (`RLATCH.AWAIT` with and
//! without `BLOCK`, and Redisson's `getCount`, a `GET`), under the run's faults.
//!
//! The check: a waiter that heard the latch open (`AWAIT` replied `1`, or `GET` found no
//! count) heard it after the count-down that opened it was sent. For a wait sent after
//! round R's `TRYSETCOUNT n` was answered, the latch was set when the wait ran, so it can
//! open only once n count-downs ran after that set: each was sent before the wait's reply
//! was read, and was not answered before the set was sent. Fewer such count-downs than n
//! is an early open. The module's `COUNTDOWN` replies are checked too: in a round whose
//! count-downs were all answered, the k-th replies n - k (only the coordinator counts down,
//! and a cut call ran, if at all, before its connection's loss was seen).
//!
//! `GET` also runs on a replica, which may lag behind the primary's latest set: it counts
//! only when sent to the server the clients took for the primary. After a `FAILOVER` the
//! coordinator sets on the new primary only once the clients follow it, after any such
//! `GET` was sent to the old one.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rlock_module_tests::redisson::{LATCH_COUNT_DOWN, LATCH_TRY_SET_COUNT};

use crate::resp::{since_epoch, Conn, ConnError, Frame};
use crate::rng::Rng;
use crate::scripts::evalsha;
use crate::workload::{acknowledged_always, error_reply, moved_if_read_only, ClientConn, Shared};

/// Latches per run.
pub const LATCHES: usize = 2;

#[derive(Debug, Clone)]
struct Round {
    n: u64,
    set_sent: Instant,
    set_replied: Instant,
    /// Whether a replica acknowledged the set (always, outside the unplanned-failover
    /// phase): a set none had is lost with a killed primary, and the latch is open then.
    acknowledged: bool,
}

#[derive(Debug, Clone)]
struct CountDown {
    sent: Instant,
    replied: Option<Instant>,
    how: &'static str,
}

#[derive(Debug, Clone)]
struct Open {
    who: String,
    sent: Instant,
    replied: Instant,
    how: &'static str,
}

#[derive(Debug, Default)]
struct Log {
    rounds: Vec<Round>,
    countdowns: Vec<CountDown>,
    opens: Vec<Open>,
    /// Rounds whose last count-down was answered.
    completed: u64,
}

/// The latches of a run and what was seen of them.
pub struct Latches {
    tag: String,
    logs: Vec<Mutex<Log>>,
}

/// What the latch check found.
#[derive(Debug, Default)]
pub struct LatchReport {
    pub violations: Vec<String>,
    pub rounds: u64,
    /// Opens heard after a known set, so checked.
    pub opens_checked: u64,
}

impl Latches {
    pub fn new(tag: &str) -> Latches {
        Latches {
            tag: tag.to_string(),
            logs: (0..LATCHES).map(|_| Mutex::new(Log::default())).collect(),
        }
    }

    fn key(&self, latch: usize) -> String {
        format!("{}:{latch}", self.tag)
    }

    /// The coordinator and the two waiters of each latch.
    pub fn spawn(
        self: &Arc<Self>,
        shared: &Arc<Shared>,
        rng: &mut Rng,
    ) -> Vec<thread::JoinHandle<()>> {
        let mut threads = Vec::new();
        for latch in 0..LATCHES {
            let (latches, for_thread, forked) = (self.clone(), shared.clone(), rng.fork());
            threads.push(thread::spawn(move || {
                coordinate(&for_thread, &latches, latch, forked)
            }));
            for waiter in 0..2 {
                let (latches, for_thread, forked) = (self.clone(), shared.clone(), rng.fork());
                threads.push(thread::spawn(move || {
                    wait(&for_thread, &latches, latch, waiter, forked)
                }));
            }
        }
        threads
    }

    /// The early-open check over every latch.
    pub fn check(&self, promotions: &[Instant]) -> LatchReport {
        let mut report = LatchReport::default();
        for (latch, log) in self.logs.iter().enumerate() {
            let log = log.lock().unwrap();
            report.rounds += log.completed;
            let key = self.key(latch);
            for open in &log.opens {
                let (found, checked) = early_open(&key, &log, open, promotions);
                report.opens_checked += u64::from(checked);
                report.violations.extend(found);
            }
        }
        report
    }
}

/// Whether `open` came before the count-downs that could open the round it waited on.
fn early_open(key: &str, log: &Log, open: &Open, promotions: &[Instant]) -> (Option<String>, bool) {
    let Some(round) = log
        .rounds
        .iter()
        .filter(|r| r.set_replied < open.sent)
        .max_by_key(|r| r.set_replied)
    else {
        return (None, false);
    };
    let lost = !round.acknowledged
        && promotions
            .iter()
            .any(|at| round.set_sent <= *at && *at <= open.replied);
    if lost {
        return (None, false);
    }
    let could: Vec<&CountDown> = log
        .countdowns
        .iter()
        .filter(|c| c.sent < open.replied && !c.replied.is_some_and(|at| at < round.set_sent))
        .collect();
    if could.len() as u64 >= round.n {
        return (None, true);
    }
    let later: String = log
        .countdowns
        .iter()
        .filter(|c| c.sent >= open.replied)
        .take(4)
        .map(|c| format!("    {} {} (not yet sent)\n", since_epoch(c.sent), c.how))
        .collect();
    (
        Some(format!(
            "early open of {key}: {} heard it open ({}: sent {}, replied {}) after the \
             round's count of {} was set (sent {}, replied {}), with only {} count-down(s) \
             that could have run since:\n{}{later}",
            open.who,
            open.how,
            since_epoch(open.sent),
            since_epoch(open.replied),
            round.n,
            since_epoch(round.set_sent),
            since_epoch(round.set_replied),
            could.len(),
            could
                .iter()
                .map(|c| format!(
                    "    {} {} replied {}\n",
                    since_epoch(c.sent),
                    c.how,
                    c.replied.map_or("never".into(), since_epoch)
                ))
                .collect::<String>()
        )),
        true,
    )
}

fn channel(shared: &Shared, key: &str) -> (Vec<u8>, &'static [u8]) {
    let publish: &[u8] = if shared.cluster {
        b"spublish"
    } else {
        b"publish"
    };
    (
        format!("redisson_countdownlatch__channel__{{{key}}}").into_bytes(),
        publish,
    )
}

/// Rounds on one latch until the load stops.
fn coordinate(shared: &Shared, latches: &Latches, latch: usize, mut rng: Rng) {
    let key = latches.key(latch);
    let log = &latches.logs[latch];
    ClientConn::until_stopped(shared, Some("latch connection lost or moved"), |_, conn| {
        let who = || format!("latch coordinator on {key}");
        conn.cycle(&key, who, |c| round(shared, c, &key, log, &mut rng));
    });
}

/// A not-run error reply: counted; `Moved` when the server takes no writes.
fn refused(shared: &Shared, key: &str, what: &str, e: &str) -> Result<(), ConnError> {
    error_reply(shared, key, what, e);
    moved_if_read_only(e)
}

/// One round: set a count, and count it down, each count-down logged as sent before it is.
fn round(
    shared: &Shared,
    c: &mut Conn,
    key: &str,
    log: &Mutex<Log>,
    rng: &mut Rng,
) -> Result<(), ConnError> {
    let n = rng.range(1, 4);
    let text = n.to_string();
    let (channel, publish) = channel(shared, key);
    let set_sent = Instant::now();
    let reply = if rng.chance(30) {
        evalsha(
            c,
            LATCH_TRY_SET_COUNT,
            &[key.as_bytes(), &channel],
            &[b"1", text.as_bytes(), publish],
        )?
        .0
    } else {
        c.call(&[b"RLATCH.TRYSETCOUNT", key.as_bytes(), text.as_bytes()])?
    };
    match reply {
        Frame::Int(1) => {}
        // A round a fault cut is still counting: one more count-down, then try again.
        Frame::Int(0) => {
            shared.count("latch set found a count");
            count_down(shared, c, key, log, rng)?;
            return Ok(());
        }
        Frame::Error(e) => return refused(shared, key, "latch set", &e),
        other => {
            shared.violation(format!("RLATCH.TRYSETCOUNT {key} replied {other:?}"));
            return Ok(());
        }
    }
    let set_replied = Instant::now();
    let acknowledged = acknowledged_always(shared, c)?;
    log.lock().unwrap().rounds.push(Round {
        n,
        set_sent,
        set_replied,
        acknowledged,
    });
    shared.count("latch round set");
    thread::sleep(Duration::from_millis(rng.below(40)));
    for k in 1..=n {
        let reply = count_down(shared, c, key, log, rng)?;
        match reply {
            // A promotion may lose count-downs the replica had not got: more are left.
            Frame::Int(_) if shared.promoted_between(set_sent, Instant::now()) => {
                shared.count("latch count-down replies not checked: a promotion in the round")
            }
            Frame::Int(left) if left != (n - k) as i64 => shared.violation(format!(
                "RLATCH.COUNTDOWN {key} replied {left}: count-down {k} of a round of {n}, \
                 every one answered"
            )),
            Frame::Error(e) => {
                // Not run: the round is left to the next set's extra count-downs.
                return refused(shared, key, "latch count-down", &e);
            }
            _ => {}
        }
        if k < n {
            thread::sleep(Duration::from_millis(rng.below(40)));
        }
    }
    log.lock().unwrap().completed += 1;
    Ok(())
}

/// One count-down (the module's or Redisson's), logged before it is sent; its reply.
fn count_down(
    shared: &Shared,
    c: &mut Conn,
    key: &str,
    log: &Mutex<Log>,
    rng: &mut Rng,
) -> Result<Frame, ConnError> {
    let redisson = rng.chance(40);
    let how = if redisson {
        "Redisson countDown"
    } else {
        "RLATCH.COUNTDOWN"
    };
    let index = {
        let mut log = log.lock().unwrap();
        log.countdowns.push(CountDown {
            sent: Instant::now(),
            replied: None,
            how,
        });
        log.countdowns.len() - 1
    };
    let (channel, publish) = channel(shared, key);
    let reply = if redisson {
        evalsha(
            c,
            LATCH_COUNT_DOWN,
            &[key.as_bytes(), &channel],
            &[b"0", publish],
        )?
        .0
    } else {
        c.call(&[b"RLATCH.COUNTDOWN", key.as_bytes()])?
    };
    shared.count("latch count-down");
    match &reply {
        // It did not run: the coordinator logs count-downs one at a time, so it is last.
        Frame::Error(_) => {
            log.lock().unwrap().countdowns.truncate(index);
        }
        f if redisson && !f.is_null() => {
            shared.violation(format!("Redisson's countDown on {key} replied {f:?}"))
        }
        _ => log.lock().unwrap().countdowns[index].replied = Some(Instant::now()),
    }
    Ok(reply)
}

/// A waiter on one latch until the load stops: `RLATCH.AWAIT` with `BLOCK` (waiter 0), or
/// without, or Redisson's `GET` (waiter 1).
fn wait(shared: &Shared, latches: &Latches, latch: usize, waiter: usize, mut rng: Rng) {
    let key = latches.key(latch);
    let log = &latches.logs[latch];
    let who = format!("latch waiter {latch}.{waiter}");
    ClientConn::until_stopped(shared, None, |_, conn| {
        let on = || format!("{who} on {key}");
        conn.cycle(&key, on, |c| -> Result<(), ConnError> {
            let sent = Instant::now();
            let (reply, how) = if waiter == 0 || rng.chance(40) {
                let block = (waiter == 0).then(|| rng.range(20, 600).to_string());
                let mut args: Vec<&[u8]> = vec![b"RLATCH.AWAIT", key.as_bytes()];
                if let Some(block) = &block {
                    args.extend([&b"BLOCK"[..], block.as_bytes()]);
                    shared.waiting.lock().unwrap().insert(c.id, key.clone());
                }
                let reply = c.call(&args);
                shared.waiting.lock().unwrap().remove(&c.id);
                (
                    reply?,
                    if block.is_some() {
                        "AWAIT BLOCK"
                    } else {
                        "AWAIT"
                    },
                )
            } else {
                let primary = c.port == shared.primary.load(Ordering::SeqCst);
                let reply = c.call(&[b"GET", key.as_bytes()])?;
                if !primary {
                    return c.check_in_step();
                }
                (reply, "GET")
            };
            let get = how == "GET";
            let open = match &reply {
                // `AWAIT`: 1 open, null not (yet).
                Frame::Int(1) if !get => true,
                f if f.is_null() && !get => false,
                // `GET`: no count, or none left, is open.
                Frame::Bulk(None) if get => true,
                Frame::Bulk(Some(v)) if get => {
                    match std::str::from_utf8(v)
                        .ok()
                        .and_then(|v| v.parse::<i64>().ok())
                    {
                        Some(v) => v <= 0,
                        None => {
                            shared.violation(format!("{who}: GET {key} replied {reply:?}"));
                            false
                        }
                    }
                }
                Frame::Error(e) => {
                    let e = e.clone();
                    c.check_in_step()?;
                    return refused(shared, &key, "latch await", &e);
                }
                other => {
                    shared.violation(format!("{who}: {how} {key} replied {other:?}"));
                    false
                }
            };
            if open {
                shared.count("latch heard open");
                log.lock().unwrap().opens.push(Open {
                    who: who.clone(),
                    sent,
                    replied: Instant::now(),
                    how,
                });
            }
            c.check_in_step()?;
            thread::sleep(Duration::from_millis(rng.below(if open { 30 } else { 5 })));
            Ok(())
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_needs_the_rounds_count_downs_sent_before_it() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut log = Log::default();
        // A count-down answered before the round's set does not count toward it.
        log.countdowns.push(CountDown {
            sent: at(0),
            replied: Some(at(1)),
            how: "x",
        });
        log.rounds.push(Round {
            n: 2,
            set_sent: at(10),
            set_replied: at(11),
            acknowledged: true,
        });
        for (sent, replied) in [(20, Some(21)), (40, None)] {
            log.countdowns.push(CountDown {
                sent: at(sent),
                replied: replied.map(at),
                how: "x",
            });
        }
        let open = |sent: u64, replied: u64| Open {
            who: "w".into(),
            sent: at(sent),
            replied: at(replied),
            how: "AWAIT",
        };
        // Heard before the second count-down was sent: early.
        let (found, checked) = early_open("l", &log, &open(12, 30), &[]);
        assert!(checked && found.is_some());
        // After it (even one never answered): fine.
        let (found, checked) = early_open("l", &log, &open(12, 41), &[]);
        assert!(checked && found.is_none(), "{found:?}");
        // Sent before the set was answered: not checked.
        assert!(!early_open("l", &log, &open(5, 30), &[]).1);
        // A set no replica acknowledged and a primary killed since: the set may be gone, the
        // latch open; not checked. Acknowledged, it is.
        log.rounds[0].acknowledged = false;
        let killed = [at(25)];
        assert!(!early_open("l", &log, &open(12, 30), &killed).1);
        log.rounds[0].acknowledged = true;
        assert!(early_open("l", &log, &open(12, 30), &killed).0.is_some());
    }
}
