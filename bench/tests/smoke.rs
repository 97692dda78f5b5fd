//! `--quick` end to end against a real server: every path of every scenario makes
//! progress with no unexpected replies, and the report renders.

use rlock_bench::contended::WaitPath;
use rlock_bench::expiry::ExpiryPath;
use rlock_bench::fair::{FairPath, FairRun, MIN_CYCLES};
use rlock_bench::harness::late::Lateness;
use rlock_bench::harness::pairs::PairRun;
use rlock_bench::harness::Cell;
use rlock_bench::memory::{MemPath, MemRun};
use rlock_bench::report::json::results;
use rlock_bench::report::{markdown, Meta};
use rlock_bench::semaphore::{ReclaimPath, SemPairPath, SemWaitPath, PERMITS};
use rlock_bench::stall::StallPath;
use rlock_bench::uncontended::{PairPath, FAIR_PIPELINE};
use rlock_bench::{run, FlavorReport, Plan};
use rlock_module_tests::flavors;

#[test]
fn quick_run_makes_progress_on_every_path() {
    let plan = Plan {
        flavors: flavors(),
        verbose: false,
        ..Plan::quick()
    };
    let reports = run(&plan);
    assert_eq!(reports.len(), plan.flavors.len());
    for r in &reports {
        check_report(&plan, r);
    }

    let meta = Meta::collect(&["--quick".into()]);
    let text = markdown(&meta, &plan, &reports, true);
    check_markdown(&text);
    check_json(&results(&meta, &plan, &reports));
}

/// `--json` carries every scenario the plan ran, the BLPOP hand-off among the contended paths,
/// and lists nothing as not measured.
fn check_json(json: &str) {
    for id in [
        "uncontended",
        "contended",
        "expiry",
        "fair",
        "fair-uncontended",
        "memory",
        "stall",
        "cluster",
        "mixed",
        "rwlock-uncontended",
        "rwlock-contended",
        "semaphore-uncontended",
        "semaphore-contended",
        "semaphore-reclaim",
        "guard",
    ] {
        let entry = format!("\"id\": \"{id}\"");
        assert!(json.contains(&entry), "--json lacks scenario {id}");
    }
    assert!(
        json.contains("\"path\": \"BLPOP\""),
        "--json lacks the BLPOP hand-off"
    );
    assert!(
        json.contains("\"not_measured\": []"),
        "--json lists something as not measured"
    );
}

/// A waiter served after a deadline: every sample taken, no errors, none served more than
/// `slack_ms` before the deadline.
fn check_lateness<P: rlock_bench::harness::Path + std::fmt::Debug>(
    cell: &Lateness<P>,
    samples: usize,
    slack_ms: f64,
    what: &str,
) {
    let path = cell.path;
    assert_eq!(cell.samples(), samples, "{what} {path:?}: samples");
    assert_eq!(cell.errors, 0, "{what} {path:?}: errors");
    assert!(
        cell.min_ms() > -slack_ms,
        "{what} {path:?}: served {} ms early",
        -cell.min_ms()
    );
}

/// Every run of a cell of pairs made some, with no unexpected replies; `what` names the cell.
fn check_pairs<P, S>(cell: &Cell<P, S, PairRun>, what: &str) {
    assert!(
        cell.runs.iter().all(|run| run.done > 0),
        "{what} made no pairs"
    );
    assert_eq!(cell.sum(|r| r.errors), 0, "{what} had unexpected replies");
}

