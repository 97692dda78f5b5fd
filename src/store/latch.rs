//! Redisson's count-down latch (`RCountDownLatch`) on its keys: the string `K` holding
//! the count, and the channel `redisson_countdownlatch__channel__{K}` (braces always):
//! `1` when a count is set or the latch deleted, `0` when a count-down reaches zero.

use redis_module::{Context, RedisError, RedisString};

use super::replicated_write;
use crate::config;
use crate::core::keys::latch_channel;
use crate::core::latch::{count_down, CountDown};
use crate::core::semaphore::parse_count;
use crate::errors;
use crate::ffi::{self, Key, KeyKind};

/// A latch's key, read once: its count (`None` while it does not exist: open).
pub struct Latch<'a> {
    ctx: &'a Context,
    name: &'a RedisString,
    count: Option<i64>,
}

impl<'a> Latch<'a> {
    /// Opens and reads the latch `name`: `WRONGTYPE` unless it is a string or missing,
    /// an error if the string is not an integer.
    pub fn open(ctx: &'a Context, name: &'a RedisString) -> Result<Self, RedisError> {
        let key = Key::open_readonly(ctx, name);
        let count = match key.kind() {
            KeyKind::Empty => None,
            KeyKind::String => Some(
                parse_count(&key.string_value())
                    .ok_or(RedisError::Str(errors::LATCH_NOT_INTEGER))?,
            ),
            _ => return Err(errors::wrong_type()),
        };
        Ok(Latch { ctx, name, count })
    }

    /// The count now; 0 for a latch that does not exist.
    pub fn count(&self) -> i64 {
        self.count.unwrap_or(0).max(0)
    }

    /// Whether waiters may pass: no count, or none left.
    pub fn is_open(&self) -> bool {
        self.count() == 0
    }

    /// `TRYSETCOUNT`: sets `n` if the latch does not exist; publishes `1`.
    pub fn try_set(&mut self, n: i64) -> bool {
        if self.count.is_some() {
            return false;
        }
        let text = n.to_string();
        replicated_write(self.ctx, "SET", &[self.name.as_slice(), text.as_bytes()]);
        self.count = Some(n);
        self.publish(b"1");
        true
    }

    /// `COUNTDOWN`: one less; at zero or below the key goes, and reaching exactly zero
    /// publishes `0`, as Redisson's script. Returns the count now.
    pub fn count_down(&mut self) -> i64 {
        let CountDown {
            count,
            delete,
            publish_zero,
        } = count_down(self.count);
        if delete {
            if self.count.is_some() {
                replicated_write(self.ctx, "DEL", &[self.name.as_slice()]);
            }
            self.count = None;
        } else {
            replicated_write(self.ctx, "DECR", &[self.name.as_slice()]);
            self.count = Some(count);
        }
        if publish_zero {
            self.publish(b"0");
        }
        count
    }

    fn publish(&self, message: &[u8]) {
        if !config::publish() {
            return;
        }
        let channel = ffi::string(self.ctx, &latch_channel(self.name.as_slice()));
        ffi::with_constant(message, |message| ffi::publish(self.ctx, &channel, message));
    }
}
