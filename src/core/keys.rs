//! Names of the Redisson helper keys that sit beside a lock key.

/// Fencing counter: a plain integer string, no TTL.
pub const TOKEN_PREFIX: &[u8] = b"redisson_lock_token";
/// Fair queue: list of owners in arrival order.
pub const QUEUE_PREFIX: &[u8] = b"redisson_lock_queue";
/// Fair deadlines: zset of owner -> absolute unix-ms deadline.
pub const TIMEOUT_PREFIX: &[u8] = b"redisson_lock_timeout";
/// Unlock channel, and the stem of the per-owner fair wake channel.
pub const CHANNEL_PREFIX: &[u8] = b"redisson_lock__channel";

/// A semaphore's channel (`RSemaphore`, `RPermitExpirableSemaphore`): the new total, or
/// the permits added, when permits appear.
pub const SEMAPHORE_CHANNEL_PREFIX: &[u8] = b"redisson_sc";

/// A count-down latch's channel: `redisson_countdownlatch__channel__{K}`, with braces
/// even when `K` has some (Redisson's rule for latches, unlike its prefix rule).
pub fn latch_channel(latch_key: &[u8]) -> Vec<u8> {
    let mut name = b"redisson_countdownlatch__channel__{".to_vec();
    name.extend_from_slice(latch_key);
    name.push(b'}');
    name
}

/// A read-write lock's channel: `0` when a read unlock frees it, `1` for a write unlock.
pub const RW_CHANNEL_PREFIX: &[u8] = b"redisson_rwlock";

/// The field of a Redisson read-write lock's hash (`RReadWriteLock`) that says who holds
/// it, `read` or `write`, beside its owners' counts.
pub const READ_WRITE_MODE_FIELD: &std::ffi::CStr = c"mode";

/// Whether a hash whose `mode` field holds `value` is a read-write lock. An owner named
/// `mode` of a reentrant lock holds a count there, never these words.
pub fn is_read_write_mode(value: &[u8]) -> bool {
    value == b"read" || value == b"write"
}

/// `prefix:{K}`, or `prefix:K` when `K` already carries a hash tag, as Redisson
/// names it. Either way the helper lands in `K`'s cluster slot.
pub fn helper_key(prefix: &[u8], lock_key: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(prefix.len() + lock_key.len() + 3);
    write_helper_key(&mut name, prefix, lock_key);
    name
}

/// `helper_key` into a buffer the caller reuses, which is emptied first.
pub fn write_helper_key(name: &mut Vec<u8>, prefix: &[u8], lock_key: &[u8]) {
    name.clear();
    name.extend_from_slice(prefix);
    name.push(b':');
    push_tagged(name, lock_key);
}

/// `lock_key` as its own hash tag (`{K}`), or as it is when it already has one.
fn push_tagged(name: &mut Vec<u8>, lock_key: &[u8]) {
    if lock_key.contains(&b'{') {
        name.extend_from_slice(lock_key);
    } else {
        name.push(b'{');
        name.extend_from_slice(lock_key);
        name.push(b'}');
    }
}

/// The lock keys whose helper under `prefix` is `helper`: the inverse of
/// `helper_key`. Usually one; `prefix:{x}` may belong to lock `x` or lock `{x}`.
pub fn lock_keys_of(prefix: &[u8], helper: &[u8]) -> Vec<Vec<u8>> {
    let Some(rest) = helper
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix(b":"))
    else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    if let Some(inner) = rest.strip_prefix(b"{").and_then(|r| r.strip_suffix(b"}")) {
        if !inner.contains(&b'{') {
            keys.push(inner.to_vec());
        }
    }
    if rest.contains(&b'{') {
        keys.push(rest.to_vec());
    }
    keys
}

/// Redisson's `suffixName`: `{K}:suffix`, or `K:suffix` when `K` already carries a
/// hash tag, into a buffer the caller reuses.
fn write_suffixed(name: &mut Vec<u8>, lock_key: &[u8], suffix: &[u8]) {
    name.clear();
    push_tagged(name, lock_key);
    name.push(b':');
    name.extend_from_slice(suffix);
}

/// A permit-expiring semaphore's zset of leased permits (`RPermitExpirableSemaphore`):
/// `{K}:timeout`, Redisson's `suffixName`.
pub fn permit_leases_key(semaphore_key: &[u8]) -> Vec<u8> {
    let mut name = Vec::with_capacity(semaphore_key.len() + 10);
    write_suffixed(&mut name, semaphore_key, b"timeout");
    name
}

/// The key whose TTL is the lease of `owner`'s `n`th read hold on read-write lock
/// `lock_key`: `suffix(K, owner):rwlock_timeout:n`.
pub fn write_read_timeout_key(name: &mut Vec<u8>, lock_key: &[u8], owner: &[u8], n: i64) {
    write_suffixed(name, lock_key, owner);
    name.extend_from_slice(b":rwlock_timeout:");
    name.extend_from_slice(n.to_string().as_bytes());
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
    fn permit_leases_sit_in_the_semaphores_slot() {
        assert_eq!(permit_leases_key(b"pool"), b"{pool}:timeout");
        assert_eq!(permit_leases_key(b"{app}:pool"), b"{app}:pool:timeout");
    }

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
    fn helper_keys_lead_back_to_their_locks() {
        for lock in [&b"orders"[..], b"{user1}:lock", b"a{b", b"{x}"] {
            let helper = helper_key(TIMEOUT_PREFIX, lock);
            assert!(
                lock_keys_of(TIMEOUT_PREFIX, &helper).contains(&lock.to_vec()),
                "{lock:?}"
            );
        }
        assert!(lock_keys_of(TIMEOUT_PREFIX, b"redisson_lock_queue:{x}").is_empty());
        assert!(lock_keys_of(TIMEOUT_PREFIX, b"unrelated").is_empty());
    }

    #[test]
    fn read_timeout_keys_are_redissons() {
        let mut name = Vec::new();
        write_read_timeout_key(&mut name, b"rw", b"uuid:1", 3);
        assert_eq!(name, b"{rw}:uuid:1:rwlock_timeout:3");
        write_read_timeout_key(&mut name, b"{t}rw", b"o", 1);
        assert_eq!(name, b"{t}rw:o:rwlock_timeout:1");
        assert_eq!(
            helper_key(RW_CHANNEL_PREFIX, b"rw"),
            b"redisson_rwlock:{rw}"
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
