//! `make bench`. See `--help`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use rlock_bench::report::json::results;
use rlock_bench::report::{markdown, Meta};
use rlock_bench::{run, Plan, Scenario};
use rlock_module_tests::{flavors, parse_flavors};

const HELP: &str =
    "rlock-bench: rlock against Lua scripts, SET NX, polling and Redisson-style waiters

Usage: cargo run --release -p rlock-bench -- [options]
       (RLOCK_MODULE=/abs/path/librlock.so; `make bench BENCH_ARGS='...'` sets it)

  --flavor LIST                server(s) to run on, one after the other, comma-separated from
                               redis (7.0), redis8 (8.2), valkey; or all (default all, or
                               what RLOCK_FLAVORS names)
  --quick                      a smoke run of every path in a few seconds
  --only LIST                  scenarios, comma-separated: uncontended,contended,expiry,fair,
                               fair-uncontended,memory,stall,cluster,mixed,rwlock,semaphore,
                               guard (or 1-12; default all)
  --rounds N                   rounds per cell, paths interleaved (default 5)
  --secs S                     seconds per measured run, throughput and fair scenarios (default 2)
  --clients LIST               contended client counts (default 1,8,32,128)
  --samples N                  lease-expiry samples per path (default 40); in the semaphore
                               scenario, reclaim samples per path and round (default 20)
  --queues LIST                fair queue lengths (default 10,1000,10000)
  --waiters N                  blocked waiters in the memory and stall scenarios (default 10000)
  --waiter-rounds N            rounds of the memory and stall scenarios (default 3)
  --no-pin                     do not pin the server to CPU 0 and the bench to CPU 1
  --write PATH                 also write the report (with a how-to-read note) to PATH
  --json PATH                  also write the results as JSON (bench/report/README.md) to PATH
  --quiet                      no per-round progress on stderr
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (plan, write, json) = match parse(&args) {
        Ok(Some(parsed)) => parsed,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("rlock-bench: {e}\n\n{HELP}");
            return ExitCode::from(2);
        }
    };
    let meta = Meta::collect(&args);
    let reports = run(&plan);
    print!("{}", markdown(&meta, &plan, &reports, false));
    if let Some(path) = write {
        if let Err(e) = std::fs::write(&path, markdown(&meta, &plan, &reports, true)) {
            eprintln!("rlock-bench: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = json {
        if let Err(e) = std::fs::write(&path, results(&meta, &plan, &reports)) {
            eprintln!("rlock-bench: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

/// The plan, `--write`'s path and `--json`'s.
type Parsed = (Plan, Option<PathBuf>, Option<PathBuf>);

fn parse(args: &[String]) -> Result<Option<Parsed>, String> {
    let quick = args.iter().any(|a| a == "--quick");
    let mut plan = if quick { Plan::quick() } else { Plan::full() };
    let mut write = None;
    let mut json = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{arg} needs a value"))
        };
        match arg.as_str() {
            "--help" | "-h" => return Ok(None),
            "--quick" => {}
            "--quiet" => plan.verbose = false,
            "--flavor" => {
                plan.flavors = parse_flavors(&value()?).map_err(|e| format!("--flavor: {e}"))?
            }
            "--only" => {
                plan.scenarios = value()?
                    .split(',')
                    .map(|s| Scenario::parse(s.trim()).ok_or(format!("unknown scenario {s:?}")))
                    .collect::<Result<_, _>>()?
            }
            "--rounds" => plan.rounds = number(&value()?)?.max(1),
            "--secs" => {
                let secs: f64 = value()?.parse().map_err(|_| "--secs: not a number")?;
                if !(secs > 0.0 && secs < 3600.0) {
                    return Err("--secs: out of range".into());
                }
                plan.uncontended_run = Duration::from_secs_f64(secs);
                plan.contended_run = Duration::from_secs_f64(secs);
                plan.fair_run = Duration::from_secs_f64(secs);
            }
            "--clients" => {
                plan.clients = value()?
                    .split(',')
                    .map(|s| number(s.trim()).map(|n| n.max(1)))
                    .collect::<Result<_, _>>()?
            }
            "--samples" => {
                let n = number(&value()?)?.max(1);
                plan.expiry_samples = n;
                plan.sem_samples = n;
            }
            "--queues" => {
                plan.fair_queues = value()?
                    .split(',')
                    .map(|s| number(s.trim()).map(|n| n.max(1)))
                    .collect::<Result<_, _>>()?
            }
            "--waiters" => plan.waiters = number(&value()?)?.max(1),
            "--waiter-rounds" => plan.waiter_rounds = number(&value()?)?.max(1),
            "--no-pin" => plan.pin = false,
            "--write" => write = Some(PathBuf::from(value()?)),
            "--json" => json = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    if plan.flavors.is_empty() {
        plan.flavors = flavors();
    }
    Ok(Some((plan, write, json)))
}

fn number(s: &str) -> Result<usize, String> {
    s.parse().map_err(|_| format!("{s:?} is not a number"))
}
