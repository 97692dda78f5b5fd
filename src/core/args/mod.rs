//! The argument grammar of the RLOCK commands, as typed requests.
//!
//! Option keywords are case-insensitive, may come in any order, and may not repeat.
//! Each family's grammar has its own file (`lock`, `multi`, `permits`, `stats`); what
//! they share (the errors, the keywords, the values of `LEASE`, `BLOCK` and `REQ`, the
//! owner's bounds) is here.

mod guard;
mod lock;
mod multi;
mod permits;
mod stats;

use std::fmt;

use super::integer::parse_i64;
use super::lease::{Lease, MAX_BLOCK_MS, MAX_LEASE_MS};
use super::requests::{RequestId, RequestIdError};
use super::rwlock::RwMode;

pub use guard::{parse_guard_options, GuardOptions};
use lock::set_mode;
pub use lock::{
    parse_acquire_options, parse_release_options, parse_renew_options, AcquireOptions,
    ReleaseOptions, RenewOptions,
};
pub use multi::{
    key_count, parse_multi_acquire_options, parse_multi_release_options, MAX_MULTI_KEYS,
};
pub use permits::{parse_permit_options, PermitGrammar, PermitOptions};
pub use stats::{parse_top_count, MAX_TOP_COUNT};

/// Owners are opaque and binary-safe, but bounded.
pub const MAX_OWNER_LEN: usize = 1024;

/// How long a `BLOCK` waiter may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// `BLOCK 0`, as `BLPOP 0`.
    Forever,
    /// `BLOCK ms` with ms >= 1.
    For(i64),
}

