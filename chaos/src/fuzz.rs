//! The fuzzer: random argument vectors for the module's commands. Each call is sent
//! between two `DEBUG DIGEST`s; a call that fails must leave the digest as it was.
//! The server must live through it all, and no call may reach a caught panic.
//!
//! So that nothing changes between the digests but the call itself: leases are long
//! (a valid `LEASE` below an hour becomes an hour, `rlock.lease-ms` is at its
//! maximum), so no key expires during the run; and a call that could block (a valid
//! `BLOCK`) is sent alone, after which the fuzzer waits until two digests 5 ms apart
//! agree (the module's follow-up work, a FAIR waiter leaving its queue, has run).

use std::collections::BTreeMap;
use std::thread;
use std::time::Duration;

use rlock_module_tests::redisson::{
    LATCH_COUNT_DOWN, LATCH_TRY_SET_COUNT, PERMIT_RELEASE, PERMIT_TRY_ACQUIRE, PERMIT_UPDATE_LEASE,
    SEMAPHORE_RELEASE, SEMAPHORE_TRY_ACQUIRE, SEMAPHORE_TRY_SET_PERMITS,
};
use rlock_module_tests::{Flavor, Server};

use crate::resp::{encode, Conn, Frame};
use crate::rng::Rng;

pub struct Outcome {
    pub violations: Vec<String>,
    pub counts: BTreeMap<String, u64>,
}

const COMMANDS: [&str; 19] = [
    "RLOCK.ACQUIRE",
    "RLOCK.RELEASE",
    "RLOCK.RENEW",
    "RLOCK.INFO",
    "RLOCK.FORCERELEASE",
    "RLOCK.MACQUIRE",
    "RLOCK.MRELEASE",
    "RSEM.TRYSETPERMITS",
    "RSEM.ADDPERMITS",
    "RSEM.ACQUIRE",
    "RSEM.RELEASE",
    "RSEM.AVAILABLE",
    "RSEM.LEASE",
    "RSEM.RETURN",
    "RSEM.RENEW",
    "RLATCH.TRYSETCOUNT",
    "RLATCH.COUNTDOWN",
    "RLATCH.AWAIT",
    "RLATCH.COUNT",
];

/// Arguments a semaphore or latch command takes after its key: counts, options, permit ids
/// (the two Redisson's scripts among the stage writes lease, and, picked apart from these,
/// ids `RSEM.LEASE` replied).
const PERMIT_WORDS: [&[u8]; 12] = [
    b"PERMITS",
    b"permits",
    b"2",
    b"1024",
    b"1025",
    b"2147483647",
    b"-2147483647",
    b"00000000000000000000000000000000",
    b"0123456789ABCDEF0123456789abcdef",
    b"SESSION",
    b"61616161616161616161616161616161",
    b"63636363636363636363636363636363",
];

/// Module-made permit ids kept to send back (`RSEM.RETURN`, `RSEM.RENEW`), at most this many.
const LEARNED_IDS: usize = 16;

const KEYS: [&[u8]; 6] = [b"k", b"k2", b"{k}x", b"", b"str", b"k\x00\xff"];

const WORDS: [&[u8]; 33] = [
    b"READ",
    b"write",
    b"k2",
    b"LEASE",
    b"BLOCK",
    b"FAIR",
    b"TOKEN",
    b"SESSION",
    b"REQ",
    b"lease",
    b"block",
    b"fair",
    b"token",
    b"req",
    b"NX",
    b"0",
    b"1",
    b"-1",
    b"100",
    b"1099511627776",
    b"1099511627777",
    b"9223372036854775807",
    b"99999999999999999999",
    b"abc",
    b"1.5",
    b" 1",
    b"+1",
    b"01",
    b"",
    b"o",
    b"o2",
    b"{",
    b"a}b",
];

