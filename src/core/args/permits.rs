//! The grammar of the semaphore and latch commands (`RSEM.*`, `RLATCH.AWAIT`): one
//! parser, told by each command's `PermitGrammar` which options it takes.

use super::Wait;
use super::{
    block_value, count_value, lease_value, once, printable, request_id, ArgError, Keyword,
};
use crate::core::lease::Lease;
use crate::core::requests::RequestId;
use crate::core::semaphore::{MAX_LEASED_AT_ONCE, MAX_PERMITS};

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

#[cfg(test)]
mod tests {
    use super::*;

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
