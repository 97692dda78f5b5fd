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

// Redisson's semaphore (`RedissonSemaphore`, master 4.7.x). K = the permits string;
// channel `redisson_sc:{K}` (`prefixName`: `redisson_sc:K` when K already contains `{`).
// ARGV "publish command" = `publish`, or `spublish` when the cluster client detected
// sharded pub/sub. `availablePermits` is no script: a plain `GET K` (nil reads as 0).
// `tryAcquire(0)` / `release(0)` send nothing.

/// `RedissonSemaphore.trySetPermitsAsync(permits)`. KEYS[1] = K, KEYS[2] = `redisson_sc:{K}`;
/// ARGV[1] = permits, ARGV[2] = `publish` or `spublish`. Publishes ARGV[1] (the permits set).
/// (The `trySetPermits(permits, ttl)` variant is the same with `'px', ARGV[3]` on the SET.)
/// Reply: 1 = set, 0 = K already existed (left unchanged).
pub const SEMAPHORE_TRY_SET_PERMITS: &str = r#"
local value = redis.call('get', KEYS[1]);
if (value == false) then
    redis.call('set', KEYS[1], ARGV[1]);
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1;
end;
return 0;
"#;

/// `RedissonSemaphore.addPermitsAsync(permits)` (permits may be negative). KEYS[1] = K,
/// KEYS[2] = `redisson_sc:{K}`; ARGV[1] = permits, ARGV[2] = `publish` or `spublish`.
/// Publishes the new total, always (even when it is 0 or negative). Reply: nil.
pub const SEMAPHORE_ADD_PERMITS: &str = r#"
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
redis.call('set', KEYS[1], value + ARGV[1]);
redis.call(ARGV[2], KEYS[2], value + ARGV[1]);
"#;

/// `RedissonSemaphore.tryAcquireAsync0(permits)`, the one non-blocking try behind every
/// acquire / tryAcquire path (permits >= 1). KEYS[1] = K; ARGV[1] = permits.
/// Publishes nothing. Reply: 1 = taken (K decremented), 0 = not enough (or K missing).
pub const SEMAPHORE_TRY_ACQUIRE: &str = r#"
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    local val = redis.call('decrby', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
"#;

/// `RedissonSemaphore.releaseAsync(permits)` (permits >= 1). KEYS[1] = K, KEYS[2] =
/// `redisson_sc:{K}`; ARGV[1] = permits, ARGV[2] = `publish` or `spublish`.
/// Creates K when missing; publishes the new total. Reply: nil.
pub const SEMAPHORE_RELEASE: &str = r#"
local value = redis.call('incrby', KEYS[1], ARGV[1]);
redis.call(ARGV[2], KEYS[2], value);
"#;

// Redisson's permit-expirable semaphore (`RedissonPermitExpirableSemaphore`). K = the
// available-permits string; leased permits in the zset `{K}:timeout` (`suffixName`:
// `K:timeout` when K contains `{`), member = the permit id as 16 raw bytes (the user
// sees it as 32 lower-case hex characters, netty `ByteBufUtil.hexDump` of
// `ServiceManager.generateIdArray(16)`), score = deadline ms in the client's clock, or
// 922337203685477 for a permit without lease. Channel `redisson_sc:{K}` as for the
// semaphore. Expired permits are reclaimed lazily, with the caller's
// `System.currentTimeMillis()` as now, by the scripts that take a now.

/// `RedissonPermitExpirableSemaphore.trySetPermitsAsync(permits)`. KEYS[1] = K, KEYS[2] =
/// `redisson_sc:{K}`; ARGV[1] = permits, ARGV[2] = `publish` or `spublish`. Publishes
/// ARGV[1]. Reply: 1 = set, 0 = K already existed. The same script as the semaphore's.
pub const PERMIT_TRY_SET_PERMITS: &str = SEMAPHORE_TRY_SET_PERMITS;

/// `RedissonPermitExpirableSemaphore.addPermitsAsync(permits)` (may be negative).
/// KEYS[1] = K, KEYS[2] = `redisson_sc:{K}`; ARGV[1] = permits, ARGV[2] = `publish` or
/// `spublish`. Publishes ARGV[1] (the delta) only when it is > 0. Reply: nil.
pub const PERMIT_ADD_PERMITS: &str = r#"
local value = redis.call('get', KEYS[1]);
if (value == false) then
    value = 0;
end;
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]));
if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
end;
"#;

