//! `RLOCK.SCAN cursor [MATCH pattern] [COUNT n] [TYPE lock|rwlock]`: its arguments,
//! checked as `SCAN` checks its own, and how a hash is told to be a lock.

use std::fmt;

use super::args::printable;
use super::hold::parse_count;
use super::integer::parse_i64;
use super::rwlock::RwMode;

/// The most fields a hash may have and still be taken for a reentrant lock. Redisson's
/// lock has one (its owner); a hash written by hand with a few owners still shows. A
/// larger hash is not read field by field, so a big hash of counters costs nothing.
pub const MAX_LOCK_FIELDS: usize = 64;

/// The two layouts `RLOCK.SCAN` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// Redisson's `RLock`: owner -> positive hold count.
    Lock,
    /// Redisson's `RReadWriteLock`: a `mode` field (`read` or `write`) and the holds.
    ReadWrite,
}

impl LockKind {
    pub fn word(self) -> &'static str {
        match self {
            LockKind::Lock => "lock",
            LockKind::ReadWrite => "rwlock",
        }
    }

    pub fn of_word(word: &[u8]) -> Option<LockKind> {
        if word.eq_ignore_ascii_case(b"lock") {
            Some(LockKind::Lock)
        } else if word.eq_ignore_ascii_case(b"rwlock") {
            Some(LockKind::ReadWrite)
        } else {
            None
        }
    }
}

/// A checked `RLOCK.SCAN` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanArgs {
    /// The cursor as given: decimal digits that fit in 64 bits.
    pub cursor: Vec<u8>,
    pub pattern: Option<Vec<u8>>,
    /// The work of this call, as `SCAN`'s `COUNT` (default 10 there).
    pub count: Option<Vec<u8>>,
    pub kind: Option<LockKind>,
}

/// A bad `RLOCK.SCAN` call; the errors `SCAN` gives for the same mistakes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanArgError {
    InvalidCursor,
    /// An unknown option, an option without its value, or `COUNT` below 1.
    Syntax,
    /// `COUNT` is not an integer.
    NotAnInteger,
    RepeatedOption(&'static str),
    /// The word given, escaped for an error line (`args::printable`).
    UnknownType(String),
}

impl fmt::Display for ScanArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScanArgError::InvalidCursor => write!(f, "ERR invalid cursor"),
            ScanArgError::Syntax => write!(f, "ERR syntax error"),
            ScanArgError::NotAnInteger => write!(f, "ERR value is not an integer or out of range"),
            ScanArgError::RepeatedOption(option) => {
                write!(f, "ERR option {option} given more than once")
            }
            ScanArgError::UnknownType(word) => {
                write!(f, "ERR unknown TYPE '{word}' (use lock or rwlock)")
            }
        }
    }
}

/// Parses the arguments after the command name.
pub fn parse_scan_args(args: &[&[u8]]) -> Result<ScanArgs, ScanArgError> {
    let (cursor, mut rest) = match args {
        [cursor, rest @ ..] => (*cursor, rest),
        [] => return Err(ScanArgError::Syntax),
    };
    let valid_cursor = !cursor.is_empty()
        && cursor.iter().all(u8::is_ascii_digit)
        && std::str::from_utf8(cursor)
            .ok()
            .and_then(|c| c.parse::<u64>().ok())
            .is_some();
    if !valid_cursor {
        return Err(ScanArgError::InvalidCursor);
    }
    let mut out = ScanArgs {
        cursor: cursor.to_vec(),
        pattern: None,
        count: None,
        kind: None,
    };
    while let [option, tail @ ..] = rest {
        let [value, tail @ ..] = tail else {
            return Err(ScanArgError::Syntax);
        };
        rest = tail;
        if option.eq_ignore_ascii_case(b"MATCH") {
            if out.pattern.replace(value.to_vec()).is_some() {
                return Err(ScanArgError::RepeatedOption("MATCH"));
            }
        } else if option.eq_ignore_ascii_case(b"COUNT") {
            let n = parse_i64(value).ok_or(ScanArgError::NotAnInteger)?;
            if n < 1 {
                return Err(ScanArgError::Syntax);
            }
            if out.count.replace(value.to_vec()).is_some() {
                return Err(ScanArgError::RepeatedOption("COUNT"));
            }
        } else if option.eq_ignore_ascii_case(b"TYPE") {
            let kind = LockKind::of_word(value)
                .ok_or_else(|| ScanArgError::UnknownType(printable(value)))?;
            if out.kind.replace(kind).is_some() {
                return Err(ScanArgError::RepeatedOption("TYPE"));
            }
        } else {
            return Err(ScanArgError::Syntax);
        }
    }
    Ok(out)
}

/// What a hash is, from its `mode` field (if any) and its length: a read-write lock
/// needs nothing more; `Unknown` means its fields must be read (`classify_fields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstLook {
    ReadWrite(RwMode),
    NotALock,
    Unknown,
}