/// A call whose arguments are wrong. Displays as a Redis error line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    UnknownOption(String),
    RepeatedOption(&'static str),
    MissingValue(&'static str),
    BadLease,
    BadBlock,
    EmptyOwner,
    OwnerTooLong,
    MissingRequestId,
    BadRequestId(RequestIdError),
    /// Both READ and WRITE, or one of them twice.
    TwoModes,
    /// An option a read-write lock does not take.
    NotForReadWrite(&'static str),
    /// `numkeys` is not a count from 1 to `MAX_MULTI_KEYS`.
    BadKeyCount,
    /// A count keyword given last, with no value.
    MissingCount(&'static str),
    /// Fewer keys than `numkeys` said.
    MissingKeys,
    /// A key named twice in one multi-key call.
    RepeatedKey,
    /// An option a multi-key call does not take.
    NotForMultiKey(&'static str),
    /// `RSEM.LEASE` and `RSEM.RENEW` without `LEASE ms`.
    MissingLease,
    /// `RLOCK.GUARD` without `CALL command`.
    MissingCall,
    /// `TOKEN` last, with no value (`RLOCK.GUARD`).
    MissingToken,
    /// A `TOKEN n` that is not a non-negative integer.
    BadToken,
    /// A count (permits, a latch's count) out of its range.
    BadCount {
        what: &'static str,
        min: i64,
        max: i64,
    },
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::UnknownOption(opt) => write!(f, "ERR unknown option '{opt}'"),
            ArgError::RepeatedOption(opt) => write!(f, "ERR option {opt} given more than once"),
            ArgError::MissingValue(opt) => write!(f, "ERR option {opt} needs a value in milliseconds"),
            ArgError::BadLease => write!(
                f,
                "ERR LEASE must be an integer number of milliseconds from 1 to {MAX_LEASE_MS}"
            ),
            ArgError::BadBlock => write!(
                f,
                "ERR BLOCK must be an integer number of milliseconds from 0 (forever) to {MAX_BLOCK_MS}"
            ),
            ArgError::EmptyOwner => write!(f, "ERR owner must not be empty"),
            ArgError::OwnerTooLong => {
                write!(f, "ERR owner must be at most {MAX_OWNER_LEN} bytes")
            }
            ArgError::MissingRequestId => write!(f, "ERR option REQ needs a request id"),
            ArgError::BadRequestId(error) => write!(f, "{error}"),
            ArgError::TwoModes => write!(f, "ERR give one of READ or WRITE, once"),
            ArgError::NotForReadWrite(option) => write!(
                f,
                "ERR option {option} does not apply to a read-write lock (READ or WRITE)"
            ),
            ArgError::BadKeyCount => write!(
                f,
                "ERR numkeys must be an integer from 1 to {MAX_MULTI_KEYS}"
            ),
            ArgError::MissingKeys => write!(f, "ERR fewer keys than numkeys"),
            ArgError::MissingCount(option) => write!(f, "ERR option {option} needs a count"),
            ArgError::RepeatedKey => write!(f, "ERR a key is named more than once"),
            ArgError::BadCount { what, min, max } => {
                write!(f, "ERR {what} must be an integer from {min} to {max}")
            }
            ArgError::MissingCall => write!(f, "ERR RLOCK.GUARD needs CALL command [arg ...]"),
            ArgError::MissingToken => write!(f, "ERR option TOKEN needs a token"),
            ArgError::BadToken => write!(
                f,
                "ERR TOKEN must be an integer from 0 to {}",
                i64::MAX
            ),
            ArgError::MissingLease => write!(f, "ERR LEASE ms is required"),
            ArgError::NotForMultiKey(option) => write!(
                f,
                "ERR option {option} does not apply to a multi-key acquire"
            ),
        }
    }
}

/// A count argument (`n` of `RSEM.ADDPERMITS`, `PERMITS n`, ...) from `min` to `max`.
pub fn count_value(word: &[u8], what: &'static str, min: i64, max: i64) -> Result<i64, ArgError> {
    parse_i64(word)
        .filter(|n| (min..=max).contains(n))
        .ok_or(ArgError::BadCount { what, min, max })
}

fn block_value(ms: &[u8]) -> Result<Wait, ArgError> {
    match parse_i64(ms) {
        Some(0) => Ok(Wait::Forever),
        Some(ms) if (1..=MAX_BLOCK_MS).contains(&ms) => Ok(Wait::For(ms)),
        _ => Err(ArgError::BadBlock),
    }
}

/// Checks an owner id: any bytes, NUL included, 1 to 1024 of them.
pub fn check_owner(owner: &[u8]) -> Result<(), ArgError> {
    match owner.len() {
        0 => Err(ArgError::EmptyOwner),
        n if n > MAX_OWNER_LEN => Err(ArgError::OwnerTooLong),
        _ => Ok(()),
    }
}

fn request_id(value: Option<&[u8]>) -> Result<RequestId, ArgError> {
    let value = value.ok_or(ArgError::MissingRequestId)?;
    RequestId::parse(value).map_err(ArgError::BadRequestId)
}

#[derive(Clone, Copy)]
enum Keyword {
    Lease,
    Block,
    Fair,
    Token,
    Session,
    Req,
    Mode(RwMode),
}

impl Keyword {
    fn of(word: &[u8]) -> Option<Keyword> {
        const WORDS: [(&[u8], Keyword); 8] = [
            (b"LEASE", Keyword::Lease),
            (b"BLOCK", Keyword::Block),
            (b"FAIR", Keyword::Fair),
            (b"TOKEN", Keyword::Token),
            (b"SESSION", Keyword::Session),
            (b"REQ", Keyword::Req),
            (b"READ", Keyword::Mode(RwMode::Read)),
            (b"WRITE", Keyword::Mode(RwMode::Write)),
        ];
        WORDS
            .iter()
            .find(|(name, _)| word.eq_ignore_ascii_case(name))
            .map(|(_, keyword)| *keyword)
    }
}

fn once(already_given: bool, name: &'static str) -> Result<(), ArgError> {
    if already_given {
        Err(ArgError::RepeatedOption(name))
    } else {
        Ok(())
    }
}

fn lease_value(value: Option<&[u8]>) -> Result<Lease, ArgError> {
    let value = value.ok_or(ArgError::MissingValue("LEASE"))?;
    parse_i64(value)
        .and_then(Lease::from_ms)
        .ok_or(ArgError::BadLease)
}

/// A user's word, made safe to echo in an error line: at most 64 bytes,
/// anything outside printable ASCII escaped.
pub fn printable(word: &[u8]) -> String {
    let mut shown: String = word
        .iter()
        .take(64)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect();
    if word.len() > 64 {
        shown.push_str("...");
    }
    shown.replace('\'', "\\'")
}
