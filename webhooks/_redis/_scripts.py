"""The Lua scripts of the Redis backends and the pure helpers around them (no I/O here).

Inbox layout, all under the prefix ``P`` (every key expires ``retention`` seconds, less at most
one, after the inbox was last written or claimed from; the dedup keys have their own TTL)::

    P inbox:stream        stream; one entry per accepted event (fields event, raw, at, key);
                          consumer group "workers" (created at id 0, so nothing is skipped)
    P inbox:attempts      hash  entry id -> times handed out, once handed out again (a first
                          hand-out by XREADGROUP, which most entries never follow, is not
                          written: an entry not here was handed out once)
    P inbox:errors        hash  entry id -> last error
    P inbox:delayed       zset  entry id -> due time (ms): retried entries and replayed dead letters
    P inbox:dead          zset  entry id -> receive time (ms): dead letters
    P inbox:dedup:<key>   string, SET NX by put; <key> is the event's dedup key as a JSON array
    P inbox:seq           integer, INCR by each put that stores an entry (no TTL): the high-water
                          mark of accepted entries
    P inbox:losses        hash (no TTL): count (acknowledged entries Redis lost), last (when the
                          last loss was found, ms, and the sequence's fall: "<ms> <from> <to>")

Each node passes the highest ``seq`` it was answered to the puts and claims it sends; a script
that finds ``seq`` below it (Redis restarted from a file that missed acknowledged writes, or failed
over to a replica that had not received them) counts the difference in ``losses``, puts ``seq``
back to the node's mark, and returns the count, which the node logs.

An entry is in exactly one state: *new* (after the group's last delivered id), *claimed* (in the
group's pending list, owned by a consumer), *delayed* (acked from the pending list, id in
``delayed``), *dead* (acked, id in ``dead``).  Ack deletes it from the stream, so the stream only
ever holds unfinished entries and dead letters: its size is bounded by the work outstanding.

Registry layout::

    P result:<process_id> string with TTL: the event, SET NX (the first event wins)
    P results             the one pub/sub channel; each message is an event, published after SET
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from webhooks._codec import decode_event
from webhooks._contract import InboxEntry
from webhooks._errors import InboxError

__all__ = [
    "ACK",
    "ACK_WITH",
    "CLAIM",
    "DEAD_LETTER",
    "DEAD_LETTERS",
    "EXTEND",
    "GROUP",
    "HIGH_WATER",
    "INBOX_SCRIPTS",
    "PENDING_COUNT",
    "PRUNE_CONSUMERS",
    "PURGE",
    "PUT",
    "PUT_CLAIMED",
    "REPLAY",
    "RESOLVE",
    "RETRY_LATER",
    "STATS",
    "InboxKeys",
    "is_entry_id",
    "parse_entry",
    "parse_held",
    "result_key",
    "results_channel",
]

GROUP: Final = "workers"

_ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")


def is_entry_id(entry_id: object) -> bool:
    """True for the ids this inbox hands out (``<ms>-<seq>``); anything else is unknown."""
    return isinstance(entry_id, str) and _ENTRY_ID.fullmatch(entry_id) is not None


class InboxKeys:
    """The key names of one inbox; ``keys`` is the KEYS list every inbox script takes first."""

    def __init__(self, prefix: str) -> None:
        base = f"{prefix}inbox:"
        self.stream = base + "stream"
        self.attempts = base + "attempts"
        self.errors = base + "errors"
        self.delayed = base + "delayed"
        self.dead = base + "dead"
        self.dedup_prefix = base + "dedup:"
        self.seq = base + "seq"
        self.losses = base + "losses"
        self.keys: Final = [
            *(self.stream, self.attempts, self.errors, self.delayed, self.dead),
            *(self.seq, self.losses),
        ]
        self.replayed = base + "replayed"
        """The count of replays (KEYS[8] of REPLAY and STATS only)."""

    def dedup(self, dedup_text: str) -> str:
        return self.dedup_prefix + dedup_text


def parse_entry(row: Sequence[object]) -> InboxEntry:
    """One ``{id, fields, attempts, last_error}`` row of CLAIM or DEAD_LETTERS as an entry."""
    return parse_held(row)[0]


def parse_held(row: Sequence[object]) -> tuple[InboxEntry, bytes]:
    """:func:`parse_entry`, and the entry's dedup key as stored (b'' if it has none) for its ack:
    bytes, sent back as they are, whatever the client's encoding."""
    entry_id, fields, attempts, error = row
    if not isinstance(entry_id, bytes) or not isinstance(fields, list):
        raise InboxError(f"unexpected reply from an inbox script: {row!r}")
    data = dict(zip(fields[::2], fields[1::2], strict=True))
    raw = bytes(data[b"raw"])
    key = data.get(b"key", b"")
    entry = InboxEntry(
        id=entry_id.decode(),
        event=decode_event(data[b"event"], raw),
        raw=raw,
        attempts=int(attempts) if isinstance(attempts, int | bytes) else 0,
        last_error=error.decode("utf-8", "replace") if isinstance(error, bytes) else None,
        received_at=float(data[b"at"]),
    )
    return entry, bytes(key) if isinstance(key, bytes) else b""