pub fn first_look(mode: Option<&[u8]>, fields: usize) -> FirstLook {
    if let Some(mode) = mode.and_then(RwMode::of_word) {
        return FirstLook::ReadWrite(mode);
    }
    if fields == 0 || fields > MAX_LOCK_FIELDS {
        return FirstLook::NotALock;
    }
    FirstLook::Unknown
}

/// Whether a hash with these values (all of them) is a reentrant lock: every value a
/// positive hold count.
pub fn is_lock<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> bool {
    let mut any = false;
    for value in values {
        if parse_count(value).is_err() {
            return false;
        }
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::words;

    #[test]
    fn cursor_alone() {
        let args = parse_scan_args(&words(&["0"])).unwrap();
        assert_eq!(args.cursor, b"0");
        assert_eq!(args.pattern, None);
        assert_eq!(args.count, None);
        assert_eq!(args.kind, None);
        assert!(parse_scan_args(&words(&["18446744073709551615"])).is_ok());
    }

    #[test]
    fn bad_cursors() {
        for cursor in [
            "",
            "-1",
            "x",
            " 1",
            "1 ",
            "18446744073709551616",
            "1.5",
            "+1",
        ] {
            assert_eq!(
                parse_scan_args(&words(&[cursor])),
                Err(ScanArgError::InvalidCursor),
                "{cursor:?}"
            );
        }
    }

    #[test]
    fn options_in_any_order_and_case() {
        let args = parse_scan_args(&words(&[
            "42", "type", "RWLOCK", "Count", "100", "match", "a*",
        ]))
        .unwrap();
        assert_eq!(args.cursor, b"42");
        assert_eq!(args.pattern.as_deref(), Some(&b"a*"[..]));
        assert_eq!(args.count.as_deref(), Some(&b"100"[..]));
        assert_eq!(args.kind, Some(LockKind::ReadWrite));
        assert_eq!(
            parse_scan_args(&words(&["0", "TYPE", "lock"]))
                .unwrap()
                .kind,
            Some(LockKind::Lock)
        );
    }

    #[test]
    fn bad_options() {
        let refused: [(&[&str], ScanArgError); 9] = [
            (&["0", "COUNT", "0"], ScanArgError::Syntax),
            (&["0", "COUNT", "-3"], ScanArgError::Syntax),
            (&["0", "COUNT", "x"], ScanArgError::NotAnInteger),
            (&["0", "COUNT"], ScanArgError::Syntax),
            (&["0", "MATCH"], ScanArgError::Syntax),
            (&["0", "LIMIT", "3"], ScanArgError::Syntax),
            (
                &["0", "TYPE", "hash"],
                ScanArgError::UnknownType("hash".into()),
            ),
            (
                &["0", "COUNT", "1", "COUNT", "2"],
                ScanArgError::RepeatedOption("COUNT"),
            ),
            (&[], ScanArgError::Syntax),
        ];
        for (args, error) in refused {
            assert_eq!(parse_scan_args(&words(args)), Err(error), "{args:?}");
        }
        assert_eq!(
            ScanArgError::UnknownType("hash".into()).to_string(),
            "ERR unknown TYPE 'hash' (use lock or rwlock)"
        );
    }

    #[test]
    fn an_unknown_type_is_echoed_in_printable_ascii() {
        // \xc4\x80 is U+0100: a reply path that truncates chars to bytes made it a NUL.
        let words: [&[u8]; 4] = [b"\xc4\x80", b"a\0b", b"\xff\r\n", "\u{4e00}'".as_bytes()];
        for word in words {
            let Err(error) = parse_scan_args(&[b"0", b"TYPE", word]) else {
                panic!("{word:?} accepted");
            };
            let line = error.to_string();
            assert!(
                line.bytes().all(|b| (0x20..0x7f).contains(&b)),
                "{word:?}: {line:?}"
            );
        }
        assert_eq!(
            parse_scan_args(&[b"0", b"TYPE", b"\xc4\x80"]),
            Err(ScanArgError::UnknownType("\\xc4\\x80".into()))
        );
    }

    #[test]
    fn telling_locks_from_other_hashes() {
        assert_eq!(
            first_look(Some(b"write"), 2),
            FirstLook::ReadWrite(RwMode::Write)
        );
        assert_eq!(
            first_look(Some(b"read"), 1),
            FirstLook::ReadWrite(RwMode::Read)
        );
        assert_eq!(first_look(Some(b"other"), 2), FirstLook::Unknown);
        assert_eq!(first_look(None, 1), FirstLook::Unknown);
        assert_eq!(first_look(None, MAX_LOCK_FIELDS + 1), FirstLook::NotALock);
        assert!(is_lock([&b"1"[..]]));
        assert!(is_lock([&b"3"[..], &b"12"[..]]));
        assert!(!is_lock([&b"0"[..]]));
        assert!(!is_lock([&b"1"[..], &b"x"[..]]));
        assert!(!is_lock([&b"-1"[..]]));
        assert!(!is_lock([&b"01"[..]]));
        assert!(!is_lock(std::iter::empty::<&[u8]>()));
    }
}
