//! The grammar of the multi-key commands: `RLOCK.MACQUIRE` and `RLOCK.MRELEASE`.

use super::lock::parse_acquire_options;
use super::{once, parse_i64, printable, request_id, AcquireOptions, ArgError, Keyword};
use crate::core::requests::RequestId;

/// How many locks one `RLOCK.MACQUIRE` or `RLOCK.MRELEASE` takes.
pub const MAX_MULTI_KEYS: usize = 1024;

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

/// Parses the options after the keys of `RLOCK.MACQUIRE`: `LEASE`, `BLOCK`, `SESSION`,
/// `REQ`.
pub fn parse_multi_acquire_options<'a>(
    words: impl IntoIterator<Item = &'a [u8]>,
) -> Result<AcquireOptions, ArgError> {
    let parsed = parse_acquire_options(words)?;
    let refused = [
        (parsed.fair, "FAIR"),
        (parsed.token, "TOKEN"),
        (parsed.mode.is_some(), "READ or WRITE"),
    ];
    match refused.into_iter().find(|(given, _)| *given) {
        Some((_, option)) => Err(ArgError::NotForMultiKey(option)),
        None => Ok(parsed),
    }
}

/// Parses the options after the keys of `RLOCK.MRELEASE`: `REQ id` alone.
pub fn parse_multi_release_options<'a>(
    words: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Option<RequestId>, ArgError> {
    let mut req = None;
    let mut rest = words.into_iter();
    while let Some(word) = rest.next() {
        match Keyword::of(word) {
            Some(Keyword::Req) => {
                once(req.is_some(), "REQ")?;
                req = Some(request_id(rest.next())?);
            }
            _ => return Err(ArgError::UnknownOption(printable(word))),
        }
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::args::Wait;
    use crate::core::lease::Lease;

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
        let req = parse_multi_acquire_options([&b"REQ"[..], b"r1"]).unwrap();
        assert_eq!(req.req, Some(RequestId::parse(b"r1").unwrap()));
    }

    #[test]
    fn a_multi_key_release_takes_a_request_id_alone() {
        use crate::core::words;
        assert_eq!(parse_multi_release_options(words(&[])), Ok(None));
        assert_eq!(
            parse_multi_release_options(words(&["req", "u1"])),
            Ok(Some(RequestId::parse(b"u1").unwrap()))
        );
        for (given, error) in [
            (&["REQ"][..], ArgError::MissingRequestId),
            (&["REQ", "a", "REQ", "b"], ArgError::RepeatedOption("REQ")),
            (&["LEASE", "10"], ArgError::UnknownOption("LEASE".into())),
            (&["READ"], ArgError::UnknownOption("READ".into())),
            (
                &["REQ", "a{b"],
                ArgError::BadRequestId(crate::core::requests::RequestIdError::Braces),
            ),
        ] {
            assert_eq!(parse_multi_release_options(words(given)), Err(error));
        }
    }
}
