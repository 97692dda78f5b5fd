//! The argument grammar of the RLOCK commands, as typed requests.
//!
//! Option keywords are case-insensitive, may come in any order, and may not repeat.

use std::fmt;

use super::integer::parse_i64;
use super::lease::{Lease, MAX_BLOCK_MS, MAX_LEASE_MS};
use super::requests::{RequestId, RequestIdError};
use super::rwlock::RwMode;
use super::semaphore::{MAX_LEASED_AT_ONCE, MAX_PERMITS};

/// Owners are opaque and binary-safe, but bounded.
pub const MAX_OWNER_LEN: usize = 1024;

/// How many locks one `RLOCK.MACQUIRE` or `RLOCK.MRELEASE` takes.
pub const MAX_MULTI_KEYS: usize = 1024;

/// How long a `BLOCK` waiter may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// `BLOCK 0`, as `BLPOP 0`.
    Forever,
    /// `BLOCK ms` with ms >= 1.
    For(i64),
}

/// Options of `RLOCK.ACQUIRE key owner [READ|WRITE] [LEASE ms] [BLOCK ms] [FAIR] [TOKEN]
/// [SESSION] [REQ id]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    /// `READ` or `WRITE`: a side of a read-write lock; `None` for a reentrant lock.
    pub mode: Option<RwMode>,
    pub lease: Option<Lease>,
    pub block: Option<Wait>,
    pub fair: bool,
    pub token: bool,
    pub session: bool,
    pub req: Option<RequestId>,
}

/// Options of `RLOCK.RENEW key owner [READ|WRITE] [LEASE ms] [REQ id]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenewOptions {
    pub mode: Option<RwMode>,
    pub lease: Option<Lease>,
    pub req: Option<RequestId>,
}

/// Options of `RLOCK.RELEASE key owner [READ|WRITE] [REQ id]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReleaseOptions {
    pub mode: Option<RwMode>,
    pub req: Option<RequestId>,
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
            ArgError::MissingLease => write!(f, "ERR LEASE ms is required"),
            ArgError::NotForMultiKey(option) => write!(
                f,
                "ERR option {option} does not apply to a multi-key acquire"
            ),
        }
    }
}

/// Options of the semaphore and latch commands: `RSEM.ACQUIRE key [PERMITS n] [BLOCK ms]
/// [REQ id]`, `RSEM.LEASE key LEASE ms [PERMITS n] [BLOCK ms] [SESSION] [REQ id]`, ...
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PermitOptions {
    pub permits: Option<i64>,
    pub block: Option<Wait>,
    pub req: Option<RequestId>,
    pub lease: Option<Lease>,
    pub session: bool,
}

/// Which options a semaphore or latch command takes.
#[derive(Debug, Clone, Copy)]
pub struct PermitGrammar {
    /// The most `PERMITS n` may ask for; `None` where the option is not taken.
    pub permits: Option<i64>,
    pub block: bool,
    pub req: bool,
    pub lease: bool,
    pub session: bool,
}

impl PermitGrammar {
    const NONE: PermitGrammar = PermitGrammar {
        permits: None,
        block: false,
        req: false,
        lease: false,
        session: false,
    };
    /// `RSEM.ACQUIRE key [PERMITS n] [BLOCK ms] [REQ id]`.
    pub const ACQUIRE: PermitGrammar = PermitGrammar {
        permits: Some(MAX_PERMITS),
        block: true,
        req: true,
        ..Self::NONE
    };
    /// `RSEM.RELEASE key [PERMITS n] [REQ id]`.
    pub const RELEASE: PermitGrammar = PermitGrammar {
        permits: Some(MAX_PERMITS),
        req: true,
        ..Self::NONE
    };
    /// `RSEM.LEASE key LEASE ms [PERMITS n] [BLOCK ms] [SESSION] [REQ id]`.
    pub const LEASE: PermitGrammar = PermitGrammar {
        permits: Some(MAX_LEASED_AT_ONCE),
        block: true,
        req: true,
        lease: true,
        session: true,
    };
    /// `RSEM.RETURN key id [REQ id]`.
    pub const RETURN: PermitGrammar = PermitGrammar {
        req: true,
        ..Self::NONE
    };
    /// `RSEM.RENEW key id LEASE ms`.
    pub const RENEW: PermitGrammar = PermitGrammar {
        lease: true,
        ..Self::NONE
    };
    /// `RLATCH.AWAIT key [BLOCK ms]`.
    pub const AWAIT: PermitGrammar = PermitGrammar {
        block: true,
        ..Self::NONE
    };
}

