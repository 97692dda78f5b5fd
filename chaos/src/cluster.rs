//! The cluster phase: the module on every node of a 3-primary cluster with a replica
//! each, the same clients and checker, and two faults a cluster adds: a lock's slot
//! resharded to another primary (classic migration, as `redis-cli --cluster reshard`
//! does, key by key with `MIGRATE`) and back, and a manual `CLUSTER FAILOVER` of a
//! shard. A split brain (two holders on two nodes) shows as a mutual-exclusion
//! violation; a `MIGRATE` refused because the target already has the key ("BUSYKEY",
//! the module re-creating a lock that left) is a violation too.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rlock_module_tests::cluster::untagged_key_slot;
use rlock_module_tests::{Cluster, Flavor};

use crate::extras::Extras;
use crate::history;
use crate::resp::{since_epoch, Conn, Frame};
use crate::rng::Rng;
use crate::rwload;
use crate::workload::{self, Shared};

/// One node's view: every primary's port and the slot ranges it serves.
struct Primaries(Vec<(u16, Vec<(u16, u16)>)>);

impl Primaries {
    fn read(port: u16) -> Option<Primaries> {
        let mut c = Conn::connect(port, Duration::from_secs(5)).ok()?;
        let text = c.call(&[b"CLUSTER", b"NODES"]).ok()?.text()?;
        let mut out = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 || !f[2].split(',').any(|flag| flag == "master") || f[2].contains("fail")
            {
                continue;
            }
            let port = f[1]
                .split('@')
                .next()
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| p.parse().ok())?;
            let ranges = f[8..]
                .iter()
                .filter(|r| !r.starts_with('['))
                .filter_map(|r| {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    Some((a.parse().ok()?, b.parse().ok()?))
                })
                .collect();
            out.push((port, ranges));
        }
        Some(Primaries(out))
    }

    fn serving(&self, slot: u16) -> Option<u16> {
        self.0
            .iter()
            .find(|(_, ranges)| ranges.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
            .map(|(port, _)| *port)
    }

    fn ports(&self) -> Vec<u16> {
        self.0.iter().map(|(p, _)| *p).collect()
    }
}

fn call(port: u16, args: &[&[u8]]) -> Result<Frame, String> {
    let mut c = Conn::connect(port, Duration::from_secs(10)).map_err(|e| e.to_string())?;
    c.call(args).map_err(|e| e.to_string())
}

fn text(port: u16, args: &[&[u8]]) -> String {
    call(port, args)
        .ok()
        .and_then(|f| f.text())
        .unwrap_or_default()
}

