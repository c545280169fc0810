""":class:`RedisInbox`: the receiver's durable inbox on a Redis stream with a consumer group.

Several receiver processes (on several hosts) share one inbox by sharing the Redis server and the
prefix: the dedup claim is one ``SET NX`` for all of them, and any consumer takes over the entries
of a consumer that crashed once their claim is ``claim_timeout`` seconds old (``XAUTOCLAIM``).
Every multi-step change is one Lua script, so no crash leaves an entry half-moved.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from asyncsdk import ConfigurationError
from webhooks._admin import InboxStats
from webhooks._checks import check_consumer, check_limit, positive_seconds, require_seconds
from webhooks._codec import dedup_key_text, encode_event
from webhooks._contract import (
    DEFAULT_CLAIM_TIMEOUT,
    DEFAULT_DEDUP_RETENTION,
    InboxEntry,
    StoredEvent,
)
from webhooks._errors import InboxError, InboxUnavailableError, UnknownEntryError
from webhooks._redis import _scripts
from webhooks._redis._admin_scripts import ADMIN_SCRIPTS
from webhooks._redis._connect import (
    DEFAULT_PREFIX,
    DEFAULT_REDIS_URL,
    check_prefix,
    connect,
    require_redis,
    translate_errors,
    where,
    whole_seconds,
)
from webhooks._redis._pipeline import ScriptPipeline
from webhooks._redis._writes import Arg, RedisWrites, encode_writes

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript


__all__ = ["RedisInbox"]

T = TypeVar("T")

_PRUNE_EVERY: Final = 60.0
"""Seconds between sweeps of consumers that hold nothing (crashed or renamed workers)."""
_PRUNE_IDLE: Final = 3600.0
"""A consumer idle this long and holding nothing is dropped from the group."""


@attrs.define(eq=False, repr=False)
class RedisInbox:
    """An :class:`~webhooks.Inbox` on Redis Streams, shared by every process using the same prefix.

    ::

        inbox = RedisInbox("redis://127.0.0.1:6379/0", prefix="myapp:")
        receiver = WebhookReceiver(..., inbox=inbox)

    ``client`` lets you pass your own ``redis.asyncio.Redis`` (it must not decode responses); it is
    then yours to close.  Otherwise the inbox opens a pool on ``url`` and closes it in ``close``.
    Keys live under ``prefix`` and expire ``retention`` seconds after the inbox was last used; a
    finished event's dedup key is kept ``retention`` seconds after its ack.  Works with one Redis
    server (with replicas or Sentinel), not with Redis Cluster.
    """

    url: str = DEFAULT_REDIS_URL
    prefix: str = attrs.field(default=DEFAULT_PREFIX, kw_only=True, converter=check_prefix)
    claim_timeout: float = attrs.field(
        default=DEFAULT_CLAIM_TIMEOUT, kw_only=True, validator=positive_seconds
    )
    """Seconds after which a claim that was not extended counts as abandoned."""
    retention: float = attrs.field(
        default=DEFAULT_DEDUP_RETENTION, kw_only=True, validator=positive_seconds
    )
    """Seconds a finished event's dedup key is kept; also the TTL of the inbox's other keys."""
    client: Redis | None = attrs.field(default=None, kw_only=True)
    _redis: Redis = attrs.field(init=False)
    _keys: _scripts.InboxKeys = attrs.field(init=False)
    _scripts: dict[str, AsyncScript] = attrs.field(init=False, factory=dict)
    _closed: bool = attrs.field(default=False, init=False)
    _next_prune: float = attrs.field(default=0.0, init=False)
    _pipeline: ScriptPipeline = attrs.field(init=False)
    """Sends puts, claims and acks made close together in one round trip."""

    def __repr__(self) -> str:  # host:port/db only: the URL may hold a password
        return f"RedisInbox({where(self._redis)!r}, prefix={self.prefix!r})"

    def __attrs_post_init__(self) -> None:
        require_redis()
        if self.client is None:
            self._redis = connect(self.url)
        else:
            if self.client.connection_pool.connection_kwargs.get("decode_responses"):
                raise ConfigurationError(
                    "the Redis client given to RedisInbox decodes responses; raw bodies are bytes:"
                    " pass a client made without decode_responses=True"
                )
            self._redis = self.client
        self._keys = _scripts.InboxKeys(self.prefix)
        for name, script in {**_scripts.INBOX_SCRIPTS, **ADMIN_SCRIPTS}.items():
            self._scripts[name] = self._redis.register_script(script)
        self._pipeline = ScriptPipeline(self._redis, self._scripts)

    # -- the Inbox contract -----------------------------------------------------------------

    async def put(self, event: StoredEvent, raw: bytes) -> bool:
        """Claim the event's dedup key and append it to the stream, in one script."""
        return await self.submit_put(event, raw)

    def submit_put(self, event: StoredEvent, raw: bytes) -> asyncio.Future[bool]:
        """Queue :meth:`put` for the next pipeline and return at once with a future for its
        answer; the script runs whatever becomes of the future.

        Puts made while an earlier batch is on the wire (or in the same turn of the event loop)
        go out together in one pipeline; each script still runs atomically on its own, and each
        caller gets its own script's answer.
        """
        dedup = dedup_key_text(event)
        script = self._queued(
            "PUT",
            [*self._keys.keys, self._keys.dedup(dedup)],
            [self._ttl, encode_event(event), bytes(raw), repr(time.time()), dedup],
        )
        answer: asyncio.Future[bool] = script.get_loop().create_future()
        script.add_done_callback(functools.partial(self._pass_on, answer, _is_stored))
        return answer

    def _pass_on(
        self, answer: asyncio.Future[T], read: Callable[[Any], T], script: asyncio.Future[Any]
    ) -> None:
        """Pass a put script's reply (``None`` for a duplicate), as ``read`` makes it, to
        ``answer``; Redis' errors translated."""
        try:
            with translate_errors(InboxUnavailableError, InboxError, "inbox put", self._redis):
                value = read(script.result())
        except Exception as exc:
            if not answer.done():
                answer.set_exception(exc)
            return
        if not answer.done():
            answer.set_result(value)

    def submit_put_claimed(
        self, event: StoredEvent, raw: bytes, consumer: str
    ) -> asyncio.Future[InboxEntry | None]:
        """:meth:`submit_put`, and in the same script the consumer group hands ``consumer`` the
        oldest entry no consumer has taken: the new one, unless others wait before it.  The
        future gets that entry, or ``None`` for a duplicate."""
        consumer = check_consumer(consumer)
        dedup = dedup_key_text(event)
        body = bytes(raw)
        received_at = time.time()
        script = self._queued(
            "PUT_CLAIMED",
            [*self._keys.keys, self._keys.dedup(dedup)],
            [
                *(self._ttl, encode_event(event), body, repr(received_at), dedup),
                *(_scripts.GROUP, consumer),
            ],
        )
        answer: asyncio.Future[InboxEntry | None] = script.get_loop().create_future()

        def handed_out(reply: Any) -> InboxEntry | None:
            return None if reply is None else self._handed_out(reply, event, body, received_at)

        script.add_done_callback(functools.partial(self._pass_on, answer, handed_out))
        return answer

    @staticmethod
    def _handed_out(
        reply: list[Any], event: StoredEvent, raw: bytes, received_at: float
    ) -> InboxEntry:
        """The entry a PUT_CLAIMED script handed out: the new one is built from the event at
        hand; an older one is read from its row."""
        new_id, *row = reply
        if row[0] != new_id:
            return _scripts.parse_entry(row)
        return InboxEntry(
            id=new_id.decode(),
            event=event,
            raw=raw,
            attempts=int(row[2]),
            received_at=received_at,
        )

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        """Due retries and replays first, then abandoned claims, then new entries."""
        consumer = check_consumer(consumer)
        check_limit(limit)
        if limit == 0:
            return []
        await self._maybe_prune()
        rows = await self._batched(
            "CLAIM",
            self._keys.keys,
            [
                _scripts.GROUP,
                consumer,
                limit,
                max(1, round(self.claim_timeout * 1000)),
                self._ttl,
            ],
        )
        return [_scripts.parse_entry(row) for row in rows]

    async def extend(self, consumer: str, entry_ids: Sequence[str]) -> None:
        """Renew the claims ``consumer`` holds on ``entry_ids``: :meth:`~webhooks.Inbox.extend`."""
        consumer = check_consumer(consumer)
        ids = [i for i in entry_ids if _scripts.is_entry_id(i)]
        if ids:
            await self._batched("EXTEND", self._keys.keys, [_scripts.GROUP, consumer, *ids])

    async def ack(self, entry_id: str) -> None:
        """Mark the entry finished for good: :meth:`~webhooks.Inbox.ack`."""
        await self.ack_many((entry_id,))

    async def ack_many(self, entry_ids: Sequence[str]) -> None:
        """:meth:`ack` for every id, in one script call (sent in the next pipeline)."""
        ids = [entry_id for entry_id in entry_ids if _scripts.is_entry_id(entry_id)]
        if ids:
            await self._batched(
                "ACK",
                list(self._keys.keys),
                [_scripts.GROUP, self._keys.dedup_prefix, self._ttl, *ids],
            )

    def new_writes(self) -> RedisWrites:
        """An empty :class:`RedisWrites` for the ``atomic=True`` handlers of one entry."""
        return RedisWrites()

    async def ack_with(self, entry_id: str, consumer: str, writes: Sequence[RedisWrites]) -> bool:
        """Run the ``writes`` (in order) and ack the entry in one script, if ``consumer`` still
        holds it; ``False`` (and nothing written) if it does not."""
        consumer = check_consumer(consumer)
        commands: list[tuple[Arg, ...]] = []
        for buffer in writes:
            if not isinstance(buffer, RedisWrites):
                raise ConfigurationError(
                    f"RedisInbox.ack_with takes RedisWrites from new_writes(), not {buffer!r}"
                )
            commands.extend(buffer.commands)
        if not _scripts.is_entry_id(entry_id):
            return False
        done = await self._batched(
            "ACK_WITH",
            list(self._keys.keys),
            [
                _scripts.GROUP,
                consumer,
                entry_id,
                self._keys.dedup_prefix,
                self._ttl,
                *encode_writes(commands),
            ],
        )
        return bool(done)

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        """Release the entry, due again in ``delay`` s: :meth:`~webhooks.Inbox.retry_later`."""
        delay = require_seconds("delay", delay, zero_ok=True)
        if _scripts.is_entry_id(entry_id):
            delay_ms = round(min(delay, 10 * 365 * 86400.0) * 1000)
            await self._run(
                "RETRY_LATER",
                self._keys.keys,
                [_scripts.GROUP, entry_id, str(error), delay_ms, self._ttl],
            )

    async def dead_letter(self, entry_id: str, error: str) -> None:
        """Park the entry until replayed; record ``error``: :meth:`~webhooks.Inbox.dead_letter`."""
        if _scripts.is_entry_id(entry_id):
            await self._run(
                "DEAD_LETTER",
                self._keys.keys,
                [
                    _scripts.GROUP,
                    entry_id,
                    str(error),
                    self._ttl,
                    self._keys.dedup_prefix,
                    self._ttl,
                ],
            )

    async def dead_letters(self, limit: int = 1000) -> list[InboxEntry]:
        """The parked entries, oldest first: :meth:`~webhooks.Inbox.dead_letters`."""
        check_limit(limit)
        if limit == 0:
            return []
        rows = await self._run("DEAD_LETTERS", self._keys.keys, [limit])
        return [_scripts.parse_entry(row) for row in rows]

    async def replay(self, entry_id: str) -> None:
        """Move a dead letter back to pending, attempts reset: :meth:`~webhooks.Inbox.replay`."""
        if not _scripts.is_entry_id(entry_id) or not await self._run(
            "REPLAY", self._keys.keys, [entry_id, self._ttl]
        ):
            raise UnknownEntryError(
                f"no dead letter with id {entry_id!r} in the inbox under {self.prefix!r};"
                " list them with dead_letters()"
            )

    async def purge(self, entry_id: str) -> None:
        """Drop a dead letter for good: :meth:`~webhooks.InspectableInbox.purge`."""
        args = [_scripts.GROUP, entry_id, self._keys.dedup_prefix, self._ttl]
        if not _scripts.is_entry_id(entry_id) or not await self._run(
            "PURGE", self._keys.keys, args
        ):
            raise UnknownEntryError(
                f"no dead letter with id {entry_id!r} in the inbox under {self.prefix!r};"
                " list them with dead_letters()"
            )

    async def stats(self) -> InboxStats:
        """Depth, oldest entry's age, dead letters: :meth:`~webhooks.InspectableInbox.stats`."""
        depth, dead, age_ms = await self._run("STATS", self._keys.keys, [])
        age = None if int(age_ms) < 0 else int(age_ms) / 1000
        return InboxStats(depth=int(depth), oldest_age=age, dead=int(dead))

    async def pending_count(self) -> int:
        """Entries neither acked nor dead-lettered: :meth:`~webhooks.Inbox.pending_count`."""
        return int(await self._run("PENDING_COUNT", self._keys.keys, []))

    async def check(self) -> None:
        """Raise ``InboxUnavailableError`` if the store is down: :meth:`~webhooks.Inbox.check`."""
        self._check_open()
        with translate_errors(InboxUnavailableError, InboxError, "inbox check", self._redis):
            await self._redis.ping()

    async def close(self) -> None:
        """Release the connections (if this inbox opened them).  Entries stay in Redis."""
        if self._closed:
            return
        self._closed = True
        await self._pipeline.sent()  # the queued puts and acks go out first
        if self.client is None:
            await self._redis.aclose()

    # -- internals ------------------------------------------------------------------------------

    @property
    def _ttl(self) -> int:
        return whole_seconds(self.retention)

    def _check_open(self) -> None:
        if self._closed:
            raise InboxUnavailableError(
                "the Redis inbox is closed; create a new RedisInbox to use it again"
            )

    async def _run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        self._check_open()
        with translate_errors(
            InboxUnavailableError, InboxError, f"inbox {name.lower()}", self._redis
        ):
            return await self._scripts[name](keys=list(keys), args=list(args))

    def _queued(self, name: str, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        """Queue one script for the next pipeline; the future gets redis-py's reply."""
        self._check_open()
        return self._pipeline.queue(name, keys, args)

    async def _batched(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """Run one script in the next pipeline; calls made while one is on the wire (or in the
        same turn of the event loop) share a round trip, each script still atomic on its own."""
        answer = self._queued(name, keys, args)
        with translate_errors(
            InboxUnavailableError, InboxError, f"inbox {name.lower()}", self._redis
        ):
            return await answer

    async def _maybe_prune(self) -> None:
        now = asyncio.get_running_loop().time()
        if now < self._next_prune:
            return
        self._next_prune = now + _PRUNE_EVERY
        idle_ms = round(max(_PRUNE_IDLE, 10 * self.claim_timeout) * 1000)
        await self._run("PRUNE_CONSUMERS", self._keys.keys, [_scripts.GROUP, idle_ms])


def _is_stored(reply: Any) -> bool:
    """A PUT script's reply: the new entry's id, or ``None`` for a duplicate."""
    return reply is not None
