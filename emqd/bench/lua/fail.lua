-- emqd-bench @fail: EMQ.FAIL QUEUE ID TOKEN ERROR text [BACKOFF ms] as a script.
-- KEYS[1] p.."active", KEYS[2] p.."scheduled", KEYS[3] p.."dead",
-- KEYS[4] p.."metrics:failed", KEYS[5] p.."config"
-- ARGV[1] p, ARGV[2] id, ARGV[3] token, ARGV[4] error text,
-- ARGV[5] backoff ms ('' = the row's rule, else the queue's, else ARGV[7]),
-- ARGV[6] the server's max_attempts, ARGV[7] the server's backoff rule
-- The native verdict: the token is checked against `attempts`, the cap is on
-- `failures` (never on attempts), and the retry waits in `scheduled`.
-- Both count in p.."metrics": `failed`, and `retried` for a retry.
-- Reply: {'dead', f} or {'scheduled', f}.
local p = ARGV[1]
local jk = p .. 'job:' .. ARGV[2]
local row = redis.call('HMGET', jk, 'attempts', 'state', 'failures', 'max_attempts', 'backoff')
if not row[1] then return redis.error_reply('EMQSTALE job gone') end
if row[1] ~= ARGV[3] then return redis.error_reply('EMQSTALE token mismatch') end
if row[2] ~= 'active' or not redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  return redis.error_reply('EMQSTALE job not active')
end
local f = tonumber(row[3] or '0') + 1
local cap = tonumber(row[4] or redis.call('HGET', KEYS[5], 'max_attempts') or ARGV[6])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREM', KEYS[1], ARGV[2])
if f >= cap then
  redis.call('HSET', jk, 'last_error', ARGV[4], 'failures', f, 'state', 'dead', 'finished_ms', now)
  redis.call('ZADD', KEYS[3], now, ARGV[2])
  redis.call('HINCRBY', KEYS[4], 'count', 1)
  redis.call('HINCRBY', p .. 'metrics', 'failed', 1)
  return {'dead', f}
end
local delay = tonumber(ARGV[5])
if not delay then
  -- a rule: N, fixed:N, or exp:BASE[:MAX] (BASE * 2^(f-1), at most MAX or one hour)
  local rule = row[5] or redis.call('HGET', KEYS[5], 'backoff') or ARGV[7]
  local kind, a, b = string.match(rule, '^(%a+):(%d+):?(%d*)$')
  if kind == 'exp' then
    delay = math.min(tonumber(a) * 2 ^ (f - 1), tonumber(b) or 3600000)
  else
    delay = tonumber(a or rule)
  end
end
redis.call('HSET', jk, 'last_error', ARGV[4], 'failures', f, 'state', 'scheduled')
redis.call('ZADD', KEYS[2], now + delay, ARGV[2])
redis.call('HINCRBY', p .. 'metrics', 'failed', 1)
redis.call('HINCRBY', p .. 'metrics', 'retried', 1)
return {'scheduled', f}
