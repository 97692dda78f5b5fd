//! Where the server is: `-u/--url` (or `RLOCK_URL`), `--cluster`, `--user`, `--password`,
//! and TLS (`--tls`, `--cacert`, `--cert`, `--key`, `--insecure`), as redis-cli names them.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use rlock_client::redis::{self, ConnectionAddr, IntoConnectionInfo};
use rlock_client::{Endpoint, Locks};

/// The connection options every subcommand takes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Connection")]
pub struct ConnectArgs {
    /// The server: redis://[user[:password]@]host[:port][/db], rediss://... (TLS) or
    /// unix:///path/to.sock.
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

    /// Speak TLS to the server: a redis:// URL is taken as rediss://.
    #[arg(long, global = true)]
    pub tls: bool,

    /// The CA certificate (PEM) that signed the server's certificate, instead of the
    /// system's trusted roots.
    #[arg(long, global = true, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// The client certificate (PEM), for a server that asks for one (tls-auth-clients);
    /// with --key.
    #[arg(long, global = true, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,

    /// The client certificate's private key (PEM); with --cert.
    #[arg(long, global = true, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,

    /// Do not check the server's certificate (nor its name). For tests only: anyone on
    /// the path can then stand in for the server.
    #[arg(long, global = true)]
    pub insecure: bool,
}

impl ConnectArgs {
    /// Refuses TLS options that cannot apply: `--tls`, `--cacert`, `--cert`, `--key` or
    /// `--insecure` with a URL that is neither redis:// nor rediss:// (a unix socket).
    pub fn check(&self) -> Result<(), String> {
        let tcp = self.url.starts_with("redis://") || self.url.starts_with("rediss://");
        let tls_options = self.tls || self.cacert.is_some() || self.cert.is_some() || self.insecure;
        if tls_options && !tcp {
            return Err(format!(
                "{}: --tls, --cacert, --cert, --key and --insecure need a redis:// or \
                 rediss:// URL",
                self.url
            ));
        }
        if !self.tls && !self.url.starts_with("rediss://") && tls_options {
            return Err(format!(
                "{}: --cacert, --cert, --key and --insecure apply to TLS: add --tls or use a \
                 rediss:// URL",
                self.url
            ));
        }
        Ok(())
    }

    /// The endpoint, or a message that says what is wrong with the options.
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let url = match self.url.strip_prefix("redis://") {
            Some(rest) if self.tls => format!("rediss://{rest}"),
            _ => self.url.clone(),
        };
        self.check()?;
        let bad = |e: redis::RedisError| format!("{url}: {e}");
        let mut info = url.as_str().into_connection_info().map_err(bad)?;
        let mut settings = info.redis_settings().clone();
        if let Some(user) = &self.user {
            settings = settings.set_username(user);
        }
        if let Some(password) = &self.password {
            settings = settings.set_password(password);
        }
        info = info.set_redis_settings(settings);
        if self.insecure {
            if let ConnectionAddr::TcpTls { host, port, .. } = info.addr().clone() {
                info = info.set_addr(ConnectionAddr::TcpTls {
                    host,
                    port,
                    insecure: true,
                    tls_params: None,
                });
            }
        }
        let certs = self.certificates()?;
        match (self.cluster, certs) {
            (true, Some(certs)) => Endpoint::cluster_tls([info], certs).map_err(bad),
            (true, None) => Endpoint::cluster([info]).map_err(bad),
            (false, Some(certs)) => redis::Client::build_with_tls(info, certs)
                .map(Endpoint::from)
                .map_err(bad),
            (false, None) => redis::Client::open(info).map(Endpoint::from).map_err(bad),
        }
    }

    /// The CA and client certificate files, read; `None` when none was given.
    fn certificates(&self) -> Result<Option<redis::TlsCertificates>, String> {
        let read = |option: &str, path: &PathBuf| {
            std::fs::read(path).map_err(|e| format!("--{option} {}: {e}", path.display()))
        };
        let root_cert = self
            .cacert
            .as_ref()
            .map(|p| read("cacert", p))
            .transpose()?;
        let client_tls = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read("cert", cert)?,
                client_key: read("key", key)?,
            }),
            _ => None,
        };
        if root_cert.is_none() && client_tls.is_none() {
            return Ok(None);
        }
        Ok(Some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }))
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
