//! The grammar of the multi-key commands: `RLOCK.MACQUIRE` and `RLOCK.MRELEASE`.

use super::lock::parse_acquire_options;
use super::{parse_i64, printable, AcquireOptions, ArgError};

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
}
