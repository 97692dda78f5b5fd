//! The crate's error type.

use std::fmt;
use std::time::Duration;

/// What can go wrong with a lock. Every variant says which lock it is about.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The server says `owner` does not hold `key`: its lease ran out, or someone
    /// force-released or deleted it, before this release, or before this guarded command
    /// ([`Hold::guard`](crate::Hold::guard)), which was then not run.
    NotHeld {
        /// The lock's key.
        key: String,
        /// The owner id the release or guarded command was sent for.
        owner: String,
    },
    /// A guarded command ([`Hold::guard`](crate::Hold::guard)) of a fenced hold was refused,
    /// and not run, because the lock was taken again since this hold got its token
    /// (`STALETOKEN`): `owner` holds it, but as a newer hold (another process or a restart
    /// with the same owner id), so this hold's writes could overlap that one's.
    /// [`Error::is_not_held`] is true for it too.
    StaleToken {
        /// The lock's key.
        key: String,
        /// The hold's owner id.
        owner: String,
        /// The hold's fencing token, now stale.
        token: u64,
        /// The lock's fencing token now, as the server told it.
        current: Option<u64>,
    },
    /// The lock can no longer be trusted to be held: a renewal was refused, or the lease ran
    /// out while renewals kept failing. Work done under it since then may overlap another holder.
    Lost {
        /// The lock's key.
        key: String,
        /// Why the hold was judged lost.
        reason: String,
    },
    /// The lock was not acquired within the wait that was asked for (a scoped call,
    /// `with_lock`, whose wait ended first). Named `Timeout` before 4.1.
    NotAcquired {
        /// The lock's key.
        key: String,
        /// How long the call waited; `None` for a single try without a wait.
        waited: Option<Duration>,
    },
    /// The server refused a wait that would have closed a cycle of waits (`DEADLOCK`): the
    /// call holds nothing new. Give up a lock in the cycle (release what this owner holds)
    /// and try again, or take locks in one order everywhere.
    Deadlock {
        /// The waits of the cycle, this call's own first.
        cycle: Vec<Wait>,
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
    /// A call's arguments are refused before anything is sent: an empty lock name, a zero
    /// lease, a zero `sync_replicas` timeout.
    InvalidArgument {
        /// The lock's key (empty when that is what is wrong).
        key: String,
        /// What is wrong with the call.
        reason: String,
    },
    /// The server or the connection failed, or the server rejected the command
    /// (for example `ERR` for an option the loaded module does not support).
    Redis(redis::RedisError),
}

/// One wait of a deadlock's cycle: `owner` waits for `key`, which `holder` holds (or, with
/// `kept`, which is kept free for `holder`'s multi-key call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// Who waits.
    pub owner: String,
    /// The lock it waits for.
    pub key: String,
    /// Who holds that lock.
    pub holder: String,
    /// The lock is free but kept for `holder`'s multi-key call (`RLOCK.MACQUIRE`).
    pub kept: bool,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// True for [`Error::Deadlock`].
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Error::Deadlock { .. })
    }

    /// True for [`Error::NotAcquired`]: a wait that ended without a grant.
    pub fn is_not_acquired(&self) -> bool {
        matches!(self, Error::NotAcquired { .. })
    }

    /// True for [`Error::NotHeld`] and [`Error::StaleToken`]: the server refused a call
    /// because this hold no longer stands.
    pub fn is_not_held(&self) -> bool {
        matches!(self, Error::NotHeld { .. } | Error::StaleToken { .. })
    }

    /// True for [`Error::Lost`].
    pub fn is_lost(&self) -> bool {
        matches!(self, Error::Lost { .. })
    }

    /// [`Error::InvalidArgument`]: a call refused before anything is sent.
    pub(crate) fn invalid(key: &str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            key: key.to_owned(),
            reason: reason.into(),
        }
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
                "lock {key:?} is not held by {owner:?}: its lease ran out or it was force-released, \
                 so another holder may have overlapped (a guarded command was not run)"
            ),
            Error::StaleToken {
                key,
                owner,
                token,
                current,
            } => {
                write!(
                    f,
                    "lock {key:?} was taken again since {owner:?} got fencing token {token}"
                )?;
                if let Some(now) = current {
                    write!(f, " (it is {now} now)")?;
                }
                write!(f, ", so the guarded command was not run")
            }
            Error::Lost { key, reason } => write!(
                f,
                "lock {key:?} was lost ({reason}); stop work that relies on it and acquire it again"
            ),
            Error::NotAcquired {
                key,
                waited: Some(w),
            } => write!(f, "lock {key:?} was not acquired within {w:?}"),
            Error::NotAcquired { key, waited: None } => write!(
                f,
                "lock {key:?} is held by someone else (tried once; use .wait(..) to wait for it)"
            ),
            Error::Deadlock { cycle } => {
                write!(f, "deadlock, this call refused:")?;
                for (i, wait) in cycle.iter().enumerate() {
                    let held = if wait.kept { "kept for" } else { "held by" };
                    let sep = if i == 0 { " " } else { "; " };
                    write!(
                        f,
                        "{sep}{:?} waits for {:?} {held} {:?}",
                        wait.owner, wait.key, wait.holder
                    )?;
                }
                Ok(())
            }
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
            Error::InvalidArgument { key, reason } => {
                write!(f, "lock {key:?}: {reason}; nothing was sent")
            }
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
        if e.code() == Some("DEADLOCK") {
            if let Some(cycle) = e.detail().and_then(parse_cycle) {
                return Error::Deadlock { cycle };
            }
        }
        Error::Redis(e)
    }
}

