//! Faults, injected one at a time by the main thread while the clients run.

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use rlock_module_tests::Server;

use crate::history::Force;
use crate::resp::{encode, Conn, Frame};
use crate::rng::Rng;
use crate::workload::{Shared, SCRATCH_DBS};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `CLIENT KILL ID` a random client: a holder, a waiter or an idle one.
    Kill,
    /// `CLIENT UNBLOCK id TIMEOUT` at a random client.
    UnblockTimeout,
    /// `CLIENT UNBLOCK id ERROR` at a random client.
    UnblockError,
    /// `CLIENT PAUSE ms WRITE`.
    PauseWrites,
    /// `DEBUG SLEEP`: the server stops; leases and BLOCKs run out meanwhile.
    DebugSleep,
    /// `CONFIG SET` of the module's configs.
    ConfigSet,
    /// `FLUSHDB` of a scratch database.
    FlushDb,
    /// `SWAPDB` of the scratch databases.
    SwapDb,
    /// `FAILOVER` to the replica that has the module, and back next time.
    Failover,
    /// `kill -9` of the primary and a restart from its AOF.
    Restart,
    /// One packet that frees a lock (`RLOCK.FORCERELEASE`, after a `DEBUG SLEEP` at
    /// times, so that BLOCKs run out meanwhile) and in the same turn unblocks or kills
    /// clients, likely among the waiters it hands the lock to.
    Race,
    /// An unplanned failover: `kill -9` of the primary, then `REPLICAOF NO ONE` on the
    /// standby, as Sentinel does, and the clients move to it; a fresh standby follows it.
    Promote,
}

