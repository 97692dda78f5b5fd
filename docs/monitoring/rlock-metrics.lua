#!lua flags=no-writes,allow-stale
-- rlock-metrics.lua: INFO rlock for redis_exporter's --script option.
--
-- redis_exporter runs this with EVAL (EVAL_RO with --lua-script-read-only) and turns each
-- name/value pair of the reply into redis_script_values{key="<name>"}. It reads the reply as
-- a flat array of bulk strings (name, value, name, value, ...): an integer reply fails the whole
-- script, and so does a value that does not parse as a float. So every value here is a string
-- of digits, and fields that are not numbers are left out.
--
-- Names are the INFO field names, with the rlock_ prefix the server adds:
--   rlock_acquires:12                           -> rlock_acquires 12
--   rlock_wait_usec_lock:p50=..,p99=..,p99.9=..  -> rlock_wait_usec_lock_p50, _p99, _p99_9
--   rlock_waitstat_lock:granted=..,timeouts=..   -> rlock_waitstat_lock_granted, _timeouts, ...
--   rlock_handoff_usec:p50=..                    -> rlock_handoff_usec_p50, ...
--   rlock_version:2.2.0                          -> rlock_version_number 20200 (as MODULE LIST's ver)
-- Any other field of name:k=v,... form becomes name_k (a '.' in k becomes '_').
--
-- The shebang (Redis 7.0+, Valkey): no-writes, the server refuses any write from it; it runs
-- with EVAL_RO, on replicas and out of memory; allow-stale, it also runs on a replica cut off
-- from its primary with replica-serve-stale-data no, where a plain script fails (MASTERDOWN)
-- and redis_exporter would report the server down.

local reply = {}

local function put(name, value)
    if string.find(value, '^%-?%d+$') or string.find(value, '^%-?%d+%.%d+$') then
        reply[#reply + 1] = name
        reply[#reply + 1] = value
    end
end

local info = redis.call('INFO', 'rlock')
for line in string.gmatch(info, '[^\r\n]+') do
    local name, value = string.match(line, '^(rlock_[%w_]+):(.*)$')
    if name == 'rlock_version' then
        local x, y, z = string.match(value, '^(%d+)%.(%d+)%.(%d+)$')
        if x then
            put('rlock_version_number', tostring(tonumber(x) * 10000 + tonumber(y) * 100 + tonumber(z)))
        end
    elseif name and string.find(value, '=', 1, true) then
        for k, v in string.gmatch(value, '([^,=]+)=([^,]*)') do
            put(name .. '_' .. (string.gsub(k, '%.', '_')), v)
        end
    elseif name then
        put(name, value)
    end
end

return reply