/// Parses the options after `key` (and a permit id) of the semaphore and latch commands,
/// each only where the command takes it. `LEASE` is required where it is taken.
pub fn parse_permit_options<'a>(
    words: impl IntoIterator<Item = &'a [u8]>,
    grammar: PermitGrammar,
) -> Result<PermitOptions, ArgError> {
    let mut parsed = PermitOptions::default();
    let mut rest = words.into_iter();
    while let Some(word) = rest.next() {
        match (grammar.permits, Keyword::of(word)) {
            (Some(max), _) if word.eq_ignore_ascii_case(b"PERMITS") => {
                once(parsed.permits.is_some(), "PERMITS")?;
                let value = rest.next().ok_or(ArgError::MissingCount("PERMITS"))?;
                parsed.permits = Some(count_value(value, "PERMITS", 1, max)?);
            }
            (_, Some(Keyword::Block)) if grammar.block => {
                once(parsed.block.is_some(), "BLOCK")?;
                let ms = rest.next().ok_or(ArgError::MissingValue("BLOCK"))?;
                parsed.block = Some(block_value(ms)?);
            }
            (_, Some(Keyword::Req)) if grammar.req => {
                once(parsed.req.is_some(), "REQ")?;
                parsed.req = Some(request_id(rest.next())?);
            }
            (_, Some(Keyword::Lease)) if grammar.lease => {
                once(parsed.lease.is_some(), "LEASE")?;
                parsed.lease = Some(lease_value(rest.next())?);
            }
            (_, Some(Keyword::Session)) if grammar.session => {
                once(parsed.session, "SESSION")?;
                parsed.session = true;
            }
            _ => return Err(ArgError::UnknownOption(printable(word))),
        }
    }
    if grammar.lease && parsed.lease.is_none() {
        return Err(ArgError::MissingLease);
    }
    Ok(parsed)
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

/// Parses the options that follow `key owner` in RLOCK.ACQUIRE.
pub fn parse_acquire_options<'a>(
    options: impl IntoIterator<Item = &'a [u8]>,
) -> Result<AcquireOptions, ArgError> {
    let mut parsed = AcquireOptions::default();
    let mut rest = options.into_iter();
    while let Some(word) = rest.next() {
        match Keyword::of(word) {
            Some(Keyword::Lease) => {
                once(parsed.lease.is_some(), "LEASE")?;
                parsed.lease = Some(lease_value(rest.next())?);
            }
            Some(Keyword::Block) => {
                once(parsed.block.is_some(), "BLOCK")?;
                let ms = rest.next().ok_or(ArgError::MissingValue("BLOCK"))?;
                parsed.block = Some(block_value(ms)?);
            }
            Some(Keyword::Fair) => {
                once(parsed.fair, "FAIR")?;
                parsed.fair = true;
            }
            Some(Keyword::Token) => {
                once(parsed.token, "TOKEN")?;
                parsed.token = true;
            }
            Some(Keyword::Session) => {
                once(parsed.session, "SESSION")?;
                parsed.session = true;
            }
            Some(Keyword::Req) => {
                once(parsed.req.is_some(), "REQ")?;
                parsed.req = Some(request_id(rest.next())?);
            }
            Some(Keyword::Mode(mode)) => set_mode(&mut parsed.mode, mode)?,
            None => return Err(ArgError::UnknownOption(printable(word))),
        }
    }
    // Waiters on a read-write lock are served in arrival order without a queue.
    if parsed.mode.is_some() && parsed.fair {
        return Err(ArgError::NotForReadWrite("FAIR"));
    }
    Ok(parsed)
}

fn set_mode(mode: &mut Option<RwMode>, given: RwMode) -> Result<(), ArgError> {
    if mode.is_some() {
        return Err(ArgError::TwoModes);
    }
    *mode = Some(given);
    Ok(())
}

/// Parses the options that follow `key owner` in RLOCK.RENEW.
pub fn parse_renew_options<'a>(
    options: impl IntoIterator<Item = &'a [u8]>,
) -> Result<RenewOptions, ArgError> {
    let mut parsed = RenewOptions::default();
    let mut rest = options.into_iter();
    while let Some(word) = rest.next() {
        match Keyword::of(word) {
            Some(Keyword::Lease) => {
                once(parsed.lease.is_some(), "LEASE")?;
                parsed.lease = Some(lease_value(rest.next())?);
            }
            Some(Keyword::Req) => {
                once(parsed.req.is_some(), "REQ")?;
                parsed.req = Some(request_id(rest.next())?);
            }
            Some(Keyword::Mode(mode)) => set_mode(&mut parsed.mode, mode)?,
            _ => return Err(ArgError::UnknownOption(printable(word))),
        }
    }
    Ok(parsed)
}

