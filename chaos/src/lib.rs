//! The chaos suite of rlock: many clients making random lock calls over every option
//! against real servers while faults are injected, with the history checked for
//! mutual exclusion, fencing, exactly one reply per command, leftovers, replica
//! agreement and memory; a fuzzer of random argument vectors; a churn of many
//! connections on a polluted keyspace after which nothing may stay tracked; and a deadlock
//! workload whose every `DEADLOCK` must be a cycle real in its history. docs/RELIABILITY.md
//! says what is run and what is checked.

pub mod capacity;
pub mod checks;
pub mod churn;
pub mod cluster;
pub mod deadlocks;
pub mod evidence;
pub mod extras;
pub mod faults;
pub mod fuzz;
pub mod guarded;
pub mod history;
pub mod latches;
pub mod permits;
pub mod redisson;
pub mod resp;
pub mod rng;
pub mod run;
pub mod rwload;
pub mod scripts;
pub mod workload;