/// Writes that set the stage (wrong types, odd counters, foreign queues, and Redisson's
/// semaphore, permit-expirable semaphore and latch scripts on the keys the module's
/// commands use): their own effects are not checked. Redisson's leases end in 2100 or
/// never, so nothing expires during the run.
const STAGE: [&[&[u8]]; 24] = [
    &[b"SET", b"k2", b"3"],
    &[b"SET", b"{k2}:timeout", b"x"],
    &[
        b"ZADD",
        b"{k}:timeout",
        b"-5",
        b"aaaaaaaaaaaaaaaa",
        b"922337203685477",
        b"bbbbbbbbbbbbbbbb",
    ],
    &[b"DEL", b"{k}:timeout", b"{k2}:timeout"],
    &[b"SET", b"str", b"x"],
    &[b"HSET", b"k", b"o", b"notanumber"],
    &[b"HSET", b"k2", b"o", b"-3"],
    &[b"SET", b"redisson_lock_token:{k}", b"abc"],
    &[b"SET", b"redisson_lock_token:{k2}", b"9223372036854775807"],
    &[b"RPUSH", b"redisson_lock_queue:{k}", b"o2"],
    &[b"SET", b"redisson_lock_timeout:{k2}", b"x"],
    &[
        b"DEL",
        b"k",
        b"k2",
        b"str",
        b"redisson_lock_token:{k}",
        b"redisson_lock_token:{k2}",
    ],
    &[
        b"DEL",
        b"redisson_lock_queue:{k}",
        b"redisson_lock_timeout:{k}",
        b"redisson_lock_timeout:{k2}",
    ],
    &[
        b"EVAL",
        SEMAPHORE_TRY_SET_PERMITS.as_bytes(),
        b"2",
        b"k2",
        b"redisson_sc:{k2}",
        b"3",
        b"publish",
    ],
    &[
        b"EVAL",
        SEMAPHORE_TRY_SET_PERMITS.as_bytes(),
        b"2",
        b"{k}x",
        b"redisson_sc:{k}x",
        b"1",
        b"publish",
    ],
    &[b"EVAL", SEMAPHORE_TRY_ACQUIRE.as_bytes(), b"1", b"k2", b"2"],
    &[
        b"EVAL",
        SEMAPHORE_RELEASE.as_bytes(),
        b"2",
        b"k2",
        b"redisson_sc:{k2}",
        b"1",
        b"publish",
    ],
    &[
        b"EVAL",
        PERMIT_TRY_ACQUIRE.as_bytes(),
        b"3",
        b"k2",
        b"{k2}:timeout",
        b"redisson_sc:{k2}",
        b"1",
        b"4102444800000",
        b"0",
        b"922337203685477",
        b"publish",
        b"aaaaaaaaaaaaaaaa",
    ],
    &[
        b"EVAL",
        PERMIT_TRY_ACQUIRE.as_bytes(),
        b"3",
        b"{k}x",
        b"{k}x:timeout",
        b"redisson_sc:{k}x",
        b"1",
        b"922337203685477",
        b"0",
        b"922337203685477",
        b"publish",
        b"cccccccccccccccc",
    ],
    &[
        b"EVAL",
        PERMIT_RELEASE.as_bytes(),
        b"3",
        b"k2",
        b"redisson_sc:{k2}",
        b"{k2}:timeout",
        b"aaaaaaaaaaaaaaaa",
        b"1",
        b"0",
        b"publish",
    ],
    &[
        b"EVAL",
        PERMIT_UPDATE_LEASE.as_bytes(),
        b"3",
        b"{k}x",
        b"{k}x:timeout",
        b"redisson_sc:{k}x",
        b"cccccccccccccccc",
        b"4102444800000",
        b"0",
        b"publish",
    ],
    &[
        b"EVAL",
        LATCH_TRY_SET_COUNT.as_bytes(),
        b"2",
        b"k2",
        b"redisson_countdownlatch__channel__{k2}",
        b"1",
        b"2",
        b"publish",
    ],
    &[
        b"EVAL",
        LATCH_COUNT_DOWN.as_bytes(),
        b"2",
        b"k2",
        b"redisson_countdownlatch__channel__{k2}",
        b"0",
        b"publish",
    ],
    &[b"DEL", b"{k}x", b"{k}x:timeout", b"{k2}:timeout"],
];

fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    (0..rng.below(12)).map(|_| rng.below(256) as u8).collect()
}

