//! The grammar of `RLOCK.GUARD key owner [READ|WRITE] [TOKEN n] CALL command [arg ...]`:
//! options up to `CALL`, then the inner command, taken as it is.

use super::{once, printable, set_mode, ArgError, Keyword};
use crate::core::integer::parse_i64;
use crate::core::rwlock::RwMode;

/// The options before `CALL`, and where the inner command starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardOptions {
    pub mode: Option<RwMode>,
    /// `TOKEN n`: the hold must still be the one that got fencing token `n`.
    pub token: Option<i64>,
    /// The inner command's name, as an index into the words after `key owner`.
    pub command_at: usize,
}

/// Parses the words after `key owner`: options, `CALL`, then at least a command name.
pub fn parse_guard_options(words: &[&[u8]]) -> Result<GuardOptions, ArgError> {
    let (mut mode, mut token) = (None, None);
    let mut at = 0;
    while at < words.len() {
        let word = words[at];
        if word.eq_ignore_ascii_case(b"CALL") {
            return match at + 1 < words.len() {
                true => Ok(GuardOptions {
                    mode,
                    token,
                    command_at: at + 1,
                }),
                false => Err(ArgError::MissingCall),
            };
        }
        match Keyword::of(word) {
            Some(Keyword::Token) => {
                once(token.is_some(), "TOKEN")?;
                let value = words.get(at + 1).ok_or(ArgError::MissingToken)?;
                token = Some(
                    parse_i64(value)
                        .filter(|n| *n >= 0)
                        .ok_or(ArgError::BadToken)?,
                );
                at += 1;
            }
            Some(Keyword::Mode(side)) => set_mode(&mut mode, side)?,
            _ => return Err(ArgError::UnknownOption(printable(word))),
        }
        at += 1;
    }
    Err(ArgError::MissingCall)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<GuardOptions, ArgError> {
        parse_guard_options(&crate::core::words(words))
    }

    #[test]
    fn options_come_before_call_and_the_command_after_it() {
        let plain = parse(&["CALL", "SET", "x", "1"]).unwrap();
        assert_eq!((plain.mode, plain.token, plain.command_at), (None, None, 1));
        let full = parse(&["token", "7", "Write", "call", "get", "TOKEN"]).unwrap();
        assert_eq!(full.mode, Some(RwMode::Write));
        assert_eq!(full.token, Some(7));
        assert_eq!(full.command_at, 4);
        // Words after CALL are the inner command's, keywords or not.
        assert_eq!(parse(&["CALL", "CALL"]).unwrap().command_at, 1);
    }

    #[test]
    fn bad_calls_are_refused() {
        assert_eq!(parse(&[]), Err(ArgError::MissingCall));
        assert_eq!(parse(&["READ"]), Err(ArgError::MissingCall));
        assert_eq!(parse(&["CALL"]), Err(ArgError::MissingCall));
        assert_eq!(parse(&["TOKEN"]), Err(ArgError::MissingToken));
        assert_eq!(
            parse(&["TOKEN", "x", "CALL", "GET"]),
            Err(ArgError::BadToken)
        );
        assert_eq!(
            parse(&["TOKEN", "-1", "CALL", "GET"]),
            Err(ArgError::BadToken)
        );
        assert_eq!(
            parse(&["TOKEN", "07", "CALL", "GET"]),
            Err(ArgError::BadToken)
        );
        assert_eq!(
            parse(&["TOKEN", "1", "TOKEN", "1", "CALL", "GET"]),
            Err(ArgError::RepeatedOption("TOKEN"))
        );
        assert_eq!(
            parse(&["READ", "WRITE", "CALL", "GET"]),
            Err(ArgError::TwoModes)
        );
        assert_eq!(
            parse(&["LEASE", "5", "CALL", "GET"]),
            Err(ArgError::UnknownOption("LEASE".into()))
        );
    }
}