impl Fault {
    pub const ALL: [Fault; 12] = [
        Fault::Kill,
        Fault::UnblockTimeout,
        Fault::UnblockError,
        Fault::PauseWrites,
        Fault::DebugSleep,
        Fault::ConfigSet,
        Fault::FlushDb,
        Fault::SwapDb,
        Fault::Failover,
        Fault::Restart,
        Fault::Race,
        Fault::Promote,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::UnblockTimeout => "unblock-timeout",
            Fault::UnblockError => "unblock-error",
            Fault::PauseWrites => "pause",
            Fault::DebugSleep => "debug-sleep",
            Fault::ConfigSet => "config-set",
            Fault::FlushDb => "flushdb",
            Fault::SwapDb => "swapdb",
            Fault::Failover => "failover",
            Fault::Restart => "restart",
            Fault::Race => "race",
            Fault::Promote => "unplanned-failover",
        }
    }

    pub fn parse(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// The servers of one phase. `primary` takes the load; `standby` (with the module)
/// is the FAILOVER target; `bare` is a replica without the module, for the digest.
pub struct Topology {
    pub primary: Server,
    pub standby: Option<Server>,
    pub bare: Server,
    /// Until when the last `CLIENT PAUSE WRITE` may hold writes.
    pub writes_paused_until: Option<Instant>,
}

impl Topology {
    /// Whether `CLIENT UNBLOCK` must not be sent now. Redis (7.0, and 7.4 by its source)
    /// unblocks a client whose write a `CLIENT PAUSE WRITE` holds back: `ERROR` replies
    /// `-UNBLOCKED` and then runs the write anyway, a second reply to one command (even to
    /// a plain `SET`), and `TIMEOUT` kills the server ("Unknown btype in
    /// replyToBlockedClientTimedOut"). A server bug, not rlock's: Valkey fixed it
    /// (valkey-io/valkey#2111, #2117) and refuses with 0. So on Redis no unblock is aimed
    /// while a pause may last.
    fn unblock_hits_server_bug(&self) -> bool {
        self.primary.flavor.is_redis()
            && self
                .writes_paused_until
                .is_some_and(|until| Instant::now() < until)
    }
}

fn control(shared: &Shared) -> Option<Conn> {
    Conn::connect(
        shared.primary.load(Ordering::SeqCst),
        Duration::from_secs(15),
    )
    .ok()
}

fn random_client(shared: &Shared, rng: &mut Rng) -> Option<i64> {
    let live = shared.live.lock().unwrap();
    (!live.is_empty()).then(|| *rng.pick(&live))
}

/// Injects one fault. Faults the server refuses (a FAILOVER while one is running)
/// are counted as refused, not as violations.
pub fn inject(fault: Fault, topology: &mut Topology, shared: &Shared, rng: &mut Rng) {
    let Some(mut c) = control(shared) else {
        shared.count("fault skipped: no connection");
        return;
    };
    shared.count(&format!("fault {}", fault.name()));
    shared.log_fault(fault.name().to_string());
    let reply = match fault {
        Fault::Kill => {
            let Some(id) = random_client(shared, rng) else {
                return;
            };
            shared.kills.lock().unwrap().insert(id, Instant::now());
            shared.log_fault(format!("kill {id}"));
            c.call(&[b"CLIENT", b"KILL", b"ID", id.to_string().as_bytes()])
        }
        Fault::UnblockTimeout | Fault::UnblockError if topology.unblock_hits_server_bug() => {
            shared.count("fault unblock skipped: writes paused on Redis");
            return;
        }
        Fault::UnblockTimeout | Fault::UnblockError => {
            let Some(id) = random_client(shared, rng) else {
                return;
            };
            let how: &[u8] = if fault == Fault::UnblockError {
                b"ERROR"
            } else {
                b"TIMEOUT"
            };
            shared.log_fault(format!("unblock {id} {}", String::from_utf8_lossy(how)));
            c.call(&[b"CLIENT", b"UNBLOCK", id.to_string().as_bytes(), how])
        }
        Fault::PauseWrites => {
            let ms = rng.range(50, 400);
            // Clients that unblock others look before the pause may start.
            let in_flight = Instant::now() + Duration::from_secs(20);
            {
                let mut paused = shared.writes_paused_until.lock().unwrap();
                *paused = (*paused).max(Some(in_flight));
            }
            let reply = c.call(&[b"CLIENT", b"PAUSE", ms.to_string().as_bytes(), b"WRITE"]);
            shared.log_fault(format!("pause {ms} ms replied"));
            // It ran before its reply came; a pause already on ends at the later end.
            let until = Instant::now() + Duration::from_millis(ms + 100);
            topology.writes_paused_until = topology.writes_paused_until.max(Some(until));
            {
                let mut paused = shared.writes_paused_until.lock().unwrap();
                // Back from the in-flight guess to the known end, unless another pause
                // is in flight (the fault thread sends one at a time: none is).
                *paused = topology.writes_paused_until;
            }
            reply
        }
        Fault::DebugSleep => {
            let secs = format!("0.{:02}", rng.range(5, 30));
            c.call(&[b"DEBUG", b"SLEEP", secs.as_bytes()])
        }
        Fault::ConfigSet => {
            let (name, value): (&[u8], String) = match rng.below(3) {
                0 => (b"rlock.fair-wait-ms", rng.range(300, 3000).to_string()),
                1 => (b"rlock.publish", rng.pick(&["yes", "no"]).to_string()),
                _ => (b"rlock.lease-ms", rng.range(1000, 3000).to_string()),
            };
            c.call(&[b"CONFIG", b"SET", name, value.as_bytes()])
        }
        Fault::FlushDb => {
            let db = rng.pick(&SCRATCH_DBS).as_bytes();
            c.call(&[b"SELECT", db]).and_then(|_| c.call(&[b"FLUSHDB"]))
        }
        Fault::SwapDb => c.call(&[
            b"SWAPDB",
            SCRATCH_DBS[0].as_bytes(),
            SCRATCH_DBS[1].as_bytes(),
        ]),
        Fault::Failover => {
            failover(topology, shared, &mut c);
            return;
        }
        Fault::Restart => {
            drop(c);
            // A primary that died by itself is reported, its log kept, before the restart
            // appends to the log and forgets how it ended.
            if let Some(death) = crate::evidence::dead(&mut topology.primary, "primary") {
                shared.violation(death);
            }
            topology.primary.kill9_and_restart();
            return;
        }
        Fault::Promote => {
            drop(c);
            promote(topology, shared);
            return;
        }
        Fault::Race => {
            race(&mut c, shared, rng, !topology.unblock_hits_server_bug());
            return;
        }
    };
    match reply {
        Ok(Frame::Error(e)) => shared.count(&format!("fault {} refused: {e}", fault.name())),
        Ok(_) => {}
        Err(e) => shared.count(&format!("fault {} failed: {e}", fault.name())),
    }
}

fn race(c: &mut Conn, shared: &Shared, rng: &mut Rng, may_unblock: bool) {
    let lock = format!("lock:{}", rng.below(4));
    let mut packet = Vec::new();
    let mut replies = 1;
    if rng.chance(50) {
        let secs = format!("0.{:02}", rng.range(2, 20));
        packet.extend(encode(&[b"DEBUG", b"SLEEP", secs.as_bytes()]));
        replies += 1;
    }
    let force = {
        let mut forced = shared.forced.lock().unwrap();
        forced.push(Force {
            lock: lock.clone(),
            sent: Instant::now(),
            replied: None,
        });
        forced.len() - 1
    };
    packet.extend(encode(&[b"RLOCK.FORCERELEASE", lock.as_bytes()]));
    let waiters: Vec<i64> = shared
        .waiting
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, on)| **on == lock)
        .map(|(id, _)| *id)
        .collect();
    for _ in 0..rng.range(1, 3) {
        let target = match waiters.is_empty() {
            false => Some(*rng.pick(&waiters)),
            true => random_client(shared, rng),
        };
        let Some(id) = target else {
            break;
        };
        let id = id.to_string();
        let how = rng.below(3);
        match if may_unblock { how } else { 0 } {
            0 => {
                shared
                    .kills
                    .lock()
                    .unwrap()
                    .insert(id.parse().unwrap_or(0), Instant::now());
                packet.extend(encode(&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]));
            }
            1 => packet.extend(encode(&[b"CLIENT", b"UNBLOCK", id.as_bytes(), b"ERROR"])),
            _ => packet.extend(encode(&[b"CLIENT", b"UNBLOCK", id.as_bytes(), b"TIMEOUT"])),
        }
        replies += 1;
    }
    shared.log_fault(format!(
        "race packet: {}",
        String::from_utf8_lossy(&packet).replace("\r\n", " ")
    ));
    if c.send_raw(&packet).is_err() {
        return;
    }
    for _ in 0..replies {
        if c.read().is_err() {
            return;
        }
    }
    shared.forced.lock().unwrap()[force].replied = Some(Instant::now());
}

