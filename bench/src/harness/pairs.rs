//! Uncontended acquire/release pairs on many keys (scenarios 1, 5, 10 and 11): each load
//! connection works on keys of its own, in batches of `pipeline / 2` pairs from a random
//! start; a batch of one pair is the acquire, then the release; a larger one is one pipeline
//! of the acquires on distinct keys, then their releases.

use std::future::Future;
use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use redis::Value;

use super::cells::{errors_note, Cells, Grid, Path};
use super::load::{measure_load, LoadRun, Tally};
use crate::measure::Rng;
use crate::{Plan, OWNER_PREFIX};

/// One measured run of one path: pairs done, unexpected replies, the window.
pub type PairRun = LoadRun;

crate::windowed!(LoadRun {
    pairs_per_sec: done
});

crate::progress!(LoadRun, |r| {
    format!(
        "{:.0} pairs/s, {:.1} us/pair server, server {:.0}% client {:.0}%{}",
        r.pairs_per_sec(),
        r.window.server_us_per(r.done),
        r.window.server_busy(),
        r.window.client_busy(),
        errors_note(r.errors)
    )
});

/// The cells of a pairs scenario: by path and pipeline depth.
pub type Pairs<P> = Cells<P, usize, PairRun>;

impl<P: PartialEq> Pairs<P> {
    /// Ratio of median pairs/s, `a / b`, at one pipeline depth.
    pub fn pairs_ratio(&self, a: P, b: P, pipeline: usize) -> f64 {
        self.ratio(a, b, pipeline, |c| c.med(PairRun::pairs_per_sec))
    }
}

/// A path of a pairs scenario: its keys and how it sends one batch.
pub trait PairPath: Path + Send + Sync + 'static {
    /// What its commands need (the scripts' SHAs).
    type Scripts: Send + Sync + 'static;

    /// Key number `n` of this path.
    fn key(self, n: u64) -> Vec<u8>;

    /// One batch of pairs on `keys` by `owner`; returns how many replies were unexpected.
    fn batch(
        self,
        scripts: &Self::Scripts,
        con: &mut MultiplexedConnection,
        keys: &[Vec<u8>],
        owner: &[u8],
    ) -> impl Future<Output = u64> + Send;
}

/// Where a pairs scenario runs: its load connections, the control connection, the scripts.
pub struct PairLoad<'a, P: PairPath> {
    pub conns: &'a [MultiplexedConnection],
    pub control: &'a mut MultiplexedConnection,
    pub scripts: Arc<P::Scripts>,
    /// Keys per connection at a pipeline depth.
    pub slice: &'a dyn Fn(usize) -> u64,
}

/// Every path at every pipeline depth, `plan.rounds` runs each, paths interleaved.
pub async fn run_pairs<P: PairPath>(
    load: PairLoad<'_, P>,
    plan: &Plan,
    paths: &[P],
    pipelines: &[usize],
    label: &str,
) -> Pairs<P> {
    let mut grid = Grid::new(pipelines, paths, plan);
    for turn in grid.turns() {
        let (path, pipeline) = grid.at(turn);
        let seed = (turn.round * 31 + pipeline) as u64;
        let slice = (load.slice)(pipeline);
        let tally = Tally::default();
        let workers = load
            .conns
            .iter()
            .enumerate()
            .map(|(c, con)| {
                let worker = work(
                    path,
                    load.scripts.clone(),
                    con.clone(),
                    format!("{OWNER_PREFIX}:{c}").into_bytes(),
                    (c as u64 * slice, slice),
                    (pipeline / 2).max(1) as u64,
                    tally.clone(),
                    Rng::new(seed * 1000 + c as u64 + 1),
                );
                tokio::spawn(worker)
            })
            .collect();
        let run = measure_load(
            Some(&mut *load.control),
            plan,
            plan.uncontended_run,
            &tally,
            workers,
        )
        .await;
        grid.record(turn, &format!("{label} p{pipeline}"), run);
    }
    grid.done()
}

#[allow(clippy::too_many_arguments)]
async fn work<P: PairPath>(
    path: P,
    scripts: Arc<P::Scripts>,
    mut con: MultiplexedConnection,
    owner: Vec<u8>,
    (first, slice): (u64, u64),
    per_batch: u64,
    tally: Tally,
    mut rng: Rng,
) {
    while tally.running() {
        let start = rng.below(slice);
        let keys: Vec<Vec<u8>> = (0..per_batch)
            .map(|j| path.key(first + (start + j) % slice))
            .collect();
        let bad = path.batch(&scripts, &mut con, &keys, &owner).await;
        tally.add(per_batch, bad);
    }
}

/// What a pair sends and expects: the acquire and release of a key, and their good replies.
pub struct PairCommands<A, R, OkA, OkR> {
    pub acquire: A,
    pub release: R,
    pub acquired: OkA,
    pub released: OkR,
}

/// A batch whose releases need nothing from the acquires' replies: with one key, the acquire
/// then the release; else one pipeline of every acquire, then every release.
pub async fn blind_batch<A, R, OkA, OkR>(
    con: &mut MultiplexedConnection,
    keys: &[Vec<u8>],
    pair: PairCommands<A, R, OkA, OkR>,
) -> u64
where
    A: Fn(&[u8]) -> redis::Cmd,
    R: Fn(&[u8]) -> redis::Cmd,
    OkA: Fn(&Value) -> bool,
    OkR: Fn(&Value) -> bool,
{
    let b = keys.len();
    if b == 1 {
        let acquired = (pair.acquire)(&keys[0]).query_async::<Value>(con).await;
        let released = (pair.release)(&keys[0]).query_async::<Value>(con).await;
        let ok = matches!(&acquired, Ok(v) if (pair.acquired)(v))
            && matches!(&released, Ok(v) if (pair.released)(v));
        return u64::from(!ok);
    }
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.add_command((pair.acquire)(key));
    }
    for key in keys {
        pipe.add_command((pair.release)(key));
    }
    match pipe.query_async::<Vec<Value>>(con).await {
        Ok(replies) if replies.len() == 2 * b => {
            let (acq, rel) = replies.split_at(b);
            (acq.iter().filter(|v| !(pair.acquired)(v)).count()
                + rel.iter().filter(|v| !(pair.released)(v)).count()) as u64
        }
        _ => b as u64,
    }
}
