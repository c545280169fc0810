"""The Lua scripts of the operators' calls on :class:`~webhooks.RedisInbox`: stats and purge.

Same keys and layout as :mod:`webhooks._redis._scripts`.
"""

from __future__ import annotations

from typing import Final

from webhooks._redis._scripts import _COMMON

__all__ = ["ADMIN_SCRIPTS"]

# ARGV: none.  Returns {depth, dead, age of the oldest unfinished entry in ms or -1, entries found
# lost, the last loss ("<ms> <from> <to>") or false}.  The stream
# holds unfinished entries and dead letters only, oldest first: the first id not in ``dead`` is
# the oldest unfinished one (looked for among the first 1,000 entries).
STATS: Final = (
    _COMMON
    + """
local dead_count = redis.call('ZCARD', dead)
local depth = redis.call('XLEN', stream) - dead_count
local oldest, start = false, '-'
for _ = 1, 10 do
  if depth == 0 then break end
  local r = redis.call('XRANGE', stream, start, '+', 'COUNT', 100)
  if #r == 0 then break end
  for _, e in ipairs(r) do
    if not redis.call('ZSCORE', dead, e[1]) then oldest = e[1] break end
  end
  if oldest then break end
  start = '(' .. r[#r][1]
end
local age = -1
if oldest then age = now_ms() - tonumber(string.match(oldest, '^(%d+)')) end
return {depth, dead_count, age, tonumber(redis.call('HGET', losses, 'count') or '0'),
        redis.call('HGET', losses, 'last')}
"""
)

# ARGV: group, id, dedup key prefix, retention.  Finishes a dead letter as an ack would (its dedup
# key stays claimed for the retention); 0 when the id is not a dead letter.
PURGE: Final = (
    _COMMON
    + """
if not redis.call('ZSCORE', dead, ARGV[2]) then return 0 end
return ack(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
"""
)

ADMIN_SCRIPTS: Final = {"STATS": STATS, "PURGE": PURGE}
