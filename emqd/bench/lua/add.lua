-- emqd-bench @add: EMQ.ADD QUEUE PAYLOAD as a script (no options: the benchmark sends none).
-- KEYS[1] p.."pending", KEYS[2] p.."meta", KEYS[3] emq:queues
-- ARGV[1] p, ARGV[2] queue name, ARGV[3] payload
-- Writes what EMQ.ADD's plan writes: the row (state, payload, created_ms), the
-- pending entry at score seq, meta.seq and meta.added, and emq:queues for a new queue.
local p = ARGV[1]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
-- the first sequence number whose row no client has created
while redis.call('EXISTS', p .. 'job:' .. seq) == 1 do
  seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
end
local id = tostring(seq)
redis.call('HSET', p .. 'job:' .. id, 'state', 'pending', 'payload', ARGV[3], 'created_ms', now)
redis.call('ZADD', KEYS[1], seq, id)
redis.call('HINCRBY', KEYS[2], 'added', 1)
if not redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  redis.call('ZADD', KEYS[3], now, ARGV[2])
end
return id
