//! N workers share a counter under one lock and print each hand-off.
//!
//! ```text
//! redis-server --loadmodule target/debug/librlock.so &
//! cargo run -p rlock-client --example workers -- [redis-url] [workers] [rounds]
//! ```
//!
//! Each worker reads the counter, waits a little, and writes it back plus one: a lost update
//! unless the lock excludes the others. The final count is workers × rounds.

use std::time::Duration;

use redis::AsyncCommands;
use rlock_client::Locks;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let workers: usize = args.next().map_or(Ok(4), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(5), |a| a.parse())?;

    let client = redis::Client::open(url)?;
    let mut con = client.get_multiplexed_async_connection().await?;
    let _: () = con.del(&["workers:counter", "workers:last"]).await?;
    let locks = Locks::new(client);

    let mut tasks = Vec::new();
    for id in 0..workers {
        // One handle per worker: one owner each, so they exclude each other.
        let lock = locks.lock("workers:lock").wait_forever().fenced();
        let mut con = con.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let guard = lock.acquire().await?.expect("waits forever");
                let last: Option<usize> = con.get("workers:last").await?;
                let n: usize = con
                    .get::<_, Option<usize>>("workers:counter")
                    .await?
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(5)).await;
                let _: () = con.set("workers:counter", n + 1).await?;
                let _: () = con.set("workers:last", id).await?;
                match last {
                    Some(prev) if prev != id => println!(
                        "worker {id} took over from worker {prev} (token {}), counter {}",
                        guard.token().unwrap_or(0),
                        n + 1
                    ),
                    Some(_) => println!("worker {id} holds it again, counter {}", n + 1),
                    None => println!("worker {id} took it first, counter {}", n + 1),
                }
                guard.release().await?;
            }
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for t in tasks {
        t.await?.map_err(|e| e.to_string())?;
    }
    let total: usize = con.get("workers:counter").await?;
    println!("counter = {total} (expected {})", workers * rounds);
    assert_eq!(
        total,
        workers * rounds,
        "a lost update: the lock did not exclude"
    );
    Ok(())
}