/// Moves `slot` from `from` to `to`, key by key, then tells every primary.
fn reshard(shared: &Shared, slot: u16, from: u16, to: u16, all: &[u16]) {
    let from_id = text(from, &[b"CLUSTER", b"MYID"]);
    let to_id = text(to, &[b"CLUSTER", b"MYID"]);
    let s = slot.to_string();
    let steps: [(u16, Vec<&[u8]>); 2] = [
        (
            to,
            vec![
                b"CLUSTER",
                b"SETSLOT",
                s.as_bytes(),
                b"IMPORTING",
                from_id.as_bytes(),
            ],
        ),
        (
            from,
            vec![
                b"CLUSTER",
                b"SETSLOT",
                s.as_bytes(),
                b"MIGRATING",
                to_id.as_bytes(),
            ],
        ),
    ];
    for (port, args) in steps {
        if let Ok(Frame::Error(e)) | Err(e) = call(port, &args) {
            shared.count(&format!(
                "reshard refused: {}",
                e.split(' ').next().unwrap_or("")
            ));
            return;
        }
    }
    shared.log_fault(format!(
        "reshard slot {slot} from {from} to {to}: migrating"
    ));
    while let Ok(Frame::Array(Some(keys))) =
        call(from, &[b"CLUSTER", b"GETKEYSINSLOT", s.as_bytes(), b"100"])
    {
        if keys.is_empty() {
            break;
        }
        for key in keys {
            let Some(key) = key.text() else { continue };
            let to_port = to.to_string();
            match call(
                from,
                &[
                    b"MIGRATE",
                    b"127.0.0.1",
                    to_port.as_bytes(),
                    key.as_bytes(),
                    b"0",
                    b"5000",
                ],
            ) {
                Ok(Frame::Error(e)) if e.contains("BUSYKEY") => {
                    shared.violation(format!(
                        "MIGRATE {key} from {from} to {to}: {e} (the key exists on both nodes)"
                    ));
                    // Back to a stable slot on its old node, so one finding stays one.
                    for port in [from, to] {
                        let _ = call(port, &[b"CLUSTER", b"SETSLOT", s.as_bytes(), b"STABLE"]);
                    }
                    return;
                }
                Ok(Frame::Error(e)) => shared.count(&format!("migrate error {e}")),
                Err(e) => shared.count(&format!("migrate failed {e}")),
                Ok(_) => shared.count("key migrated"),
            }
        }
    }
    for port in std::iter::once(to)
        .chain(std::iter::once(from))
        .chain(all.iter().copied().filter(|p| *p != to && *p != from))
    {
        let _ = call(
            port,
            &[
                b"CLUSTER",
                b"SETSLOT",
                s.as_bytes(),
                b"NODE",
                to_id.as_bytes(),
            ],
        );
    }
    shared.log_fault(format!("reshard slot {slot} from {from} to {to}: done"));
    shared.count("reshard");
}

