-- emqd-bench @complete: EMQ.COMPLETE QUEUE ID TOKEN as a script.
-- KEYS[1] p.."active", KEYS[2] p.."completed", KEYS[3] p.."metrics:completed", KEYS[4] p.."config"
-- ARGV[1] p, ARGV[2] id, ARGV[3] token, ARGV[4] the server's keep_completed
-- The token is compared as bytes with `attempts`; then the plan of EMQ.COMPLETE:
-- ZREM active, state completed, finished_ms, ZADD completed, metrics +1, and the
-- retention trim (at most 100 of the oldest rows beyond keep_completed).
local p = ARGV[1]
local jk = p .. 'job:' .. ARGV[2]
local row = redis.call('HMGET', jk, 'attempts', 'state')
if not row[1] then return redis.error_reply('EMQSTALE job gone') end
if row[1] ~= ARGV[3] then return redis.error_reply('EMQSTALE token mismatch') end
if row[2] ~= 'active' or not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return redis.error_reply('EMQSTALE job not active')
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('HSET', jk, 'state', 'completed', 'finished_ms', now)
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('HINCRBY', KEYS[3], 'count', 1)
local keep = tonumber(redis.call('HGET', KEYS[4], 'keep_completed') or ARGV[4])
local excess = redis.call('ZCARD', KEYS[2]) - keep
if excess > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, math.min(excess, 100) - 1)
  for _, oid in ipairs(old) do
    redis.call('DEL', p .. 'job:' .. oid)
    redis.call('ZREM', KEYS[2], oid)
  end
end
return redis.status_reply('OK')
