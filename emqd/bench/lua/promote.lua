-- emqd-bench @promote: EMQ.PROMOTE QUEUE [LIMIT n] as a script.
-- KEYS[1] p.."scheduled", KEYS[2] p.."pending", KEYS[3] p.."meta"
-- ARGV[1] p, ARGV[2] limit
-- Due jobs enter pending with state pending and ready_ms their due time: at the
-- front of their band when claimed before (attempts present), at the back (a new
-- seq) when never claimed.
-- Reply: how many.
local p = ARGV[1]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[2]))
local due = {}
for i = 1, #found, 2 do
  local id, ready = found[i], found[i + 1]
  table.insert(due, id)
  local jk = p .. 'job:' .. id
  local row = redis.call('HMGET', jk, 'attempts', 'priority')
  local score = tonumber(row[2] or '0') * 1099511627776
  if not row[1] then
    score = score + redis.call('HINCRBY', KEYS[3], 'seq', 1)
  end
  redis.call('ZREM', KEYS[1], id)
  redis.call('HSET', jk, 'ready_ms', ready, 'state', 'pending')
  redis.call('ZADD', KEYS[2], score, id)
end
return #due
