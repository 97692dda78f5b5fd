//! The Lua baseline: Redisson's reentrant lock scripts (`RedissonLock`'s
//! `tryLockInnerAsync` and `unlockInnerAsync`) and its read-write lock's (kept in
//! module-tests as Redisson's data), so both the uncontended and the Redisson-style
//! waiter paths run what Redisson sends; and the classic fair-lock pair
//! (`RedissonFairLock`) for the fair queue scenario; and Redisson's semaphore and
//! permit-expirable semaphore scripts for the semaphore scenario.

use redis::aio::MultiplexedConnection;

use rlock_module_tests::redisson::{
    PERMIT_RELEASE, PERMIT_TRY_ACQUIRE, PERMIT_TRY_SET_PERMITS, READ_LOCK, READ_UNLOCK,
    SEMAPHORE_RELEASE, SEMAPHORE_TRY_ACQUIRE, SEMAPHORE_TRY_SET_PERMITS, TRY_LOCK, UNLOCK,
    WRITE_LOCK, WRITE_UNLOCK,
};

/// The SHA1s of Redisson's scripts, loaded on one server.
#[derive(Debug, Clone)]
pub struct Shas {
    pub try_lock: String,
    pub unlock: String,
    pub read_lock: String,
    pub read_unlock: String,
    pub write_lock: String,
    pub write_unlock: String,
}

/// Redisson's unlock latch lifetime with its default config: (timeout 3000 + retryDelay
/// 1500) × retryAttempts 3, ms. Redisson deletes the latch after the unlock; the bench
/// does not send that DEL, which spares the baseline a command.
pub const UNLOCK_LATCH_MS: u64 = 13_500;

/// Request ids of the read-write unlock latches, unique for the run.
static NEXT_UNLOCK_REQUEST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// `SCRIPT LOAD` of each script, in order: their SHA1s.
async fn load_all<const N: usize>(
    con: &mut MultiplexedConnection,
    scripts: [&str; N],
) -> redis::RedisResult<std::array::IntoIter<String, N>> {
    let mut shas = Vec::with_capacity(N);
    for script in scripts {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script)
            .query_async(con)
            .await?;
        shas.push(sha);
    }
    let shas: [String; N] = shas.try_into().expect("one SHA1 per script");
    Ok(shas.into_iter())
}

/// `EVALSHA sha numkeys keys...`; the caller adds the arguments.
fn evalsha(sha: &str, keys: &[&[u8]]) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(sha).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    cmd
}

impl Shas {
    pub async fn load(con: &mut MultiplexedConnection) -> redis::RedisResult<Shas> {
        let scripts = [
            TRY_LOCK,
            UNLOCK,
            READ_LOCK,
            READ_UNLOCK,
            WRITE_LOCK,
            WRITE_UNLOCK,
        ];
        let mut shas = load_all(con, scripts).await?;
        let mut next = || shas.next().expect("six scripts");
        Ok(Shas {
            try_lock: next(),
            unlock: next(),
            read_lock: next(),
            read_unlock: next(),
            write_lock: next(),
            write_unlock: next(),
        })
    }

    /// `RedissonReadLock`'s tryLock: `EVALSHA readLock 2 key timeoutPrefix lease owner owner:write`.
    pub fn read_lock_cmd(&self, key: &[u8], lease_ms: u64, owner: &[u8]) -> redis::Cmd {
        let mut cmd = evalsha(&self.read_lock, &[key, &read_timeout_prefix(key, owner)]);
        cmd.arg(lease_ms).arg(owner).arg(write_field(owner));
        cmd
    }

    /// `RedissonReadLock`'s unlock: `EVALSHA readUnlock 5 key channel timeoutPrefix keyPrefix
    /// latch 0 owner publish latchMs`.
    pub fn read_unlock_cmd(&self, key: &[u8], owner: &[u8]) -> redis::Cmd {
        let mut cmd = evalsha(
            &self.read_unlock,
            &[
                key,
                &rw_channel(key),
                &read_timeout_prefix(key, owner),
                &suffixed(key, b""),
                &unlock_latch(key),
            ],
        );
        cmd.arg(0).arg(owner).arg("publish").arg(UNLOCK_LATCH_MS);
        cmd
    }

    /// `RedissonWriteLock`'s tryLock: `EVALSHA writeLock 1 key lease owner:write`.
    pub fn write_lock_cmd(&self, key: &[u8], lease_ms: u64, owner: &[u8]) -> redis::Cmd {
        let mut cmd = evalsha(&self.write_lock, &[key]);
        cmd.arg(lease_ms).arg(write_field(owner));
        cmd
    }

