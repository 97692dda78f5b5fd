//! Locks set up straight on the server, beside what `rlock` does: a holder, a blocked waiter.
//! Shared by the integration tests (through `common`) and by `top`'s unit tests (`#[path]`),
//! so it needs nothing but the module-tests crate.

use std::thread::JoinHandle;

use rlock_module_tests::{call, Server};

/// `owner` holds `key` for `lease_ms`.
pub fn hold(c: &mut redis::Connection, key: &str, owner: &str, lease_ms: &str) {
    call(c, &["RLOCK.ACQUIRE", key, owner, "LEASE", lease_ms]).unwrap();
}

/// `owner` waits for `key` (`BLOCK block_ms`) on a connection of its own: the thread ends with
/// the reply.
pub fn blocked_waiter(
    server: &Server,
    key: &str,
    owner: &str,
    block_ms: &str,
) -> JoinHandle<Result<redis::Value, String>> {
    let mut w = server.conn();
    let args = ["RLOCK.ACQUIRE", key, owner, "BLOCK", block_ms].map(str::to_owned);
    std::thread::spawn(move || call(&mut w, &args.each_ref().map(String::as_str)))
}

/// How many calls wait for `key` now.
pub fn waiting(c: &mut redis::Connection, key: &str) -> usize {
    match call(c, &["RLOCK.WAITERS", key]) {
        Ok(redis::Value::Array(a)) => a.len(),
        _ => 0,
    }
}
