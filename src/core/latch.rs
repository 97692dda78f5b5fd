//! Redisson's count-down latch (`RCountDownLatch`), free of Redis.

/// What `RLATCH.COUNTDOWN` does to a latch holding `count` (absent: `None`): the new
/// count, and whether the key goes (at zero or below, as Redisson's script deletes it)
/// and whether `0` is published (only on reaching exactly zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountDown {
    pub count: i64,
    pub delete: bool,
    pub publish_zero: bool,
}

pub fn count_down(count: Option<i64>) -> CountDown {
    let count = count.unwrap_or(0).saturating_sub(1);
    CountDown {
        count: count.max(0),
        delete: count <= 0,
        publish_zero: count == 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counting_down_deletes_at_zero_and_announces_only_exactly_zero() {
        assert_eq!(
            count_down(Some(2)),
            CountDown {
                count: 1,
                delete: false,
                publish_zero: false
            }
        );
        assert_eq!(
            count_down(Some(1)),
            CountDown {
                count: 0,
                delete: true,
                publish_zero: true
            }
        );
        // Absent (or already zero): Redisson's DECR makes -1, then deletes; no message.
        assert_eq!(
            count_down(None),
            CountDown {
                count: 0,
                delete: true,
                publish_zero: false
            }
        );
    }
}
