//! A path's runs in one setting, their medians, and the order the runs are measured in.

use crate::measure::{median, ratio, Window};
use crate::Plan;

/// A path a scenario compares: its letter in the tables and what it sends.
pub trait Path: Copy + PartialEq {
    fn letter(self) -> &'static str;
    fn describe(self) -> &'static str;
}

/// Declares a scenario's paths in one table: the enum, `ALL` in report order, and each
/// path's letter and description ([`Path`]).
#[macro_export]
macro_rules! paths {
    ($(#[$meta:meta])* pub enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident => $letter:literal, $describe:expr;)+
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            pub const ALL: [$name; [$($name::$variant),+].len()] = [$($name::$variant),+];
        }

        impl $crate::harness::Path for $name {
            fn letter(self) -> &'static str {
                match self {
                    $($name::$variant => $letter,)+
                }
            }
            fn describe(self) -> &'static str {
                match self {
                    $($name::$variant => $describe,)+
                }
            }
        }
    };
}

/// Runs that carry their measured window ([`Windowed`]) in a field named `window`. With
/// `{ rate: count, ... }`, also a method `rate` for each: the field `count` per second.
#[macro_export]
macro_rules! windowed {
    ($run:ty { $($rate:ident: $count:ident),+ $(,)? }) => {
        $crate::windowed!($run);
        impl $run {
            $(pub fn $rate(&self) -> f64 {
                $crate::harness::Windowed::per_sec(self, self.$count)
            })+
        }
    };
    ($($run:ty),+) => {
        $(impl $crate::harness::Windowed for $run {
            fn window(&self) -> &$crate::measure::Window {
                &self.window
            }
        })+
    };
}

/// A run's [`Progress`] line, from a function of the run.
#[macro_export]
macro_rules! progress {
    ($run:ty, $line:expr) => {
        impl $crate::harness::Progress for $run {
            fn progress(&self) -> String {
                let line: fn(&$run) -> String = $line;
                line(self)
            }
        }
    };
}

/// What one run prints when the plan is verbose, after `<label> <path> round <n>: `.
pub trait Progress {
    fn progress(&self) -> String;
}

/// Every run of one path in one setting (a pipeline depth, a client count and hold time, a
/// queue length, or `()`), and their medians.
#[derive(Debug, Clone)]
pub struct Cell<P, S, R> {
    pub path: P,
    pub setting: S,
    pub runs: Vec<R>,
}

impl<P, S, R> Cell<P, S, R> {
    /// The median over runs of one figure of a run.
    pub fn med(&self, f: impl Fn(&R) -> f64) -> f64 {
        median(self.runs.iter().map(f))
    }

    /// The sum over runs of one count of a run.
    pub fn sum(&self, f: impl Fn(&R) -> u64) -> u64 {
        self.runs.iter().map(f).sum()
    }
}

/// A run measured over a window of wall and CPU time.
pub trait Windowed {
    fn window(&self) -> &Window;

    /// `count` per second of the window.
    fn per_sec(&self, count: u64) -> f64 {
        count as f64 / self.window().secs
    }
}

impl<P, S, R: Windowed> Cell<P, S, R> {
    /// Median share of one core the server used, in percent.
    pub fn server_busy(&self) -> f64 {
        self.med(|r| r.window().server_busy())
    }

    /// Median share of one core this process used, in percent.
    pub fn client_busy(&self) -> f64 {
        self.med(|r| r.window().client_busy())
    }

    /// Median server CPU microseconds per operation, `ops` counting them in a run.
    pub fn server_us_per(&self, ops: impl Fn(&R) -> u64) -> f64 {
        self.med(|r| r.window().server_us_per(ops(r)))
    }
}

/// The cells of one scenario (or one part of it), in the order they were laid out.
#[derive(Debug, Clone)]
pub struct Cells<P, S, R> {
    pub cells: Vec<Cell<P, S, R>>,
}

impl<P: PartialEq, S: PartialEq + Copy, R> Cells<P, S, R> {
    pub fn cell(&self, path: P, setting: S) -> Option<&Cell<P, S, R>> {
        self.cells
            .iter()
            .find(|c| c.path == path && c.setting == setting)
    }

    /// `f` of path `a` over `f` of path `b` in one setting (NaN when either is missing).
    pub fn ratio(&self, a: P, b: P, setting: S, f: impl Fn(&Cell<P, S, R>) -> f64) -> f64 {
        match (self.cell(a, setting), self.cell(b, setting)) {
            (Some(a), Some(b)) => ratio(f(a), f(b)),
            _ => f64::NAN,
        }
    }
}

/// Which loop is outermost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// For each setting, every round: R, L, S, R, L, S, ... then the next setting.
    BySetting,
    /// For each round, every setting: Q=10 R, F, Q=1000 R, F, ... then the next round.
    ByRound,
}

/// One run to measure: which cell, which round.
#[derive(Debug, Clone, Copy)]
pub struct Turn {
    pub cell: usize,
    pub round: usize,
}

/// The cells of a scenario being measured, and the order of their runs: within a round the
/// paths run one after another on the same server, so drift in machine load hits them alike.
pub struct Grid<P, S, R> {
    pub cells: Vec<Cell<P, S, R>>,
    paths: usize,
    rounds: usize,
    order: Order,
    verbose: bool,
}

impl<P: Path, S: Copy, R: Progress> Grid<P, S, R> {
    /// `settings` × `paths` cells, the plan's rounds each, settings outermost.
    pub fn new(settings: &[S], paths: &[P], plan: &Plan) -> Grid<P, S, R> {
        let cells: Vec<Cell<P, S, R>> = settings
            .iter()
            .flat_map(|&setting| {
                paths.iter().map(move |&path| Cell {
                    path,
                    setting,
                    runs: Vec::new(),
                })
            })
            .collect();
        Grid {
            cells,
            paths: paths.len(),
            rounds: plan.rounds,
            order: Order::BySetting,
            verbose: plan.verbose,
        }
    }

