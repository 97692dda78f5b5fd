//! Idempotent retries (`REQ id`): what a call that changed a lock leaves behind so
//! that the same call, sent again, replies the same and changes nothing.
//!
//! The record is a string key beside the lock, `rlock_request:{K}:<id>`, so it
//! replicates and fails over with the lock. Its value names the command and the
//! owner, so an id reused for another call is refused rather than misread.

use std::fmt;

/// Request ids are short and free of hash-tag braces, so the record stays in the
/// lock's cluster slot whatever the lock's name.
pub const MAX_REQUEST_ID_LEN: usize = 64;

/// Record keys: `rlock_request:{K}:<id>` (Redisson's prefix rule, then the id).
pub const REQUEST_PREFIX: &[u8] = b"rlock_request";

/// A request id, kept inline so options stay `Copy`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RequestId {
    len: u8,
    bytes: [u8; MAX_REQUEST_ID_LEN],
}

impl RequestId {
    /// Checks an id: 1 to 64 bytes, no `{` or `}`.
    pub fn parse(id: &[u8]) -> Result<RequestId, RequestIdError> {
        if id.is_empty() || id.len() > MAX_REQUEST_ID_LEN {
            return Err(RequestIdError::Length);
        }
        if id.iter().any(|b| matches!(b, b'{' | b'}')) {
            return Err(RequestIdError::Braces);
        }
        let mut bytes = [0u8; MAX_REQUEST_ID_LEN];
        bytes[..id.len()].copy_from_slice(id);
        Ok(RequestId {
            len: id.len() as u8,
            bytes,
        })
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "RequestId({:?})",
            String::from_utf8_lossy(self.as_bytes())
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestIdError {
    Length,
    Braces,
}

impl fmt::Display for RequestIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestIdError::Length => {
                write!(f, "ERR REQ id must be 1 to {MAX_REQUEST_ID_LEN} bytes")
            }
            RequestIdError::Braces => write!(f, "ERR REQ id must not contain '{{' or '}}'"),
        }
    }
}

/// The command a record answers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Acquire,
    Release,
    Renew,
    /// `RSEM.LEASE`: the record keeps the permit ids it granted where others keep an owner.
    Lease,
    /// `RSEM.RETURN`.
    Return,
    /// `RLOCK.MACQUIRE`: recorded on the first key it names.
    MultiAcquire,
    /// `RLOCK.MRELEASE`: recorded on the first key it names.
    MultiRelease,
}

impl RequestKind {
    fn letter(self) -> u8 {
        match self {
            RequestKind::Acquire => b'A',
            RequestKind::Release => b'R',
            RequestKind::Renew => b'N',
            RequestKind::Lease => b'L',
            RequestKind::Return => b'T',
            RequestKind::MultiAcquire => b'M',
            RequestKind::MultiRelease => b'U',
        }
    }
}

/// The record's name beside lock `lock_key` (whose helper name is `helper`).
pub fn record_key(helper: &[u8], id: &RequestId) -> Vec<u8> {
    let mut name = Vec::with_capacity(helper.len() + 1 + id.as_bytes().len());
    name.extend_from_slice(helper);
    name.push(b':');
    name.extend_from_slice(id.as_bytes());
    name
}

/// `<kind>:<reply>:<owner>`, e.g. `A:1:worker-7`.
pub fn encode(kind: RequestKind, reply: i64, owner: &[u8]) -> Vec<u8> {
    let mut value = vec![kind.letter(), b':'];
    value.extend_from_slice(reply.to_string().as_bytes());
    value.push(b':');
    value.extend_from_slice(owner);
    value
}

/// What an existing record says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The same call ran before: reply this, change nothing.
    Reply(i64),
    /// The id was used by another owner or command.
    Conflict,
}

/// Reads a record against the call that presents its id.
pub fn replay(record: &[u8], kind: RequestKind, owner: &[u8]) -> Replay {
    match parse(record) {
        Some((letter, reply, recorded_owner))
            if letter == kind.letter() && recorded_owner == owner =>
        {
            Replay::Reply(reply)
        }
        _ => Replay::Conflict,
    }
}