/// Every scenario of one server made progress, with no errors and no two holders.
fn check_report(plan: &Plan, r: &FlavorReport) {
    let u = r.uncontended.as_ref().expect("uncontended ran");
    for &pipeline in &plan.pipelines {
        for path in PairPath::PLAIN {
            let cell = u.cell(path, pipeline).expect("cell");
            check_pairs(cell, &format!("{path:?} p{pipeline}"));
        }
    }

    let m = r.mixed.as_ref().expect("mixed ran");
    for cell in &m.cells {
        assert_eq!(
            cell.problems(),
            0,
            "mixed N={}: errors or two holders",
            cell.clients
        );
        assert!(
            cell.mixed
                .iter()
                .all(|run| run.per_client.iter().all(|n| *n > 0)),
            "mixed N={} hold={}: a client never acquired: {:?}",
            cell.clients,
            cell.hold_ms,
            cell.mixed
                .iter()
                .map(|r| r.per_client.clone())
                .collect::<Vec<_>>()
        );
    }

    let c = r.contended.as_ref().expect("contended ran");
    for &clients in &plan.clients {
        for &hold in &plan.holds_ms {
            for path in WaitPath::ALL {
                let cell = c.cell(path, (clients, hold)).expect("cell");
                assert!(
                    cell.runs.iter().all(|run| run.acquisitions > 0),
                    "{path:?} N={clients} hold={hold} never acquired"
                );
                assert_eq!(
                    cell.sum(|r| r.trouble.violations),
                    0,
                    "{path:?} N={clients}: two holders at once"
                );
                assert_eq!(
                    cell.sum(|r| r.trouble.total()),
                    0,
                    "{path:?} N={clients} hold={hold}: errors"
                );
            }
            // BLOCK serves waiters in turn, so the lock does change hands.
            let b = c.cell(WaitPath::B, (clients, hold)).expect("cell");
            assert!(b.runs.iter().all(|run| run.handoffs > 0));
        }
    }

    let e = r.expiry.as_ref().expect("expiry ran");
    for path in ExpiryPath::ALL {
        // Nobody gets the lock before the lease runs out (small slack: the deadline is
        // estimated from the holder's reply, which arrives after the server set it).
        let cell = e.cell(path).expect("cell");
        check_lateness(cell, plan.expiry_samples, 5.0, "expiry");
    }

    let f = r.fair.as_ref().expect("fair ran");
    for &queue in &plan.fair_queues {
        for path in FairPath::ALL {
            let cell = f.cell(path, queue).expect("cell");
            assert_eq!(
                cell.sum(|r| r.errors),
                0,
                "{path:?} Q={queue}: unexpected replies"
            );
            assert!(
                cell.runs.iter().all(|run| run.cycles >= MIN_CYCLES),
                "{path:?} Q={queue}: too few cycles"
            );
            let bytes = cell.med(FairRun::bytes_per_waiter);
            assert!(
                bytes > 10.0 && bytes < 10_000.0,
                "{path:?} Q={queue}: {bytes} bytes per waiter"
            );
        }
    }
    // The script re-scores every waiter on each acquire; rlock does not.
    let longest = *plan.fair_queues.iter().max().expect("queue lengths");
    let f_over_r = f.server_cost_ratio((FairPath::F, longest), (FairPath::R, longest));
    assert!(f_over_r > 1.0, "F ÷ R at Q={longest} is {f_over_r}");

    let fu = r.fair_uncontended.as_ref().expect("FAIR vs plain ran");
    for path in PairPath::FAIR_VS_PLAIN {
        let cell = fu.cell(path, FAIR_PIPELINE).expect("cell");
        check_pairs(cell, &format!("{path:?}"));
    }

    let m = r.memory.as_ref().expect("memory ran");
    assert_eq!(m.waiters, plan.waiters);
    for path in MemPath::ALL {
        let cell = m.cells.cell(path, ()).expect("cell");
        assert_eq!(cell.sum(|r| r.errors), 0, "memory {path:?}: errors");
        assert!(
            cell.med(MemRun::bytes_per_waiter).is_finite(),
            "memory {path:?}: no figure"
        );
    }
    // With 200 waiters and a 300 ms settle, BLPOP's figure is noise (it can be ≤ 0), so the
    // ratio is not checked here.

    let st = r.stall.as_ref().expect("stall ran");
    for path in StallPath::ALL {
        let cell = st.cells.cell(path, ()).expect("cell");
        assert_eq!(
            cell.sum(|r| r.errors),
            0,
            "stall {path:?}: errors (waiters not forgotten?)"
        );
        assert!(
            cell.clean(|r| r.stall_ms) > 0.0,
            "stall {path:?}: no PING in the window"
        );
    }
    let sem = r.semaphore.as_ref().expect("semaphore ran");
    for &pipeline in &plan.pipelines {
        for path in SemPairPath::ALL {
            let cell = sem.pairs.cell(path, pipeline).expect("cell");
            check_pairs(cell, &format!("semaphore {path:?} p{pipeline}"));
        }
    }
    for &hold in &plan.holds_ms {
        for path in SemWaitPath::ALL {
            let cell = sem.contended.cell(path, hold).expect("cell");
            assert!(
                cell.runs.iter().all(|run| run.acquisitions > 0),
                "semaphore {path:?} hold={hold}: never acquired"
            );
            assert_eq!(
                cell.sum(|r| r.trouble.total()),
                0,
                "semaphore {path:?} hold={hold}: problems"
            );
            assert!(cell.runs.iter().all(|r| r.max_holders <= PERMITS as i64));
        }
    }
    for path in ReclaimPath::ALL {
        // The permit never comes back before its deadline (ms-rounded scores: 1 ms slack).
        let cell = sem.reclaim.cell(path).expect("cell");
        check_lateness(cell, plan.rounds * plan.sem_samples, 1.0, "reclaim");
    }

    let g = r.guard.as_ref().expect("guard ran");
    for &pipeline in &plan.pipelines {
        for path in rlock_bench::guard::GuardPath::ALL {
            let cell = g.cell(path, pipeline).expect("cell");
            check_pairs(cell, &format!("guard {path:?} p{pipeline}"));
        }
    }

    assert!(!r.pinning.is_empty());
}

fn check_markdown(text: &str) {
    for heading in [
        "## Targets",
        "### 1.",
        "### 2.",
        "### 3.",
        "### 4.",
        "### 5.",
        "### 6.",
        "### 7.",
        "### 11.",
        "### 12.",
        "CPU pinning",
        "## How to read this",
    ] {
        assert!(text.contains(heading), "report lacks {heading}:\n{text}");
    }
}