/// A random argument vector for one module command. Whether it may block. `learned`:
/// permit ids the module replied, to send back now and then.
fn call(rng: &mut Rng, learned: &[Vec<u8>]) -> (Vec<Vec<u8>>, bool) {
    let command = rng.pick(&COMMANDS);
    // The multi-key commands take `owner numkeys key...`: the owner and a count first.
    let multi = command.starts_with("RLOCK.M");
    let counted = command.starts_with("RSEM.") || command.starts_with("RLATCH.");
    let mut args = vec![command.as_bytes().to_vec()];
    if counted && rng.chance(40) {
        args = shaped(rng, command, learned);
    }
    for i in 0..rng.below(9) * u64::from(args.len() == 1) {
        let arg = match (i, rng.below(10)) {
            (1..=8, 0) if counted && !learned.is_empty() => rng.pick(learned).clone(),
            (1..=8, 0..=3) if counted => rng.pick(&PERMIT_WORDS).to_vec(),
            (0, 0..=6) if multi => rng.pick(&[&b"o"[..], b"o2", b"p"]).to_vec(),
            (1, 0..=7) if multi => rng.pick(&[&b"1"[..], b"2", b"3", b"0", b"-1"]).to_vec(),
            (2..=4, 0..=6) if multi => rng.pick(&KEYS).to_vec(),
            (0, 0..=7) => rng.pick(&KEYS).to_vec(),
            (1, 0..=6) => rng.pick(&[&b"o"[..], b"o2", b"p"]).to_vec(),
            (_, 0) => random_bytes(rng),
            _ => rng.pick(&WORDS).to_vec(),
        };
        args.push(arg);
    }
    // No key may expire during the run: valid leases become an hour.
    let mut may_block = false;
    for i in 1..args.len() {
        let value = std::str::from_utf8(&args[i])
            .ok()
            .and_then(|s| s.parse::<i64>().ok());
        let canonical = value.is_some_and(|v| v.to_string().as_bytes() == args[i].as_slice());
        let after = args[i - 1].to_ascii_uppercase();
        if after == b"LEASE" && canonical && (1..3_600_000).contains(&value.unwrap_or(0)) {
            args[i] = b"3600000".to_vec();
        }
        if after == b"BLOCK" && canonical && (0..=1_099_511_627_776).contains(&value.unwrap_or(-1))
        {
            // Blocks at most a few ms.
            args[i] = b"2".to_vec();
            may_block = true;
        }
    }
    (args, may_block)
}

/// A well-formed semaphore or latch call: its options in random number and order, `REQ`
/// ids from a small set (so that calls are replayed), permit ids the module replied or
/// Redisson's scripts leased. One call in four then has one argument replaced, dropped
/// or doubled.
fn shaped(rng: &mut Rng, command: &str, learned: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let word = |rng: &mut Rng, words: &[&[u8]]| rng.pick(words).to_vec();
    let count: &[&[u8]] = &[b"1", b"2", b"3", b"0", b"1024", b"-1"];
    let mut args = vec![command.as_bytes().to_vec(), rng.pick(&KEYS).to_vec()];
    let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut option = |rng: &mut Rng, percent: u64, name: &[u8], values: &[&[u8]]| {
        if rng.chance(percent) {
            let mut parts = vec![name.to_vec()];
            if !values.is_empty() {
                parts.push(word(rng, values));
            }
            options.push(parts);
        }
    };
    let permit_id = |rng: &mut Rng| match learned.is_empty() || rng.chance(40) {
        true => word(rng, &PERMIT_WORDS[7..]),
        false => rng.pick(learned).clone(),
    };
    let (block, lease, req): (&[&[u8]], &[&[u8]], &[&[u8]]) = (
        &[b"0", b"5", b"100"],
        &[b"100", b"60000", b"0", b"-5"],
        &[b"r1", b"r2", b"r3"],
    );
    match command {
        "RSEM.TRYSETPERMITS" | "RSEM.ADDPERMITS" | "RLATCH.TRYSETCOUNT" => {
            args.push(word(rng, count))
        }
        "RSEM.ACQUIRE" => {
            option(rng, 50, b"PERMITS", count);
            option(rng, 30, b"BLOCK", block);
            option(rng, 50, b"REQ", req);
        }
        "RSEM.RELEASE" => {
            option(rng, 50, b"PERMITS", count);
            option(rng, 50, b"REQ", req);
        }
        "RSEM.LEASE" => {
            option(rng, 95, b"LEASE", lease);
            option(rng, 50, b"PERMITS", count);
            option(rng, 30, b"BLOCK", block);
            option(rng, 30, b"SESSION", &[]);
            option(rng, 50, b"REQ", req);
        }
        "RSEM.RETURN" => {
            args.push(permit_id(rng));
            option(rng, 50, b"REQ", req);
        }
        "RSEM.RENEW" => {
            args.push(permit_id(rng));
            option(rng, 95, b"LEASE", lease);
        }
        "RLATCH.AWAIT" => option(rng, 60, b"BLOCK", block),
        _ => {}
    }
    for i in (1..options.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        options.swap(i, j);
    }
    args.extend(options.into_iter().flatten());
    if rng.chance(25) && args.len() > 1 {
        let at = 1 + rng.below(args.len() as u64 - 1) as usize;
        match rng.below(3) {
            0 => args[at] = rng.pick(&WORDS).to_vec(),
            1 => {
                args.remove(at);
            }
            _ => args.insert(at, args[at].clone()),
        }
    }
    args
}

