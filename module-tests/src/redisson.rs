//! Redisson's data: the Lua scripts of Redisson's reentrant lock
//! (`RedissonLock.tryLockInnerAsync` and `unlockInnerAsync`) and of its read-write lock
//! (`RedissonReadLock`, `RedissonWriteLock`, the read-lock renewal of `ReadLockTask`), as
//! Redisson sends them (read from its source, master 4.x), for the tests, the bench and
//! the chaos suite to act as a Redisson client.

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

/// `RedissonReadLock.tryLockInnerAsync`. KEYS[1] = lock, KEYS[2] = the owner's timeout
/// prefix (`suffix(K, owner):rwlock_timeout`); ARGV[1] = lease ms, ARGV[2] = owner,
/// ARGV[3] = `owner:write`. Reply: nil = acquired, integer = the lock's PTTL.
pub const READ_LOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
  redis.call('hset', KEYS[1], 'mode', 'read');
  redis.call('hset', KEYS[1], ARGV[2], 1);
  redis.call('set', KEYS[2] .. ':1', 1);
  redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
if (mode == 'read') or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1);
  local key = KEYS[2] .. ':' .. ind;
  redis.call('set', key, 1);
  redis.call('pexpire', key, ARGV[1]);
  local remainTime = redis.call('pttl', KEYS[1]);
  redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1]));
  return nil;
end;
return redis.call('pttl', KEYS[1]);
"#;

/// `RedissonReadLock.unlockInnerAsync`. KEYS[1] = lock, KEYS[2] = `redisson_rwlock:{K}`,
/// KEYS[3] = the owner's timeout prefix, KEYS[4] = the key prefix (`{K}`), KEYS[5] =
/// the unlock latch (`redisson_unlock_latch:{K}:<request id>`); ARGV[1] = 0, ARGV[2] =
/// owner, ARGV[3] = `publish` or `spublish`, ARGV[4] = latch ms.
/// Reply: nil = not held, 0 = others still hold it, 1 = freed (and published).
pub const READ_UNLOCK: &str = r#"
local val = redis.call('get', KEYS[5]);
if val ~= false then
    return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call(ARGV[3], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
    return nil;
end;
local lockExists = redis.call('hexists', KEYS[1], ARGV[2]);
if (lockExists == 0) then
    return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1);
if (counter == 0) then
    redis.call('hdel', KEYS[1], ARGV[2]);
end;
redis.call('del', KEYS[3] .. ':' .. (counter+1));
if (redis.call('hlen', KEYS[1]) > 1) then
    local maxRemainTime = -3;
    local keys = redis.call('hkeys', KEYS[1]);
    for n, key in ipairs(keys) do
        counter = tonumber(redis.call('hget', KEYS[1], key));
        if type(counter) == 'number' then
            for i=counter, 1, -1 do
                local remainTime = redis.call('pttl', KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i);
                maxRemainTime = math.max(remainTime, maxRemainTime);
            end;
        end;
    end;
    if maxRemainTime > 0 then
        redis.call('pexpire', KEYS[1], maxRemainTime);
        redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
        return 0;
    end;
    if mode == 'write' then
        redis.call('set', KEYS[5], 0, 'px', ARGV[4]);
        return 0;
    end;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[3], KEYS[2], ARGV[1]);
redis.call('set', KEYS[5], 1, 'px', ARGV[4]);
return 1;
"#;

/// `RedissonWriteLock.tryLockInnerAsync`. KEYS[1] = lock; ARGV[1] = lease ms,
/// ARGV[2] = `owner:write`. Reply: nil = acquired, integer = the lock's PTTL.
pub const WRITE_LOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
      redis.call('hset', KEYS[1], 'mode', 'write');
      redis.call('hset', KEYS[1], ARGV[2], 1);
      redis.call('pexpire', KEYS[1], ARGV[1]);
      return nil;
  end;
  if (mode == 'write') then
      if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
          redis.call('hincrby', KEYS[1], ARGV[2], 1);
          local currentExpire = redis.call('pttl', KEYS[1]);
          redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]);
          return nil;
      end;
    end;
    return redis.call('pttl', KEYS[1]);
"#;

/// `RedissonWriteLock.unlockInnerAsync`. KEYS[1] = lock, KEYS[2] = `redisson_rwlock:{K}`,
/// KEYS[3] = the unlock latch; ARGV[1] = 1, ARGV[2] = lease ms, ARGV[3] = `owner:write`,
/// ARGV[4] = `publish` or `spublish`, ARGV[5] = latch ms.
/// Reply: nil = not held, 0 = a re-entry undone, 1 = released.
pub const WRITE_UNLOCK: &str = r#"
local val = redis.call('get', KEYS[3]);
if val ~= false then
    return tonumber(val);
end;
local mode = redis.call('hget', KEYS[1], 'mode');
if (mode == false) then
    redis.call(ARGV[4], KEYS[2], ARGV[1]);
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
    return nil;
end;
if (mode == 'write') then
    local lockExists = redis.call('hexists', KEYS[1], ARGV[3]);
    if (lockExists == 0) then
        return nil;
    else
        local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
        if (counter > 0) then
            redis.call('pexpire', KEYS[1], ARGV[2]);
            redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
            return 0;
        else
            redis.call('hdel', KEYS[1], ARGV[3]);
            if (redis.call('hlen', KEYS[1]) == 1) then
                redis.call('del', KEYS[1]);
                redis.call(ARGV[4], KEYS[2], ARGV[1]);
            else
                redis.call('hset', KEYS[1], 'mode', 'read');
            end;
            redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
            return 1;
        end;
    end;
end;
return nil;
"#;

/// `ReadLockTask`'s renewal of read holds, for one lock. KEYS[1] = lock, KEYS[2] = the
/// key prefix (`{K}`); ARGV[1] = lease ms, ARGV[2] = how many owners, ARGV[3..] = owners.
/// Reply: `{1}` renewed, `{0}` none of them holds it.
pub const READ_RENEW: &str = r#"
local result = {}
local argIdx = 2
for i = 1, #KEYS, 2 do
    local anyAlive = false;
    local lockNamesCount = tonumber(ARGV[argIdx]);
    argIdx = argIdx + 1;
    for k = 1, lockNamesCount do
        local counter = redis.call('hget', KEYS[i], ARGV[argIdx]);
        if (counter ~= false) then
            anyAlive = true;
            for c=counter, 1, -1 do
                redis.call('pexpire', KEYS[i+1] .. ':' .. ARGV[argIdx] .. ':rwlock_timeout:' .. c, ARGV[1]);
            end;
        end;
        argIdx = argIdx + 1;
    end;
    if (anyAlive) then
        redis.call('pexpire', KEYS[i], ARGV[1]);
        table.insert(result, 1);
    else
        table.insert(result, 0);
    end;
end;
return result;
"#;