    /// Rounds outermost instead.
    pub fn by_round(self) -> Grid<P, S, R> {
        Grid {
            order: Order::ByRound,
            ..self
        }
    }

    /// `rounds` rounds instead of the plan's.
    pub fn rounds(self, rounds: usize) -> Grid<P, S, R> {
        Grid { rounds, ..self }
    }

    /// Every run to measure, in order.
    pub fn turns(&self) -> Vec<Turn> {
        let settings = self.cells.len() / self.paths.max(1);
        let mut turns = Vec::new();
        match self.order {
            Order::BySetting => {
                for s in 0..settings {
                    for round in 0..self.rounds {
                        turns.extend((0..self.paths).map(|p| Turn {
                            cell: s * self.paths + p,
                            round,
                        }));
                    }
                }
            }
            Order::ByRound => {
                for round in 0..self.rounds {
                    turns.extend((0..self.cells.len()).map(|cell| Turn { cell, round }));
                }
            }
        }
        turns
    }

    /// The path and setting of a turn.
    pub fn at(&self, turn: Turn) -> (P, S) {
        let cell = &self.cells[turn.cell];
        (cell.path, cell.setting)
    }

    /// Keeps a run, printing its progress line when verbose: `what` (the scenario and the
    /// setting: `uncontended p16`), the path, the round, the run's progress.
    pub fn record(&mut self, turn: Turn, what: &str, run: R) {
        let cell = &mut self.cells[turn.cell];
        if self.verbose {
            eprintln!(
                "  {what} {} round {}: {}",
                cell.path.letter(),
                turn.round + 1,
                run.progress()
            );
        }
        cell.runs.push(run);
    }

    pub fn done(self) -> Cells<P, S, R> {
        Cells { cells: self.cells }
    }
}

/// `", N ERRORS"` when there were any.
pub fn errors_note(errors: u64) -> String {
    if errors > 0 {
        format!(", {errors} ERRORS")
    } else {
        String::new()
    }
}

/// `", V VIOLATIONS E ERRORS S STRAGGLERS"` when there were any.
pub fn problems_note(violations: u64, errors: u64, stragglers: u64) -> String {
    match (violations, errors, stragglers) {
        (0, 0, 0) => String::new(),
        (v, e, s) => format!(", {v} VIOLATIONS {e} ERRORS {s} STRAGGLERS"),
    }
}

/// min/max of per-client counts; 1.0 is perfectly even (NaN when nobody got any).
pub fn min_over_max(per_client: &[u64]) -> f64 {
    let max = per_client.iter().copied().max().unwrap_or(0);
    let min = per_client.iter().copied().min().unwrap_or(0);
    if max == 0 {
        f64::NAN
    } else {
        min as f64 / max as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Two {
        A,
        B,
    }

    impl Path for Two {
        fn letter(self) -> &'static str {
            match self {
                Two::A => "A",
                Two::B => "B",
            }
        }
        fn describe(self) -> &'static str {
            ""
        }
    }

    impl Progress for f64 {
        fn progress(&self) -> String {
            self.to_string()
        }
    }

    fn plan(rounds: usize) -> Plan {
        Plan {
            rounds,
            verbose: false,
            ..Plan::quick()
        }
    }

    fn order(order: Order) -> Vec<(Two, usize, usize)> {
        let mut grid: Grid<Two, usize, f64> = Grid::new(&[1, 16], &[Two::A, Two::B], &plan(2));
        if order == Order::ByRound {
            grid = grid.by_round();
        }
        grid.turns()
            .into_iter()
            .map(|t| {
                let (p, s) = grid.at(t);
                (p, s, t.round)
            })
            .collect()
    }

    #[test]
    fn paths_interleave_within_each_round() {
        use Two::{A, B};
        assert_eq!(
            order(Order::BySetting),
            [
                (A, 1, 0),
                (B, 1, 0),
                (A, 1, 1),
                (B, 1, 1),
                (A, 16, 0),
                (B, 16, 0),
                (A, 16, 1),
                (B, 16, 1)
            ]
        );
        assert_eq!(
            order(Order::ByRound),
            [
                (A, 1, 0),
                (B, 1, 0),
                (A, 16, 0),
                (B, 16, 0),
                (A, 1, 1),
                (B, 1, 1),
                (A, 16, 1),
                (B, 16, 1)
            ]
        );
    }

    #[test]
    fn medians_and_ratios_by_path_and_setting() {
        let mut grid: Grid<Two, usize, f64> = Grid::new(&[1], &[Two::A, Two::B], &plan(3));
        for (turn, x) in grid
            .turns()
            .into_iter()
            .zip([1.0, 10.0, 3.0, 30.0, 2.0, 20.0])
        {
            grid.record(turn, "", x);
        }
        let cells = grid.done();
        let a = cells.cell(Two::A, 1).expect("A");
        assert_eq!(a.med(|x| *x), 2.0);
        assert_eq!(a.sum(|x| *x as u64), 6);
        assert_eq!(cells.ratio(Two::B, Two::A, 1, |c| c.med(|x| *x)), 10.0);
        assert!(cells.ratio(Two::B, Two::A, 16, |c| c.med(|x| *x)).is_nan());
        assert_eq!(min_over_max(&[2, 4]), 0.5);
        assert!(min_over_max(&[0, 0]).is_nan());
    }
}