/// `RedissonPermitExpirableSemaphore.tryAcquireAsync(ids, timeoutDate)`, the one try
/// behind every acquire / tryAcquire (with or without lease). KEYS[1] = K, KEYS[2] =
/// `{K}:timeout`, KEYS[3] = `redisson_sc:{K}`; ARGV[1] = n (permits, also the most
/// expired permits reclaimed), ARGV[2] = deadline ms (now + lease, or 922337203685477
/// without lease), ARGV[3] = now ms, ARGV[4] = 922337203685477, ARGV[5] = `publish` or
/// `spublish`, ARGV[6..] = the n new permit ids (16 raw bytes each, made by the client).
/// Reclaiming publishes the new total when it is > 0. Reply: `OK` = taken (the ids are
/// the client's), `:<score>` = not enough, the earliest deadline in the zset (when it is
/// not the no-lease score; the waiter retries by then), nil = not enough.
pub const PERMIT_TRY_ACQUIRE: &str = r#"
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]);
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds));
    local value = redis.call('incrby', KEYS[1], #expiredIds);
    if tonumber(value) > 0 then
        redis.call(ARGV[5], KEYS[3], value);
    end;
end;
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
    redis.call('decrby', KEYS[1], ARGV[1]);
    for i = 6, #ARGV, 1 do
        redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]);
    end;
    local ttl = redis.call('pttl', KEYS[1]);
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl);
    end;
    return 'OK';
end;
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES');
if v[1] ~= nil and v[2] ~= ARGV[4] then
    return ':' .. tostring(v[2]);
end
return nil;
"#;

/// `RedissonPermitExpirableSemaphore.tryReleaseAsync(permitId)` (also behind
/// `release(id)`, which throws on 0). KEYS[1] = K, KEYS[2] = `redisson_sc:{K}`, KEYS[3] =
/// `{K}:timeout`; ARGV[1] = permit id (16 raw bytes), ARGV[2] = 1, ARGV[3] = now ms,
/// ARGV[4] = `publish` or `spublish`. Does no reclaim of others. When the id was in the
/// zset it is removed, K gets +1 and the new total is published (even if the permit had
/// expired). Reply: 1 = released, 0 = unknown id, or it had expired (score <= now).
pub const PERMIT_RELEASE: &str = r#"
local expire = redis.call('zscore', KEYS[3], ARGV[1]);
local removed = redis.call('zrem', KEYS[3], ARGV[1]);
if tonumber(removed) ~= 1 then
    return 0;
end;
local value = redis.call('incrby', KEYS[1], ARGV[2]);
redis.call(ARGV[4], KEYS[2], value);
if tonumber(expire) <= tonumber(ARGV[3]) then
    return 0;
end;
return 1;
"#;

/// `RedissonPermitExpirableSemaphore.tryReleaseAsync(List ids)` (also behind
/// `release(List)`). KEYS[1] = K, KEYS[2] = `redisson_sc:{K}`, KEYS[3] = `{K}:timeout`;
/// ARGV[1] = how many ids, ARGV[2] = now ms, ARGV[3] = `publish` or `spublish`,
/// ARGV[4..] = the ids (16 raw bytes each). Nothing changes if any id is unknown or
/// expired; otherwise reclaims every expired permit (publishing the new total when > 0),
/// removes the ids, adds their count to K and publishes that count.
/// Reply: how many were released (0 = none, all or nothing).
pub const PERMIT_RELEASE_MANY: &str = r#"
for i = 4, #ARGV, 1 do
    local expire = redis.call('zscore', KEYS[3], ARGV[i]);
    if expire== false or tonumber(expire) <= tonumber(ARGV[2]) then
        return 0;
    end;
