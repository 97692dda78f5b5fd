//! The grammar of the lock commands: `RLOCK.ACQUIRE`, `RLOCK.RENEW` and `RLOCK.RELEASE`,
//! reentrant or a side of a read-write lock (`READ`, `WRITE`).

use super::{block_value, lease_value, once, printable, request_id, ArgError, Keyword, Wait};
use crate::core::lease::Lease;
use crate::core::requests::RequestId;
use crate::core::rwlock::RwMode;

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

/// Parses the options that follow `key owner` in RLOCK.ACQUIRE.
pub fn parse_acquire_options<'a>(
    options: impl IntoIterator<Item = &'a [u8]>,
) -> Result<AcquireOptions, ArgError> {
    let parsed = parse_lock_options(options, |_| true)?;
    // Waiters on a read-write lock are served in arrival order without a queue.
    if parsed.mode.is_some() && parsed.fair {
        return Err(ArgError::NotForReadWrite("FAIR"));
    }
    Ok(parsed)
}

/// Parses the options that follow `key owner` in RLOCK.RENEW.
pub fn parse_renew_options<'a>(
    options: impl IntoIterator<Item = &'a [u8]>,
) -> Result<RenewOptions, ArgError> {
    let parsed = parse_lock_options(options, |keyword| {
        matches!(keyword, Keyword::Lease | Keyword::Req | Keyword::Mode(_))
    })?;
    Ok(RenewOptions {
        mode: parsed.mode,
        lease: parsed.lease,
        req: parsed.req,
    })
}

/// Parses the options that follow `key owner` in RLOCK.RELEASE.
pub fn parse_release_options<'a>(
    options: impl IntoIterator<Item = &'a [u8]>,
) -> Result<ReleaseOptions, ArgError> {
    let parsed = parse_lock_options(options, |keyword| {
        matches!(keyword, Keyword::Req | Keyword::Mode(_))
    })?;
    Ok(ReleaseOptions {
        mode: parsed.mode,
        req: parsed.req,
    })
}

/// The one grammar of the lock commands' options: a keyword the command does not
/// `take` is an unknown option, as any other word.
fn parse_lock_options<'a>(
    options: impl IntoIterator<Item = &'a [u8]>,
    takes: impl Fn(Keyword) -> bool,
) -> Result<AcquireOptions, ArgError> {
    let mut parsed = AcquireOptions::default();
    let mut rest = options.into_iter();
    while let Some(word) = rest.next() {
        match Keyword::of(word).filter(|keyword| takes(*keyword)) {
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
    Ok(parsed)
}

pub(super) fn set_mode(mode: &mut Option<RwMode>, given: RwMode) -> Result<(), ArgError> {
    if mode.is_some() {
        return Err(ArgError::TwoModes);
    }
    *mode = Some(given);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::args::check_owner;

    fn acquire(words: &[&str]) -> Result<AcquireOptions, ArgError> {
        parse_acquire_options(crate::core::words(words))
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
}