def result_key(prefix: str, process_id: str) -> str:
    return f"{prefix}result:{process_id}"


def results_channel(prefix: str) -> str:
    return f"{prefix}results"


# The key names every inbox script starts with.  KEYS: stream, attempts, errors, delayed, dead,
# seq, losses.
_KEY_NAMES = """
local stream, attempts, errors, delayed, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local seq, losses = KEYS[6], KEYS[7]
"""

# The inbox scripts' helpers, by name, each after the helpers it calls.
_HELPERS: Final = {
    "now_ms": """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
""",
    "touch": """
local function touch(ttl)
  for i = 1, 5 do redis.call('EXPIRE', KEYS[i], ttl) end
end
""",
    # touch, unless it was done less than a second ago (half the TTL, for a TTL under two
    # seconds): ``probe`` is a key every touch renews and that lost its TTL if it was created
    # since (one PTTL in place of five EXPIREs per delivery).
    "refresh": """
local function refresh(ttl, probe)
  local ms = tonumber(ttl) * 1000
  if redis.call('PTTL', probe) < ms - math.min(1000, ms / 2) then touch(ttl) end
end
""",
    "field": """
local function field(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then return fields[i + 1] end
  end
  return false
end
""",
    "claimed": """
local function claimed(group, id)
  local p = redis.pcall('XPENDING', stream, group, id, id, 1)
  return type(p) == 'table' and not p.err and #p > 0
end
""",
    # ``known``: the highest seq the calling node was answered.  Below it, Redis lost
    # acknowledged puts: count them, raise seq back to ``known`` (so no other node counts them
    # again), return how many.
    "high_water": """
local function high_water(known)
  known = tonumber(known)
  local now = tonumber(redis.call('GET', seq) or '0')
  if now >= known then return 0 end
  redis.call('SET', seq, known)
  redis.call('HINCRBY', losses, 'count', known - now)
  redis.call('HSET', losses, 'last', now_ms() .. ' ' .. known .. ' ' .. now)
  return known - now
end
""",
    # A hand-out after an entry's first: recorded, and the first (XREADGROUP's, not written)
    # counted if nothing was recorded yet.  Returns the entry's hand-outs.
    "handed_again": """
local function handed_again(id)
  redis.call('HSETNX', attempts, id, 1)
  return redis.call('HINCRBY', attempts, id, 1)
end
""",
    "forget": """
local function forget(id)
  redis.call('HDEL', attempts, id)
  redis.call('HDEL', errors, id)
end
""",
    # Finishes entries, each structure written once for them all.  ``held``: each entry's id,
    # then its dedup key text as the caller read it when the entry was handed out, or '' for the
    # script to read it from the entry.  Each dedup key is kept ``retention`` seconds from now.
    # Returns how many of the entries were unfinished.
    "ack": """
local function ack(group, held, dedup_prefix, retention)
  local ids = {}
  for i = 1, #held, 2 do
    local id, key = held[i], held[i + 1]
    ids[#ids + 1] = id
    if key == '' then
      local e = redis.call('XRANGE', stream, id, id)
      key = #e > 0 and field(e[1][2], 'key')
    end
    if key then
      local dedup = dedup_prefix .. key
      if redis.call('EXPIRE', dedup, retention) == 0 then
        redis.call('SET', dedup, '1', 'EX', retention)
      end
    end
  end
  redis.pcall('XACK', stream, group, unpack(ids))
  redis.call('HDEL', attempts, unpack(ids))
  redis.call('HDEL', errors, unpack(ids))
  redis.call('ZREM', delayed, unpack(ids))
  redis.call('ZREM', dead, unpack(ids))
  return redis.call('XDEL', stream, unpack(ids))
end
""",
}


def _inbox_script(body: str) -> str:
    """An inbox script: the key names, the helpers its body calls (and those they call), then the
    body.  Each helper is a closure made on every run, so a script carries only those it uses
    (the server's work per delivery, ``python -m benchmarks.redis_server_cpu``)."""
    calls, needed = body, set()
    for name in reversed(_HELPERS):
        if re.search(rf"\b{name}\(", calls):
            needed.add(name)
            calls += _HELPERS[name]
    return _KEY_NAMES + "".join(code for name, code in _HELPERS.items() if name in needed) + body