end;
local expiredIds = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1);
if #expiredIds > 0 then
    redis.call('zrem', KEYS[3], unpack(expiredIds));
    local value = redis.call('incrby', KEYS[1], #expiredIds);
    if tonumber(value) > 0 then
        redis.call(ARGV[3], KEYS[2], value);
    end;
end;
local keys = {};
for i = 4, #ARGV, 1 do
    table.insert(keys, ARGV[i]);
end;
local removed = redis.call('zrem', KEYS[3], unpack(keys));
redis.call('incrby', KEYS[1], removed);
redis.call(ARGV[3], KEYS[2], removed);
return removed;
"#;

/// `RedissonPermitExpirableSemaphore.updateLeaseTimeAsync(permitId, lease)`. KEYS[1] = K,
/// KEYS[2] = `{K}:timeout`, KEYS[3] = `redisson_sc:{K}`; ARGV[1] = permit id (16 raw
/// bytes), ARGV[2] = new deadline ms (now + lease, or 922337203685477 for lease -1),
/// ARGV[3] = now ms, ARGV[4] = `publish` or `spublish`. Reclaims every expired permit
/// first (publishing the new total when > 0), so an expired id is not renewed.
/// Reply: 1 = renewed, 0 = unknown (or expired) id.
pub const PERMIT_UPDATE_LEASE: &str = r#"
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1);
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds));
    local value = redis.call('incrby', KEYS[1], #expiredIds);
    if tonumber(value) > 0 then
        redis.call(ARGV[4], KEYS[3], value);
    end;
end;
local value = redis.call('zscore', KEYS[2], ARGV[1]);
if (value ~= false) then
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1]);
    return 1;
end;
return 0;
"#;

/// `RedissonPermitExpirableSemaphore.availablePermitsAsync()`. KEYS[1] = K, KEYS[2] =
/// `{K}:timeout`, KEYS[3] = `redisson_sc:{K}`; ARGV[1] = now ms, ARGV[2] = `publish` or
/// `spublish`. Reclaims every expired permit (publishing the new total when > 0).
/// Reply: the available permits (0 when K is missing).
pub const PERMIT_AVAILABLE: &str = r#"
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1);
if #expiredIds > 0 then
    redis.call('zrem', KEYS[2], unpack(expiredIds));
    local value = redis.call('incrby', KEYS[1], #expiredIds);
    if tonumber(value) > 0 then
        redis.call(ARGV[2], KEYS[3], value);
    end;
    return value;
end;
local ret = redis.call('get', KEYS[1]);
return ret == false and 0 or ret;
"#;

// Redisson's count-down latch (`RedissonCountDownLatch`). K = the count string; channel
// `redisson_countdownlatch__channel__{K}`, braces always (no `{` check). Messages:
// 0 = count reached zero (opens waiters), 1 = a new count was set / the latch was deleted.
// `getCount` is no script: a plain `GET K` (nil reads as 0).

/// `RedissonCountDownLatch.trySetCountAsync(count)`. KEYS[1] = K, KEYS[2] =
/// `redisson_countdownlatch__channel__{K}`; ARGV[1] = 1 (the new-count message), ARGV[2]
/// = count, ARGV[3] = `publish` or `spublish`. Publishes 1. Reply: 1 = set, 0 = K existed.
pub const LATCH_TRY_SET_COUNT: &str = r#"
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('set', KEYS[1], ARGV[2]);
    redis.call(ARGV[3], KEYS[2], ARGV[1]);
    return 1
else
    return 0
end
"#;

/// `RedissonCountDownLatch.countDownAsync()`. KEYS[1] = K, KEYS[2] =
/// `redisson_countdownlatch__channel__{K}`; ARGV[1] = 0 (the zero-count message), ARGV[2]
/// = `publish` or `spublish`. Deletes K once the count is <= 0 (so counting down a
/// missing latch leaves nothing behind); publishes 0 only when it reached exactly 0.
/// Reply: nil.
pub const LATCH_COUNT_DOWN: &str = r#"
local v = redis.call('decr', KEYS[1]);
if v <= 0 then redis.call('del', KEYS[1]) end;
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;
"#;

/// `RedissonCountDownLatch.deleteAsync()`. KEYS[1] = K, KEYS[2] =
/// `redisson_countdownlatch__channel__{K}`; ARGV[1] = 1 (the new-count message), ARGV[2]
/// = `publish` or `spublish`. Publishes 1 only when K existed. Reply: 1 = deleted, 0 = none.
pub const LATCH_DELETE: &str = r#"
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1]);
    return 1
else
    return 0
end
"#;
