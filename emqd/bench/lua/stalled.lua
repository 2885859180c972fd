-- emqd-bench @stalled: EMQ.STALLED.CHECK QUEUE [MAXSTALLED n] [LIMIT n] as a script,
-- with the native rules: every member is judged before the first write.
-- KEYS[1] p.."active", KEYS[2] p.."pending", KEYS[3] p.."dead", KEYS[4] p.."metrics:failed"
-- ARGV[1] p, ARGV[2] max_stalled, ARGV[3] limit, ARGV[4] the current epoch (run_id)
-- A ghost (no row) leaves active and is listed nowhere; a lease from another
-- epoch is exempt (back to pending, not counted); otherwise stalled + 1 and
-- dead at max_stalled, else back to the front of pending (and p.."metrics" stalled + 1).
-- Reply: {{recovered ids...}, {dead ids...}}.
local p = ARGV[1]
local maxst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local exp = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
-- read pass: a verdict for every member, or a refusal with nothing written
local verdicts = {}
for i, id in ipairs(exp) do
  local jk = p .. 'job:' .. id
  local kind = redis.call('TYPE', jk).ok
  if kind == 'none' then
    verdicts[i] = {'ghost'}
  elseif kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
  else
    local row = redis.call('HMGET', jk, 'lease_epoch', 'stalled', 'priority')
    local band = tonumber(row[3] or '0') * 1099511627776
    if row[1] ~= ARGV[4] then
      verdicts[i] = {'exempt', band}
    else
      local s = row[2] or '0'
      if not string.match(s, '^-?[1-9]%d*$') and s ~= '0' then
        return redis.error_reply('ERR hash value is not an integer')
      end
      verdicts[i] = {'counted', band, tonumber(s) + 1}
    end
  end
end
-- write pass
local recovered, dead = {}, {}
for i, id in ipairs(exp) do
  local v = verdicts[i]
  local jk = p .. 'job:' .. id
  redis.call('ZREM', KEYS[1], id)
  if v[1] == 'exempt' then
    redis.call('HSET', jk, 'ready_ms', now, 'state', 'pending')
    redis.call('ZADD', KEYS[2], v[2], id)
    table.insert(recovered, id)
  elseif v[1] == 'counted' then
    if v[3] >= maxst then
      redis.call('HSET', jk, 'stalled', v[3], 'state', 'dead', 'last_error', 'stalled',
        'finished_ms', now)
      redis.call('ZADD', KEYS[3], now, id)
      redis.call('HINCRBY', KEYS[4], 'count', 1)
      table.insert(dead, id)
    else
      redis.call('HSET', jk, 'stalled', v[3], 'ready_ms', now, 'state', 'pending')
      redis.call('ZADD', KEYS[2], v[2], id)
      redis.call('HINCRBY', p .. 'metrics', 'stalled', 1)
      table.insert(recovered, id)
    end
  end
end
return {recovered, dead}