# KEYS: common + dedup key.  ARGV: ttl, event, raw, received_at, dedup text, the node's high-water
# mark.  The dedup claim, the XADD and the INCR of seq happen together or not at all: if XADD
# fails, the claim is undone.  A duplicate renews its dedup key's TTL: a write, so that a WAIT
# after it also waits for the write of the entry it duplicates.  A new entry's INCR also tells
# whether seq had fallen below the mark (high_water's check, without its GET).
# Returns {new id, or false for a duplicate; seq; entries found lost}.
_PUT = """
if not redis.call('SET', KEYS[8], '1', 'NX', 'EX', ARGV[1]) then
  redis.call('EXPIRE', KEYS[8], ARGV[1])
  local lost = high_water(ARGV[6])
  return {false, tonumber(redis.call('GET', seq) or '0'), lost}
end
local id = redis.pcall('XADD', stream, '*', 'event', ARGV[2], 'raw', ARGV[3], 'at', ARGV[4],
                       'key', ARGV[5])
if type(id) == 'table' and id.err then
  redis.call('DEL', KEYS[8])
  return id
end
local n = redis.call('INCR', seq)
local lost = 0
if n - 1 < tonumber(ARGV[6]) then
  redis.call('DECR', seq)
  lost = high_water(ARGV[6])
  n = redis.call('INCR', seq)
end
"""
PUT: Final = _inbox_script(_PUT + "refresh(ARGV[1], stream)\nreturn {id, n, lost}\n")

# As PUT, then ARGV: group, consumer.  Hands the consumer the oldest entry no consumer has taken
# (XREADGROUP: the new one unless others wait before it; the group is created on its first
# NOGROUP).  Returns PUT's reply for a duplicate, else {new id, seq, entries found lost, then the
# row of the entry handed out: id, fields, attempts, last_error}; for the new entry itself, whose
# fields the caller holds, the row is {id, false, attempts, false}.
PUT_CLAIMED: Final = _inbox_script(
    _PUT
    + """
local function read_new()
  return redis.pcall('XREADGROUP', 'GROUP', ARGV[7], ARGV[8], 'COUNT', 1, 'STREAMS', stream, '>')
end
local r = read_new()
if type(r) == 'table' and r.err and string.sub(r.err, 1, 7) == 'NOGROUP' then
  redis.call('XGROUP', 'CREATE', stream, ARGV[7], '0')
  r = read_new()
end
if type(r) == 'table' and r.err then return r end
if not r then
  -- Only if the group was moved past the new entry: undo the put rather than half-succeed.
  redis.call('XDEL', stream, id)
  redis.call('DEL', KEYS[8])
  redis.call('DECR', seq)
  return redis.error_reply('the new entry could not be handed out')
end
local e = r[1][2][1]
refresh(ARGV[1], stream)
-- A first hand-out: one attempt, no error yet.
if e[1] == id then return {id, n, lost, id, false, 1, false} end
return {id, n, lost, e[1], e[2], 1, false}
"""
)

# ARGV: group, consumer, limit, claim timeout (ms), ttl.
# Returns rows {id, fields, attempts, last_error}: due retries first, then abandoned claims, then
# new entries.
CLAIM: Final = _inbox_script(
    """
local group, consumer, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out = {}
if redis.call('EXISTS', stream) == 0 then return out end
redis.pcall('XGROUP', 'CREATE', stream, group, '0')
local recorded = false
-- ``again``: the entries were handed out before (a first hand-out has one attempt, no error).
local function take(entries, again)
  for _, e in ipairs(entries) do
    local id, fields = e[1], e[2]
    if fields and again then
      out[#out + 1] = {id, fields, handed_again(id), redis.call('HGET', errors, id)}
      recorded = true
    elseif fields then
      out[#out + 1] = {id, fields, 1, false}
    end
  end
end
local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now_ms(), 'LIMIT', 0, limit)
for _, id in ipairs(due) do
  redis.call('ZREM', delayed, id)
  local got = redis.call('XCLAIM', stream, group, consumer, 0, id, 'FORCE')
  if #got == 0 then forget(id) end
  take(got, true)
end
local cursor, rounds = '0-0', 0
while #out < limit and rounds < 100 do
  local r = redis.call('XAUTOCLAIM', stream, group, consumer, ARGV[4], cursor,
                       'COUNT', limit - #out)
  take(r[2], true)
  for _, id in ipairs(r[3] or {}) do forget(id) end
  cursor, rounds = r[1], rounds + 1
  if cursor == '0-0' then break end
end
if #out < limit then
  local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', limit - #out,
                       'STREAMS', stream, '>')
  if r then take(r[1][2], false) end
end
refresh(ARGV[5], stream)
-- attempts, if this claim created it, has no TTL yet.
if recorded then refresh(ARGV[5], attempts) end
return out
"""
)

