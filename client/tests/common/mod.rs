//! Shared helpers for the client's integration tests. Each test starts its own servers
//! (free ports, killed on drop) through the module-tests harness.

#![allow(dead_code, unused_imports)]

use std::time::Duration;

use rlock_module_tests::redis;
pub use rlock_module_tests::{flavors, Flavor, Server};

/// Every flavor, each with a fresh server that has the module loaded.
pub fn servers() -> Vec<Server> {
    flavors().into_iter().map(Server::start).collect()
}

/// Every flavor's fresh server with a client of it: the loop most cases run in.
pub fn each_server() -> impl Iterator<Item = (Flavor, Server, rlock_client::Locks)> {
    each_server_with(|server| rlock_client::Locks::new(server.client()))
}

/// [`each_server`] with locks built by `locks` (a watchdog lease, a timeout).
pub fn each_server_with(
    locks: impl Fn(&Server) -> rlock_client::Locks,
) -> impl Iterator<Item = (Flavor, Server, rlock_client::Locks)> {
    servers().into_iter().map(move |server| {
        let built = locks(&server);
        (server.flavor, server, built)
    })
}

/// Cancelling a blocked acquire (`wait`, dropped after 200 ms) takes nothing: the permit
/// `give_back_one` adds 400 ms later stays `available`.
pub async fn a_cancelled_wait_takes_nothing<T>(
    flavor: Flavor,
    wait: impl std::future::Future<Output = T>,
    give_back_one: impl std::future::Future<Output = rlock_client::Result<i64>>,
    available: impl std::future::Future<Output = rlock_client::Result<i64>>,
) {
    let gave_up = tokio::time::timeout(Duration::from_millis(200), wait).await;
    assert!(gave_up.is_err(), "{flavor}: still waiting");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(give_back_one.await.unwrap(), 1, "{flavor}");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(available.await.unwrap(), 1, "{flavor}: nobody took it");
}

/// [`each_server`] for the blocking face.
pub fn each_server_blocking(
) -> impl Iterator<Item = (Flavor, Server, rlock_client::blocking::Locks)> {
    servers().into_iter().map(|server| {
        let locks = rlock_client::blocking::Locks::new(server.client()).unwrap();
        (server.flavor, server, locks)
    })
}

/// A cluster of three primaries without replicas, and locks on it through its first primary.
pub fn cluster_locks(flavor: Flavor) -> (rlock_module_tests::Cluster, rlock_client::Locks) {
    let nodes = rlock_module_tests::Cluster::start(flavor, 3, 0);
    let endpoint = rlock_client::Endpoint::cluster(vec![nodes.primaries[0].url()]).unwrap();
    (nodes, rlock_client::Locks::new(endpoint))
}

/// What an acquire that must be granted at once returns: panics on an error or a refusal.
pub async fn granted<H>(
    acquire: impl std::future::Future<Output = rlock_client::Result<Option<H>>>,
) -> H {
    acquire.await.unwrap().expect("free")
}

/// Adds the user `nokill` (password `pw`) that may run everything but `CLIENT KILL`: a
/// connection that cannot kill a blocked client (the cancel path must do without it).
pub fn add_user_without_client_kill(server: &Server) {
    let rule = [
        "ACL",
        "SETUSER",
        "nokill",
        "on",
        ">pw",
        "~*",
        "&*",
        "+@all",
        "-client|kill",
    ];
    raw(server, &rule).unwrap();
}

/// Raw `RLOCK.INFO`-free look at the lock hash: `HGETALL key` as (owner, count) pairs.
pub fn holders(server: &Server, key: &str) -> Vec<(String, i64)> {
    let mut con = server.conn();
    let map: std::collections::BTreeMap<String, i64> = redis::cmd("HGETALL")
        .arg(key)
        .query(&mut con)
        .expect("HGETALL");
    map.into_iter().collect()
}

/// `PTTL key` over a plain connection.
pub fn pttl(server: &Server, key: &str) -> i64 {
    let mut con = server.conn();
    redis::cmd("PTTL").arg(key).query(&mut con).expect("PTTL")
}

/// Runs a raw command over a plain connection.
pub fn raw(server: &Server, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut con = server.conn();
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut con)
}

/// `GET key` over a plain connection: a semaphore's permits, as the server keeps them.
pub fn get(server: &Server, key: &str) -> Option<String> {
    match raw(server, &["GET", key]).unwrap() {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}

/// Locks on `server` whose watchdog lease (the lease of a lock taken without one) is `lease`.
pub fn locks_with_lease(server: &Server, lease: Duration) -> rlock_client::Locks {
    rlock_client::Locks::builder(server.client())
        .watchdog_lease(lease)
        .build()
}

/// Locks on `server` whose short commands time out after `timeout`.
pub fn locks_with_timeout(server: &Server, timeout: Duration) -> rlock_client::Locks {
    rlock_client::Locks::builder(server.client())
        .response_timeout(timeout)
        .build()
}

/// Whether the lock `key` is free (no holder left in its hash) within `timeout`.
pub async fn freed_within(server: &Server, key: &str, timeout: Duration) -> bool {
    eventually(timeout, || holders(server, key).is_empty()).await
}

/// Whether `GET key` reads `want` within `timeout`: permits given back in the background.
pub async fn reads_within(server: &Server, key: &str, want: &str, timeout: Duration) -> bool {
    eventually(timeout, || get(server, key).as_deref() == Some(want)).await
}

/// Stalls `server` for `seconds` (`DEBUG SLEEP`, sent from a thread of its own) and returns
/// 100 ms later, the stall begun; join the thread to wait for its end.
pub async fn stall(server: &Server, seconds: &'static str) -> std::thread::JoinHandle<()> {
    let port = server.port;
    let sleeper = std::thread::spawn(move || {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut con = client.get_connection().unwrap();
        let _: redis::Value = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(seconds)
            .query(&mut con)
            .unwrap();
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    sleeper
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes.
pub async fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Freezes a server process (`SIGSTOP`) until dropped: a hung primary, or a replica that stops
/// answering.
pub struct Frozen(String);

impl Frozen {
    pub fn new(server: &Server) -> Frozen {
        let pid = server.info("server")["process_id"].clone();
        let ok = std::process::Command::new("kill")
            .args(["-STOP", &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok);
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0])
            .status();
    }
}