    /// `RedissonWriteLock`'s unlock: `EVALSHA writeUnlock 3 key channel latch 1 lease
    /// owner:write publish latchMs`.
    pub fn write_unlock_cmd(&self, key: &[u8], lease_ms: u64, owner: &[u8]) -> redis::Cmd {
        let mut cmd = evalsha(
            &self.write_unlock,
            &[key, &rw_channel(key), &unlock_latch(key)],
        );
        cmd.arg(1)
            .arg(lease_ms)
            .arg(write_field(owner))
            .arg("publish")
            .arg(UNLOCK_LATCH_MS);
        cmd
    }

    /// `EVALSHA tryLock 1 key lease owner`.
    pub fn try_lock_cmd(&self, key: &[u8], lease_ms: u64, owner: &[u8]) -> redis::Cmd {
        let mut cmd = evalsha(&self.try_lock, &[key]);
        cmd.arg(lease_ms).arg(owner);
        cmd
    }

    /// `EVALSHA unlock 2 key channel 0 lease owner`.
    pub fn unlock_cmd(&self, key: &[u8], lease_ms: u64, owner: &[u8]) -> redis::Cmd {
        let mut cmd = evalsha(&self.unlock, &[key, &unlock_channel(key)]);
        cmd.arg(0).arg(lease_ms).arg(owner);
        cmd
    }
}

/// Redisson's `suffixName(K, x)`: `{K}:x`, or `K:x` when K has a hash tag; with an empty
/// `x`, the key prefix its read unlock takes (`{K}`, without the colon).
fn suffixed(key: &[u8], suffix: &[u8]) -> Vec<u8> {
    let mut name = rlock_module_tests::tagged(key);
    if !suffix.is_empty() {
        name.extend_from_slice(&[&b":"[..], suffix].concat());
    }
    name
}

fn read_timeout_prefix(key: &[u8], owner: &[u8]) -> Vec<u8> {
    let mut name = suffixed(key, owner);
    name.extend_from_slice(b":rwlock_timeout");
    name
}

fn write_field(owner: &[u8]) -> Vec<u8> {
    [owner, b":write"].concat()
}

fn unlock_latch(key: &[u8]) -> Vec<u8> {
    let id = NEXT_UNLOCK_REQUEST.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = rlock_module_tests::helper_key("redisson_unlock_latch", key);
    name.extend_from_slice(format!(":{id:032x}").as_bytes());
    name
}

/// `redisson_rwlock:{K}`, the channel Redisson's read-write lock waiters listen on.
pub fn rw_channel(key: &[u8]) -> Vec<u8> {
    rlock_module_tests::helper_key("redisson_rwlock", key)
}

/// `redisson_lock__channel:{K}`, the channel Redisson waiters listen on.
pub fn unlock_channel(key: &[u8]) -> Vec<u8> {
    rlock_module_tests::unlock_channel(key)
}

/// Redisson's default `threadWaitTime`: how far apart queued deadlines are, ms.
pub const THREAD_WAIT_MS: u64 = 300_000;

/// The classic fair-lock tryLock (Redisson's `RedissonFairLock`, written out from its
/// documented behaviour). KEYS[1] = lock, KEYS[2] = queue list, KEYS[3] = deadline zset;
/// ARGV[1] = lease ms, ARGV[2] = owner, ARGV[3] = threadWaitTime ms, ARGV[4] = now (unix ms).
/// Reply: nil = acquired (or re-entered); integer = the caller's wait estimate, ms.
pub const FAIR_TRY_LOCK: &str = r#"
local now = tonumber(ARGV[4]);
local wait = tonumber(ARGV[3]);
-- Drop waiters from the head whose deadline has passed.
while true do
    local head = redis.call('lindex', KEYS[2], 0);
    if head == false then break; end;
    local deadline = tonumber(redis.call('zscore', KEYS[3], head));
    if deadline ~= nil and deadline > now then break; end;
    redis.call('zrem', KEYS[3], head);
    redis.call('lpop', KEYS[2]);
end;
-- A free lock goes to the caller only when nobody queues before it.
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0);
    if head == false or head == ARGV[2] then
        redis.call('lpop', KEYS[2]);
        redis.call('zrem', KEYS[3], ARGV[2]);
        -- Deadlines are cumulative: every waiter moves up by one turn.
        local waiters = redis.call('zrange', KEYS[3], 0, -1);
        for i = 1, #waiters do
            redis.call('zincrby', KEYS[3], -wait, waiters[i]);
        end;
        redis.call('hset', KEYS[1], ARGV[2], 1);
        redis.call('pexpire', KEYS[1], ARGV[1]);
        return nil;
    end;
