//! Names of the Redisson helper keys that sit beside a lock key.

/// Fencing counter: a plain integer string, no TTL.
pub const TOKEN_PREFIX: &[u8] = b"redisson_lock_token";
/// Fair queue: list of owners in arrival order.
pub const QUEUE_PREFIX: &[u8] = b"redisson_lock_queue";
/// Fair deadlines: zset of owner -> absolute unix-ms deadline.
pub const TIMEOUT_PREFIX: &[u8] = b"redisson_lock_timeout";
/// Unlock channel, and the stem of the per-owner fair wake channel.
pub const CHANNEL_PREFIX: &[u8] = b"redisson_lock__channel";

/// `prefix:{K}`, or `prefix:K` when `K` already carries a hash tag, as Redisson
/// names it. Either way the helper lands in `K`'s cluster slot.
pub fn helper_key(prefix: &[u8], lock_key: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(prefix.len() + lock_key.len() + 3);
    name.extend_from_slice(prefix);
    name.push(b':');
    if lock_key.contains(&b'{') {
        name.extend_from_slice(lock_key);
    } else {
        name.push(b'{');
        name.extend_from_slice(lock_key);
        name.push(b'}');
    }
    name
}

/// The fair lock's per-owner wake channel: `redisson_lock__channel:{K}:<owner>`.
pub fn wake_channel(lock_key: &[u8], owner: &[u8]) -> Vec<u8> {
    let mut name = helper_key(CHANNEL_PREFIX, lock_key);
    name.push(b':');
    name.extend_from_slice(owner);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_get_a_hash_tag() {
        assert_eq!(
            helper_key(TOKEN_PREFIX, b"orders"),
            b"redisson_lock_token:{orders}"
        );
        assert_eq!(
            helper_key(CHANNEL_PREFIX, b"a:b"),
            b"redisson_lock__channel:{a:b}"
        );
    }

    #[test]
    fn tagged_keys_are_kept_as_they_are() {
        assert_eq!(
            helper_key(QUEUE_PREFIX, b"{user1}:lock"),
            b"redisson_lock_queue:{user1}:lock"
        );
    }

    #[test]
    fn wake_channel_appends_the_owner_verbatim() {
        assert_eq!(
            wake_channel(b"k", b"id\0:7"),
            b"redisson_lock__channel:{k}:id\0:7".to_vec()
        );
    }
}
