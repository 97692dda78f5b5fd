//! A command that may block in the server (`BLOCK`), sent so that the caller may give up:
//! on a pooled connection, in a task of its own. Dropping the caller's future ends the
//! wait (if the server shows it blocked, the server closes the connection at the client's
//! word, forgets the waiter and gives back a grant it never sent; see `conn::cancel_wait`);
//! a reply that arrives anyway goes to `orphaned`, which gives back what was granted.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::command::{self, Wait};
use crate::conn::{cancel_wait, redirect_of, Cancelled, Dedicated, Redirect, TRY_AGAIN_AFTER};
use crate::error::{Error, Result};
use crate::locks::Inner;

/// What to do with a reply nobody waits for any more.
pub(crate) type Orphaned =
    Box<dyn FnOnce(Arc<Inner>, redis::Value) -> BoxFuture<'static, ()> + Send>;

/// Sends `cmd` (whose key is `key`, and which waits up to `wait` in the server) and
/// returns its reply. See the module's doc for what happens when the caller gives up.
pub(crate) async fn call(
    inner: &Arc<Inner>,
    key: Arc<str>,
    cmd: redis::Cmd,
    wait: Wait,
    orphaned: Orphaned,
) -> Result<redis::Value> {
    let mut conn = inner.dedicated().await?;
    let client_id = conn.client_id(&key).await?;
    let (mut tx, rx) = oneshot::channel::<Result<redis::Value>>();
    let inner = inner.clone();
    tokio::spawn(async move {
        let left = tx.closed();
        let sent = send_unless_left(&inner, &mut conn, &key, &cmd, wait, client_id, true, left);
        // Still blocked when the caller left: the connection closes here.
        let Some((reply, usable)) = sent.await else {
            return;
        };
        let reply = reply.map_err(Error::from);
        if reply.is_ok() && usable {
            inner.pool.give_back(conn);
        }
        if let Err(Ok(value)) = tx.send(reply) {
            orphaned(inner, value).await;
        }
    });
    rx.await.unwrap_or_else(|_| {
        Err(Error::lost(
            "",
            "the waiting task stopped: is the runtime shutting down?",
        ))
    })
}

/// Sends `cmd` without a wait on the shared connection, with one as [`call`] does: a
/// family's blocking command. `orphaned` gives back what a reply nobody waits for granted.
pub(crate) async fn send<F, Fut>(
    inner: &Arc<Inner>,
    key: &Arc<str>,
    cmd: redis::Cmd,
    wait: Wait,
    orphaned: F,
) -> Result<redis::Value>
where
    F: FnOnce(Arc<Inner>, redis::Value) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    match wait {
        Wait::No => inner.query(&cmd).await,
        wait => {
            let orphaned: Orphaned = Box::new(move |inner, value| Box::pin(orphaned(inner, value)));
            call(inner, key.clone(), cmd, wait, orphaned).await
        }
    }
}

/// Sends `cmd` on `conn` as [`send_following_redirects`] does, unless `left` (the caller
/// gave up) comes first: then the wait is ended (see `conn::cancel_wait`, `keep_reading` as
/// there). The reply and whether `conn` may be used again; `None` when the request was still
/// blocked, and `conn` must close.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn send_unless_left(
    inner: &Inner,
    conn: &mut Dedicated,
    key: &str,
    cmd: &redis::Cmd,
    wait: Wait,
    client_id: i64,
    keep_reading: bool,
    left: impl Future<Output = ()>,
) -> Option<(redis::RedisResult<redis::Value>, bool)> {
    let name = command::name_of(cmd);
    let request = send_following_redirects(conn, key, cmd, wait);
    tokio::pin!(request);
    tokio::select! {
        biased;
        r = &mut request => Some((r, true)),
        _ = left => {
            let shared = inner.conn().await.ok();
            match cancel_wait(shared, key, client_id, &[&name], keep_reading, request).await {
                Cancelled::Close => None,
                Cancelled::Replied(r) => Some((r, true)),
                Cancelled::Killed(r) => Some((r, false)),
            }
        }
    }
}

/// Sends `cmd` on `conn` to the node of `key`, following `-MOVED`/`-ASK`/`-TRYAGAIN` (the
/// slot moved while it waited) until the wait is over; then the reply is null.
pub(crate) async fn send_following_redirects(
    conn: &mut Dedicated,
    key: &str,
    cmd: &redis::Cmd,
    wait: Wait,
) -> redis::RedisResult<redis::Value> {
    let started = Instant::now();
    let mut pipe = redis::pipe();
    pipe.add_command(cmd.clone());
    let mut reply = conn.pipeline_for_key(key, &mut pipe).await;
    while let Some(redirect) = redirect_of(&reply) {
        if wait.left(started.elapsed()).is_none() {
            return Ok(redis::Value::Nil);
        }
        reply = match redirect {
            Redirect::To { host, port, ask } => conn.pipeline_at(&host, port, ask, &pipe).await,
            Redirect::Later => {
                tokio::time::sleep(TRY_AGAIN_AFTER).await;
                conn.pipeline_for_key(key, &mut pipe).await
            }
        };
    }
    reply.map(|values| values.into_iter().next().unwrap_or_default())
}
