//! Redisson's data: the Lua scripts of Redisson 3.x's classic reentrant lock
//! (`RedissonLock.tryLockInnerAsync` and `unlockInnerAsync`), exactly as Redisson sends
//! them, for the tests, the bench and the chaos suite to act as a Redisson client.

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
