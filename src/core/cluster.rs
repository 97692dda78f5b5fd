//! Where a key lives in a cluster: its hash slot, and what this node's `CLUSTER NODES`
//! says about that slot. Used so that the module never creates a lock in a slot it
//! no longer serves alone (one being migrated away, or gone), and tells the waiters
//! blocked here where the lock went instead.

/// The hash slot of `key`: CRC16 (XMODEM) of its hash tag, or of the whole key, mod 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16(tagged) & 0x3fff
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= (b as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// What this node may do with a key of a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotRoute {
    /// This node serves the slot and is not migrating it away: it may create keys.
    Served,
    /// This node is migrating the slot to `addr` (`host:port`): a missing key is there,
    /// or will be created there. A client is told `-ASK`.
    Migrating { addr: String },
    /// Another node serves the slot: `-MOVED`.
    Moved { addr: String },
    /// Nobody is known to serve it (or the output was not understood).
    Unknown,
}

impl SlotRoute {
    /// The redirection error a client waiting here gets, as the server words its own.
    pub fn redirect_error(&self, slot: u16) -> Option<String> {
        match self {
            SlotRoute::Served => None,
            SlotRoute::Migrating { addr } => Some(format!("ASK {slot} {addr}")),
            SlotRoute::Moved { addr } => Some(format!("MOVED {slot} {addr}")),
            SlotRoute::Unknown => Some("CLUSTERDOWN Hash slot not served".to_string()),
        }
    }
}

/// Reads `slot` in `CLUSTER NODES` output, as seen by the node marked `myself`.
pub fn route(cluster_nodes: &str, slot: u16) -> SlotRoute {
    ClusterView::parse(cluster_nodes).route(slot)
}

/// `CLUSTER NODES` output split once, to route many slots (the sweep of waited locks).
pub struct ClusterView<'a> {
    nodes: Vec<Vec<&'a str>>,
    /// The node marked `myself`, by its place in `nodes`.
    me: Option<usize>,
}

impl<'a> ClusterView<'a> {
    pub fn parse(cluster_nodes: &'a str) -> Self {
        let nodes: Vec<Vec<&str>> = cluster_nodes
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.len() >= 8)
            .collect();
        let me = nodes
            .iter()
            .position(|f| f[2].split(',').any(|flag| flag == "myself"));
        ClusterView { nodes, me }
    }

    /// What this node may do with keys of `slot`.
    pub fn route(&self, slot: u16) -> SlotRoute {
        let addr_of = |fields: &[&str]| -> String {
            // ip:port@cport[,hostname]
            fields[1].split('@').next().unwrap_or("").to_string()
        };
        let Some(me) = self.me.map(|i| &self.nodes[i]) else {
            return SlotRoute::Unknown;
        };
        let my_slots = &me[8..];
        // `[slot->-target]`: migrating away.
        let migrating_to = my_slots.iter().find_map(|s| {
            let inner = s.strip_prefix('[')?.strip_suffix(']')?;
            let (n, target) = inner.split_once("->-")?;
            (n.parse::<u16>().ok()? == slot).then_some(target)
        });
        let serves = |fields: &[&str]| {
            fields[8..].iter().any(|range| {
                if range.starts_with('[') {
                    return false;
                }
                let (from, to) = range.split_once('-').unwrap_or((range, range));
                matches!((from.parse::<u16>(), to.parse::<u16>()), (Ok(a), Ok(b)) if (a..=b).contains(&slot))
            })
        };
        if serves(me) {
            return match migrating_to {
                Some(target) => match self.nodes.iter().find(|f| f[0] == target) {
                    Some(t) => SlotRoute::Migrating { addr: addr_of(t) },
                    None => SlotRoute::Unknown,
                },
                None => SlotRoute::Served,
            };
        }
        match self
            .nodes
            .iter()
            .find(|f| f[2].split(',').any(|flag| flag == "master") && serves(f))
        {
            Some(owner) => SlotRoute::Moved {
                addr: addr_of(owner),
            },
            None => SlotRoute::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_the_servers() {
        // Values from `CLUSTER KEYSLOT`.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(
            key_slot(b"redisson_lock_queue:{orders}"),
            key_slot(b"orders")
        );
        // An empty tag is no tag.
        assert_eq!(key_slot(b"{}x"), crc16(b"{}x") & 0x3fff);
        assert_eq!(key_slot(b""), 0);
    }

    const NODES: &str = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 [42->-b2]
b2 127.0.0.1:7002@17002,node-b master - 0 1 2 connected 5461-10922
c3 127.0.0.1:7003@17003 master - 0 1 3 connected 10923-16383
d4 127.0.0.1:7004@17004 slave a1 0 1 1 connected
";

    #[test]
    fn routes_follow_cluster_nodes() {
        assert_eq!(route(NODES, 0), SlotRoute::Served);
        assert_eq!(route(NODES, 5460), SlotRoute::Served);
        assert_eq!(
            route(NODES, 42),
            SlotRoute::Migrating {
                addr: "127.0.0.1:7002".into()
            }
        );
        assert_eq!(
            route(NODES, 6000),
            SlotRoute::Moved {
                addr: "127.0.0.1:7002".into()
            }
        );
        assert_eq!(
            route(NODES, 16383),
            SlotRoute::Moved {
                addr: "127.0.0.1:7003".into()
            }
        );
        let unserved = NODES.replace("10923-16383", "10923-16000");
        assert_eq!(route(&unserved, 16383), SlotRoute::Unknown);
        assert_eq!(route("", 1), SlotRoute::Unknown);
        // An importing slot (`[n-<-source]`) is not served until the migration ends.
        let importing = NODES.replace("5461-10922", "5461-10922 [42-<-a1]");
        assert_eq!(route(&importing, 42), route(NODES, 42));
        // One view routes every slot as a fresh read would.
        let view = ClusterView::parse(NODES);
        for slot in [0, 42, 5460, 6000, 16383] {
            assert_eq!(view.route(slot), route(NODES, slot));
        }
    }

    #[test]
    fn redirections_read_like_the_servers() {
        let moved = SlotRoute::Moved {
            addr: "10.0.0.2:6379".into(),
        };
        assert_eq!(
            moved.redirect_error(7).as_deref(),
            Some("MOVED 7 10.0.0.2:6379")
        );
        assert_eq!(SlotRoute::Served.redirect_error(7), None);
    }
}
