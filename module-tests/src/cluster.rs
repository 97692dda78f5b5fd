//! A real Redis Cluster (or Valkey cluster) for tests: primaries with replicas, the
//! module loaded on every node, slots split evenly, and the moves a resharding makes.

use std::time::Duration;

use redis::Value;

use crate::{wait_until, Flavor, Server};

/// The hash slot of a key without a hash tag (CRC16-XMODEM mod 16384), as
/// `CLUSTER KEYSLOT` gives it; for the test tools (the module has its own in
/// `core::cluster`, tags included).
pub fn untagged_key_slot(key: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in key {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc & 0x3fff
}

pub struct Cluster {
    pub flavor: Flavor,
    pub primaries: Vec<Server>,
    pub replicas: Vec<Server>,
}

/// `CLUSTER <args>` on `server`, panicking with the server's log on error.
fn cluster_cmd<T: redis::FromRedisValue>(server: &Server, args: &[&str]) -> T {
    let mut cmd = redis::cmd("CLUSTER");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(&mut server.conn()).unwrap_or_else(|e| {
        panic!(
            "CLUSTER {args:?} on {server:?}: {e}\n{}",
            server.log_tail(20)
        )
    })
}

impl Cluster {
    /// Starts `primaries` primaries with `replicas_per_primary` replicas each, all with
    /// the module, and returns once every node sees every node and the cluster is ok.
    pub fn start(flavor: Flavor, primaries: usize, replicas_per_primary: usize) -> Cluster {
        Cluster::start_with(flavor, primaries, replicas_per_primary, |b| b)
    }

    /// As `start`, with each node's builder passed through `configure` first.
    pub fn start_with(
        flavor: Flavor,
        primaries: usize,
        replicas_per_primary: usize,
        configure: impl Fn(crate::ServerBuilder) -> crate::ServerBuilder,
    ) -> Cluster {
        let node = || {
            configure(
                Server::builder(flavor)
                    .config("cluster-enabled", "yes")
                    .config("cluster-node-timeout", "3000")
                    .config("cluster-require-full-coverage", "no"),
            )
            .start()
        };
        let primary_nodes: Vec<Server> = (0..primaries).map(|_| node()).collect();
        let replica_nodes: Vec<Server> = (0..primaries * replicas_per_primary)
            .map(|_| node())
            .collect();
        let per = 16384 / primaries;
        for (i, p) in primary_nodes.iter().enumerate() {
            let from = i * per;
            let to = if i + 1 == primaries {
                16383
            } else {
                from + per - 1
            };
            let _: () = cluster_cmd(p, &["ADDSLOTSRANGE", &from.to_string(), &to.to_string()]);
        }
        let first = &primary_nodes[0];
        for other in primary_nodes.iter().skip(1).chain(&replica_nodes) {
            let _: () = cluster_cmd(first, &["MEET", "127.0.0.1", &other.port.to_string()]);
        }
        let cluster = Cluster {
            flavor,
            primaries: primary_nodes,
            replicas: replica_nodes,
        };
        // Every node knows every other by its real id: a node still in handshake is
        // listed under a temporary one, and `CLUSTER REPLICATE` of it fails.
        let ids: Vec<String> = cluster.nodes().map(|n| cluster.node_id(n)).collect();
        assert!(
            wait_until(Duration::from_secs(20), || cluster.nodes().all(|n| {
                let nodes = cluster_cmd::<String>(n, &["NODES"]);
                !nodes.contains("handshake") && ids.iter().all(|id| nodes.contains(id.as_str()))
            })),
            "{flavor}: the nodes did not all meet"
        );
        for (i, replica) in cluster.replicas.iter().enumerate() {
            let primary = &cluster.primaries[i / replicas_per_primary.max(1)];
            let id = cluster.node_id(primary);
            let _: () = cluster_cmd(replica, &["REPLICATE", &id]);
        }
        cluster.wait_ok();
        cluster
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Server> {
        self.primaries.iter().chain(&self.replicas)
    }

    pub fn node_id(&self, server: &Server) -> String {
        cluster_cmd(server, &["MYID"])
    }

    /// Waits until every node says `cluster_state:ok`, every replica is linked, and the
    /// nodes agree on who serves each slot.
    pub fn wait_ok(&self) {
        let ok = wait_until(Duration::from_secs(30), || {
            let states_ok = self
                .nodes()
                .all(|n| cluster_cmd::<String>(n, &["INFO"]).contains("cluster_state:ok"));
            let replicas_linked = self.replicas.iter().all(|r| {
                r.info("replication")
                    .get("master_link_status")
                    .is_some_and(|s| s == "up")
            });
            let views: Vec<String> = self
                .nodes()
                .map(|n| {
                    let mut lines: Vec<String> = cluster_cmd::<String>(n, &["NODES"])
                        .lines()
                        .filter(|l| l.contains("master"))
                        .map(|l| {
                            let f: Vec<&str> = l.split_whitespace().collect();
                            format!("{} {}", f[0], f[8..].join(" "))
                        })
                        .collect();
                    lines.sort();
                    lines.join("\n")
                })
                .collect();
            states_ok && replicas_linked && views.windows(2).all(|w| w[0] == w[1])
        });
        assert!(ok, "{}: the cluster did not settle", self.flavor);
    }

    pub fn slot(&self, key: &str) -> u16 {
        cluster_cmd::<i64>(&self.primaries[0], &["KEYSLOT", key]) as u16
    }

    /// The primary serving `slot`, as that primary itself says.
    pub fn primary_of_slot(&self, slot: u16) -> &Server {
        self.primaries
            .iter()
            .find(|p| {
                let mut con = p.conn();
                let owned: Vec<Vec<Value>> = redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query(&mut con)
                    .unwrap_or_default();
                let me = p.port as i64;
                owned.iter().any(|range| {
                    let (Some(Value::Int(from)), Some(Value::Int(to))) =
                        (range.first(), range.get(1))
                    else {
                        return false;
                    };
                    let port = match range.get(2) {
                        Some(Value::Array(node)) => match node.get(1) {
                            Some(Value::Int(port)) => *port,
                            _ => 0,
                        },
                        _ => 0,
                    };
                    port == me && (*from..=*to).contains(&(slot as i64))
                })
            })
            .unwrap_or_else(|| panic!("{}: no primary serves slot {slot}", self.flavor))
    }

    pub fn primary_for(&self, key: &str) -> &Server {
        self.primary_of_slot(self.slot(key))
    }

    /// Some primary other than `server`.
    pub fn other_primary(&self, server: &Server) -> &Server {
        self.primaries
            .iter()
            .find(|p| p.port != server.port)
            .expect("a second primary")
    }

    /// A key of `prefix` whose slot `server` serves.
    pub fn key_on(&self, server: &Server, prefix: &str) -> String {
        (0..100_000)
            .map(|i| format!("{prefix}{i}"))
            .find(|k| self.primary_for(k).port == server.port)
            .expect("a key on that node")
    }

    /// The first half of a classic slot migration: `to` imports `slot`, `from`
    /// migrates it. Keys stay on `from` until `migrate_keys`.
    pub fn begin_migration(&self, slot: u16, from: &Server, to: &Server) {
        let slot = slot.to_string();
        let _: () = cluster_cmd(to, &["SETSLOT", &slot, "IMPORTING", &self.node_id(from)]);
        let _: () = cluster_cmd(from, &["SETSLOT", &slot, "MIGRATING", &self.node_id(to)]);
    }

    /// Moves every key of `slot` from `from` to `to` with `MIGRATE`, as `redis-cli
    /// --cluster reshard` does. Returns the keys moved.
    pub fn migrate_keys(&self, slot: u16, from: &Server, to: &Server) -> Vec<String> {
        let mut moved = Vec::new();
        loop {
            let keys: Vec<String> = cluster_cmd(from, &["GETKEYSINSLOT", &slot.to_string(), "100"]);
            if keys.is_empty() {
                return moved;
            }
            for key in keys {
                let reply: redis::RedisResult<Value> = redis::cmd("MIGRATE")
                    .arg("127.0.0.1")
                    .arg(to.port)
                    .arg(&key)
                    .arg(0)
                    .arg(5000)
                    .query(&mut from.conn());
                if let Err(e) = reply {
                    panic!("MIGRATE {key} from {from:?} to {to:?}: {e}");
                }
                moved.push(key);
            }
        }
    }

    /// The last step: every primary learns that `to` serves `slot` now.
    pub fn end_migration(&self, slot: u16, from: &Server, to: &Server) {
        let slot_text = slot.to_string();
        let id = self.node_id(to);
        let _: () = cluster_cmd(to, &["SETSLOT", &slot_text, "NODE", &id]);
        let _: () = cluster_cmd(from, &["SETSLOT", &slot_text, "NODE", &id]);
        for p in &self.primaries {
            if p.port != to.port && p.port != from.port {
                let _: () = cluster_cmd(p, &["SETSLOT", &slot_text, "NODE", &id]);
            }
        }
        self.wait_ok();
    }

    /// A whole classic migration of `slot`.
    pub fn move_slot(&self, slot: u16, from: &Server, to: &Server) -> Vec<String> {
        self.begin_migration(slot, from, to);
        let moved = self.migrate_keys(slot, from, to);
        self.end_migration(slot, from, to);
        moved
    }
}
