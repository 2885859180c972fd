-- emqd-bench @claim: EMQ.CLAIM QUEUE LEASE_MS as a script (one job, no BLOCK).
-- KEYS[1] p.."pending", KEYS[2] p.."active", KEYS[3] p.."dead"
-- ARGV[1] p, ARGV[2] lease ms, ARGV[3] the epoch (run_id) to stamp as lease_epoch
-- Takes the front job (ZPOPMIN order); a ghost (no row) is dropped and skipped,
-- a corrupt attempts is dead-lettered with HINCRBY's text and skipped, as emqd does;
-- a token from a row that held one raises meta.token_floor, as emqd's CLAIM does.
-- Reply: {id, token, payload, failures} or nil.
local p = ARGV[1]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
while true do
  local head = redis.call('ZPOPMIN', KEYS[1])
  if #head == 0 then return false end
  local id = head[1]
  local jk = p .. 'job:' .. id
  if redis.call('EXISTS', jk) == 1 then
    local att = redis.pcall('HINCRBY', jk, 'attempts', 1)
    if type(att) == 'table' and att.err then
      redis.call('HSET', jk, 'state', 'dead', 'last_error', att.err)
      redis.call('ZADD', KEYS[3], now, id)
    else
      if att > 1 then  -- a row that held a token: the queue's token floor (PROTOCOL.md 6.1)
        local floor = tonumber(redis.call('HGET', p .. 'meta', 'token_floor') or '0')
        if att > floor then redis.call('HSET', p .. 'meta', 'token_floor', att) end
      end
      redis.call('HSET', jk, 'state', 'active', 'lease_epoch', ARGV[3], 'claimed_ms', now)
      redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), id)
      local row = redis.call('HMGET', jk, 'payload', 'failures')
      return {id, tostring(att), row[1], tonumber(row[2] or '0')}
    end
  end
end
