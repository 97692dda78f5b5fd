//! The crate's error type.

use std::fmt;
use std::time::Duration;

/// What can go wrong with a lock. Every variant says which lock it is about.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The server says `owner` does not hold `key`: its lease ran out, or someone
    /// force-released or deleted it, before this release.
    NotHeld {
        /// The lock's key.
        key: String,
        /// The owner id the release was sent for.
        owner: String,
    },
    /// The lock can no longer be trusted to be held: a renewal was refused, or the lease ran
    /// out while renewals kept failing. Work done under it since then may overlap another holder.
    Lost {
        /// The lock's key.
        key: String,
        /// Why the hold was judged lost.
        reason: String,
    },
    /// The lock was not acquired within the wait that was asked for.
    Timeout {
        /// The lock's key.
        key: String,
        /// How long the call waited; `None` for a single try without a wait.
        waited: Option<Duration>,
    },
    /// A campaign's value is not 1 to 1024 bytes (the server's limit on an owner).
    InvalidValue {
        /// The election's key.
        key: String,
        /// The value's length in bytes.
        len: usize,
    },
    /// A campaign found its value already the leader's: another candidate, in this process or
    /// another, campaigns with the same value and is the leader. The lock is reentrant per
    /// owner, so this candidate would have "won" alongside it; its re-entry was given back
    /// and the other's leadership is untouched. Give every candidate a value of its own.
    DuplicateValue {
        /// The election's key.
        key: String,
        /// The value both candidates use.
        value: String,
    },
    /// Fewer replicas than asked with `sync_replicas` acknowledged the grant in time, so it
    /// was given back (released) instead of believed: a failover could lose it.
    NotAcknowledged {
        /// The lock's key.
        key: String,
        /// Replicas that acknowledged.
        acked: u64,
        /// Replicas asked for.
        wanted: usize,
    },
    /// The server or the connection failed, or the server rejected the command
    /// (for example `ERR` for an option the loaded module does not support).
    Redis(redis::RedisError),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for [`Error::Lost`].
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::Lost { .. })
    }

    pub(crate) fn lost(key: &str, reason: impl Into<String>) -> Self {
        Error::Lost {
            key: key.to_owned(),
            reason: reason.into(),
        }
    }

    pub(crate) fn unexpected(what: &'static str, value: &redis::Value) -> Self {
        Error::Redis(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            what,
            format!("{value:?}"),
        )))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotHeld { key, owner } => write!(
                f,
                "lock {key:?} is not held by {owner:?}: its lease ran out or it was force-released \
                 before this release, so another holder may have overlapped"
            ),
            Error::Lost { key, reason } => write!(
                f,
                "lock {key:?} was lost ({reason}); stop work that relies on it and acquire it again"
            ),
            Error::Timeout {
                key,
                waited: Some(w),
            } => write!(f, "lock {key:?} was not acquired within {w:?}"),
            Error::Timeout { key, waited: None } => write!(
                f,
                "lock {key:?} is held by someone else (tried once; use .wait(..) to wait for it)"
            ),
            Error::InvalidValue { key, len } => write!(
                f,
                "election {key:?}: a candidate's value must be 1 to 1024 bytes, this one has {len}"
            ),
            Error::DuplicateValue { key, value } => write!(
                f,
                "election {key:?}: another candidate with the value {value:?} is the leader; \
                 give each candidate a value of its own"
            ),
            Error::NotAcknowledged { key, acked, wanted } => write!(
                f,
                "lock {key:?} was granted but only {acked} of {wanted} replicas acknowledged it \
                 in time, so it was released rather than trusted across a failover"
            ),
            Error::Redis(e) => write!(f, "redis: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_lock_and_the_remedy() {
        let e = Error::lost("orders", "renewal refused");
        assert!(e.is_lost());
        let text = e.to_string();
        assert!(text.contains("\"orders\"") && text.contains("renewal refused"));
        let t = Error::Timeout {
            key: "k".into(),
            waited: None,
        };
        assert!(t.to_string().contains(".wait("));
        let n = Error::NotHeld {
            key: "k".into(),
            owner: "o:1".into(),
        };
        assert!(n.to_string().contains("o:1"));
    }
}