end;
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
local mine = redis.call('zscore', KEYS[3], ARGV[2]);
if mine ~= false then
    return tonumber(mine) - wait - now;
end;
-- Join the tail: the last waiter's deadline (or the lock's) plus one turn.
local last = redis.call('lindex', KEYS[2], -1);
local ttl;
if last ~= false then
    ttl = tonumber(redis.call('zscore', KEYS[3], last)) - now;
else
    ttl = redis.call('pttl', KEYS[1]);
end;
redis.call('zadd', KEYS[3], now + ttl + wait, ARGV[2]);
redis.call('rpush', KEYS[2], ARGV[2]);
return ttl;
"#;

/// The classic fair-lock unlock. KEYS[1] = lock, KEYS[2] = queue list, KEYS[3] = deadline
/// zset, KEYS[4] = `redisson_lock__channel:{K}`; ARGV[1] = unlock message (0),
/// ARGV[2] = lease ms, ARGV[3] = owner, ARGV[4] = now (unix ms).
/// Reply: nil = not the owner, 0 = a re-entry undone, 1 = released (the head is woken).
pub const FAIR_UNLOCK: &str = r#"
local now = tonumber(ARGV[4]);
while true do
    local head = redis.call('lindex', KEYS[2], 0);
    if head == false then break; end;
    local deadline = tonumber(redis.call('zscore', KEYS[3], head));
    if deadline ~= nil and deadline > now then break; end;
    redis.call('zrem', KEYS[3], head);
    redis.call('lpop', KEYS[2]);
end;
if redis.call('exists', KEYS[1]) == 0 then
    local head = redis.call('lindex', KEYS[2], 0);
    if head ~= false then
        redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]);
    end;
    return 1;
end;
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if counter > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
end;
redis.call('del', KEYS[1]);
local head = redis.call('lindex', KEYS[2], 0);
if head ~= false then
    redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]);
end;
return 1;
"#;

/// A fair lock's Redisson keys: the lock, `redisson_lock_queue:{K}` and
/// `redisson_lock_timeout:{K}`.
#[derive(Debug, Clone)]
pub struct FairKeys {
    pub lock: Vec<u8>,
    pub queue: Vec<u8>,
    pub timeout: Vec<u8>,
}

impl FairKeys {
    pub fn new(lock: &[u8]) -> FairKeys {
        FairKeys {
            lock: lock.to_vec(),
            queue: rlock_module_tests::helper_key("redisson_lock_queue", lock),
            timeout: rlock_module_tests::helper_key("redisson_lock_timeout", lock),
        }
    }
}

/// The SHA1s of the two fair scripts, loaded on one server.
#[derive(Debug, Clone)]
pub struct FairShas {
    pub try_lock: String,
    pub unlock: String,
}

impl FairShas {
    pub async fn load(con: &mut MultiplexedConnection) -> redis::RedisResult<FairShas> {
        let mut shas = load_all(con, [FAIR_TRY_LOCK, FAIR_UNLOCK]).await?;
        let mut next = || shas.next().expect("two scripts");
        Ok(FairShas {
            try_lock: next(),
            unlock: next(),
        })
    }

    /// `EVALSHA fairTryLock 3 lock queue timeout lease owner threadWaitTime now`.
    pub fn try_lock_cmd(
        &self,
        keys: &FairKeys,
        lease_ms: u64,
        owner: &[u8],
        now_ms: u64,
    ) -> redis::Cmd {
        let mut cmd = evalsha(&self.try_lock, &[&keys.lock, &keys.queue, &keys.timeout]);
        cmd.arg(lease_ms).arg(owner).arg(THREAD_WAIT_MS).arg(now_ms);
        cmd
    }

    /// `EVALSHA fairUnlock 4 lock queue timeout channel 0 lease owner now`.
    pub fn unlock_cmd(
        &self,
        keys: &FairKeys,
        lease_ms: u64,
        owner: &[u8],
        now_ms: u64,
    ) -> redis::Cmd {
        let mut cmd = evalsha(
            &self.unlock,
            &[
                &keys.lock,
                &keys.queue,
                &keys.timeout,
                &unlock_channel(&keys.lock),
            ],
        );
        cmd.arg(0).arg(lease_ms).arg(owner).arg(now_ms);
        cmd
    }
}

/// Redisson's score for a permit without lease, and `ARGV[4]` of its permit tryAcquire.
pub const NO_LEASE_SCORE: &str = "922337203685477";

