//! The watchdog's keyspace-event listener: with the module's events on (`notify-keyspace-events`
//! with `d`, or `A`, and `K` or `E`), one pub/sub connection per [`Locks`](crate::Locks) hears
//! of what may end a hold (`rlock.forcerelease`, `del`, `expired`, ...) on the keys held, and
//! checks those holds at once (`RLOCK.RENEW` for a renewed hold, `HEXISTS` for one with a fixed
//! lease): a hold that the server no longer has is lost within a round trip, not at the next
//! renewal. Without events, in a cluster, or when the subscription fails, nothing of this runs
//! and the renewals alone tell loss (within a third of the lease).

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::command;
use crate::keyspace::{self, Mode};
use crate::watchdog::{Listener, Watched};

/// How often `notify-keyspace-events` is read again while holds are registered.
const RECHECK_EVERY: Duration = Duration::from_secs(10);

pub(crate) fn spawn(inner: Weak<dyn Watched>, keys_wake: Arc<Notify>) -> Option<Listener> {
    let pubsub = inner.upgrade()?.pubsub()?;
    Some(Listener(tokio::spawn(listen(inner, keys_wake, pubsub))))
}

struct Subscribed {
    mode: Mode,
    db: i64,
    sink: PubSubSink,
    stream: PubSubStream,
    /// The keys whose keyspace channel is subscribed (`K`).
    keys: HashSet<Arc<str>>,
}

async fn recv(sub: &mut Option<Subscribed>) -> Option<redis::Msg> {
    match sub {
        Some(s) => s.stream.next().await,
        None => std::future::pending().await,
    }
}

/// What `notify-keyspace-events` lets the listener follow (`Some(None)`: nothing, for now);
/// `None` if `CONFIG GET` is refused (the listener then stops asking).
async fn wanted(inner: &dyn Watched) -> Option<Option<Mode>> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("notify-keyspace-events");
    match inner.conn().await {
        Ok(conn) => match conn.query(&cmd).await {
            Ok(v) => Some(keyspace::mode(
                &keyspace::config_value(v).unwrap_or_default(),
            )),
            Err(e) if e.is_io_error() || e.is_timeout() => Some(None),
            Err(_) => None,
        },
        Err(_) => Some(None),
    }
}

async fn open(client: &redis::Client, mode: Option<Mode>, timeout: Duration) -> Option<Subscribed> {
    let mode = mode?;
    let db = client.get_connection_info().redis_settings().db();
    let connect = async {
        let (mut sink, stream) = client.get_async_pubsub().await?.split();
        if mode == Mode::Keyevent {
            sink.subscribe(&keyspace::channels(mode, db, [])).await?;
        }
        Ok::<_, redis::RedisError>((sink, stream))
    };
    match tokio::time::timeout(timeout, connect).await {
        Ok(Ok((sink, stream))) => Some(Subscribed {
            mode,
            db,
            sink,
            stream,
            keys: HashSet::new(),
        }),
        _ => None,
    }
}

/// Subscribes the keyspace channels of newly held keys and unsubscribes those of keys no
/// longer held. False if the connection failed.
async fn sync_keys(sub: &mut Subscribed, held: HashSet<Arc<str>>, timeout: Duration) -> bool {
    if sub.mode != Mode::Keyspace {
        return true;
    }
    let channel = |k: &Arc<str>| keyspace::keyspace_channel(sub.db, k);
    let new: Vec<String> = held.difference(&sub.keys).map(channel).collect();
    let gone: Vec<String> = sub.keys.difference(&held).map(channel).collect();
    let work = async {
        if !new.is_empty() {
            sub.sink.subscribe(&new).await?;
        }
        if !gone.is_empty() {
            sub.sink.unsubscribe(&gone).await?;
        }
        Ok::<_, redis::RedisError>(())
    };
    let ok = matches!(tokio::time::timeout(timeout, work).await, Ok(Ok(())));
    if ok {
        sub.keys = held;
    }
    ok
}