# ARGV: group, consumer, ids...  Resets the idle time of the ids the consumer holds.
EXTEND: Final = _inbox_script(
    """
local n = 0
for i = 3, #ARGV do
  local p = redis.pcall('XPENDING', stream, ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if type(p) == 'table' and not p.err and #p > 0 then
    redis.call('XCLAIM', stream, ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
    n = n + 1
  end
end
return n
"""
)

# ARGV: group, dedup key prefix, retention, then each id followed by its dedup key text or ''
# (see ack).  Returns how many of the entries were unfinished.
ACK: Final = _inbox_script(
    """
return ack(ARGV[1], {unpack(ARGV, 4)}, ARGV[2], ARGV[3])
"""
)

# ARGV: group, consumer, id, its dedup key text or '' (see ack), dedup key prefix, retention, then
# the handlers' writes, each as its argument count followed by its arguments (see encode_writes).
# Only while the consumer holds the entry: the writes, then the ack; otherwise nothing, and 0.  A
# write that fails stops the script with its error before the ack (Redis keeps the writes made
# before it, as MULTI/EXEC would).
ACK_WITH: Final = _inbox_script(
    """
local group, consumer, id = ARGV[1], ARGV[2], ARGV[3]
local p = redis.pcall('XPENDING', stream, group, id, id, 1, consumer)
if type(p) ~= 'table' or p.err or #p == 0 then return 0 end
local i = 7
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + n))
  i = i + n + 1
end
ack(group, {id, ARGV[4]}, ARGV[5], ARGV[6])
return 1
"""
)

# ARGV: group, id, error, delay (ms), ttl.  Only a claimed or already delayed entry moves.
RETRY_LATER: Final = _inbox_script(
    """
local id = ARGV[2]
local held = claimed(ARGV[1], id)
if not held and not redis.call('ZSCORE', delayed, id) then return 0 end
if held then redis.call('XACK', stream, ARGV[1], id) end
redis.call('ZADD', delayed, now_ms() + tonumber(ARGV[4]), id)
redis.call('HSET', errors, id, ARGV[3])
touch(ARGV[5])
return 1
"""
)

# ARGV: group, id, error, ttl, dedup key prefix, retention.
DEAD_LETTER: Final = _inbox_script(
    """
local id = ARGV[2]
local held = claimed(ARGV[1], id)
if not held and not redis.call('ZSCORE', delayed, id) then return 0 end
if held then redis.call('XACK', stream, ARGV[1], id) end
redis.call('ZREM', delayed, id)
local e = redis.call('XRANGE', stream, id, id)
if #e == 0 then forget(id) return 0 end
redis.call('ZADD', dead, tonumber(string.match(id, '^(%d+)')), id)
redis.call('HSET', errors, id, ARGV[3])
redis.call('HSETNX', attempts, id, 1)  -- its first hand-out, if it had no other
local key = field(e[1][2], 'key')
if key then redis.call('SET', ARGV[5] .. key, '1', 'EX', ARGV[6]) end
touch(ARGV[4])
return 1
"""
)

# ARGV: limit.  Rows as CLAIM's, oldest first.
DEAD_LETTERS: Final = _inbox_script(
    """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', dead, 0, tonumber(ARGV[1]) - 1)) do
  local e = redis.call('XRANGE', stream, id, id)
  if #e > 0 then
    out[#out + 1] = {id, e[1][2], redis.call('HGET', attempts, id), redis.call('HGET', errors, id)}
  else
    redis.call('ZREM', dead, id)
    forget(id)
  end
end
return out
"""
)

# KEYS[8]: the count of replays.  ARGV: id, ttl.  Returns 0 when the id is not a dead letter.
REPLAY: Final = _inbox_script(
    """
local id = ARGV[1]
if redis.call('ZREM', dead, id) == 0 then return 0 end
if #redis.call('XRANGE', stream, id, id) == 0 then forget(id) return 0 end
redis.call('HSET', attempts, id, 0)
redis.call('ZADD', delayed, now_ms(), id)
redis.call('INCR', KEYS[8])
redis.call('EXPIRE', KEYS[8], ARGV[2])
touch(ARGV[2])
return 1
"""
)