fn refs(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.iter().map(Vec::as_slice).collect()
}

fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run(flavor: Flavor, seed: u64, calls: u64) -> Outcome {
    let mut server = Server::builder(flavor)
        .module_args(&["lease-ms", "1099511627776"])
        .start();
    let mut rng = Rng::new(seed);
    let mut violations = Vec::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut c = match Conn::connect(server.port, Duration::from_secs(30)) {
        Ok(c) => c,
        Err(e) => {
            return Outcome {
                violations: vec![format!("connect: {e}")],
                counts,
            }
        }
    };
    let mut done = 0u64;
    let mut learned: Vec<Vec<u8>> = Vec::new();
    const BATCH: usize = 200;
    const FLUSH_EVERY: u64 = 20_000;
    let mut flushed_at = 0u64;
    'outer: while done < calls {
        // `DEBUG DIGEST` costs in proportion to the data, and the data grows (records and
        // queues that live an hour): a fresh keyspace every `FLUSH_EVERY` calls keeps two
        // digests per call cheap (a million calls took over half an hour without it).
        if done - flushed_at >= FLUSH_EVERY {
            flushed_at = done;
            *counts.entry("flushes".into()).or_default() += 1;
            if let Err(e) = c
                .call(&[b"FLUSHALL"])
                .map_err(|e| e.to_string())
                .and_then(|_| settle(&mut c))
            {
                violations.push(format!("FLUSHALL between batches: {e}"));
                break;
            }
        }
        // A batch: stage writes first, in one write, then a wait until the module's
        // follow-up work on them (keyspace events on its helper keys) has run; then the
        // digest / call / digest triples, in one write. Follow-up work runs on a timer,
        // between two reads of a packet the kernel split, so it must never be pending
        // while triples are read.
        let mut stage = Vec::new();
        let mut stages = 0usize;
        let mut packet = Vec::new();
        let mut batch = Vec::new();
        while batch.len() < BATCH && done < calls {
            if rng.chance(3) {
                let write = rng.pick(&STAGE);
                stage.extend(encode(write));
                stages += 1;
                continue;
            }
            let (args, may_block) = call(&mut rng, &learned);
            done += 1;
            if may_block {
                // Alone, after the batch so far.
                if let Err(v) = send_batch(
                    &mut c,
                    &stage,
                    stages,
                    &packet,
                    &batch,
                    &mut counts,
                    &mut learned,
                ) {
                    violations.push(v);
                    break 'outer;
                }
                (stage, stages, packet, batch) = (Vec::new(), 0, Vec::new(), Vec::new());
                *counts.entry("calls that may block".into()).or_default() += 1;
                match c.call(&refs(&args)) {
                    Ok(Frame::Error(e)) if e.contains("internal error") => {
                        violations.push(format!("a caught panic: `{}` → {e}", show(&args)))
                    }
                    Ok(reply) => learn(&args, &reply, &mut learned),
                    Err(e) => {
                        violations.push(format!("`{}`: {e}", show(&args)));
                        break 'outer;
                    }
                }
                // Let the module's follow-up work (a 0 ms timer) run before the next digest.
                if let Err(v) = settle(&mut c) {
                    violations.push(v);
                    break 'outer;
                }
                continue;
            }
            packet.extend(encode(&[b"DEBUG", b"DIGEST"]));
            packet.extend(encode(&refs(&args)));
            packet.extend(encode(&[b"DEBUG", b"DIGEST"]));
            batch.push(args);
        }
        if let Err(v) = send_batch(
            &mut c,
            &stage,
            stages,
            &packet,
            &batch,
            &mut counts,
            &mut learned,
        ) {
            violations.push(v);
            break;
        }
    }
    *counts.entry("calls".into()).or_default() += done;
    if !server.is_running() {
        // The crash report's head (the signal, the command, the stack) and its tail.
        let log = server.log();
        let report = log
            .find("BUG REPORT START")
            .map(|at| log[at..].lines().take(60).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        violations.push(format!(
            "the server died:\n{report}\n...\n{}",
            server.log_tail(30)
        ));
    } else if server.log().contains("panicked") {
        violations.push(format!("a panic in the log:\n{}", server.log_tail(30)));
    }
    Outcome { violations, counts }
}

