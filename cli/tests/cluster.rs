//! `--cluster`: a lock on any primary; `ls` and `top` ask every primary, rates summed and keys
//! merged.

mod common;

use std::time::Duration;

use common::*;
use rlock_module_tests::cluster::Cluster;
use serde_json::Value as Json;

#[test]
fn lock_ls_and_top_span_every_primary() {
    for flavor in flavors() {
        let cluster = Cluster::start(flavor, 3, 0);
        let primaries: Vec<&Server> = cluster.nodes().collect();
        let seed = primaries[0];
        // One lock on each primary, taken through the tool.
        let keys: Vec<String> = primaries.iter().map(|p| cluster.key_on(p, "job")).collect();
        for key in &keys {
            let lock = ["--cluster", "lock", key, "--", "true"];
            assert_exit(&run_on(seed, &lock, "cluster lock"), 0, flavor);
        }
        for (p, key) in primaries.iter().zip(&keys) {
            hold(&mut p.conn(), key, "holder", "30000");
        }
        let out = run_on(seed, &["--cluster", "ls", "--json"], "ls");
        assert_exit(&out, 0, flavor);
        let listed: Json = serde_json::from_slice(&out.stdout).unwrap();
        let mut found: Vec<String> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["key"].as_str().unwrap().to_owned())
            .collect();
        found.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(found, want, "{flavor}: a lock of every primary");

        // A call blocked on each of two primaries: top sums them and lists both keys.
        let waiters: Vec<_> = primaries[..2]
            .iter()
            .zip(&keys)
            .map(|(p, key)| blocked_waiter(p, key, "w", "2500"))
            .collect();
        let blocked = wait_until(Duration::from_secs(5), || {
            primaries[..2]
                .iter()
                .all(|p| p.info("rlock").get("rlock_blocked").map(String::as_str) == Some("1"))
        });
        assert!(blocked, "{flavor}");
        let mut top = rlock(seed, &["--cluster", "top", "--stat", "-i", "0.3"])
            .spawn()
            .unwrap();
        let stdout = top.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .take(2)
                .collect::<Vec<_>>()
        });
        let lines = reader.join().unwrap();
        let _ = top.kill();
        let _ = top.wait();
        assert_eq!(lines.len(), 2, "{flavor}: {lines:?}");
        let blocked_col: u64 = lines[1].split_whitespace().nth(5).unwrap().parse().unwrap();
        assert_eq!(blocked_col, 2, "{flavor}: blocked calls summed: {lines:?}");
        for w in waiters {
            let _ = w.join();
        }
    }
}