/// The key a message concerns, if its event may end a hold.
fn key_of(sub: &Subscribed, msg: &redis::Msg) -> Option<Arc<str>> {
    keyspace::lost_key(sub.db, msg.get_channel_name(), msg.get_payload_bytes()).map(Arc::from)
}

async fn listen(
    inner: Weak<dyn Watched>,
    keys_wake: Arc<Notify>,
    pubsub: (redis::Client, Duration),
) {
    let (client, timeout) = pubsub;
    let mut sub: Option<Subscribed> = None;
    let mut refused = false;
    let mut next_check = Instant::now();
    loop {
        let notified = keys_wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let holding = {
            let Some(strong) = inner.upgrade() else {
                return;
            };
            let holding = !strong.registry().is_empty();
            if !refused && holding && Instant::now() >= next_check {
                next_check = Instant::now() + RECHECK_EVERY;
                match wanted(&*strong).await {
                    None => {
                        refused = true;
                        sub = None;
                    }
                    Some(want) if sub.as_ref().map(|s| s.mode) != want => {
                        sub = open(&client, want, timeout).await;
                    }
                    Some(_) => {}
                }
            }
            if let Some(s) = sub.as_mut() {
                if !sync_keys(s, strong.registry().keys(), timeout).await {
                    sub = None;
                }
            }
            holding
        };
        // The next look at the config, while something is held; else a new hold wakes it.
        let timer = (!refused && holding).then_some(next_check);
        tokio::select! {
            msg = recv(&mut sub), if sub.is_some() => match msg {
                Some(msg) => {
                    let s = sub.as_mut().expect("checked by the select");
                    let mut keys: HashSet<Arc<str>> = key_of(s, &msg).into_iter().collect();
                    // Messages that came together need one check.
                    while let Some(Some(msg)) = s.stream.next().now_or_never() {
                        keys.extend(key_of(s, &msg));
                    }
                    if !keys.is_empty() {
                        let Some(strong) = inner.upgrade() else {
                            return;
                        };
                        check(&*strong, &keys, timeout).await;
                    }
                }
                // The connection is gone: renewals alone until the next look at the config.
                None => sub = None,
            },
            _ = &mut notified => {}
            _ = sleep_until_some(timer) => {}
        }
    }
}

async fn sleep_until_some(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Checks at once the holds on `keys`, which an event says may be gone: a renewed hold is
/// renewed, one with a fixed lease looked up (`HEXISTS`, which leaves its lease alone); a
/// hold the server no longer has is lost. Errors leave the holds to the renewals.
async fn check(inner: &dyn Watched, keys: &HashSet<Arc<str>>, timeout: Duration) {
    let registry = inner.registry();
    let holds: Vec<_> = registry
        .holds_on(keys)
        .into_iter()
        .filter(|(h, _, _, renew)| *renew || !h.permit)
        .collect();
    if holds.is_empty() {
        return;
    }
    let mut pipe = redis::pipe();
    for (hold, _, lease, renew) in &holds {
        if *renew {
            pipe.add_command(command::renew(hold, *lease));
        } else {
            pipe.cmd("HEXISTS").arg(&*hold.key).arg(hold.field());
        }
    }
    let sent = Instant::now();
    let Ok(conn) = inner.conn().await else {
        return;
    };
    let Ok(Ok(values)) = tokio::time::timeout(timeout, conn.pipeline(&mut pipe)).await else {
        return;
    };
    for ((hold, id, _, renew), v) in holds.into_iter().zip(values) {
        match command::parse_flag(v, "the check replied") {
            Ok(true) if renew => registry.renewed(&hold, id, sent),
            Ok(true) => {}
            Ok(false) if hold.permit => registry.mark_lost(
                &hold,
                id,
                "the server refused the renewal, checked on a keyspace event: the lease ended, \
                 or the permit was given back or deleted",
            ),
            Ok(false) => registry.mark_lost(
                &hold,
                id,
                "the server no longer has it, checked on a keyspace event: the lock was \
                 force-released, deleted, flushed or expired (the renewal was refused)",
            ),
            Err(_) => {}
        }
    }
}
