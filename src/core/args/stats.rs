//! The grammar of `RLOCK.TOP`.

use super::{count_value, once, printable, ArgError};

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
}
