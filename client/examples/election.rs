//! Leader election: N candidates campaign for one post; each leads for a while, then resigns
//! and campaigns again, while an observer prints every change of leader.
//!
//! ```text
//! redis-server --loadmodule target/debug/librlock.so &
//! redis-cli CONFIG SET notify-keyspace-events Kd   # optional: the observer follows events
//! cargo run -p rlock-client --example election -- [redis-url] [candidates] [terms]
//! ```
//!
//! Each leader writes its term to a "resource" that refuses older terms: the fencing a real
//! leader's writes need, since a leader paused past its lease may still try to write.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_client::{Leader, Locks};

/// Writes `line` to the resource unless a newer term wrote to it already (a script, so the
/// check and the write are one step).
async fn fenced_write(
    con: &mut redis::aio::MultiplexedConnection,
    term: u64,
    line: &str,
) -> redis::RedisResult<bool> {
    let script = redis::Script::new(
        r"local last = tonumber(redis.call('GET', KEYS[1]) or '0')
          if tonumber(ARGV[1]) < last then return 0 end
          redis.call('SET', KEYS[1], ARGV[1])
          redis.call('RPUSH', KEYS[2], ARGV[2])
          return 1",
    );
    let written: i64 = script
        .key("election-example:term")
        .key("election-example:log")
        .arg(term)
        .arg(line)
        .invoke_async(con)
        .await?;
    Ok(written == 1)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let candidates: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let terms: usize = args.next().map_or(Ok(2), |a| a.parse())?;

    let client = redis::Client::open(url)?;
    let mut con = client.get_multiplexed_async_connection().await?;
    let _: () = con
        .del(&["election-example:term", "election-example:log"])
        .await?;

    let observer = Locks::new(client.clone()).election("election-example");
    let mut changes = observer.observe().await?;
    println!("observer: {:?}", changes.mode());
    let watch = tokio::spawn(async move {
        loop {
            match changes.next().await {
                Ok(Some(Leader { value, term })) => {
                    println!("observer: {value} leads, term {term}")
                }
                Ok(None) => println!("observer: no leader"),
                Err(e) => println!("observer: {e}"),
            }
        }
    });

    let mut tasks = Vec::new();
    for id in 0..candidates {
        // A Locks each, as separate processes would have, with a short lease: a candidate
        // that dies is replaced within 3 s.
        let locks = Locks::builder(client.clone())
            .watchdog_lease(Duration::from_secs(3))
            .build();
        let election = locks.election("election-example");
        let mut con = con.clone();
        tasks.push(tokio::spawn(async move {
            let value = format!("candidate-{id}");
            for _ in 0..terms {
                let leadership = election.campaign(value.clone()).await?;
                let term = leadership.term();
                tokio::select! {
                    written = async {
                        let line = format!("{value} term {term}");
                        let ok = fenced_write(&mut con, term, &line).await?;
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        Ok::<_, redis::RedisError>(ok)
                    } => {
                        if !written? {
                            println!("{value}: a newer term wrote first; term {term} refused");
                        }
                    }
                    lost = leadership.lost() => {
                        println!("{value}: lost term {term}: {lost}");
                        continue;
                    }
                }
                leadership.resign().await?;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for t in tasks {
        t.await?.map_err(|e| e.to_string())?;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    watch.abort();
    let log: Vec<String> = con.lrange("election-example:log", 0, -1).await?;
    println!("resource log, in term order:");
    for line in log {
        println!("  {line}");
    }
    Ok(())
}
