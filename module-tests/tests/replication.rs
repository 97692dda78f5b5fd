//! A replica WITHOUT the module ends up with the primary's keys, fields and TTLs.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rlock_module_tests::redis::{Connection, Value};
use rlock_module_tests::*;

const LOCKS: usize = 120;
const OPS: usize = 3000;
const OWNERS: [&[u8]; 5] = [
    b"uuid-a:1",
    b"uuid-a:2",
    b"uuid-b:1",
    b"uuid-c:9",
    b"bin\x00\xff\r\n",
];

#[derive(Clone, Default)]
struct Model {
    holder: Option<(Vec<u8>, i64, Option<i64>)>, // owner, count, token of this hold
    last_token: i64,
}

fn lock_name(i: usize) -> Vec<u8> {
    if i % 10 == 0 {
        format!("grp{{tag{}}}:lock{i}", i % 3).into_bytes()
    } else {
        format!("lock:{i}").into_bytes()
    }
}

struct Workload<'a> {
    flavor: Flavor,
    seed: u64,
    c: &'a mut Connection,
    rng: StdRng,
    models: Vec<Model>,
}

impl Workload<'_> {
    fn run(&mut self, step: usize, args: Vec<Vec<u8>>) -> Result<Value, String> {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let r = call_bytes(self.c, &refs);
        if let Err(e) = &r {
            if !e.starts_with("NOTHELD") {
                panic!(
                    "{}: seed {} step {step}: `{}` failed: {e}",
                    self.flavor,
                    self.seed,
                    show(&args)
                );
            }
        }
        r
    }

    fn check(&self, step: usize, args: &[Vec<u8>], got: &Result<Value, String>, ok: bool) {
        assert!(
            ok,
            "{}: seed {} step {step}: `{}` replied {got:?}, unexpected for the model",
            self.flavor,
            self.seed,
            show(args)
        );
    }

    /// A lease from 30 s to 10 min, in ms, as an argument.
    fn lease(&mut self) -> Vec<u8> {
        let ms = self.rng.random_range(30_000..600_000u64);
        ms.to_string().into_bytes()
    }

    fn owner(&mut self) -> Vec<u8> {
        OWNERS[self.rng.random_range(0..OWNERS.len())].to_vec()
    }

    fn acquire(&mut self, step: usize, i: usize, owner: Vec<u8>) {
        let lease = self.lease();
        let token = self.rng.random_bool(0.3);
        let mut args = vec![
            b"RLOCK.ACQUIRE".to_vec(),
            lock_name(i),
            owner.clone(),
            b"LEASE".to_vec(),
            lease,
        ];
        if token {
            args.push(b"TOKEN".to_vec());
        }
        let got = self.run(step, args.clone());
        let m = &mut self.models[i];
        let ok = match (&mut m.holder, &got) {
            (None, Ok(Value::Int(n))) if token => {
                let fresh = *n > m.last_token;
                m.last_token = *n;
                m.holder = Some((owner, 1, Some(*n)));
                fresh
            }
            (None, Ok(Value::Int(1))) => {
                m.holder = Some((owner, 1, None));
                true
            }
            (Some((o, count, held_token)), Ok(Value::Int(n))) if *o == owner => {
                *count += 1;
                if token {
                    let ok = match held_token {
                        Some(t) => *n == *t,
                        // Covered by acquire_release.rs; here only replication matters.
                        None => *n >= 1,
                    };
                    *held_token = Some(*n);
                    m.last_token = m.last_token.max(*n);
                    ok
                } else {
                    *n == *count
                }
            }
            (Some((o, _, _)), Ok(Value::Nil)) => *o != owner,
            _ => false,
        };
        self.check(step, &args, &got, ok);
    }

    fn release(&mut self, step: usize, i: usize, owner: Vec<u8>) {
        let args = vec![b"RLOCK.RELEASE".to_vec(), lock_name(i), owner.clone()];
        let got = self.run(step, args.clone());
        let m = &mut self.models[i];
        let ok = match (&mut m.holder, &got) {
            (Some((o, count, _)), Ok(Value::Int(r))) if *o == owner => {
                *count -= 1;
                let expect = i64::from(*count == 0);
                if *count == 0 {
                    m.holder = None;
                }
                *r == expect
            }
            (h, Err(e)) => e.starts_with("NOTHELD") && !matches!(h, Some((o, _, _)) if *o == owner),
            _ => false,
        };
        self.check(step, &args, &got, ok);
    }

    fn renew(&mut self, step: usize, i: usize, owner: Vec<u8>) {
        let lease = self.lease();
        let args = vec![
            b"RLOCK.RENEW".to_vec(),
            lock_name(i),
            owner.clone(),
            b"LEASE".to_vec(),
            lease,
        ];
        let got = self.run(step, args.clone());
        let held = self.models[i]
            .holder
            .as_ref()
            .is_some_and(|(o, _, _)| *o == owner);
        self.check(step, &args, &got, got == Ok(Value::Int(i64::from(held))));
    }

    fn force_release(&mut self, step: usize, i: usize) {
        let args = vec![b"RLOCK.FORCERELEASE".to_vec(), lock_name(i)];
        let got = self.run(step, args.clone());
        let held = self.models[i].holder.take().is_some();
        self.check(step, &args, &got, got == Ok(Value::Int(i64::from(held))));
    }
}

fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn keys(c: &mut Connection) -> BTreeSet<Vec<u8>> {
    let ks: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    ks.into_iter().collect()
}

#[test]
fn replica_without_module_matches_primary_after_random_workload() {
    for flavor in flavors() {
        let seed = test_seed();
        println!("{flavor}: replication workload seed {seed} (RLOCK_SEED={seed} to replay)");
        let (primary, replica) = primary_and_bare_replica(flavor);
        let mut c = primary.conn();
        let mut w = Workload {
            flavor,
            seed,
            c: &mut c,
            rng: StdRng::seed_from_u64(seed),
            models: vec![Model::default(); LOCKS],
        };

        for i in 0..LOCKS {
            let owner = w.owner();
            w.acquire(i, i, owner);
        }
        for step in LOCKS..LOCKS + OPS {
            let i = w.rng.random_range(0..LOCKS);
            let holder = w.models[i].holder.as_ref().map(|(o, _, _)| o.clone());
            let pick = w.rng.random_range(0..100);
            let as_holder = w.rng.random_bool(0.8);
            let owner = match (&holder, as_holder) {
                (Some(o), true) => o.clone(),
                _ => w.owner(),
            };
            match pick {
                0..=34 => w.acquire(step, i, owner),
                35..=49 => w.renew(step, i, owner),
                50..=89 => w.release(step, i, owner),
                _ => w.force_release(step, i),
            }
        }
        let held = w.models.iter().filter(|m| m.holder.is_some()).count();
        assert!(
            held > 10 && held < LOCKS,
            "{flavor}: seed {seed}: workload left {held} locks held; too few to compare"
        );

        let models = std::mem::take(&mut w.models);
        let acked = call(&mut c, &["WAIT", "1", "5000"]);
        assert_eq!(
            acked,
            Ok(Value::Int(1)),
            "{flavor}: WAIT 1 5000 on the primary"
        );

        let mut r = replica.conn();
        let (pk, rk) = (keys(&mut c), keys(&mut r));
        let show_set = |s: &BTreeSet<Vec<u8>>| {
            s.iter()
                .map(|k| String::from_utf8_lossy(k).to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            show_set(&rk.difference(&pk).cloned().collect()),
            Vec::<String>::new(),
            "{flavor}: seed {seed}: keys on the replica only\n--- replica log ---\n{}",
            replica.log_tail(20)
        );
        assert_eq!(
            show_set(&pk.difference(&rk).cloned().collect()),
            Vec::<String>::new(),
            "{flavor}: seed {seed}: keys missing on the replica\n--- replica log ---\n{}",
            replica.log_tail(20)
        );
        for (i, m) in models.iter().enumerate() {
            let k = lock_name(i);
            assert_eq!(
                pk.contains(&k),
                m.holder.is_some(),
                "{flavor}: seed {seed}: primary key {:?} vs model",
                String::from_utf8_lossy(&k)
            );
        }
        for k in &pk {
            let name = String::from_utf8_lossy(k).to_string();
            let pt: String = redis::cmd("TYPE").arg(k).query(&mut c).expect("TYPE");
            let rt: String = redis::cmd("TYPE").arg(k).query(&mut r).expect("TYPE");
            assert_eq!(pt, rt, "{flavor}: seed {seed}: type of {name}");
            match pt.as_str() {
                "hash" => assert_eq!(
                    hgetall(&mut c, k),
                    hgetall(&mut r, k),
                    "{flavor}: seed {seed}: fields of {name}"
                ),
                "string" => {
                    let pv: Vec<u8> = redis::cmd("GET").arg(k).query(&mut c).expect("GET");
                    let rv: Vec<u8> = redis::cmd("GET").arg(k).query(&mut r).expect("GET");
                    assert_eq!(pv, rv, "{flavor}: seed {seed}: value of {name}");
                    assert!(
                        String::from_utf8_lossy(&pv).parse::<i64>().is_ok(),
                        "{flavor}: {name} is not an integer"
                    );
                    assert!(
                        k.starts_with(b"redisson_lock_token:"),
                        "{flavor}: unexpected string key {name}"
                    );
                }
                other => panic!("{flavor}: seed {seed}: unexpected {other} key {name}"),
            }
            let (pe, re) = (pexpiretime(&mut c, k), pexpiretime(&mut r, k));
            assert!(
                (pe == -1) == (re == -1) && (pe - re).abs() <= 50,
                "{flavor}: seed {seed}: expiry of {name}: primary {pe} replica {re} (PEXPIRETIME)"
            );
            if pt == "hash" {
                assert!(pe > 0, "{flavor}: seed {seed}: lock {name} has no lease");
            } else {
                assert_eq!(
                    pe, -1,
                    "{flavor}: seed {seed}: token key {name} must have no TTL"
                );
            }
        }
    }
}