/// Waits until two digests 5 ms apart agree: the module's deferred work has run.
fn settle(c: &mut Conn) -> Result<(), String> {
    let mut last = c
        .call(&[b"DEBUG", b"DIGEST"])
        .map_err(|e| format!("digest: {e}"))?;
    for _ in 0..200 {
        thread::sleep(Duration::from_millis(5));
        let now = c
            .call(&[b"DEBUG", b"DIGEST"])
            .map_err(|e| format!("digest: {e}"))?;
        if now == last {
            return Ok(());
        }
        last = now;
    }
    Err("the data kept changing for a second after a blocking call".into())
}

/// Keeps the permit ids an `RSEM.LEASE` replied, to send back in later calls.
fn learn(args: &[Vec<u8>], reply: &Frame, learned: &mut Vec<Vec<u8>>) {
    if !args[0].eq_ignore_ascii_case(b"RSEM.LEASE") {
        return;
    }
    if let Frame::Array(Some(ids)) = reply {
        for id in ids {
            if let Frame::Bulk(Some(id)) = id {
                if learned.len() == LEARNED_IDS {
                    learned.remove(0);
                }
                learned.push(id.clone());
            }
        }
    }
}

/// Sends the stage writes (`stages` of them, one reply each) and waits for their
/// follow-up work, then the triples, and checks each call's reply and digests.
fn send_batch(
    c: &mut Conn,
    stage: &[u8],
    stages: usize,
    packet: &[u8],
    batch: &[Vec<Vec<u8>>],
    counts: &mut BTreeMap<String, u64>,
    learned: &mut Vec<Vec<u8>>,
) -> Result<(), String> {
    if stages > 0 {
        c.send_raw(stage).map_err(|e| format!("send: {e}"))?;
        for _ in 0..stages {
            c.read().map_err(|e| format!("stage write: {e}"))?;
        }
        settle(c)?;
    }
    if batch.is_empty() {
        return Ok(());
    }
    c.send_raw(packet).map_err(|e| format!("send: {e}"))?;
    let mut problems = Vec::new();
    for args in batch {
        let before = c.read().map_err(|e| format!("digest: {e}"))?;
        let reply = c.read().map_err(|e| format!("`{}`: {e}", show(args)))?;
        let after = c.read().map_err(|e| format!("digest: {e}"))?;
        match &reply {
            Frame::Error(e) => {
                let kind = e.split_whitespace().next().unwrap_or("").to_string();
                *counts.entry(format!("error {kind}")).or_default() += 1;
                if e.contains("internal error") {
                    problems.push(format!("a caught panic: `{}` → {e}", show(args)));
                }
                if before != after {
                    problems.push(format!(
                        "a failing call changed the data: `{}` → {e}",
                        show(args)
                    ));
                }
            }
            _ => {
                *counts.entry("succeeded".into()).or_default() += 1;
                // Per semaphore and latch command: how much of them the fuzzer reached.
                let command = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
                if command.starts_with("RSEM.") || command.starts_with("RLATCH.") {
                    *counts.entry(format!("succeeded {command}")).or_default() += 1;
                }
                let before = learned.len();
                learn(args, &reply, learned);
                if learned.len() > before {
                    *counts.entry("permit ids learned".into()).or_default() += 1;
                }
            }
        }
    }
    match problems.into_iter().next() {
        Some(p) => Err(p),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_never_wait_long_nor_expire_soon() {
        let mut rng = Rng::new(1);
        let learned = vec![b"0123456789abcdef0123456789abcdef".to_vec()];
        for i in 0..10_000 {
            let (args, may_block) = call(&mut rng, &learned[..i % 2]);
            for pair in args.windows(2) {
                let after = pair[0].to_ascii_uppercase();
                let value = std::str::from_utf8(&pair[1])
                    .ok()
                    .and_then(|s| s.parse::<i64>().ok());
                if let (b"BLOCK", Some(v)) = (after.as_slice(), value) {
                    if v.to_string().as_bytes() == pair[1].as_slice()
                        && (0..=1_099_511_627_776).contains(&v)
                    {
                        assert_eq!(v, 2);
                        assert!(may_block);
                    }
                }
                if let (b"LEASE", Some(v)) = (after.as_slice(), value) {
                    if v.to_string().as_bytes() == pair[1].as_slice() && v >= 1 {
                        assert!(v >= 3_600_000, "{v}");
                    }
                }
            }
        }
    }
}
