//! The Lua baseline: Redisson 3.x's classic reentrant lock scripts (`RedissonLock`'s
//! `tryLockInnerAsync` and `unlockInnerAsync`), written out here so both the
//! uncontended and the Redisson-style waiter paths run exactly what Redisson sends.

use redis::aio::MultiplexedConnection;

/// KEYS[1] = lock; ARGV[1] = lease ms, ARGV[2] = owner.
/// Reply: nil = acquired (or re-entered), integer = the holder's PTTL.
pub const TRY_LOCK: &str = r#"
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
return redis.call('pttl', KEYS[1]);
"#;

/// KEYS[1] = lock, KEYS[2] = unlock channel; ARGV[1] = unlock message (0),
/// ARGV[2] = lease ms, ARGV[3] = owner.
/// Reply: nil = not the owner, 0 = a re-entry undone, 1 = released (and published).
pub const UNLOCK: &str = r#"
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
    redis.call('pexpire', KEYS[1], ARGV[2]);
    return 0;
else
    redis.call('del', KEYS[1]);
    redis.call('publish', KEYS[2], ARGV[1]);
    return 1;
end;
return nil;
"#;

/// The SHA1s of the two scripts, loaded on one server.
#[derive(Debug, Clone)]
pub struct Shas {
    pub try_lock: String,
    pub unlock: String,
}

impl Shas {
    pub async fn load(con: &mut MultiplexedConnection) -> redis::RedisResult<Shas> {
        let try_lock: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(TRY_LOCK)
            .query_async(con)
            .await?;
        let unlock: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(UNLOCK)
            .query_async(con)
            .await?;
        Ok(Shas { try_lock, unlock })
    }

    /// `EVALSHA tryLock 1 key lease owner`.
    pub fn try_lock_cmd(&self, key: &[u8], lease_ms: u64, owner: &[u8]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.try_lock)
            .arg(1)
            .arg(key)
            .arg(lease_ms)
            .arg(owner);
        cmd
    }

    /// `EVALSHA unlock 2 key channel 0 lease owner`.
    pub fn unlock_cmd(&self, key: &[u8], lease_ms: u64, owner: &[u8]) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.unlock)
            .arg(2)
            .arg(key)
            .arg(unlock_channel(key))
            .arg(0)
            .arg(lease_ms)
            .arg(owner);
        cmd
    }
}

/// `redisson_lock__channel:{K}`, the channel Redisson waiters listen on.
pub fn unlock_channel(key: &[u8]) -> Vec<u8> {
    rlock_module_tests::unlock_channel(key)
}
