//! Where the server is: `-u/--url` (or `RLOCK_URL`), `--cluster`, `--user`, `--password`,
//! as redis-cli users expect them.

use std::time::Duration;

use clap::Args;
use rlock_client::redis::{self, IntoConnectionInfo};
use rlock_client::{Endpoint, Locks};

/// The connection options every subcommand takes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Connection")]
pub struct ConnectArgs {
    /// The server: redis://[user[:password]@]host[:port][/db] or unix:///path/to.sock.
    /// rediss:// (TLS) is not supported by this build (the client crate is built without TLS).
    #[arg(
        short = 'u',
        long = "url",
        env = "RLOCK_URL",
        default_value = "redis://127.0.0.1:6379",
        global = true
    )]
    pub url: String,

    /// The URL is one node of a Redis Cluster: keys go to their primaries; ls and top ask
    /// every primary.
    #[arg(long, global = true)]
    pub cluster: bool,

    /// The ACL user (AUTH user password), instead of the one in the URL.
    #[arg(long, global = true, env = "RLOCK_USER")]
    pub user: Option<String>,

    /// The password, instead of the one in the URL (env RLOCK_PASSWORD keeps it out of
    /// `ps`).
    #[arg(long, global = true, env = "RLOCK_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
}

impl ConnectArgs {
    /// The endpoint, or a message that says what is wrong with the options.
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        if self.url.starts_with("rediss://") {
            return Err(format!(
                "{}: TLS (rediss://) is not supported by this build of rlock (its client crate \
                 is built without redis-rs's TLS features); reach the server through a TLS \
                 tunnel (stunnel, spiped) on a local port instead",
                self.url
            ));
        }
        let bad = |e: redis::RedisError| format!("{}: {e}", self.url);
        let mut info = self.url.as_str().into_connection_info().map_err(bad)?;
        let mut settings = info.redis_settings().clone();
        if let Some(user) = &self.user {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        info = info.set_redis_settings(settings);
        if self.cluster {
            Endpoint::cluster([info]).map_err(bad)
        } else {
            redis::Client::open(info).map(Endpoint::from).map_err(bad)
        }
    }

    /// Locks on the server, with `lease` as the watchdog's lease when given.
    pub fn locks(&self, lease: Option<Duration>) -> Result<Locks, String> {
        let mut b = Locks::builder(self.endpoint()?);
        if let Some(lease) = lease {
            b = b.watchdog_lease(lease);
        }
        Ok(b.build())
    }
}
