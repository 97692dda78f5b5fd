//! Integers as Redis writes them.

/// Parses a decimal integer the way Redis does: optional `-`, digits only,
/// no spaces, no `+`, no leading zeros.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let canonical = match digits {
        [] => false,
        [b'0'] => bytes.len() == 1,
        [first, ..] => *first != b'0' && digits.iter().all(u8::is_ascii_digit),
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Room for any `i64` in decimal, sign included.
pub const I64_DIGITS: usize = 20;

/// `n` in decimal, as Redis writes it, into `buffer`, without allocating.
pub fn format_i64(n: i64, buffer: &mut [u8; I64_DIGITS]) -> &[u8] {
    let mut magnitude = n.unsigned_abs();
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        buffer[at] = b'-';
    }
    &buffer[at..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_as_redis_writes_them() {
        for n in [0, 7, -7, 10, 1_234_567, i64::MAX, i64::MIN] {
            let mut buffer = [0; I64_DIGITS];
            let text = format_i64(n, &mut buffer);
            assert_eq!(text, n.to_string().as_bytes());
            assert_eq!(parse_i64(text), Some(n));
        }
    }

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"007"), None);
        assert_eq!(parse_i64(b"99999999999999999999"), None);
    }
}
