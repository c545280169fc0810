"""The Redis journal of runs: a hash per run under a key prefix, several nodes sharing it
(redis-py, the ``redis`` extra).

redis-py is imported when a journal connects, never when :mod:`asyncsdk` is imported.  Every
change is one Lua script that checks the owner and writes, so no two callers change a run at
once; taking a run over compares its owner and lease as read (a process of this host that has
stopped is seen in Python, not in Redis).  A run is ``<prefix>run:<key>``; the unfinished ones are
listed in the sorted set ``<prefix>unfinished``.  Writes are as durable as the server keeps them:
``appendonly yes`` with ``appendfsync always`` for a journal that survives the server's crash.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from asyncsdk._checks import require_number
from asyncsdk._errors import ConfigurationError
from asyncsdk._journal.contract import (
    Claim,
    RunEntry,
    RunStage,
    recorded,
    stored_ids,
    takeable,
    taken_over,
    translated,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisJournal"]

DEFAULT_PREFIX: Final = "asyncsdk:journal:"

# KEYS: the run, the unfinished set.  ARGV: key, digest, arguments, owner, now, lease_until.
_INSERT: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'key', ARGV[1], 'digest', ARGV[2], 'arguments', ARGV[3],
  'stage', 'intent', 'order_id', '', 'request', '', 'process_ids', '[]', 'result', '',
  'owner', ARGV[4], 'lease_until', ARGV[6], 'updated_at', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
return 1
"""
# KEYS: the run.  ARGV: the owner and lease read, the new owner and lease.
_TAKE_OVER: Final = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'lease_until') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'lease_until', ARGV[4])
return 1
"""
# KEYS: the run, the unfinished set.  ARGV: owner, key, finished (1/0), then field, value...
_ADVANCE: Final = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
if ARGV[3] == '1' then redis.call('ZREM', KEYS[2], ARGV[2]) end
return 1
"""


def _store_errors() -> tuple[type[BaseException], ...]:
    """redis-py's errors, and the network's (redis-py is loaded: the journal has a client)."""
    exceptions = importlib.import_module("redis.exceptions")
    return (exceptions.RedisError, OSError, TimeoutError)


