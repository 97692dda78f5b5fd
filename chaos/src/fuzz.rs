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

use rlock_module_tests::{Flavor, Server};

use crate::resp::{encode, refs, Conn, Frame};
use crate::rng::Rng;

pub struct Outcome {
    pub violations: Vec<String>,
    pub counts: BTreeMap<String, u64>,
}

const COMMANDS: [&str; 24] = [
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
    "RLOCK.WAITERS",
    "RLOCK.TOP",
    "RLOCK.SCAN",
    "RLOCK.RESETSTAT",
    "RLOCK.GUARD",
];

/// Arguments a semaphore or latch command takes after its key: counts, options, a permit
/// id (one the module made: the fuzzer reads them back from the leases zset).
const PERMIT_WORDS: [&[u8]; 10] = [
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
];

pub(crate) const KEYS: [&[u8]; 6] = [b"k", b"k2", b"{k}x", b"", b"str", b"k\x00\xff"];

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

/// Writes that set the stage (wrong types, odd counters, foreign queues): their own
/// effects are not checked.
const STAGE: [&[&[u8]]; 13] = [
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
];

fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    (0..rng.below(12)).map(|_| rng.below(256) as u8).collect()
}

/// `RLOCK.SCAN` cursors: `SCAN`'s own, the bounds of an unsigned 64-bit cursor and past
/// them, and words that are not cursors.
const CURSORS: [&[u8]; 14] = [
    b"0",
    b"1",
    b"7",
    b"1024",
    b"18446744073709551615",
    b"18446744073709551616",
    b"9223372036854775807",
    b"99999999999999999999999",
    b"-1",
    b"abc",
    b"",
    b" 0",
    b"+1",
    b"1.5",
];

/// `MATCH` patterns: every key, a hash tag, unclosed and escaped brackets, empty.
const PATTERNS: [&[u8]; 10] = [
    b"*", b"k*", b"{k}*", b"k?", b"[", b"[a-", b"\\", b"*\\*", b"", b"[^k]*",
];

/// `COUNT` values of `RLOCK.SCAN` and `RLOCK.TOP`: 0, negatives, at and past the limits.
const OBSERVE_COUNTS: [&[u8]; 12] = [
    b"0",
    b"-1",
    b"1",
    b"10",
    b"1000",
    b"1001",
    b"2147483648",
    b"9223372036854775807",
    b"99999999999999999999",
    b"abc",
    b"01",
    b"",
];

/// `TYPE` values of `RLOCK.SCAN`: its two, in any case, and others.
const SCAN_TYPES: [&[u8]; 8] = [
    b"lock", b"rwlock", b"LOCK", b"RwLock", b"hash", b"string", b"bad", b"",
];

/// Arguments for the keyless observation commands (`RLOCK.TOP`, `RLOCK.SCAN`,
/// `RLOCK.RESETSTAT`) and `RLOCK.WAITERS`: mostly their shape, sometimes not.
fn observe_args(rng: &mut Rng, command: &str) -> Vec<Vec<u8>> {
    let mut args = vec![command.as_bytes().to_vec()];
    // A key for WAITERS, a cursor for SCAN: now and then left out.
    if command == "RLOCK.WAITERS" && !rng.chance(10) {
        args.push(rng.pick(&KEYS).to_vec());
    }
    if command == "RLOCK.SCAN" && !rng.chance(5) {
        args.push(if rng.chance(10) {
            random_bytes(rng)
        } else {
            rng.pick(&CURSORS).to_vec()
        });
    }
    let options = match command {
        "RLOCK.SCAN" => rng.below(5),
        "RLOCK.TOP" => rng.below(3),
        _ => u64::from(rng.chance(10)),
    };
    for _ in 0..options {
        let (word, values): (&[u8], &[&[u8]]) = match rng.below(10) {
            0..=2 => (b"MATCH", &PATTERNS),
            3..=5 => (b"COUNT", &OBSERVE_COUNTS),
            6..=7 => (b"TYPE", &SCAN_TYPES),
            _ => (*rng.pick(&WORDS), &WORDS),
        };
        let word = if rng.chance(20) {
            word.to_ascii_lowercase()
        } else {
            word.to_vec()
        };
        args.push(word);
        // Now and then an option without its value.
        if !rng.chance(10) {
            args.push(if rng.chance(5) {
                random_bytes(rng)
            } else {
                rng.pick(values).to_vec()
            });
        }
    }
    args
}