# ARGV: the node's high-water mark.  Returns {seq, entries found lost}; sent with each claim, so
# that a node that only handles entries finds a loss too.
HIGH_WATER: Final = _inbox_script(
    """
local lost = high_water(ARGV[1])
return {tonumber(redis.call('GET', seq) or '0'), lost}
"""
)

PENDING_COUNT: Final = _inbox_script(
    """
return redis.call('XLEN', stream) - redis.call('ZCARD', dead)
"""
)

# ARGV: group, idle (ms).  Drops consumers that hold nothing and were idle that long.
PRUNE_CONSUMERS: Final = _inbox_script(
    """
local r = redis.pcall('XINFO', 'CONSUMERS', stream, ARGV[1])
if type(r) ~= 'table' or r.err then return 0 end
local n = 0
for _, c in ipairs(r) do
  local name, pending, idle
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1]
    elseif c[i] == 'pending' then pending = c[i + 1]
    elseif c[i] == 'idle' then idle = c[i + 1] end
  end
  if pending == 0 and idle > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', stream, ARGV[1], name)
    n = n + 1
  end
end
return n
"""
)

# -- the operators' calls (asyncsdk inbox stats|purge) --

# KEYS[8]: the count of replays.  ARGV: group.  Returns {depth, dead, age of the oldest unfinished
# entry in ms or -1, entries found lost, the last loss ("<ms> <from> <to>") or false, replays}.
# The oldest unfinished entry is the oldest of the three states that hold them, each read without
# walking the stream (dead letters, however many, are never read): the first *new* entry (after
# the group's last delivered id), the first *claimed* one (XPENDING's summary), the oldest
# *delayed* one (a retry, a replay: the few entries waiting out a pause).
STATS: Final = _inbox_script(
    """
local dead_count = redis.call('ZCARD', dead)
local depth = redis.call('XLEN', stream) - dead_count
local oldest = false
local function older(id)
  if not id then return end
  local ms = tonumber(string.match(id, '^(%d+)'))
  if not oldest or ms < oldest then oldest = ms end
end
if depth > 0 then
  local after = '-'
  local groups = redis.pcall('XINFO', 'GROUPS', stream)
  if type(groups) == 'table' and not groups.err then
    for _, g in ipairs(groups) do
      if field(g, 'name') == ARGV[1] then after = '(' .. field(g, 'last-delivered-id') end
    end
  end
  local new = redis.call('XRANGE', stream, after, '+', 'COUNT', 1)
  if #new > 0 then older(new[1][1]) end
  if after ~= '-' then
    older(redis.call('XPENDING', stream, ARGV[1])[2])
  end
  for _, id in ipairs(redis.call('ZRANGE', delayed, 0, -1)) do older(id) end
end
local age = -1
if oldest then age = math.max(0, now_ms() - oldest) end
return {depth, dead_count, age, tonumber(redis.call('HGET', losses, 'count') or '0'),
        redis.call('HGET', losses, 'last'), tonumber(redis.call('GET', KEYS[8]) or '0')}
"""
)

# ARGV: group, id, dedup key prefix, retention.  Finishes a dead letter as an ack would (its dedup
# key stays claimed for the retention); 0 when the id is not a dead letter.
PURGE: Final = _inbox_script(
    """
if not redis.call('ZSCORE', dead, ARGV[2]) then return 0 end
return ack(ARGV[1], {ARGV[2], ''}, ARGV[3], ARGV[4])
"""
)

INBOX_SCRIPTS: Final = {
    "PUT": PUT,
    "PUT_CLAIMED": PUT_CLAIMED,
    "CLAIM": CLAIM,
    "EXTEND": EXTEND,
    "ACK": ACK,
    "ACK_WITH": ACK_WITH,
    "RETRY_LATER": RETRY_LATER,
    "DEAD_LETTER": DEAD_LETTER,
    "DEAD_LETTERS": DEAD_LETTERS,
    "REPLAY": REPLAY,
    "PENDING_COUNT": PENDING_COUNT,
    "HIGH_WATER": HIGH_WATER,
    "PRUNE_CONSUMERS": PRUNE_CONSUMERS,
    "STATS": STATS,
    "PURGE": PURGE,
}
"""The inbox's scripts by the name :class:`~webhooks.RedisInbox` calls them."""

# KEYS: result key.  ARGV: event, ttl (ms), channel.  SET NX first, PUBLISH only if it was set:
# the key is there before any subscriber hears of it, and the first event wins.
RESOLVE: Final = """
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
"""
