//! Leader election on real servers (every flavor): one leader at a time, terms that grow,
//! re-election when a leader dies or resigns, observers that see every change in order within
//! 100 ms (with keyspace events and by polling), and failover with acknowledged grants.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{holders, raw, servers, Frozen, Server};
use rlock_client::{Error, Leader, LeaderChanges, Leadership, Locks, ObserveMode};
use rlock_module_tests::redis::Value;
use tokio::time::Instant;

/// A short watchdog lease, so that a dead leader's post lapses quickly.
const LEASE: Duration = Duration::from_millis(1500);

/// How late an observer may report a change.
const WITHIN: Duration = Duration::from_millis(100);

fn locks(server: &Server) -> Locks {
    Locks::builder(server.client())
        .watchdog_lease(LEASE)
        .response_timeout(Duration::from_millis(300))
        .build()
}

fn leader(value: &str, term: u64) -> Option<Leader> {
    Some(Leader {
        value: value.to_owned(),
        term,
    })
}

fn set_events(server: &Server, on: bool) {
    let flags = if on { "Kd" } else { "" };
    raw(server, &["CONFIG", "SET", "notify-keyspace-events", flags]).unwrap();
}

fn int(v: Value) -> i64 {
    match v {
        Value::Int(n) => n,
        Value::BulkString(b) => String::from_utf8_lossy(&b).parse().unwrap(),
        other => panic!("not an integer: {other:?}"),
    }
}

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// `RLOCK.INFO` calls the server has run so far.
fn info_calls(server: &Server) -> u64 {
    let stats = server.info("commandstats");
    stats
        .get("cmdstat_rlock.info")
        .and_then(|s| s.strip_prefix("calls="))
        .and_then(|s| s.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// What an observer received, and when.
type Seen = Arc<Mutex<Vec<(Instant, Option<Leader>)>>>;

/// Reads `changes` in a task of its own, recording each item with the moment it arrived.
fn record(mut changes: LeaderChanges) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let item = changes.next().await.expect("observer error");
            log.lock().unwrap().push((Instant::now(), item));
        }
    });
    (seen, task)
}