/// Parses the options that follow `key owner` in RLOCK.RELEASE.
pub fn parse_release_options<'a>(
    options: impl IntoIterator<Item = &'a [u8]>,
) -> Result<ReleaseOptions, ArgError> {
    let mut parsed = ReleaseOptions::default();
    let mut rest = options.into_iter();
    while let Some(word) = rest.next() {
        match Keyword::of(word) {
            Some(Keyword::Req) => {
                once(parsed.req.is_some(), "REQ")?;
                parsed.req = Some(request_id(rest.next())?);
            }
            Some(Keyword::Mode(mode)) => set_mode(&mut parsed.mode, mode)?,
            _ => return Err(ArgError::UnknownOption(printable(word))),
        }
    }
    Ok(parsed)
}

/// Checks `numkeys key [key ...] rest...` of `RLOCK.MACQUIRE` and `RLOCK.MRELEASE`,
/// with `words` the words after `numkeys`: how many of them are keys. Keys must be
/// distinct.
pub fn key_count(numkeys: &[u8], words: &[&[u8]]) -> Result<usize, ArgError> {
    let count = parse_i64(numkeys)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| (1..=MAX_MULTI_KEYS).contains(n))
        .ok_or(ArgError::BadKeyCount)?;
    let keys = words.get(..count).ok_or(ArgError::MissingKeys)?;
    let mut seen = std::collections::HashSet::with_capacity(count);
    if !keys.iter().all(|key| seen.insert(*key)) {
        return Err(ArgError::RepeatedKey);
    }
    Ok(count)
}

/// Parses the options after the keys of `RLOCK.MACQUIRE`: `LEASE`, `BLOCK`, `SESSION`.
pub fn parse_multi_acquire_options<'a>(
    words: impl IntoIterator<Item = &'a [u8]>,
) -> Result<AcquireOptions, ArgError> {
    let parsed = parse_acquire_options(words)?;
    let refused = [
        (parsed.fair, "FAIR"),
        (parsed.token, "TOKEN"),
        (parsed.mode.is_some(), "READ or WRITE"),
        (parsed.req.is_some(), "REQ"),
    ];
    match refused.into_iter().find(|(given, _)| *given) {
        Some((_, option)) => Err(ArgError::NotForMultiKey(option)),
        None => Ok(parsed),
    }
}

/// `RLOCK.MRELEASE` takes no options after its keys.
pub fn check_no_options<'a>(words: impl IntoIterator<Item = &'a [u8]>) -> Result<(), ArgError> {
    match words.into_iter().next() {
        Some(word) => Err(ArgError::UnknownOption(printable(word))),
        None => Ok(()),
    }
}

/// `RLOCK.TOP [COUNT n]`: the count asked for, `MAX_TOP_COUNT` at most, 10 if not given.
pub fn parse_top_count<'a>(words: impl IntoIterator<Item = &'a [u8]>) -> Result<usize, ArgError> {
    let mut count = None;
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        if !word.eq_ignore_ascii_case(b"COUNT") {
            return Err(ArgError::UnknownOption(printable(word)));
        }
        once(count.is_some(), "COUNT")?;
        let value = words.next().ok_or(ArgError::MissingCount("COUNT"))?;
        count = Some(count_value(value, "COUNT", 1, MAX_TOP_COUNT)? as usize);
    }
    Ok(count.unwrap_or(10))
}