/// The permit ids (their hex, one after the other) an `RSEM.LEASE` record granted;
/// `None` when the record is another call's.
pub fn leased_ids(record: &[u8]) -> Option<&[u8]> {
    match parse(record)? {
        (letter, _, ids) if letter == RequestKind::Lease.letter() => Some(ids),
        _ => None,
    }
}

/// `<kind>:<reply>:<owner>` taken apart.
fn parse(record: &[u8]) -> Option<(u8, i64, &[u8])> {
    let (&letter, rest) = record.split_first()?;
    let rest = rest.strip_prefix(b":")?;
    let colon = rest.iter().position(|b| *b == b':')?;
    let reply = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    Some((letter, reply, &rest[colon + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_short_and_brace_free() {
        assert_eq!(RequestId::parse(b"").unwrap_err(), RequestIdError::Length);
        assert_eq!(
            RequestId::parse(&[b'a'; 65]).unwrap_err(),
            RequestIdError::Length
        );
        assert_eq!(
            RequestId::parse(b"a{b").unwrap_err(),
            RequestIdError::Braces
        );
        assert_eq!(
            RequestId::parse(b"a}b").unwrap_err(),
            RequestIdError::Braces
        );
        let id = RequestId::parse(&[b'x'; 64]).unwrap();
        assert_eq!(id.as_bytes(), &[b'x'; 64][..]);
        assert_eq!(RequestId::parse(b"\0\xff").unwrap().as_bytes(), b"\0\xff");
    }

    #[test]
    fn a_record_replays_only_for_its_own_call() {
        let record = encode(RequestKind::Acquire, 3, b"own:er");
        assert_eq!(record, b"A:3:own:er");
        let negative = encode(RequestKind::Renew, -1, b"o");
        for (record, kind, owner, replayed) in [
            (
                &record,
                RequestKind::Acquire,
                &b"own:er"[..],
                Replay::Reply(3),
            ),
            (&record, RequestKind::Acquire, b"other", Replay::Conflict),
            (&record, RequestKind::Release, b"own:er", Replay::Conflict),
            (&negative, RequestKind::Renew, b"o", Replay::Reply(-1)),
        ] {
            assert_eq!(replay(record, kind, owner), replayed, "{kind:?}");
        }
    }

    #[test]
    fn multi_key_records_are_their_own_calls() {
        let acquired = encode(RequestKind::MultiAcquire, 2, b"o");
        assert_eq!(acquired, b"M:2:o");
        let released = encode(RequestKind::MultiRelease, 1, b"o");
        assert_eq!(released, b"U:1:o");
        let single = encode(RequestKind::Acquire, 1, b"o");
        for (record, kind, replayed) in [
            (&acquired, RequestKind::MultiAcquire, Replay::Reply(2)),
            (&released, RequestKind::MultiRelease, Replay::Reply(1)),
            (&acquired, RequestKind::Acquire, Replay::Conflict),
            (&acquired, RequestKind::MultiRelease, Replay::Conflict),
            (&released, RequestKind::Release, Replay::Conflict),
            (&released, RequestKind::MultiAcquire, Replay::Conflict),
            (&single, RequestKind::MultiAcquire, Replay::Conflict),
        ] {
            assert_eq!(replay(record, kind, b"o"), replayed, "{kind:?}");
        }
    }

    #[test]
    fn a_lease_record_gives_back_its_ids() {
        let record = encode(RequestKind::Lease, 2, b"00ffaa11");
        assert_eq!(leased_ids(&record), Some(&b"00ffaa11"[..]));
        assert_eq!(leased_ids(b"A:1:00ff"), None);
        assert_eq!(leased_ids(b"L"), None);
        assert_eq!(
            replay(&record, RequestKind::Acquire, b"00ffaa11"),
            Replay::Conflict
        );
    }

    #[test]
    fn a_foreign_value_is_a_conflict() {
        for value in [&b""[..], b"A", b"A:", b"A:x:o", b"A:1", b"Z:1:o"] {
            assert_eq!(
                replay(value, RequestKind::Acquire, b"o"),
                Replay::Conflict,
                "{value:?}"
            );
        }
    }

    #[test]
    fn record_keys_keep_the_lock_slot() {
        assert_eq!(
            record_key(b"rlock_request:{orders}", &RequestId::parse(b"r1").unwrap()),
            b"rlock_request:{orders}:r1"
        );
    }
}
