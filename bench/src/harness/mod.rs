//! The one harness every scenario runs on, so that a scenario file says only what it measures:
//!
//! - [`cells`]: a path's runs in one setting and their medians, and the order the runs are
//!   measured in (paths interleaved round by round, so drift in machine load hits every path
//!   alike), with the progress line each run prints;
//! - [`pairs`]: uncontended pairs on many keys, whatever the commands;
//! - [`load`]: the measured window of a load (warm-up, server and client CPU, the counts inside
//!   the window), for workers on many keys and for clients on one key;
//! - [`wake`]: how a Redisson-style waiter hears a message on its channel and waits for it;
//! - [`late`]: how late after a deadline a waiter was served, sample by sample;
//! - [`table`]: the report's markdown: numbers, path lists and table rows.
//!
//! Server start and pinning live in `lib.rs` (`start_server`) and `pin.rs`; clocks and
//! medians in `measure.rs`.

pub mod cells;
pub mod late;
pub mod load;
pub mod pairs;
pub mod table;
pub mod wake;

pub use cells::{Cell, Cells, Grid, Order, Path, Progress, Windowed};
pub use load::{measure_clients, measure_load, Counts, Measured, Shared, Tally};
