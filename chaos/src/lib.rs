//! The chaos suite of rlock: many clients making random lock calls over every option
//! against real servers while faults are injected, with the history checked for
//! mutual exclusion, fencing, exactly one reply per command, leftovers, replica
//! agreement and memory; a fuzzer of random argument vectors; and a churn of many
//! connections on a polluted keyspace after which nothing may stay tracked. docs/RELIABILITY.md
//! says what is run and what is checked.

pub mod checks;
pub mod churn;
pub mod cluster;
pub mod faults;
pub mod fuzz;
pub mod history;
pub mod permits;
pub mod redisson;
pub mod resp;
pub mod rng;
pub mod run;
pub mod rwload;
pub mod workload;