/// The SHA1s of Redisson's semaphore scripts (`RedissonSemaphore`) and permit-expirable
/// semaphore scripts (`RedissonPermitExpirableSemaphore`), loaded on one server. Every
/// publishing script is sent with `publish` (a standalone server, no sharded pub/sub).
#[derive(Debug, Clone)]
pub struct SemShas {
    pub try_set_permits: String,
    pub try_acquire: String,
    pub release: String,
    pub permit_try_set_permits: String,
    pub permit_try_acquire: String,
    pub permit_release: String,
}

impl SemShas {
    pub async fn load(con: &mut MultiplexedConnection) -> redis::RedisResult<SemShas> {
        let scripts = [
            SEMAPHORE_TRY_SET_PERMITS,
            SEMAPHORE_TRY_ACQUIRE,
            SEMAPHORE_RELEASE,
            PERMIT_TRY_SET_PERMITS,
            PERMIT_TRY_ACQUIRE,
            PERMIT_RELEASE,
        ];
        let mut shas = load_all(con, scripts).await?;
        let mut next = || shas.next().expect("six scripts");
        Ok(SemShas {
            try_set_permits: next(),
            try_acquire: next(),
            release: next(),
            permit_try_set_permits: next(),
            permit_try_acquire: next(),
            permit_release: next(),
        })
    }

    /// `RSemaphore.trySetPermits(n)`: `EVALSHA trySetPermits 2 K redisson_sc:{K} n publish`.
    pub fn try_set_permits_cmd(&self, key: &[u8], permits: u64) -> redis::Cmd {
        let mut cmd = evalsha(&self.try_set_permits, &[key, &semaphore_channel(key)]);
        cmd.arg(permits).arg("publish");
        cmd
    }

    /// `RSemaphore.tryAcquire()`: `EVALSHA tryAcquire 1 K 1`.
    pub fn try_acquire_cmd(&self, key: &[u8]) -> redis::Cmd {
        let mut cmd = evalsha(&self.try_acquire, &[key]);
        cmd.arg(1);
        cmd
    }

    /// `RSemaphore.release()`: `EVALSHA release 2 K redisson_sc:{K} 1 publish`.
    pub fn release_cmd(&self, key: &[u8]) -> redis::Cmd {
        let mut cmd = evalsha(&self.release, &[key, &semaphore_channel(key)]);
        cmd.arg(1).arg("publish");
        cmd
    }

    /// `RPermitExpirableSemaphore.trySetPermits(n)`:
    /// `EVALSHA trySetPermits 2 K redisson_sc:{K} n publish`.
    pub fn permit_try_set_permits_cmd(&self, key: &[u8], permits: u64) -> redis::Cmd {
        let mut cmd = evalsha(
            &self.permit_try_set_permits,
            &[key, &semaphore_channel(key)],
        );
        cmd.arg(permits).arg("publish");
        cmd
    }

    /// `RPermitExpirableSemaphore.tryAcquire(lease)` for one permit: `EVALSHA tryAcquire 3 K
    /// {K}:timeout redisson_sc:{K} 1 now+lease now 922337203685477 publish id`, `now` the
    /// client's unix ms and `id` the 16 raw bytes the client made.
    pub fn permit_try_acquire_cmd(
        &self,
        key: &[u8],
        id: &[u8; 16],
        lease_ms: u64,
        now_ms: u64,
    ) -> redis::Cmd {
        let mut cmd = evalsha(
            &self.permit_try_acquire,
            &[key, &permit_timeout_key(key), &semaphore_channel(key)],
        );
        cmd.arg(1)
            .arg(now_ms + lease_ms)
            .arg(now_ms)
            .arg(NO_LEASE_SCORE)
            .arg("publish")
            .arg(&id[..]);
        cmd
    }

    /// `RPermitExpirableSemaphore.tryRelease(id)`: `EVALSHA release 3 K redisson_sc:{K}
    /// {K}:timeout id 1 now publish`.
    pub fn permit_release_cmd(&self, key: &[u8], id: &[u8], now_ms: u64) -> redis::Cmd {
        let mut cmd = evalsha(
            &self.permit_release,
            &[key, &semaphore_channel(key), &permit_timeout_key(key)],
        );
        cmd.arg(id).arg(1).arg(now_ms).arg("publish");
        cmd
    }
}

/// `redisson_sc:{K}`, the channel Redisson's semaphore waiters listen on.
pub fn semaphore_channel(key: &[u8]) -> Vec<u8> {
    rlock_module_tests::helper_key("redisson_sc", key)
}

/// `{K}:timeout` (`K:timeout` when K has a hash tag): a permit-expirable semaphore's leases.
pub fn permit_timeout_key(key: &[u8]) -> Vec<u8> {
    suffixed(key, b"timeout")
}