/// The most keys `RLOCK.TOP` shows (and the most its history remembers).
pub const MAX_TOP_COUNT: i64 = 1000;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_count() {
        let none: [&[u8]; 0] = [];
        assert_eq!(parse_top_count(none), Ok(10));
        assert_eq!(parse_top_count([&b"count"[..], b"1000"]), Ok(1000));
        for bad in [
            &[&b"COUNT"[..], b"0"][..],
            &[b"COUNT", b"1001"],
            &[b"COUNT", b"x"],
            &[b"COUNT"],
            &[b"COUNT", b"1", b"COUNT", b"2"],
            &[b"LIMIT", b"1"],
        ] {
            assert!(parse_top_count(bad.iter().copied()).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_top_count([&b"COUNT"[..], b"0"])
                .unwrap_err()
                .to_string(),
            "ERR COUNT must be an integer from 1 to 1000"
        );
    }

    fn acquire(words: &[&str]) -> Result<AcquireOptions, ArgError> {
        let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        parse_acquire_options(words)
    }

    #[test]
    fn no_options_means_defaults() {
        assert_eq!(acquire(&[]), Ok(AcquireOptions::default()));
    }

    #[test]
    fn options_in_any_order_and_case() {
        let parsed = acquire(&["token", "Block", "0", "LEASE", "500", "fair", "SeSsIoN"]).unwrap();
        assert_eq!(parsed.lease, Lease::from_ms(500));
        assert_eq!(parsed.block, Some(Wait::Forever));
        assert!(parsed.fair && parsed.token && parsed.session);
        assert_eq!(
            acquire(&["BLOCK", "250"]).unwrap().block,
            Some(Wait::For(250))
        );
    }

    #[test]
    fn repeated_options_are_refused() {
        assert_eq!(
            acquire(&["LEASE", "1", "lease", "2"]),
            Err(ArgError::RepeatedOption("LEASE"))
        );
        assert_eq!(
            acquire(&["TOKEN", "TOKEN"]),
            Err(ArgError::RepeatedOption("TOKEN"))
        );
        assert_eq!(
            acquire(&["FAIR", "fair"]),
            Err(ArgError::RepeatedOption("FAIR"))
        );
    }

    #[test]
    fn bad_leases_are_refused() {
        for bad in [
            "0",
            "-1",
            "abc",
            "1.5",
            "",
            " 5",
            "+5",
            "05",
            "1099511627777",
        ] {
            assert_eq!(acquire(&["LEASE", bad]), Err(ArgError::BadLease), "{bad:?}");
        }
        assert_eq!(
            acquire(&["LEASE", "1099511627776"])
                .unwrap()
                .lease
                .map(Lease::ms),
            Some(1 << 40)
        );
        assert_eq!(acquire(&["LEASE"]), Err(ArgError::MissingValue("LEASE")));
    }

    #[test]
    fn bad_blocks_are_refused() {
        for bad in ["-1", "x", "1099511627777"] {
            assert_eq!(acquire(&["BLOCK", bad]), Err(ArgError::BadBlock), "{bad:?}");
        }
        assert_eq!(acquire(&["BLOCK"]), Err(ArgError::MissingValue("BLOCK")));
    }

    #[test]
    fn unknown_options_are_named_safely() {
        assert_eq!(acquire(&["NX"]), Err(ArgError::UnknownOption("NX".into())));
        let err = parse_acquire_options([&b"a\0\r\n'"[..]]).unwrap_err();
        assert_eq!(err.to_string(), "ERR unknown option 'a\\x00\\r\\n\\\\''");
        assert!(!err.to_string().contains('\0'));
    }

    #[test]
    fn renew_takes_only_a_lease() {
        let words: [&[u8]; 2] = [b"lease", b"10"];
        assert_eq!(
            parse_renew_options(words).unwrap().lease,
            Lease::from_ms(10)
        );
        assert!(matches!(
            parse_renew_options([&b"TOKEN"[..]]),
            Err(ArgError::UnknownOption(_))
        ));
    }

    #[test]
    fn read_and_write_pick_a_side_once() {
        assert_eq!(acquire(&["read"]).unwrap().mode, Some(RwMode::Read));
        assert_eq!(
            acquire(&["LEASE", "5", "Write"]).unwrap().mode,
            Some(RwMode::Write)
        );
        assert_eq!(acquire(&["READ", "WRITE"]), Err(ArgError::TwoModes));
        assert_eq!(acquire(&["READ", "READ"]), Err(ArgError::TwoModes));
        assert_eq!(
            acquire(&["READ", "FAIR"]),
            Err(ArgError::NotForReadWrite("FAIR"))
        );
        let with_req = acquire(&["WRITE", "REQ", "r-1"]).unwrap();
        assert_eq!(with_req.mode, Some(RwMode::Write));
        assert!(with_req.req.is_some());
        let words: [&[u8]; 3] = [b"READ", b"REQ", b"r-1"];
        assert!(parse_release_options(words).unwrap().req.is_some());
        assert!(parse_renew_options(words).unwrap().req.is_some());
        let words: [&[u8]; 1] = [b"write"];
        assert_eq!(
            parse_release_options(words).unwrap().mode,
            Some(RwMode::Write)
        );
        assert_eq!(
            parse_renew_options(words).unwrap().mode,
            Some(RwMode::Write)
        );
    }

    #[test]
    fn owners_are_binary_but_bounded() {
        assert_eq!(check_owner(b""), Err(ArgError::EmptyOwner));
        assert_eq!(check_owner(b"\0\xff\r\n"), Ok(()));
        assert_eq!(check_owner(&[b'x'; 1024]), Ok(()));
        assert_eq!(check_owner(&[b'x'; 1025]), Err(ArgError::OwnerTooLong));
    }

    #[test]
    fn multi_key_calls_name_distinct_keys_then_options() {
        let words: Vec<&[u8]> = vec![b"a", b"b", b"LEASE", b"5"];
        assert_eq!(key_count(b"2", &words), Ok(2));
        assert_eq!(key_count(b"3", &words[..2]), Err(ArgError::MissingKeys));
        for bad in [&b"0"[..], b"-1", b"x", b"1025"] {
            assert_eq!(key_count(bad, &words), Err(ArgError::BadKeyCount));
        }
        let twice: Vec<&[u8]> = vec![b"a", b"a"];
        assert_eq!(key_count(b"2", &twice), Err(ArgError::RepeatedKey));
        let options = parse_multi_acquire_options(words[2..].iter().copied()).unwrap();
        assert_eq!(options.lease, Lease::from_ms(5));
        for (words, option) in [
            (&["FAIR"][..], "FAIR"),
            (&["TOKEN"], "TOKEN"),
            (&["WRITE"], "READ or WRITE"),
            (&["REQ", "r"], "REQ"),
        ] {
            let words = words.iter().map(|w| w.as_bytes());
            assert_eq!(
                parse_multi_acquire_options(words),
                Err(ArgError::NotForMultiKey(option))
            );
        }
        let session = parse_multi_acquire_options([&b"SESSION"[..], b"BLOCK", b"0"]).unwrap();
        assert!(session.session);
        assert_eq!(session.block, Some(Wait::Forever));
    }

    #[test]
    fn permit_options_take_what_the_command_takes() {
        let words = |w: &'static [&'static str]| w.iter().map(|w| w.as_bytes());
        let all = PermitGrammar::ACQUIRE;
        let no_block = PermitGrammar::RELEASE;
        let parsed = parse_permit_options(words(&["permits", "3", "BLOCK", "0"]), all);
        assert_eq!(
            parsed,
            Ok(PermitOptions {
                permits: Some(3),
                block: Some(Wait::Forever),
                ..PermitOptions::default()
            })
        );
        let bad_count = ArgError::BadCount {
            what: "PERMITS",
            min: 1,
            max: MAX_PERMITS,
        };
        for bad in ["0", "-1", "x", "2147483648"] {
            let got = parse_permit_options([&b"PERMITS"[..], bad.as_bytes()], no_block);
            assert_eq!(got, Err(bad_count.clone()), "{bad}");
        }
        assert_eq!(
            parse_permit_options(words(&["BLOCK", "5"]), no_block),
            Err(ArgError::UnknownOption("BLOCK".into()))
        );
        assert_eq!(
            parse_permit_options(words(&["PERMITS", "1", "PERMITS", "2"]), all),
            Err(ArgError::RepeatedOption("PERMITS"))
        );
        assert_eq!(
            parse_permit_options(words(&["PERMITS"]), all),
            Err(ArgError::MissingCount("PERMITS"))
        );
        assert_eq!(count_value(b"-5", "n", -10, 10), Ok(-5));
        let with_req = parse_permit_options(words(&["REQ", "r-1"]), all).unwrap();
        assert!(with_req.req.is_some());
        let latch = PermitGrammar::AWAIT;
        assert_eq!(
            parse_permit_options(words(&["REQ", "r-1"]), latch),
            Err(ArgError::UnknownOption("REQ".into()))
        );
        let lease = PermitGrammar::LEASE;
        assert_eq!(
            parse_permit_options(words(&["PERMITS", "2"]), lease),
            Err(ArgError::MissingLease)
        );
        let parsed =
            parse_permit_options(words(&["lease", "500", "SESSION", "PERMITS", "2"]), lease)
                .unwrap();
        assert_eq!(parsed.lease.map(|l| l.ms()), Some(500));
        assert!(parsed.session && parsed.permits == Some(2));
        assert_eq!(
            parse_permit_options(words(&["LEASE", "5", "PERMITS", "1025"]), lease),
            Err(ArgError::BadCount {
                what: "PERMITS",
                min: 1,
                max: MAX_LEASED_AT_ONCE
            })
        );
        assert_eq!(
            parse_permit_options(words(&["LEASE", "5", "SESSION"]), PermitGrammar::RENEW),
            Err(ArgError::UnknownOption("SESSION".into()))
        );
        assert_eq!(
            parse_permit_options(words(&["SESSION"]), PermitGrammar::ACQUIRE),
            Err(ArgError::UnknownOption("SESSION".into()))
        );
    }
}