/// Waits until the observer has seen `n` items; returns them.
async fn seen_at_least(seen: &Seen, n: usize, what: &str) -> Vec<(Instant, Option<Leader>)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let items = seen.lock().unwrap().clone();
        if items.len() >= n {
            return items;
        }
        assert!(Instant::now() < deadline, "{what}: saw only {items:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Consecutive items differ; the leaders' terms strictly grow.
fn assert_ordered(items: &[(Instant, Option<Leader>)], what: &str) {
    for w in items.windows(2) {
        assert_ne!(w[0].1, w[1].1, "{what}: an item repeated: {items:?}");
    }
    let terms: Vec<u64> = items
        .iter()
        .filter_map(|(_, l)| Some(l.as_ref()?.term))
        .collect();
    assert!(
        terms.windows(2).all(|w| w[0] < w[1]),
        "{what}: terms out of order: {terms:?}"
    );
}

/// A leader's time in office: term, value, elected at, stepping down at.
type Tenure = (u64, String, Instant, Instant);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c13_one_leader_at_a_time_and_terms_grow() {
    const CANDIDATES: usize = 6;
    const ROUNDS: usize = 3;
    for server in servers() {
        let flavor = server.flavor;
        let tenures: Arc<Mutex<Vec<Tenure>>> = Arc::default();
        let mut tasks = Vec::new();
        for i in 0..CANDIDATES {
            // A Locks each: as many processes.
            let election = locks(&server).election("leader");
            let tenures = tenures.clone();
            tasks.push(tokio::spawn(async move {
                let value = format!("candidate-{i}");
                for _ in 0..ROUNDS {
                    let l = election.campaign(value.clone()).await.unwrap();
                    let start = Instant::now();
                    assert_eq!(l.value(), value);
                    // What an observer reads is the post as the leader knows it.
                    let seen = election.leader().await.unwrap();
                    assert_eq!(seen, leader(&value, l.term()), "{flavor}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    assert!(!l.is_lost(), "{flavor}");
                    let end = Instant::now();
                    tenures
                        .lock()
                        .unwrap()
                        .push((l.term(), value.clone(), start, end));
                    l.resign().await.unwrap();
                }
            }));
        }
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .unwrap_or_else(|_| panic!("{flavor}: candidates stuck"))
                .unwrap();
        }
        let mut tenures = tenures.lock().unwrap().clone();
        assert_eq!(tenures.len(), CANDIDATES * ROUNDS, "{flavor}");
        tenures.sort_by_key(|t| t.2);
        for w in tenures.windows(2) {
            let (a, b) = (&w[0], &w[1]);
            assert!(
                a.3 <= b.2,
                "{flavor}: {} (term {}) still led when {} (term {}) was elected",
                a.1,
                a.0,
                b.1,
                b.0
            );
            // Each election takes the lock from free: the counter goes up by exactly one.
            assert_eq!(b.0, a.0 + 1, "{flavor}: terms {tenures:?}");
        }
        assert_eq!(
            locks(&server).election("leader").leader().await.unwrap(),
            None
        );
    }
}

/// A candidate in a runtime of its own, as in another process.
struct Process {
    rt: tokio::runtime::Runtime,
}

impl Process {
    fn new() -> Process {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        Process { rt }
    }

    async fn campaign(&self, locks: Locks, name: &str, value: &str) -> Leadership {
        let (name, value) = (name.to_owned(), value.to_owned());
        self.rt
            .spawn(async move { locks.election(name).campaign(value).await })
            .await
            .unwrap()
            .unwrap()
    }

    /// Stops dead, as a crash would: no resignation, no more renewals, its connections closed.
    fn die(self, leadership: Leadership) {
        std::mem::forget(leadership);
        self.rt.shutdown_background();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_leader_is_replaced_within_its_lease() {
    for server in servers() {
        let flavor = server.flavor;
        let process = Process::new();
        let a = process.campaign(locks(&server), "dies", "a").await;
        let election = locks(&server).election("dies");
        let next = tokio::spawn(async move {
            let b = election.campaign("b").await.unwrap();
            (Instant::now(), b)
        });
        // Renewals keep the dead-to-be leader's post past its first lease.
        tokio::time::sleep(LEASE + LEASE / 3).await;
        assert!(!next.is_finished(), "{flavor}: b elected while a renewed");
        let term = a.term();
        let died = Instant::now();
        process.die(a);
        let (elected, b) = tokio::time::timeout(LEASE * 2, next)
            .await
            .unwrap_or_else(|_| panic!("{flavor}: nobody elected after the leader died"))
            .unwrap();
        let after = elected - died;
        // Its last renewal was at most a third of a lease before it died.
        assert!(
            after >= LEASE / 2 && after <= LEASE + Duration::from_millis(300),
            "{flavor}: b elected {after:?} after a died (lease {LEASE:?})"
        );
        assert_eq!(b.term(), term + 1, "{flavor}");
        b.resign().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c13_a_resignation_elects_the_next_candidate_at_once() {
    for server in servers() {
        let flavor = server.flavor;
        // The default 30 s lease: only the resignation can explain a quick election.
        let a = Locks::new(server.client())
            .election("resigns")
            .campaign("a")
            .await
            .unwrap();
        let election = Locks::new(server.client()).election("resigns");
        let next = tokio::spawn(async move {
            let b = election.campaign("b").await.unwrap();
            (Instant::now(), b)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!next.is_finished(), "{flavor}: b elected while a led");
        let term = a.term();
        let resigned = Instant::now();
        a.resign().await.unwrap();
        let (elected, b) = next.await.unwrap();
        assert!(
            elected - resigned < Duration::from_millis(500),
            "{flavor}: {:?}",
            elected - resigned
        );
        assert_eq!(b.term(), term + 1);
        assert_eq!(holders(&server, "resigns"), [("b".to_owned(), 1)]);
        // A bounded campaign gives up when the post stays taken.
        let c = Locks::new(server.client()).election("resigns");
        let started = Instant::now();
        assert!(c
            .campaign_for("c", Duration::from_millis(150))
            .await
            .unwrap()
            .is_none());
        assert!(started.elapsed() >= Duration::from_millis(150));
        b.resign().await.unwrap();
        let c = c.campaign_for("c", Duration::ZERO).await.unwrap();
        assert_eq!(c.expect("free").term(), term + 2, "{flavor}");
    }
}

/// Hands the post on through `n` candidates waiting in line while an observer watches; checks
/// every term is seen, in order, once, within 100 ms of the resignation that made it.
async fn observe_hand_offs(server: &Server, events: bool) {
    let flavor = server.flavor;
    let name = format!("observed-{events}");
    set_events(server, events);
    let observer = locks(server);
    let changes = observer.election(&name).observe().await.unwrap();
    let mode = changes.mode();
    let expected = if events {
        ObserveMode::Events
    } else {
        ObserveMode::Polling
    };
    assert_eq!(mode, expected, "{flavor}");
    let (seen, task) = record(changes);
    let first = seen_at_least(&seen, 1, "the first item").await;
    assert_eq!(first[0].1, None, "{flavor}: a new election has no leader");

    // Candidate 0 is elected from free; 1..4 wait in line; each resigns after 150 ms.
    const N: usize = 4;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut sent = Vec::new();
    for i in 0..N {
        let election = locks(server).election(&name);
        let tx = tx.clone();
        sent.push(Instant::now());
        tokio::spawn(async move {
            let l = election.campaign(format!("c{i}")).await.unwrap();
            tx.send(l).unwrap();
        });
        if i == 0 {
            // Elected before the others queue.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // (item, the moment it could happen at the earliest)
    let mut expected = vec![(None, first[0].0)];
    let mut earliest = sent[0];
    for _ in 0..N {
        let l = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        expected.push((leader(l.value(), l.term()), earliest));
        tokio::time::sleep(Duration::from_millis(150)).await;
        earliest = Instant::now();
        l.resign().await.unwrap();
    }
    expected.push((None, earliest));
    let items = seen_at_least(&seen, expected.len(), "every term").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    task.abort();
    let items = {
        let all = seen.lock().unwrap().clone();
        assert!(all.len() >= items.len());
        all
    };
    assert_ordered(&items, &format!("{flavor} events={events}"));
    // In polling mode the observer's unlock-channel subscription makes the module leave a
    // freed lock free for 5 ms once per round of hand-offs: a `None` may show between two
    // leaders. Every leader must show, once, in order.
    let leaders: Vec<_> = items.iter().filter(|(_, l)| l.is_some()).collect();
    let wanted: Vec<_> = expected.iter().filter(|(l, _)| l.is_some()).collect();
    assert_eq!(
        leaders.iter().map(|(_, l)| l.clone()).collect::<Vec<_>>(),
        wanted.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(),
        "{flavor} events={events}"
    );
    for ((at, l), (_, earliest)) in leaders.iter().zip(&wanted) {
        let late = at.saturating_duration_since(*earliest);
        assert!(
            late < WITHIN,
            "{flavor} events={events}: {l:?} seen {late:?} after it could happen"
        );
    }
    let (last_at, last) = items.last().unwrap();
    assert_eq!(
        *last, None,
        "{flavor} events={events}: the last resignation"
    );
    let late = last_at.saturating_duration_since(expected.last().unwrap().1);
    assert!(
        late < WITHIN,
        "{flavor} events={events}: free seen {late:?} late"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c13_observe_sees_every_change_in_order_with_keyspace_events() {
    for server in servers() {
        observe_hand_offs(&server, true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_sees_every_change_in_order_by_polling() {
    for server in servers() {
        observe_hand_offs(&server, false).await;
    }
}

/// A dead leader's lease lapses with nobody waiting: no module event says so.
async fn observe_a_lapse(server: &Server, events: bool) {
    let flavor = server.flavor;
    let name = format!("lapses-{events}");
    set_events(server, events);
    let process = Process::new();
    let a = process.campaign(locks(server), &name, "a").await;
    let term = a.term();
    let changes = locks(server).election(&name).observe().await.unwrap();
    let (seen, task) = record(changes);
    let first = seen_at_least(&seen, 1, "the first item").await;
    assert_eq!(first[0].1, leader("a", term), "{flavor}");
    process.die(a);
    // No renewal comes any more: this is when the server ends the post.
    let expires = int(raw(server, &["PEXPIRETIME", &name]).unwrap());
    assert!(expires > 0, "{flavor}: {expires}");
    let items = seen_at_least(&seen, 2, "the lapse").await;
    let seen_ms = unix_ms() - items[1].0.elapsed().as_millis() as i64;
    task.abort();
    assert_eq!(items[1].1, None, "{flavor}");
    let late = seen_ms - expires;
    assert!(
        (-5..WITHIN.as_millis() as i64).contains(&late),
        "{flavor} events={events}: a lapse seen {late} ms after the lease's end"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_sees_a_lapsed_lease_in_time() {
    for server in servers() {
        observe_a_lapse(&server, true).await;
        observe_a_lapse(&server, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_reads_on_events_and_polls_without_them() {
    for server in servers() {
        let flavor = server.flavor;
        let leader_locks = Locks::new(server.client());
        let _l = leader_locks.election("quiet").campaign("a").await.unwrap();
        let observer = locks(&server);
        // Without events: a read every 50 ms.
        set_events(&server, false);
        let mut changes = observer.election("quiet").observe().await.unwrap();
        assert_eq!(changes.mode(), ObserveMode::Polling, "{flavor}");
        assert!(changes.next().await.unwrap().is_some());
        let before = info_calls(&server);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let polls = info_calls(&server) - before;
        assert!(
            polls >= 10,
            "{flavor}: {polls} reads in a second of polling"
        );
        // Turned on, it is noticed within a second or so, and the reads stop.
        set_events(&server, true);
        let deadline = Instant::now() + Duration::from_secs(3);
        while changes.mode() != ObserveMode::Events {
            assert!(Instant::now() < deadline, "{flavor}: events not noticed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let before = info_calls(&server);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let reads = info_calls(&server) - before;
        assert!(
            reads <= 3,
            "{flavor}: {reads} reads in a quiet second with events"
        );
        drop(changes);
        set_events(&server, false);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_checked_and_unique() {
    for server in servers() {
        let flavor = server.flavor;
        let election = locks(&server).election("unique");
        for bad in [String::new(), "v".repeat(1025)] {
            match election.campaign(bad.clone()).await {
                Err(Error::InvalidValue { len, .. }) => assert_eq!(len, bad.len()),
                other => panic!("{flavor}: {other:?}"),
            }
        }
        let long = "v".repeat(1024);
        let l = election.campaign_for(long.clone(), Duration::ZERO).await;
        l.unwrap()
            .expect("1024 bytes are fine")
            .resign()
            .await
            .unwrap();

        let a = election.campaign("same").await.unwrap();
        // Another process with the same value, and this one again: both refused.
        for other in [locks(&server).election("unique"), election.clone()] {
            match other.campaign_for("same", Duration::from_millis(200)).await {
                Err(Error::DuplicateValue { value, .. }) => assert_eq!(value, "same"),
                other => panic!("{flavor}: {other:?}"),
            }
        }
        // The sitting leader is untouched: one hold, same term, not lost.
        assert_eq!(holders(&server, "unique"), [("same".to_owned(), 1)]);
        assert_eq!(
            election.leader().await.unwrap(),
            leader("same", a.term()),
            "{flavor}"
        );
        assert!(!a.is_lost());
        a.resign().await.unwrap();
        assert!(holders(&server, "unique").is_empty(), "{flavor}");
    }
}

fn repl_offset(server: &Server) -> i64 {
    server.info("replication")["master_repl_offset"]
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacknowledged_grant_is_not_believed() {
    for flavor in common::flavors() {
        let primary = Server::start(flavor);
        let replica = Server::builder(flavor).replica_of(primary.port).start();
        let election = locks(&primary)
            .election("acked")
            .sync_replicas(1, Duration::from_millis(300));
        {
            let _frozen = Frozen::new(&replica);
            match election.campaign_for("a", Duration::from_secs(1)).await {
                Err(Error::NotAcknowledged { acked, wanted, .. }) => {
                    assert_eq!((acked, wanted), (0, 1), "{flavor}")
                }
                other => panic!("{flavor}: {other:?}"),
            }
            // Given back, not kept.
            assert!(holders(&primary, "acked").is_empty(), "{flavor}");
            assert_eq!(election.leader().await.unwrap(), None);
        }
        // With the replica answering again, the same campaign is believed.
        let caught_up = rlock_module_tests::wait_until(Duration::from_secs(10), || {
            repl_offset(&replica) >= repl_offset(&primary)
        });
        assert!(caught_up, "{flavor}: the replica did not catch up");
        let election = election.sync_replicas(1, Duration::from_secs(2));
        let a = tokio::time::timeout(Duration::from_secs(10), election.campaign("a"))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{flavor}: {e}"));
        assert_eq!(a.replicas_acked(), Some(1), "{flavor}");
        assert_eq!(holders(&replica, "acked"), [("a".to_owned(), 1)]);
        a.resign().await.unwrap();
    }
}

/// A failover from `primary` to its replica. With `demote`, the old primary follows the new
/// one (the old leader's renewals are refused at once: `READONLY`); without, it stays paused,
/// as if cut off (its renewals hang until they time out).
async fn failover(flavor: rlock_module_tests::Flavor, demote: bool) {
    {
        let primary = Server::start(flavor);
        let replica = Server::builder(flavor).replica_of(primary.port).start();
        let old = locks(&primary)
            .election("failover")
            .sync_replicas(1, Duration::from_secs(2))
            .campaign("a")
            .await
            .unwrap();
        assert_eq!(old.replicas_acked(), Some(1), "{flavor}");
        // A renewal or two go by, replicated as they come.
        tokio::time::sleep(LEASE / 2).await;

        // The failover: writes on the primary stop, the replica catches up and is promoted,
        // the old primary follows it.
        raw(&primary, &["CLIENT", "PAUSE", "10000", "WRITE"]).unwrap();
        let caught_up = rlock_module_tests::wait_until(Duration::from_secs(5), || {
            repl_offset(&replica) >= repl_offset(&primary)
        });
        assert!(caught_up, "{flavor}: the replica did not catch up");
        raw(&replica, &["REPLICAOF", "NO", "ONE"]).unwrap();
        if demote {
            let port = replica.port.to_string();
            raw(&primary, &["REPLICAOF", "127.0.0.1", &port]).unwrap();
            raw(&primary, &["CLIENT", "UNPAUSE"]).unwrap();
        }

        // The acknowledged grant is there: the old leader still holds the post on the new
        // primary, with its term.
        assert_eq!(
            holders(&replica, "failover"),
            [("a".to_owned(), 1)],
            "{flavor}"
        );
        let on_new = locks(&replica).election("failover");
        assert_eq!(on_new.leader().await.unwrap(), leader("a", old.term()));

        // A candidate on the new primary is elected only once the old leader stopped
        // believing it leads (its renewals now fail: the old primary is a replica).
        let next = tokio::spawn(async move {
            let b = on_new
                .campaign_for("b", LEASE * 3)
                .await
                .unwrap()
                .expect("elected once the old lease ran out");
            (Instant::now(), b)
        });
        let lost = tokio::time::timeout(LEASE * 2, old.lost())
            .await
            .unwrap_or_else(|_| panic!("{flavor}: the old leader never learnt"));
        let lost_at = Instant::now();
        assert!(lost.is_lost(), "{flavor}: {lost}");
        let (elected_at, b) = next.await.unwrap();
        assert!(
            lost_at <= elected_at,
            "{flavor} demote={demote}: b elected {:?} before a stopped believing",
            lost_at - elected_at
        );
        assert!(b.term() > old.term(), "{flavor}");
        drop(old);
        if !demote {
            raw(&primary, &["CLIENT", "UNPAUSE"]).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_does_not_make_two_leaders() {
    for flavor in common::flavors() {
        failover(flavor, true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_from_a_hung_primary_does_not_make_two_leaders() {
    for flavor in common::flavors() {
        failover(flavor, false).await;
    }
}

#[test]
fn the_blocking_twins() {
    for server in servers() {
        let flavor = server.flavor;
        let locks = rlock_client::blocking::Locks::builder(server.client())
            .watchdog_lease(LEASE)
            .build()
            .unwrap();
        let election = locks.election("blocking");
        let mut changes = election.observe().unwrap();
        assert_eq!(changes.next().unwrap().unwrap(), None);
        let a = election.campaign("a").unwrap();
        assert_eq!(a.value(), "a");
        assert_eq!(election.leader().unwrap(), leader("a", a.term()));
        let seen = changes.next_timeout(Duration::from_millis(500));
        assert_eq!(seen.unwrap().unwrap(), leader("a", a.term()), "{flavor}");
        let other = rlock_client::blocking::Locks::new(server.client()).unwrap();
        let b = other.election("blocking");
        assert!(b
            .campaign_for("b", Duration::from_millis(50))
            .unwrap()
            .is_none());
        assert!(a.wait_lost(Duration::from_millis(10)).is_none());
        let term = a.term();
        a.resign().unwrap();
        assert_eq!(changes.next().unwrap().unwrap(), None, "{flavor}");
        let b = b.campaign("b").unwrap();
        assert_eq!(b.term(), term + 1);
        assert_eq!(changes.next().unwrap().unwrap(), leader("b", term + 1));
        drop(b); // steps down in the background
        assert_eq!(changes.next().unwrap().unwrap(), None, "{flavor}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_in_a_cluster_is_observed_by_polling() {
    for flavor in common::flavors() {
        let nodes = rlock_module_tests::Cluster::start(flavor, 3, 0);
        let endpoint = || rlock_client::Endpoint::cluster(vec![nodes.primaries[0].url()]).unwrap();
        let candidates = || {
            Locks::builder(endpoint())
                .watchdog_lease(LEASE)
                .build()
                .election("{cluster}:leader")
        };
        let changes = candidates().observe().await.unwrap();
        assert_eq!(changes.mode(), ObserveMode::Polling, "{flavor}");
        let (seen, task) = record(changes);
        let items = seen_at_least(&seen, 1, "the first item").await;
        assert_eq!(items[0].1, None, "{flavor}");

        let campaigned = Instant::now();
        let a = candidates().campaign("a").await.unwrap();
        let election = candidates();
        let next = tokio::spawn(async move { election.campaign("b").await.unwrap() });
        // Each tenure lasts until the poller has reported it (a fixed pause missed a tenure
        // on a loaded machine); how soon it reported is checked below.
        seen_at_least(&seen, 2, "a's tenure").await;
        // b's campaign waits in the server before a resigns, so the post passes straight to b.
        let (watcher, deadline) = (
            Locks::new(endpoint()),
            Instant::now() + Duration::from_secs(5),
        );
        while watcher.info("{cluster}:leader").await.unwrap().blocked < 1 {
            assert!(
                Instant::now() < deadline,
                "{flavor}: b's campaign never waited"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            candidates().leader().await.unwrap(),
            leader("a", a.term()),
            "{flavor}"
        );
        let (a_term, resigned) = (a.term(), Instant::now());
        a.resign().await.unwrap();
        let b = next.await.unwrap();
        let b_term = b.term();
        assert_eq!(b_term, a_term + 1, "{flavor}");
        seen_at_least(&seen, 3, "b's tenure").await;
        let stepped_down = Instant::now();
        b.resign().await.unwrap();
        let items = seen_at_least(&seen, 4, "a, b and free").await;
        task.abort();
        assert_ordered(&items, flavor.name());
        let values: Vec<_> = items.iter().map(|(_, l)| l.clone()).collect();
        assert_eq!(
            values,
            [None, leader("a", a_term), leader("b", b_term), None],
            "{flavor}"
        );
        for ((at, l), since) in items[1..].iter().zip([campaigned, resigned, stepped_down]) {
            let late = at.saturating_duration_since(since);
            assert!(late < WITHIN, "{flavor}: {l:?} seen {late:?} late");
        }
    }
}