/// Refuses an empty name, and a count of zero where one is given (`what`: its name).
pub(crate) fn check_args(key: &str, counts: &[(&str, u64)]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid(key, "a name must not be empty"));
    }
    match counts.iter().find(|(_, n)| *n == 0) {
        Some((what, _)) => Err(Error::invalid(key, format!("{what} must be at least 1"))),
        None => Ok(()),
    }
}

/// The cycle of a `DEADLOCK` error's text: `"b" waits for "k1" held by "a"; ...`, each
/// name quoted as redis-cli shows strings. `None` when the text is not of that shape.
fn parse_cycle(text: &str) -> Option<Vec<Wait>> {
    let mut rest = text.trim();
    let mut cycle = Vec::new();
    loop {
        let (owner, after) = quoted(rest)?;
        let after = after.strip_prefix(" waits for ")?;
        let (key, after) = quoted(after)?;
        let (kept, after) = match (
            after.strip_prefix(" held by "),
            after.strip_prefix(" kept for "),
        ) {
            (Some(after), _) => (false, after),
            (None, Some(after)) => (true, after),
            (None, None) => return None,
        };
        let (holder, after) = quoted(after)?;
        cycle.push(Wait {
            owner,
            key,
            holder,
            kept,
        });
        match after.strip_prefix("; ") {
            Some(next) => rest = next,
            None if after.is_empty() => return Some(cycle),
            None => return None,
        }
    }
}

/// A leading `"..."` with `\"`, `\\` and `\xNN` escapes: its bytes (as lossy UTF-8) and
/// what follows it.
fn quoted(text: &str) -> Option<(String, &str)> {
    let body = text.strip_prefix('"')?;
    let mut bytes = Vec::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((String::from_utf8_lossy(&bytes).into_owned(), &body[i + 1..])),
            '\\' => match chars.next()? {
                (_, 'x') => {
                    let hex: String = [chars.next()?.1, chars.next()?.1].iter().collect();
                    bytes.push(u8::from_str_radix(&hex, 16).ok()?);
                }
                (_, escaped) => {
                    let mut buf = [0; 4];
                    bytes.extend_from_slice(escaped.encode_utf8(&mut buf).as_bytes());
                }
            },
            c => {
                let mut buf = [0; 4];
                bytes.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadlock_reply_becomes_its_cycle() {
        let e = redis::RedisError::from((redis::ErrorKind::Extension, "", String::new()));
        assert!(!Error::from(e).is_deadlock());
        let text = r#""b" waits for "k1" held by "a"; "a \"x\"" waits for "k\x002" kept for "b""#;
        let cycle = parse_cycle(text).expect("parsed");
        assert_eq!(
            cycle,
            vec![
                Wait {
                    owner: "b".into(),
                    key: "k1".into(),
                    holder: "a".into(),
                    kept: false
                },
                Wait {
                    owner: "a \"x\"".into(),
                    key: "k\u{0}2".into(),
                    holder: "b".into(),
                    kept: true
                },
            ]
        );
        assert!(parse_cycle(r#""b" waits for "k1""#).is_none());
        assert!(parse_cycle(r#""b" waits for "k1" held by "a" and more"#).is_none());
        let shown = Error::Deadlock { cycle }.to_string();
        assert!(
            shown.contains(r#""b" waits for "k1" held by "a""#),
            "{shown}"
        );
    }

    #[test]
    fn messages_name_the_lock_and_the_remedy() {
        let e = Error::lost("orders", "renewal refused");
        assert!(e.is_lost());
        let text = e.to_string();
        assert!(text.contains("\"orders\"") && text.contains("renewal refused"));
        let t = Error::NotAcquired {
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