def _text(value: object) -> str:
    """A value as redis-py gives it (bytes, or str when the client decodes) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _entry(journal: RedisJournal, fields: Mapping[Any, Any]) -> RunEntry:
    data = {_text(name): _text(value) for name, value in fields.items()}
    return RunEntry(
        key=data["key"],
        digest=data["digest"],
        arguments=data["arguments"],
        stage=data["stage"],
        order_id=data["order_id"],
        request=data["request"],
        process_ids=stored_ids(journal, data["key"], data["process_ids"]),
        result=data["result"],
        owner=data["owner"],
        lease_until=float(data["lease_until"]),
        updated_at=float(data["updated_at"]),
    )


class RedisJournal:
    """A :class:`~asyncsdk.Journal` on a Redis server, shared by several nodes.

    ::

        journal = RedisJournal.connect("redis://127.0.0.1:6379/0", prefix="myapp:runs:")
        async with Client(journal=journal) as client:
            ...
        await journal.close()

    ``prefix``: the start of every key of the journal.  ``lease``: the seconds a node holds a run
    without renewing it, as for :class:`~asyncsdk.SQLiteJournal`.  Nodes' clocks must agree to
    well within the lease.  A journal made from a client of yours (``RedisJournal(redis)``)
    leaves it open; one from :meth:`connect` closes its own.
    """

    def __init__(self, redis: Redis, *, prefix: str = DEFAULT_PREFIX, lease: float = 30.0) -> None:
        if not isinstance(prefix, str) or not prefix or any(c in prefix for c in "*?[]"):
            raise ConfigurationError(
                f"prefix must be a non-empty str without * ? [ ] such as {DEFAULT_PREFIX!r}, "
                f"not {prefix!r}"
            )
        require_number(
            lease, "lease must be a number of seconds above 0", above=True, error=ConfigurationError
        )
        self._redis = redis
        self.prefix = prefix
        self.lease = float(lease)
        self._owned = False
        self._closed = False
        self._insert = redis.register_script(_INSERT)
        self._take_over = redis.register_script(_TAKE_OVER)
        self._advance = redis.register_script(_ADVANCE)

    @classmethod
    def connect(
        cls, url: str, *, prefix: str = DEFAULT_PREFIX, lease: float = 30.0
    ) -> RedisJournal:
        """A journal on a client of its own for ``url`` (closed by :meth:`close`)."""
        try:
            redis_asyncio = importlib.import_module("redis.asyncio")
        except ImportError as exc:
            raise ConfigurationError(
                "RedisJournal needs redis-py, which is not installed: pip install 'asyncsdk[redis]'"
            ) from exc
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(
                "url must be a redis://, rediss:// or unix:// URL such as "
                "'redis://127.0.0.1:6379/0'"
            )
        journal = cls(redis_asyncio.Redis.from_url(url), prefix=prefix, lease=lease)
        journal._owned = True
        return journal

    def __repr__(self) -> str:
        return f"<RedisJournal prefix={self.prefix!r} lease={self.lease:g}>"

    def _run_key(self, key: str) -> str:
        return f"{self.prefix}run:{key}"

    @property
    def _unfinished_key(self) -> str:
        return f"{self.prefix}unfinished"

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigurationError("the journal is closed; connect a new one")

    @translated(_store_errors)
    async def claim(self, key: str, digest: str, arguments: str, owner: str) -> Claim:
        """Record the run of ``key`` or take a lapsed one over: :meth:`~asyncsdk.Journal.claim`."""
        self._check_open()
        now = time.time()
        until = repr(now + self.lease)
        run_key = self._run_key(key)
        keys = [run_key, self._unfinished_key]
        if await self._insert(keys=keys, args=[key, digest, arguments, owner, repr(now), until]):
            entry = await self.get(key)
            assert entry is not None  # just written
            return Claim(entry, owned=True)
        raw = {_text(name): _text(value) for name, value in (await self._hgetall(run_key)).items()}
        entry = _entry(self, raw)
        if not takeable(entry, digest, now):
            return Claim(entry, owned=False)
        read_lease = raw["lease_until"]  # compared as stored, not as a float
        if await self._take_over(keys=[run_key], args=[entry.owner, read_lease, owner, until]):
            taken = await self.get(key)
            assert taken is not None
            return Claim(taken, owned=True)
        return Claim(entry, owned=False)  # another caller took it between the read and now

    @translated(_store_errors)
    async def advance(
        self,
        key: str,
        owner: str,
        stage: str,
        *,
        order_id: str | None = None,
        request: str | None = None,
        process_ids: tuple[str, ...] | None = None,
        result: str | None = None,
    ) -> None:
        """Record the run's next stage: :meth:`~asyncsdk.Journal.advance`."""
        self._check_open()
        now = time.time()
        changes = {
            **recorded(
                stage,
                order_id=order_id,
                request=request,
                process_ids=process_ids,
                result=result,
            ),
            "lease_until": repr(now + self.lease),
            "updated_at": repr(now),
        }
        flat = [item for pair in changes.items() for item in pair]
        finished = "1" if stage == RunStage.FINISHED else "0"
        keys = [self._run_key(key), self._unfinished_key]
        if not await self._advance(keys=keys, args=[owner, key, finished, *flat]):
            raise taken_over(key, self.lease)

    @translated(_store_errors)
    async def renew(self, key: str, owner: str) -> bool:
        """Extend ``owner``'s lease on ``key``: :meth:`~asyncsdk.Journal.renew`."""
        self._check_open()
        until = repr(time.time() + self.lease)
        keys = [self._run_key(key), self._unfinished_key]
        return bool(await self._advance(keys=keys, args=[owner, key, "0", "lease_until", until]))

    @translated(_store_errors)
    async def release(self, key: str, owner: str) -> None:
        """Give the lease on ``key`` up: :meth:`~asyncsdk.Journal.release`."""
        self._check_open()
        keys = [self._run_key(key), self._unfinished_key]
        await self._advance(keys=keys, args=[owner, key, "0", "owner", "", "lease_until", "0"])

    @translated(_store_errors)
    async def get(self, key: str) -> RunEntry | None:
        """The entry of ``key``, or None: :meth:`~asyncsdk.Journal.get`."""
        self._check_open()
        raw = await self._hgetall(self._run_key(key))
        return _entry(self, raw) if raw else None

    async def _hgetall(self, name: str) -> Mapping[Any, Any]:
        fields: Mapping[Any, Any] = await self._redis.hgetall(name)
        return fields

    @translated(_store_errors)
    async def unfinished(self) -> list[RunEntry]:
        """The runs not finished, oldest first: :meth:`~asyncsdk.Journal.unfinished`."""
        self._check_open()
        keys = await self._redis.zrange(self._unfinished_key, 0, -1)
        entries = [await self.get(_text(key)) for key in keys]
        return [entry for entry in entries if entry is not None]

    async def close(self) -> None:
        """Close the client :meth:`connect` made (never one passed in).  Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._owned:
            await self._redis.aclose()