/// Arguments for the other commands: keys, owners, counts and option words.
fn other_args(rng: &mut Rng, command: &str) -> Vec<Vec<u8>> {
    // The multi-key commands take `owner numkeys key...`: the owner and a count first.
    let multi = command.starts_with("RLOCK.M");
    let counted = command.starts_with("RSEM.") || command.starts_with("RLATCH.");
    let mut args = vec![command.as_bytes().to_vec()];
    for i in 0..rng.below(9) {
        let arg = match (i, rng.below(10)) {
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
    args
}

/// Inner commands of `RLOCK.GUARD`: writes and reads that either change the keyspace and
/// reply, or fail changing nothing (no script writes then fails), and the kinds the guard
/// refuses.
const INNER: [&[&[u8]]; 22] = [
    &[b"SET", b"g", b"v"],
    &[b"SET", b"{k}g", b"v"],
    &[b"INCR", b"g"],
    &[b"GET", b"g"],
    &[b"DEL", b"g", b"{k}g"],
    &[b"HSET", b"k", b"o", b"5"],
    &[b"RPUSH", b"g", b"x"],
    &[b"INCR", b"str"],
    &[b"BLPOP", b"g", b"0"],
    &[b"XREAD", b"STREAMS", b"g", b"0"],
    &[b"WAIT", b"0", b"0"],
    &[b"MULTI"],
    &[b"EXEC"],
    &[b"WATCH", b"g"],
    &[b"PUBLISH", b"c", b"m"],
    &[b"SUBSCRIBE", b"c"],
    &[b"EVAL", b"return redis.call('get', KEYS[1])", b"1", b"g"],
    &[b"EVAL", b"return 1", b"0"],
    &[b"RLOCK.GUARD", b"k", b"o", b"CALL", b"SET", b"g", b"v"],
    &[b"RLOCK.ACQUIRE", b"k", b"o"],
    &[b"NOSUCHCOMMAND", b"g"],
    &[b"SET", b"g"],
];

const GUARD_OPTIONS: [&[&[u8]]; 7] = [
    &[b"READ"],
    &[b"write"],
    &[b"TOKEN", b"1"],
    &[b"TOKEN", b"2"],
    &[b"token", b"abc"],
    &[b"TOKEN"],
    &[b"LEASE", b"5"],
];

/// `RLOCK.GUARD key owner [options...] [CALL inner...]`, the options drawn from good and bad
/// words, the inner command from [`INNER`] (or cut short, or random bytes).
fn guard_args(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut args = vec![b"RLOCK.GUARD".to_vec()];
    if rng.chance(95) {
        args.push(rng.pick(&KEYS).to_vec());
    }
    if rng.chance(95) {
        args.push(rng.pick(&[&b"o"[..], b"o2", b"p", b""]).to_vec());
    }
    for _ in 0..rng.below(3) {
        let option = rng.pick(&GUARD_OPTIONS);
        args.extend(option.iter().map(|w| w.to_vec()));
    }
    if rng.chance(90) {
        args.push(rng.pick(&[&b"CALL"[..], b"call"]).to_vec());
        let inner = rng.pick(&INNER);
        let keep = match rng.chance(85) {
            true => inner.len(),
            false => rng.below(inner.len() as u64 + 1) as usize,
        };
        args.extend(inner[..keep].iter().map(|w| w.to_vec()));
        if rng.chance(5) {
            args.push(random_bytes(rng));
        }
    }
    args
}

/// A random argument vector for one module command. Whether it may block.
pub(crate) fn call(rng: &mut Rng) -> (Vec<Vec<u8>>, bool) {
    let command = rng.pick(&COMMANDS);
    let mut args = if matches!(
        *command,
        "RLOCK.WAITERS" | "RLOCK.TOP" | "RLOCK.SCAN" | "RLOCK.RESETSTAT"
    ) {
        observe_args(rng, command)
    } else if *command == "RLOCK.GUARD" {
        guard_args(rng)
    } else {
        other_args(rng, command)
    };
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
            let (args, may_block) = call(&mut rng);
            done += 1;
            if may_block {
                // Alone, after the batch so far.
                if let Err(v) = send_batch(&mut c, &stage, stages, &packet, &batch, &mut counts) {
                    violations.push(v);
                    break 'outer;
                }
                (stage, stages, packet, batch) = (Vec::new(), 0, Vec::new(), Vec::new());
                *counts.entry("calls that may block".into()).or_default() += 1;
                match c.call(&refs(&args)) {
                    Ok(Frame::Error(e)) if e.contains("internal error") => {
                        violations.push(format!("a caught panic: `{}` → {e}", show(&args)))
                    }
                    Ok(_) => {}
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
        if let Err(v) = send_batch(&mut c, &stage, stages, &packet, &batch, &mut counts) {
            violations.push(v);
            break;
        }
    }
    *counts.entry("calls".into()).or_default() += done;
    violations.extend(crate::evidence::dead_or_panicked(&mut server));
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

/// Sends the stage writes (`stages` of them, one reply each) and waits for their
/// follow-up work, then the triples, and checks each call's reply and digests.
fn send_batch(
    c: &mut Conn,
    stage: &[u8],
    stages: usize,
    packet: &[u8],
    batch: &[Vec<Vec<u8>>],
    counts: &mut BTreeMap<String, u64>,
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
            _ => *counts.entry("succeeded".into()).or_default() += 1,
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
    fn observation_commands_get_good_and_bad_arguments() {
        let mut rng = Rng::new(3);
        let mut seen: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let mut saw = |what: &[u8]| *seen.entry(what.to_vec()).or_default() += 1;
        for _ in 0..20_000 {
            let (args, _) = call(&mut rng);
            if !matches!(
                args[0].as_slice(),
                b"RLOCK.WAITERS" | b"RLOCK.TOP" | b"RLOCK.SCAN" | b"RLOCK.RESETSTAT"
            ) {
                continue;
            }
            saw(&args[0]);
            if args[0] == b"RLOCK.SCAN" && args.len() > 1 {
                for cursor in [&b"abc"[..], b"18446744073709551616", b"0"] {
                    if args[1] == cursor {
                        saw(&[b"cursor ", cursor].concat());
                    }
                }
            }
            for pair in args.windows(2) {
                match (pair[0].to_ascii_uppercase().as_slice(), pair[1].as_slice()) {
                    (b"COUNT", n @ (b"0" | b"-1" | b"9223372036854775807")) => {
                        saw(&[b"COUNT ", n].concat())
                    }
                    (b"TYPE", t @ (b"lock" | b"rwlock" | b"bad")) => saw(&[b"TYPE ", t].concat()),
                    (b"MATCH", _) => saw(b"MATCH"),
                    _ => {}
                }
            }
        }
        for what in [
            &b"RLOCK.WAITERS"[..],
            b"RLOCK.TOP",
            b"RLOCK.SCAN",
            b"RLOCK.RESETSTAT",
            b"cursor abc",
            b"cursor 18446744073709551616",
            b"cursor 0",
            b"COUNT 0",
            b"COUNT -1",
            b"COUNT 9223372036854775807",
            b"TYPE lock",
            b"TYPE rwlock",
            b"TYPE bad",
            b"MATCH",
        ] {
            assert!(
                seen.get(what).copied().unwrap_or(0) > 0,
                "never sent: {}",
                String::from_utf8_lossy(what)
            );
        }
    }

    #[test]
    fn calls_never_wait_long_nor_expire_soon() {
        let mut rng = Rng::new(1);
        for _ in 0..10_000 {
            let (args, may_block) = call(&mut rng);
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
