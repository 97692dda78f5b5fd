//! Lease and wait durations, in milliseconds.

/// The largest lease the contract allows: 2^40 ms, about 35 years.
pub const MAX_LEASE_MS: i64 = 1 << 40;

/// The largest `BLOCK` accepted. Same bound as a lease, so deadlines never overflow.
pub const MAX_BLOCK_MS: i64 = 1 << 40;

/// How long a hold lasts, as validated milliseconds (1 ..= 2^40).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease(i64);

impl Lease {
    pub fn from_ms(ms: i64) -> Option<Lease> {
        (1..=MAX_LEASE_MS).contains(&ms).then_some(Lease(ms))
    }

    pub fn ms(self) -> i64 {
        self.0
    }

    /// The absolute unix-ms deadline of a lease that starts at `now_ms`.
    pub fn deadline_from(self, now_ms: i64) -> i64 {
        now_ms.saturating_add(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_bounds() {
        assert_eq!(Lease::from_ms(0), None);
        assert_eq!(Lease::from_ms(-5), None);
        assert_eq!(Lease::from_ms(1).map(Lease::ms), Some(1));
        assert_eq!(
            Lease::from_ms(MAX_LEASE_MS).map(Lease::ms),
            Some(MAX_LEASE_MS)
        );
        assert_eq!(Lease::from_ms(MAX_LEASE_MS + 1), None);
    }

    #[test]
    fn deadline_is_absolute() {
        let lease = Lease::from_ms(30_000).unwrap();
        assert_eq!(lease.deadline_from(1_700_000_000_000), 1_700_000_030_000);
        assert_eq!(lease.deadline_from(i64::MAX - 1), i64::MAX);
    }
}