/// `CLUSTER FAILOVER` on a replica: its primary pauses writes until it caught up, then
/// they swap roles. Waits until the replica says it is a primary.
fn failover(shared: &Shared, nodes: &[u16], rng: &mut Rng) {
    let replicas: Vec<u16> = nodes
        .iter()
        .copied()
        .filter(|p| text(*p, &[b"INFO", b"replication"]).contains("role:slave"))
        .collect();
    if replicas.is_empty() {
        return;
    }
    let replica = *rng.pick(&replicas);
    // One that outlives its pause is not coordinated: writes no replica acknowledged may
    // be lost, as with a killed primary.
    shared.promotions.lock().unwrap().push(Instant::now());
    shared.log_fault(format!("cluster failover to {replica}"));
    match call(replica, &[b"CLUSTER", b"FAILOVER"]) {
        Ok(Frame::Error(e)) => {
            shared.count(&format!("cluster failover refused: {e}"));
            return;
        }
        Err(e) => {
            shared.count(&format!("cluster failover failed: {e}"));
            return;
        }
        Ok(_) => {}
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if text(replica, &[b"INFO", b"replication"]).contains("role:master") {
            shared.count("cluster failover");
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
    shared.count("cluster failover did not complete in 10 s");
}

/// The unplanned failover of a shard: `kill -9` of a primary whose replica is in sync,
/// then `CLUSTER FAILOVER TAKEOVER` on that replica (no agreement, no pause: what an
/// operator does when the primary is gone); the clients' routes move to it, and once it
/// serves, the killed node starts again and rejoins as its replica.
fn takeover(shared: &Shared, cluster: &mut Cluster, rng: &mut Rng) {
    let nodes: Vec<u16> = cluster.nodes().map(|n| n.port).collect();
    let pairs: Vec<(u16, u16)> = nodes
        .iter()
        .filter_map(|&replica| {
            let info = text(replica, &[b"INFO", b"replication"]);
            let field = |name: &str| {
                info.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(str::trim)
                    .map(str::to_string)
            };
            let in_sync = info.contains("role:slave")
                && field("master_link_status:").as_deref() == Some("up")
                && field("master_sync_in_progress:").as_deref() == Some("0");
            let primary = field("master_port:")?.parse().ok()?;
            in_sync.then_some((replica, primary))
        })
        .collect();
    if pairs.is_empty() {
        shared.count("cluster takeover: no replica in sync");
        return;
    }
    let (replica, primary) = *rng.pick(&pairs);
    shared.promotions.lock().unwrap().push(Instant::now());
    shared.log_fault(format!("kill -9 of shard primary {primary}"));
    let Some(node) = cluster
        .primaries
        .iter_mut()
        .chain(cluster.replicas.iter_mut())
        .find(|n| n.port == primary)
    else {
        return;
    };
    node.kill9();
    let reply = call(replica, &[b"CLUSTER", b"FAILOVER", b"TAKEOVER"]);
    shared.log_fault(format!("CLUSTER FAILOVER TAKEOVER on {replica}: {reply:?}"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut promoted = false;
    while Instant::now() < deadline && !promoted {
        promoted = text(replica, &[b"INFO", b"replication"]).contains("role:master");
        thread::sleep(Duration::from_millis(20));
    }
    shared.count(if promoted {
        "cluster takeovers"
    } else {
        "cluster takeover did not complete in 10 s"
    });
    // Routes to the dead node go to the one that took its slots.
    for port in shared.routes.lock().unwrap().values_mut() {
        if *port == primary {
            *port = replica;
        }
    }
    if shared.primary.load(Ordering::SeqCst) == primary {
        shared.primary.store(replica, Ordering::SeqCst);
    }
    let node = cluster
        .primaries
        .iter_mut()
        .chain(cluster.replicas.iter_mut())
        .find(|n| n.port == primary)
        .expect("the killed node");
    node.start_again();
    shared.log_fault(format!("shard primary {primary} started again"));
}

/// Runs the cluster phase: load, faults, then the checks. Returns the violations, the
/// counts and the holds checked.
pub fn run_phase(
    flavor: Flavor,
    seed: u64,
    secs: u64,
    clients: usize,
    locks: &[String],
    fault_every_ms: u64,
) -> (Vec<String>, BTreeMap<String, u64>, usize) {
    let mut rng = Rng::new(seed);
    let began = (since_epoch(Instant::now()), SystemTime::now());
    let mut cluster = Cluster::start_with(flavor, 3, 1, |b| b.module_args(&["lease-ms", "2000"]));
    let nodes: Vec<u16> = cluster.nodes().map(|n| n.port).collect();
    let mut shared = Shared::new(cluster.primaries[0].port, true);
    shared.cluster = true;
    shared.acknowledge = true;
    let rw_locks = rwload::lock_names(2);
    for lock in locks.iter().chain(&rw_locks) {
        let port = cluster.primary_for(lock).port;
        shared.routes.lock().unwrap().insert(lock.clone(), port);
    }
    let shared = Arc::new(shared);
    let mut threads: Vec<_> = (0..clients)
        .map(|index| {
            let (shared, rng, locks) = (shared.clone(), rng.fork(), locks.to_vec());
            thread::spawn(move || workload::client(shared, index, rng, locks))
        })
        .collect();
    // Read-write clients: module ones, and one running Redisson's scripts.
    let rw_clients = clients.div_ceil(4);
    for index in 0..=rw_clients {
        let (shared, rng, locks) = (shared.clone(), rng.fork(), rw_locks.clone());
        let redisson = index == rw_clients;
        threads.push(thread::spawn(move || {
            rwload::client(shared, index, rng, locks, redisson)
        }));
    }
    // Semaphores and latches beside them, on their own slots (failed over, not resharded).
    let extras = Extras::spawn(&shared, &mut rng, "");
    let moved_locks: Vec<String> = locks.iter().chain(&rw_locks).cloned().collect();
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        thread::sleep(Duration::from_millis(
            rng.range(fault_every_ms / 5, fault_every_ms),
        ));
        let Some(view) = nodes.iter().find_map(|p| Primaries::read(*p)) else {
            continue;
        };
        if rng.chance(70) {
            let lock = rng.pick(&moved_locks).clone();
            let slot = untagged_key_slot(lock.as_bytes());
            let Some(from) = view.serving(slot) else {
                continue;
            };
            let others: Vec<u16> = view.ports().into_iter().filter(|p| *p != from).collect();
            if others.is_empty() {
                continue;
            }
            let to = *rng.pick(&others);
            reshard(&shared, slot, from, to, &view.ports());
        } else if rng.chance(50) {
            failover(&shared, &nodes, &mut rng);
        } else {
            takeover(&shared, &mut cluster, &mut rng);
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    let history = workload::join_clients(&shared, threads);
    let extras = extras.join(&shared);
    let mut violations = shared.violations.lock().unwrap().clone();
    let fault_log = shared.fault_log.lock().unwrap().clone();
    violations.extend(history::mutual_exclusion(&history, &fault_log));
    violations.extend(history::fencing(&history, &[]));
    let promotions = shared.promotions.lock().unwrap().clone();
    let (found, extra_counts) = extras.check(&fault_log, &promotions, cluster.primaries[0].port);
    violations.extend(found);
    violations.extend(after_load(&mut cluster, locks));
    if let Some(last) = violations.last_mut() {
        last.push('\n');
        last.push_str(&failover_lines(&cluster, began));
    }
    let mut counts = shared.counts.lock().unwrap().clone();
    counts.insert("holds checked".into(), history.holds.len() as u64);
    counts.extend(extra_counts);
    (violations, counts, history.holds.len())
}

/// The nodes' log lines on failovers and pauses, to read beside a finding: the nodes
/// log wall-clock times (UTC here), the findings times since the run began.
fn failover_lines(cluster: &Cluster, began: (String, SystemTime)) -> String {
    let unix = began
        .1
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let day_ms = unix % 86_400_000;
    let mut out = format!(
        "the nodes' failover log lines (the phase began at {} = {:02}:{:02}:{:02}.{:03} UTC):\n",
        began.0,
        day_ms / 3_600_000,
        day_ms / 60_000 % 60,
        day_ms / 1000 % 60,
        day_ms % 1000
    );
    for node in cluster.nodes() {
        for line in node.log().lines() {
            let lower = line.to_lowercase();
            if lower.contains("failover") || lower.contains("paus") || lower.contains("role change")
            {
                out.push_str(&format!("  {}: {line}\n", node.port));
            }
        }
    }
    out
}

/// Once the load stopped: nobody blocked on any node, every lock gone everywhere once
/// the leases ran out, every node alive with no panic in its log.
fn after_load(cluster: &mut Cluster, locks: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let mut left = Vec::new();
        for node in cluster.nodes() {
            let info = text(node.port, &[b"INFO", b"rlock"]);
            if !info.contains("rlock_blocked:0") {
                left.push(format!("{} has blocked clients", node.port));
            }
            if text(node.port, &[b"INFO", b"replication"]).contains("role:master") {
                for lock in locks {
                    if let Ok(Frame::Int(1)) = call(node.port, &[b"EXISTS", lock.as_bytes()]) {
                        left.push(format!("{lock} still held on {}", node.port));
                    }
                }
            }
        }
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            found.push(format!("after the load: {}", left.join("; ")));
            break;
        }
        thread::sleep(Duration::from_millis(200));
    }
    for node in cluster
        .primaries
        .iter_mut()
        .chain(cluster.replicas.iter_mut())
    {
        let port = node.port;
        if let Some(death) = crate::evidence::dead(node, &format!("node {port}")) {
            found.push(death);
        } else if call(node.port, &[b"PING"]).is_err() {
            found.push(format!(
                "node {} stopped answering PING:\n{}",
                node.port,
                node.log_tail(30)
            ));
        } else if node.log().contains("panicked") {
            found.push(format!(
                "a panic in node {}'s log:\n{}",
                node.port,
                node.log_tail(30)
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #[test]
    fn slots_match_the_servers() {
        assert_eq!(
            rlock_module_tests::cluster::untagged_key_slot(b"foo"),
            12182
        );
        assert_eq!(rlock_module_tests::cluster::untagged_key_slot(b"bar"), 5061);
    }
}
