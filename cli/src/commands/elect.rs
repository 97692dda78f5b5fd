//! `rlock elect NAME VALUE -- CMD`: run CMD while leader. `rlock elect --observe NAME`: print
//! the leader and term, then a line at every change.

use std::io::Write;

use clap::Args;
use rlock_client::{Error, Leader};
use serde_json::json;

use super::{leased_client, unavailable, worded, EndArgs, Holding, WaitArgs, Worded};
use crate::child::{self, GivenBack};
use crate::connect::ConnectArgs;
use crate::exit;
use crate::output;

const AFTER: &str = "\
An election is a lock whose holder is the leader (the client's Locks::election): the owner is
the candidate's VALUE (1 to 1024 bytes, unique among the candidates: its address or host name),
the lock's fencing token is the term. The campaign waits in the server; once elected, CMD runs
with RLOCK_KEY, RLOCK_VALUE and RLOCK_TERM (also as RLOCK_TOKEN) in its environment, the lease
renewed while it runs; when CMD exits, the candidate resigns and the next one is elected at once.
Leadership lost while CMD runs (as for `rlock lock`: a refused renewal, or the server unreachable
for a whole lease): SIGTERM to CMD's process group, SIGKILL after --kill-after, exit 70. Pass the
term with what the leader writes, and have the resource refuse older terms.

A VALUE that already leads (another candidate with the same value, or this host's previous run
whose lease has not run out yet) is refused: exit 75 (or -E CODE), CMD not run.

--observe prints the current leader (or `no leader`), then a line at every change, within 100 ms
of it: from the module's keyspace events where the server sends them (notify-keyspace-events
with K or E, and d), by polling every 50 ms where not and in a cluster.

Examples:
  # every host runs this; one scheduler at a time, the others wait to take over
  rlock elect scheduler \"$(hostname)\" -- /opt/scheduler/run
  # who leads, and every change
  rlock elect --observe scheduler
  rlock elect --observe scheduler --json | jq -r .leader";

const HELP: Worded = [
    "How long to campaign, in the server. Default: until elected; 0: try once",
    "The leadership's lease, renewed every third of it while CMD runs: how long a dead leader \
     keeps the post. Default 30s",
    "Exit with CODE instead of 75 when not elected within --wait",
    "After leadership is lost and CMD got SIGTERM, SIGKILL it after this long",
];

/// Run CMD while elected leader, or watch who leads (--observe).
#[derive(Debug, Args)]
#[command(after_help = AFTER, mut_args(|a| worded(a, &HELP)))]
pub struct ElectArgs {
    /// The election's name (its lock's key).
    pub name: String,

    /// This candidate's value: unique among the candidates (its address, its host name).
    #[arg(required_unless_present = "observe", conflicts_with = "observe")]
    pub value: Option<String>,

    /// Print the leader and term, then a line at every change, until interrupted.
    #[arg(long)]
    pub observe: bool,

    /// With --observe: one JSON object a line, {time, leader, term} (null without a leader).
    #[arg(long, requires = "observe")]
    pub json: bool,

    #[command(flatten)]
    pub waits: WaitArgs,

    #[command(flatten)]
    pub ends: EndArgs,

    /// The command to run while leader, and its arguments (after `--`).
    #[arg(
        last = true,
        value_name = "CMD",
        required_unless_present = "observe",
        conflicts_with = "observe"
    )]
    pub command: Vec<String>,
}

/// A campaign and CMD's run while leader, or --observe: `Err(status)` when `rlock` exits
/// before CMD runs.
pub async fn run(conn: &ConnectArgs, args: ElectArgs) -> Result<u8, u8> {
    let locks = leased_client(conn, args.waits.lease)?;
    let election = locks.election(args.name.as_str());
    if args.observe {
        return Ok(observe(election, args.json).await);
    }
    let value = args
        .value
        .clone()
        .expect("clap requires it without --observe");
    let what = format!("election {:?}", args.name);
    let mut holding = Holding::start(&args.waits, &args.ends)?;
    let campaign = async {
        match args.waits.wait {
            None => election.campaign(value.as_str()).await.map(Some),
            Some(d) => election.campaign_for(value.as_str(), d).await,
        }
    };
    let refused = |within| format!("not elected in {what}{within}: someone else leads");
    let leadership = match holding.acquire_or_refuse(&what, campaign, refused).await? {
        Ok(l) => l,
        Err(e @ Error::DuplicateValue { .. }) => {
            eprintln!("rlock: {e}; CMD not run");
            return Err(args.ends.conflict_exit_code);
        }
        Err(e @ Error::InvalidValue { .. }) => {
            eprintln!("rlock: {e}");
            return Err(exit::USAGE);
        }
        Err(e) => return Err(unavailable(format!("{what}: {e}"))),
    };
    let term = leadership.term().to_string();
    let env = vec![
        ("RLOCK_KEY".to_owned(), args.name.clone()),
        ("RLOCK_VALUE".to_owned(), value.clone()),
        ("RLOCK_TERM".to_owned(), term.clone()),
        ("RLOCK_TOKEN".to_owned(), term),
    ];
    let ended = holding.run(&args.command, &env, leadership.lost()).await;
    let held = format!("leadership of {what}");
    let status = child::exit_status(ended, &held, leadership, |leadership| async {
        match leadership.resign().await {
            Ok(()) => GivenBack::Done,
            Err(e @ (Error::Lost { .. } | Error::NotHeld { .. })) => {
                GivenBack::NotHeld(format!("{held} was no longer held when CMD exited: {e}"))
            }
            Err(e) => GivenBack::Failed(format!(
                "{what}: resigning failed ({e}); the post ends with its lease"
            )),
        }
    });
    Ok(status.await)
}

fn line(leader: &Option<Leader>, json: bool) -> String {
    let time = output::utc_now();
    match (leader, json) {
        (Some(l), false) => format!("{time}  leader {}  term {}", l.value, l.term),
        (None, false) => format!("{time}  no leader"),
        (Some(l), true) => json!({"time": time, "leader": l.value, "term": l.term}).to_string(),
        (None, true) => json!({"time": time, "leader": null, "term": null}).to_string(),
    }
}

async fn observe(election: rlock_client::Election, json: bool) -> u8 {
    let mut changes = match election.observe().await {
        Ok(c) => c,
        Err(e) => return unavailable(format!("election {:?}: {e}", election.name())),
    };
    let mut out = std::io::stdout();
    loop {
        match changes.next().await {
            Ok(leader) => {
                let text = line(&leader, json) + "\n";
                // A closed pipe (`| head`) ends the run quietly.
                if out
                    .write_all(text.as_bytes())
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    return exit::OK;
                }
            }
            // The stream says so once, then goes on when the server answers again.
            Err(e) => eprintln!("rlock: {}: {e}", output::utc_now()),
        }
    }
}