/// The module's configs on every server of the phases: leases of 2 s by default, and a
/// polling FAIR caller's place kept 3 s (the `config-set` fault picks 0.3 to 3 s too): once
/// the load stops, every deadline passes within seconds, and the checks after it expect
/// nothing left tracked (`checks::after_load`).
pub const MODULE_ARGS: &[&str] = &["lease-ms", "2000", "fair-wait-ms", "3000"];

/// The unplanned failover: the primary is killed (`kill -9`, noted in
/// `Shared::promotions` just before), the standby is told `REPLICAOF NO ONE` and the
/// clients follow it; a fresh standby with the module replicates from it, and the
/// module-less replica moves under that one, so that `WAIT 1` counts only the server the
/// next promotion picks.
fn promote(topology: &mut Topology, shared: &Shared) {
    let Some(standby) = topology.standby.take() else {
        return;
    };
    let flavor = standby.flavor;
    shared.promotions.lock().unwrap().push(Instant::now());
    shared.log_fault(format!("kill -9 of the primary {}", topology.primary.port));
    // Dropping a server kills it with SIGKILL.
    drop(std::mem::replace(&mut topology.primary, standby));
    let port = topology.primary.port;
    let promoted = Conn::connect(port, Duration::from_secs(5))
        .and_then(|mut c| c.call(&[b"REPLICAOF", b"NO", b"ONE"]));
    shared.log_fault(format!("REPLICAOF NO ONE on {port}: {promoted:?}"));
    shared.primary.store(port, Ordering::SeqCst);
    shared.count("unplanned failovers");
    let standby = Server::builder(flavor)
        .module_args(MODULE_ARGS)
        .replica_of(port)
        .start();
    let moved = Conn::connect(topology.bare.port, Duration::from_secs(5)).and_then(|mut c| {
        c.call(&[
            b"REPLICAOF",
            b"127.0.0.1",
            standby.port.to_string().as_bytes(),
        ])
    });
    if !matches!(moved, Ok(Frame::Simple(_))) {
        shared.violation(format!(
            "REPLICAOF of the module-less replica replied {moved:?}"
        ));
    }
    topology.standby = Some(standby);
}

/// `FAILOVER TO` the standby; once it is primary the clients follow it, and the old
/// primary becomes the standby.
fn failover(topology: &mut Topology, shared: &Shared, c: &mut Conn) {
    let Some(standby) = topology.standby.as_ref() else {
        return;
    };
    let port = standby.port.to_string();
    // `FAILOVER` pauses writes as `CLIENT PAUSE WRITE` does, until the switch (or its
    // timeout): clients that unblock others hold off until it is over.
    *shared.writes_paused_until.lock().unwrap() = Some(Instant::now() + Duration::from_secs(30));
    failover_to(topology, shared, c, &port);
    let after = Instant::now() + Duration::from_millis(200);
    *shared.writes_paused_until.lock().unwrap() = topology.writes_paused_until.max(Some(after));
}

fn failover_to(topology: &mut Topology, shared: &Shared, c: &mut Conn, port: &str) {
    let Some(standby) = topology.standby.as_ref() else {
        return;
    };
    match c.call(&[
        b"FAILOVER",
        b"TO",
        b"127.0.0.1",
        port.as_bytes(),
        b"TIMEOUT",
        b"5000",
    ]) {
        Ok(Frame::Simple(_)) => {}
        other => {
            shared.count(&format!("fault failover refused: {other:?}"));
            return;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let promoted = Conn::connect(standby.port, Duration::from_secs(2))
            .and_then(|mut s| s.call(&[b"ROLE"]))
            .is_ok_and(|role| match role {
                Frame::Array(Some(items)) => {
                    items.first().and_then(Frame::text).as_deref() == Some("master")
                }
                _ => false,
            });
        if promoted {
            shared.primary.store(standby.port, Ordering::SeqCst);
            let old = std::mem::replace(
                &mut topology.primary,
                topology.standby.take().expect("standby"),
            );
            topology.standby = Some(old);
            shared.count("failover done");
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    shared.count("failover timed out");
}
