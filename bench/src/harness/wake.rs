//! How a Redisson-style waiter hears that it may try again: a message on its channel adds a
//! permit to its latch (as Redisson's `RedissonLockEntry` latch), and the waiter waits on the
//! latch for at most what Redisson would.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::PubSubSink;
use rlock_module_tests::Server;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

/// Which messages wake a waiter, by payload.
pub type Wakes = fn(&[u8]) -> bool;

/// An unlock message (`0`), as `LockPubSub` hears it.
pub fn unlock_message(payload: &[u8]) -> bool {
    payload == b"0"
}

/// Any message.
pub fn any_message(_: &[u8]) -> bool {
    true
}

/// A positive total of permits, as `SemaphorePubSub` hears it.
pub fn positive(payload: &[u8]) -> bool {
    std::str::from_utf8(payload)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .is_some_and(|n| n > 0)
}

/// A listener of its own on `channel`, for a run: each message that `wakes` adds one permit
/// to `latch`.
pub async fn listen(
    server: &Server,
    channel: Vec<u8>,
    wakes: Wakes,
    latch: Arc<Semaphore>,
) -> JoinHandle<()> {
    let mut pubsub = server
        .client()
        .get_async_pubsub()
        .await
        .expect("pub/sub connection");
    pubsub.subscribe(channel).await.expect("SUBSCRIBE");
    let mut stream = pubsub.into_on_message();
    tokio::spawn(async move {
        while let Some(msg) = stream.next().await {
            if wakes(msg.get_payload_bytes()) {
                latch.add_permits(1);
            }
        }
    })
}

/// One pub/sub connection whose channel changes from sample to sample.
pub struct Wakeups {
    sink: PubSubSink,
    pub latch: Arc<Semaphore>,
    listener: JoinHandle<()>,
}

impl Wakeups {
    pub async fn open(server: &Server, wakes: Wakes) -> Wakeups {
        let (sink, mut stream) = server
            .client()
            .get_async_pubsub()
            .await
            .expect("pub/sub connection")
            .split();
        let latch = Arc::new(Semaphore::new(0));
        let listener = {
            let latch = latch.clone();
            tokio::spawn(async move {
                while let Some(msg) = stream.next().await {
                    if wakes(msg.get_payload_bytes()) {
                        latch.add_permits(1);
                    }
                }
            })
        };
        Wakeups {
            sink,
            latch,
            listener,
        }
    }

    pub async fn subscribe(&mut self, channel: &[u8]) {
        self.sink.subscribe(channel).await.expect("SUBSCRIBE");
    }

    /// Leaves `channel` and forgets the wake-ups it left behind.
    pub async fn unsubscribe(&mut self, channel: &[u8]) {
        self.sink.unsubscribe(channel).await.expect("UNSUBSCRIBE");
        forget_stale(&self.latch);
    }

    pub fn close(self) {
        self.listener.abort();
    }
}

/// Redisson unsubscribes once it holds and starts a fresh latch next time: forget the
/// wake-ups that arrived meanwhile.
pub fn forget_stale(latch: &Semaphore) {
    let stale = latch.available_permits();
    if stale > 0 {
        latch.forget_permits(stale);
    }
}

/// Waits on `latch` for a wake-up, at most `wait`; true when one came.
pub async fn wait_wakeup(latch: &Semaphore, wait: Duration) -> bool {
    match tokio::time::timeout(wait, latch.acquire()).await {
        Ok(Ok(permit)) => {
            permit.forget();
            true
        }
        _ => false,
    }
}

/// Redisson's wait after a missed tryLock that replied `ttl`: min(ttl, what is left of the
/// wait), or all that is left when the lock has no TTL.
pub fn ttl_wait(ttl: i64, remaining: Duration) -> Duration {
    if ttl >= 0 {
        remaining.min(Duration::from_millis(ttl as u64))
    } else {
        remaining
    }
}
