//! The lock semantics, free of Redis: argument grammar, hold decisions, lease
//! arithmetic, helper key names. Everything here is tested with plain `cargo test`.

pub mod args;
pub mod deferred;
pub mod fair;
pub mod fences;
pub mod hold;
pub mod keys;
pub mod lease;
pub mod sessions;
pub mod timer_table;
pub mod waitlist;
