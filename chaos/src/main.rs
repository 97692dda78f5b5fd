//! `make chaos`: see `--help`.

use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rlock_chaos::faults::Fault;
use rlock_chaos::run::{run, Options};
use rlock_module_tests::{flavors, parse_flavors};

const USAGE: &str = "\
Usage: rlock-chaos [options]
  --seed N             reproduce a run (default: from the clock; printed either way)
  --seconds S          seconds of load per server over the restarts and failovers phases
                       (default 600); the unplanned phase adds half of it (a primary
                       killed and its standby promoted every 2 s), the cluster a quarter
  --phases LIST        comma-separated, from: restarts,failovers,unplanned,cluster (default all;
                       an empty list for none: the fuzzer and the churn alone)
  --flavor LIST        comma-separated, from: redis (7.0), redis8 (8.2), valkey; or all
                       (default all, or what RLOCK_FLAVORS names)
  --clients N          concurrent clients (default 24)
  --locks N            locks they share (default 4)
  --fuzz-calls N       fuzzer calls per server (default 1000000; 0 skips it)
  --churn-calls N      keyspace churn calls per server, from 8 connections on a polluted
                       keyspace, then FLUSHALL and nothing may stay tracked (default 160000)
  --deadlock-seconds S seconds per server of the deadlock workload: clients taking locks in
                       random orders and in one order, every DEADLOCK checked against their
                       history, on a server of its own without faults (default 120; 0 skips it)
  --guard-seconds S    seconds per server of the guarded-write workload: holders pausing
                       past their lease (client sleeps, DEBUG SLEEP) while others take the
                       lock and append through RLOCK.GUARD; the logs checked against the holds;
                       again on a cluster when the cluster phase runs (default 60; 0 skips it)
  --faults LIST        comma-separated, from: kill,unblock-timeout,unblock-error,pause,
                       debug-sleep,config-set,flushdb,swapdb,failover,restart,race (default all;
                       the cluster phase reshards and fails over, the unplanned phase
                       promotes, whatever the list)
  --fault-every MS     at most this long between faults (default 400)
  --fuzz-seed N        only the fuzzer, with the seed a run printed for it (fuzz: seed N)";

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        seed: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
        seconds: 600,
        flavors: Vec::new(),
        clients: 24,
        locks: 4,
        fuzz_calls: 1_000_000,
        churn_calls: 160_000,
        deadlock_seconds: 120,
        guard_seconds: 60,
        faults: Fault::ALL.to_vec(),
        fault_every_ms: 400,
        phases: vec![
            "restarts".into(),
            "failovers".into(),
            "unplanned".into(),
            "cluster".into(),
        ],
        fuzz_seed: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{arg} needs a value"));
        let number = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{arg}: not a number: {v}"))
        };
        match arg.as_str() {
            "--help" | "-h" => return Err(USAGE.into()),
            "--seed" => options.seed = number(value()?)?,
            "--seconds" => options.seconds = number(value()?)?,
            "--clients" => options.clients = number(value()?)? as usize,
            "--locks" => options.locks = number(value()?)?.max(1) as usize,
            "--fuzz-calls" => options.fuzz_calls = number(value()?)?,
            "--churn-calls" => options.churn_calls = number(value()?)?,
            "--deadlock-seconds" => options.deadlock_seconds = number(value()?)?,
            "--guard-seconds" => options.guard_seconds = number(value()?)?,
            "--fuzz-seed" => options.fuzz_seed = Some(number(value()?)?),
            "--fault-every" => options.fault_every_ms = number(value()?)?.max(5),
            "--flavor" => {
                options.flavors = parse_flavors(&value()?).map_err(|e| format!("--flavor: {e}"))?
            }
            "--phases" => {
                let list = value()?;
                let phases: Vec<String> = list
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = phases.iter().find(|p| {
                    !["restarts", "failovers", "unplanned", "cluster"].contains(&p.as_str())
                }) {
                    return Err(format!(
                        "--phases: restarts, failovers, unplanned or cluster, not {bad}"
                    ));
                }
                options.phases = phases;
            }
            "--faults" => {
                options.faults = value()?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| Fault::parse(s).ok_or(format!("--faults: unknown fault {s}")))
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    if options.flavors.is_empty() {
        options.flavors = flavors();
    }
    Ok(options)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    if let Some(seed) = options.fuzz_seed {
        let mut failed = false;
        for flavor in &options.flavors {
            let outcome = rlock_chaos::fuzz::run(*flavor, seed, options.fuzz_calls);
            println!("{flavor} fuzz, seed {seed}: {:?}", outcome.counts);
            for v in &outcome.violations {
                println!("VIOLATION: {flavor} fuzz (seed {seed}): {v}");
                failed = true;
            }
        }
        return if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    let faults: Vec<&str> = options.faults.iter().map(|f| f.name()).collect();
    println!(
        "rlock chaos: seed {} · {} s per server · {} clients on {} locks · faults {} · fuzz {} calls per server",
        options.seed,
        options.seconds,
        options.clients,
        options.locks,
        faults.join(","),
        options.fuzz_calls
    );
    let started = Instant::now();
    let report = run(&options);
    for (what, counts) in &report.counts {
        println!("\n{what}:");
        for (name, n) in counts {
            println!("  {name:<50} {n:>10}");
        }
    }
    println!(
        "\n{} holds checked · {} semaphore holds checked · {} latch rounds ({} opens checked) · \
         {} unplanned failovers, {} unacknowledged grants lost · {} violations · {:.0} s · \
         reproduce with --seed {}",
        report.holds_checked,
        report.semaphore_holds,
        report.latch_rounds,
        report.latch_opens,
        report.promotions,
        report.lost_unacknowledged,
        report.violations.len(),
        started.elapsed().as_secs_f64(),
        options.seed
    );
    if report.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        for v in &report.violations {
            println!("VIOLATION: {v}");
        }
        ExitCode::FAILURE
    }
}
