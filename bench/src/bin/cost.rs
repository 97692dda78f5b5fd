//! `make cost-check` (run by `make test`): server instructions per uncontended pair on each
//! path, under callgrind, against `bench/cost-baseline.toml`; exits 1 when a path costs more
//! than 5 % above its baseline, or the baseline has no numbers for a server found.
//!
//! `make cost-baseline` (`--update`) measures and rewrites the baseline's sections for the
//! servers found. Options: `--pairs N` (default 1024; windows of N and 2N pairs),
//! `--baseline PATH`. Servers: `rlock_module_tests::flavors()` (`RLOCK_FLAVORS`,
//! `REDIS_SERVER`, `VALKEY_SERVER`); module: `RLOCK_MODULE` (the release build).
//! `RLOCK_COST_KEEP_DUMPS=DIR` keeps callgrind's dumps (`dN`, one per `ECHO` mark) for
//! `callgrind_annotate`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use rlock_bench::cost::{
    check_valgrind, compare, flavor_key, measure, table, thousands, Baseline, Row, Verdict, BATCH,
    MAX_RATIO,
};

struct Args {
    update: bool,
    pairs: usize,
    baseline: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        update: false,
        pairs: 1024,
        baseline: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/cost-baseline.toml")),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--update" => args.update = true,
            "--pairs" => {
                args.pairs = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or("--pairs takes a positive number")?
            }
            "--baseline" => {
                args.baseline = it
                    .next()
                    .map(PathBuf::from)
                    .ok_or("--baseline takes a path")?
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (use --update, --pairs N, --baseline PATH)"
                ))
            }
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cost check: {e}");
            println!("cost check: failed (see the message above)");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, String> {
    let args = parse_args()?;
    check_valgrind()?;
    let mut baseline = Baseline::load(&args.baseline)?;
    let flavors = rlock_module_tests::flavors();
    let module = rlock_module_tests::module_path();
    println!(
        "cost check: server instructions per uncontended pair (callgrind), module {}",
        module.display()
    );
    println!(
        "  per pair = (instructions of {} pairs - of {}) / {}, pipelines of {BATCH} pairs; fails above {:.0} % of the baseline",
        2 * args.pairs.div_ceil(BATCH) * BATCH,
        args.pairs.div_ceil(BATCH) * BATCH,
        args.pairs.div_ceil(BATCH) * BATCH,
        MAX_RATIO * 100.0
    );
    let (mut passed, mut failed) = (0usize, 0usize);
    for flavor in flavors {
        let key = flavor_key(flavor);
        let started = Instant::now();
        let measured = measure(flavor, args.pairs)?;
        println!(
            "\n{key} ({}), {:.1} s:",
            flavor.binary().display(),
            started.elapsed().as_secs_f64()
        );
        let costs: Vec<(&str, u64)> = measured
            .iter()
            .map(|m| (m.path.name(), m.per_pair()))
            .collect();
        if args.update {
            let old = baseline.servers.get(&key).cloned().unwrap_or_default();
            println!("  {:<11} {:>10} {:>10}", "path", "was", "now");
            for (path, cost) in &costs {
                let was = old.get(*path).map(|v| thousands(*v)).unwrap_or("-".into());
                println!("  {path:<11} {was:>10} {:>10}", thousands(*cost));
            }
            baseline.servers.insert(
                key,
                costs.iter().map(|(p, c)| (p.to_string(), *c)).collect(),
            );
            continue;
        }
        match compare(&baseline, &key, &costs) {
            Ok(rows) => {
                print!("{}", table(&rows));
                let bad = rows.iter().filter(|r| r.verdict.failed()).count();
                failed += bad;
                passed += rows.len() - bad;
                report_failures(&rows);
            }
            Err(e) => {
                for (path, cost) in &costs {
                    println!("  {path:<11} {:>10} {:>10}", "-", thousands(*cost));
                }
                println!("  FAIL: {e}");
                failed += costs.len();
            }
        }
    }
    if args.update {
        std::fs::write(&args.baseline, baseline.to_text())
            .map_err(|e| format!("write {}: {e}", args.baseline.display()))?;
        println!(
            "\ncost baseline written to {}: commit it with the change that moved it, saying why.",
            args.baseline.display()
        );
        return Ok(true);
    }
    println!("\ncost check: {passed} passed, {failed} failed");
    Ok(failed == 0)
}

fn report_failures(rows: &[Row]) {
    if rows.iter().any(|r| r.verdict == Verdict::TooCostly) {
        println!(
            "  A path costs more than +5 % over its baseline. If that is intended, run \
             `make cost-baseline` and commit bench/cost-baseline.toml with the change, saying why; \
             else profile it (docs/PROFILE.md)."
        );
    }
}
