"""The Lua the fronts run in the cluster, each in one queue's hash slot.

They are sent with EVAL (the server caches them by digest): no EVALSHA, so a
primary promoted by a failover, whose script cache is empty, needs nothing
reloaded.
"""

from __future__ import annotations

from typing import Final

# The two scripts that write a queue's data share their first and last parts: the term
# check, and the ops (from ARGV[3] on, each as its count and its arguments) applied
# before `written` takes the batch's number (ARGV[2]).
_TERM_CHECK: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('EMQFENCED the queue has another owner')
end
"""
_OPS_THEN_NUMBER: Final = """
local i = 3
local n = #ARGV
while i <= n do
  local count = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + count))
  i = i + count + 1
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""

# A batch of plans of one queue, applied atomically behind the term check.
# KEYS[1] owner, KEYS[2] written; ARGV[1] the owner's value (its term), ARGV[2] the
# batch's number (`written` once applied), then the ops. A batch already applied (a
# retry after a lost answer) is not applied again, but its number is written again,
# so that the WAIT after it waits for a write.
APPLY: Final = _TERM_CHECK + """
local written = tonumber(redis.call('GET', KEYS[2]) or '0')
local seq = tonumber(ARGV[2])
if written >= seq then
  redis.call('SET', KEYS[2], written)
  return 0
end
if written ~= seq - 1 then
  return redis.error_reply('EMQGAP the cluster holds batch ' .. written .. ', not ' .. (seq - 1))
end
""" + _OPS_THEN_NUMBER

# The whole queue as its owner holds it in memory, written back where the cluster lost
# batches it had acknowledged (sink.py `_restore`): APPLY without its check of the
# batch number. The ops delete every key of the queue the cluster or the owner has,
# then write the owner's, so a retry writes the same again.
RESTORE: Final = _TERM_CHECK + _OPS_THEN_NUMBER

# Renew the leases a front holds on one primary, in one call however many there are: each
# one if its value is still this owner's (then the number of the queue's last batch the
# cluster holds, 0 for none), else -1. The keys are in many slots of this one node, so
# they come as arguments, not declared keys (a script's declared keys must share a slot),
# under the flag that lets a script reach keys of other slots of its node (Redis 7.0,
# Valkey 7.2); one that another node serves now fails the whole call (the slot map is
# then read again). ARGV: the lease in ms, then (owner key, written key, value) a lease.
RENEW: Final = """#!lua flags=allow-cross-slot-keys
local answers = {}
for i = 2, #ARGV, 3 do
  if redis.call('GET', ARGV[i]) == ARGV[i + 2] then
    redis.call('PEXPIRE', ARGV[i], ARGV[1])
    answers[#answers + 1] = tonumber(redis.call('GET', ARGV[i + 1]) or '0')
  else
    answers[#answers + 1] = -1
  end
end
return answers
"""

# Let go of the lease if it is still this owner's (a clean shutdown). KEYS[1] owner.
RELEASE: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# When a queue's work is next due: "0" while it has jobs pending (a claim can take one
# now: in `pending`, or in a lane of the `ring`), else the smallest first score of its
# clock's sets (scheduled jobs, leases, schedules, rate windows), or false when it has
# nothing to do. KEYS: pending, ring, then the four sets.
DUE: Final = """
if redis.call('ZCARD', KEYS[1]) > 0 or redis.call('ZCARD', KEYS[2]) > 0 then return '0' end
local best = false
for i = 3, #KEYS do
  local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
  if first[2] then
    local score = tonumber(first[2])
    if not best or score < best then best = score end
  end
end
if best then return tostring(best) end
return false
"""

# Take over a lease this front's address holds from an earlier life (a restart
# before it ran out): only if the value is still the one seen. KEYS[1] owner;
# ARGV: the value seen, the new value, ms.
TAKE_BACK: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
