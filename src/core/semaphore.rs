//! Redisson's semaphores (`RSemaphore`, `RPermitExpirableSemaphore`), free of Redis:
//! permit counts, the order blocked waiters are served in, permit ids.

use std::fmt;

use super::integer::parse_i64;

/// Redisson's score for a permit leased without a lease: it never expires.
pub const NO_LEASE_SCORE: i64 = 922_337_203_685_477;

/// The most permits one call takes or gives (Redisson's are Java `int`s).
pub const MAX_PERMITS: i64 = i32::MAX as i64;

/// The most permits one `RSEM.LEASE` takes: each gets an id in the reply.
pub const MAX_LEASED_AT_ONCE: i64 = 1024;

/// How often a semaphore with acquires blocked here is looked at, for permits given back
/// by clients whose writes the module does not hear (Redisson's scripts write strings,
/// which raise no event a module hears).
pub const PERMIT_POLL_MS: i64 = 10;

/// The deadline (unix ms, server clock) of a lease of `lease_ms` taken at `now`: below
/// the no-lease score, so it always ends.
pub fn lease_deadline(now: i64, lease_ms: i64) -> i64 {
    now.saturating_add(lease_ms).min(NO_LEASE_SCORE - 1)
}

/// When the earliest lease of a semaphore ends, from the lowest score of its zset at or
/// above 0; `None` when there is none, or it is a permit without lease (Redisson's
/// no-lease score, or anything past it, never ends). A score below 0 is nobody's deadline
/// (Redisson's reclaim starts at 0): `None`.
pub fn earliest_lease_end(lowest_score: Option<f64>) -> Option<i64> {
    let score = lowest_score?;
    (0.0..NO_LEASE_SCORE as f64)
        .contains(&score)
        .then_some(score as i64)
}

/// When a semaphore next needs a look: at its earliest lease's end, and every
/// `PERMIT_POLL_MS` while acquires wait here. `None`: never.
pub fn next_look(now: i64, earliest_lease_end: Option<i64>, has_waiters: bool) -> Option<i64> {
    let poll = has_waiters.then_some(now + PERMIT_POLL_MS);
    match (poll, earliest_lease_end) {
        (Some(poll), Some(end)) => Some(poll.min(end)),
        (poll, end) => poll.or(end),
    }
}

/// What a semaphore's or a latch's string holds: a decimal integer, as Redisson writes it
/// (`SET`, `INCRBY`, `DECRBY`, or a Lua number that prints as an integer). `None` for
/// anything else.
pub fn parse_count(stored: &[u8]) -> Option<i64> {
    parse_i64(stored)
}

/// How many of the blocked acquires, oldest first, wanting `wanted` permits each, are
/// served when `available` permits are there: the longest run from the head that fits.
/// A large request at the head is never overtaken by smaller ones behind it.
pub fn served_from_head(mut available: i64, wanted: impl IntoIterator<Item = i64>) -> usize {
    let mut served = 0;
    for n in wanted {
        if n > available {
            break;
        }
        available -= n;
        served += 1;
    }
    served
}

/// The total after adding `delta` to `available`, or `None` past `i64`.
pub fn added(available: i64, delta: i64) -> Option<i64> {
    available.checked_add(delta)
}

/// A leased permit's id: 16 bytes in the zset, as Redisson makes them; users see 32
/// lower-case hex characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PermitId(pub [u8; 16]);

impl PermitId {
    /// The id from its 32 hex characters (either case); `None` for anything else.
    pub fn parse_hex(text: &[u8]) -> Option<PermitId> {
        if text.len() != 32 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, pair) in text.chunks(2).enumerate() {
            let digit = |c: u8| (c as char).to_digit(16);
            bytes[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Some(PermitId(bytes))
    }

    /// The id from the zset's raw member, if it is one.
    pub fn from_raw(raw: &[u8]) -> Option<PermitId> {
        raw.try_into().ok().map(PermitId)
    }
}

impl PermitId {
    /// The 32 lower-case hex characters users see.
    pub fn hex(&self) -> [u8; 32] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut shown = [0u8; 32];
        for (i, byte) in self.0.iter().enumerate() {
            shown[2 * i] = DIGITS[usize::from(byte >> 4)];
            shown[2 * i + 1] = DIGITS[usize::from(byte & 0x0f)];
        }
        shown
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Hex digits are ASCII.
        f.write_str(std::str::from_utf8(&self.hex()).unwrap_or_default())
    }
}

/// Makes permit ids: 128 bits from a splitmix64 stream seeded once (time, process), so
/// ids do not repeat within a server's life nor, in practice, across servers.
#[derive(Debug)]
pub struct PermitIds {
    state: u64,
}

impl PermitIds {
    pub fn new(seed: u64) -> PermitIds {
        PermitIds { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn next_id(&mut self) -> PermitId {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        bytes[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        PermitId(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_never_overtaken() {
        assert_eq!(served_from_head(5, [2, 2, 1]), 3);
        assert_eq!(served_from_head(3, [2, 2, 1]), 1, "the 1 behind waits");
        assert_eq!(served_from_head(1, [2, 1]), 0, "the head wants 2");
        assert_eq!(served_from_head(0, []), 0);
        assert_eq!(served_from_head(-3, [1]), 0);
    }

    #[test]
    fn permit_ids_read_and_show_as_32_hex_characters() {
        let mut ids = PermitIds::new(7);
        let (a, b) = (ids.next_id(), ids.next_id());
        assert_ne!(a, b);
        let shown = a.to_string();
        assert_eq!(shown.len(), 32);
        assert!(shown
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(PermitId::parse_hex(shown.as_bytes()), Some(a));
        assert_eq!(
            PermitId::parse_hex(shown.to_uppercase().as_bytes()),
            Some(a)
        );
        assert_eq!(PermitId::parse_hex(b"xyz"), None);
        assert_eq!(PermitId::parse_hex(&[b'g'; 32]), None);
        assert_eq!(PermitId::from_raw(&a.0), Some(a));
        assert_eq!(PermitId::from_raw(b"short"), None);
    }

    #[test]
    fn leases_end_where_their_score_says() {
        assert_eq!(lease_deadline(1_000, 500), 1_500);
        assert_eq!(lease_deadline(i64::MAX - 5, 500), NO_LEASE_SCORE - 1);
        assert_eq!(earliest_lease_end(None), None);
        assert_eq!(earliest_lease_end(Some(NO_LEASE_SCORE as f64)), None);
        assert_eq!(earliest_lease_end(Some(1e300)), None);
        assert_eq!(earliest_lease_end(Some(1_234.0)), Some(1_234));
        assert_eq!(earliest_lease_end(Some(-3.0)), None);
    }

    #[test]
    fn a_semaphore_is_looked_at_by_its_next_lease_end_or_poll() {
        assert_eq!(next_look(100, None, false), None);
        assert_eq!(next_look(100, Some(500), false), Some(500));
        assert_eq!(next_look(100, None, true), Some(100 + PERMIT_POLL_MS));
        assert_eq!(next_look(100, Some(105), true), Some(105));
        assert_eq!(next_look(100, Some(500), true), Some(100 + PERMIT_POLL_MS));
    }

    #[test]
    fn counts_parse_like_redis_integers() {
        assert_eq!(parse_count(b"5"), Some(5));
        assert_eq!(parse_count(b"-2"), Some(-2));
        assert_eq!(parse_count(b"5.0"), None);
        assert_eq!(added(i64::MAX, 1), None);
        assert_eq!(added(3, -5), Some(-2));
    }
}
