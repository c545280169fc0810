""":class:`RedisInbox`: the receiver's durable inbox on a Redis stream with a consumer group.

Several receiver processes (on several hosts) share one inbox by sharing the Redis server and the
prefix: the dedup claim is one ``SET NX`` for all of them, and any consumer takes over the entries
of a consumer that crashed once their claim is ``claim_timeout`` seconds old (``XAUTOCLAIM``).
Every multi-step change is one Lua script, so no crash leaves an entry half-moved.

At start (``check``) the inbox reads the server's persistence and logs what a crash of its host can
lose; ``durability="strict"`` answers a put only once its write is on disk or on replicas, and
refuses a server that cannot promise it.  Each put also counts a sequence of accepted entries in
Redis, and each node remembers the highest it was answered, so that a restart of Redis that lost
acknowledged entries is found, logged and counted (``webhooks._redis._durability``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs

from asyncsdk import ConfigurationError
from webhooks._checks import check_consumer, check_limit, positive_seconds, require_seconds
from webhooks._codec import dedup_key_text, encode_event
from webhooks._contract import (
    DEFAULT_CLAIM_TIMEOUT,
    DEFAULT_DEDUP_RETENTION,
    InboxEntry,
    InboxStats,
    StoredEvent,
)
from webhooks._errors import InboxError, InboxUnavailableError, UnknownEntryError
from webhooks._redis import _scripts
from webhooks._redis._connect import (
    DEFAULT_PREFIX,
    DEFAULT_REDIS_URL,
    check_prefix,
    close,
    connect,
    read_persistence,
    require_redis,
    translate_errors,
    where,
    whole_seconds,
)
from webhooks._redis._durability import (
    DURABILITY_MODES,
    RELAXED,
    STRICT,
    Persistence,
    StrictStep,
    crash_loss,
    last_loss,
    loss_line,
    refuse_cluster,
    start_line,
    strict_step,
)
from webhooks._redis._pipeline import ScriptPipeline
from webhooks._redis._writes import Arg, RedisWrites, encode_writes

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript


__all__ = ["RedisInbox"]

T = TypeVar("T")

logger = logging.getLogger("webhooks")

_PRUNE_EVERY: Final = 60.0
"""Seconds between sweeps of consumers that hold nothing (crashed or renamed workers)."""
_PRUNE_IDLE: Final = 3600.0
"""A consumer idle this long and holding nothing is dropped from the group."""
_MARK_EVERY: Final = 1.0
"""Seconds between the checks of the sequence sent with claims (puts check it each time)."""
_MAX_REPLICA_TIMEOUT: Final = 5.0
"""Longest ``replica_timeout``: well within the socket timeout of the inbox's connections."""
_ACK_AT_MOST: Final = 1000
"""Ids per ACK script call (Lua unpacks at most about 8,000 values at once)."""
_HELD_AT_MOST: Final = 100_000
"""Entries whose dedup key an inbox remembers for their acks: far more than a node's workers hold
at once; past it the oldest is forgotten (its ack then reads the entry)."""
_PERSISTENCE_FRESH: Final = 30.0
"""Seconds :meth:`RedisInbox.stats` reuses its last read of the server's persistence (``INFO``
and ``CONFIG GET``): a node reads its figures every few seconds, and persistence rarely changes."""


def _check_durability(_: object, __: object, value: object) -> None:
    if value not in DURABILITY_MODES:
        raise ConfigurationError(
            f"durability must be {RELAXED!r} (the default: answer once Redis has the write) or"
            f" {STRICT!r} (answer once it is on disk or on replicas), not {value!r}"
        )


def _check_replicas(_: object, __: object, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigurationError(
            f"replicas must be an int of 0 or more (the replicas each strict put waits for),"
            f" not {value!r}"
        )


def _check_replica_timeout(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if require_seconds(attribute.name, value, zero_ok=False) > _MAX_REPLICA_TIMEOUT:
        raise ConfigurationError(
            f"replica_timeout must be at most {_MAX_REPLICA_TIMEOUT:g} s, not {value!r}: a put"
            " waits that long for the replicas before the sender is answered"
        )


@attrs.define(eq=False, repr=False)
class RedisInbox:
    """An :class:`~webhooks.Inbox` on Redis Streams, shared by every process using the same prefix.

    ::

        inbox = RedisInbox("redis://127.0.0.1:6379/0", prefix="myapp:")
        receiver = WebhookReceiver(..., inbox=inbox)

    ``client`` lets you pass your own ``redis.asyncio.Redis`` (it must not decode responses); it is
    then yours to close.  Otherwise the inbox opens a pool on ``url`` and closes it in ``close``.
    Keys live under ``prefix`` and expire ``retention`` seconds (less at most one) after the inbox
    was last used; a finished event's dedup key is kept ``retention`` seconds after its ack.
    Works with one Redis server (with replicas or Sentinel), not with Redis Cluster.

    ``durability`` says when a put is answered (and so when the receiver answers 2xx):

    ``"relaxed"`` (the default)
        Once Redis has the write.  What a crash of the Redis host can lose is the window of its
        persistence (``appendfsync everysec``: about 1 s), logged at start.  Each put counts a
        sequence in Redis and each node remembers the highest it was answered: a node running
        across a restart of Redis that lost acknowledged entries logs an error naming how many at
        its next put or claim, and ``stats()`` counts them (``lost``).

    ``"strict"``
        Once the write is on disk or on replicas: with ``replicas=N`` (N > 0), each pipeline of
        puts is followed by ``WAIT N`` (``replica_timeout`` seconds at most, else the put fails and
        the sender is answered 503); otherwise the server must run ``appendonly yes`` with
        ``appendfsync always`` (it fsyncs each write before answering; each pipeline of puts ends
        with a ``CONFIG GET`` that checks it still does), or be Redis 7.2+, where ``WAITAOF``
        waits for the fsync.  Checked at start (``check()``, which the receiver calls): a server
        that cannot promise it is refused with :class:`~asyncsdk.ConfigurationError` naming the
        fix; one that stops promising it later (a ``CONFIG SET``, a restart with another
        ``redis.conf``) fails the puts, which the sender is answered 503 for.
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
    durability: str = attrs.field(default=RELAXED, kw_only=True, validator=_check_durability)
    """``"relaxed"`` or ``"strict"``: see the class docstring."""
    replicas: int = attrs.field(default=0, kw_only=True, validator=_check_replicas)
    """With ``durability="strict"``: the replicas each put waits for (``WAIT``); 0 to wait for
    the disk instead."""
    replica_timeout: float = attrs.field(
        default=1.0, kw_only=True, validator=_check_replica_timeout
    )
    """Seconds a strict put waits for its replicas (or its fsync, with ``WAITAOF``)."""
    _redis: Redis = attrs.field(init=False)
    _keys: _scripts.InboxKeys = attrs.field(init=False)
    _scripts: dict[str, AsyncScript] = attrs.field(init=False, factory=dict)
    _closed: bool = attrs.field(default=False, init=False)
    _next_prune: float = attrs.field(default=0.0, init=False)
    _pipeline: ScriptPipeline = attrs.field(init=False)
    """Sends puts, claims and acks made close together in one round trip."""
    _high_water: int = attrs.field(default=0, init=False)
    """The highest sequence of accepted entries this node was answered."""
    _announced: bool = attrs.field(default=False, init=False)
    _step: StrictStep | None = attrs.field(default=None, init=False)
    """Strict mode: how each put becomes durable on this server, once read."""
    _planning: asyncio.Task[StrictStep] | None = attrs.field(default=None, init=False)
    _tasks: set[asyncio.Task[None]] = attrs.field(factory=set, init=False)
    _next_mark: float = attrs.field(default=0.0, init=False)
    _persistence_read: tuple[float, Persistence] | None = attrs.field(default=None, init=False)
    """``time.monotonic()`` of the last persistence read for :meth:`stats`, and what it gave."""
    _held: OrderedDict[str, str | bytes] = attrs.field(factory=OrderedDict, init=False)
    """The dedup key of each entry this inbox handed out and that was not settled through it
    yet, oldest first, at most ``_HELD_AT_MOST``: their acks need not read the entries back (the
    server's work per delivery, ``python -m benchmarks.redis_server_cpu``).  An ack of an id not
    here has the script read it."""

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
        for name, script in _scripts.INBOX_SCRIPTS.items():
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
        known = self._high_water
        return self._submit(
            "PUT",
            [*self._keys.keys, self._keys.dedup(dedup)],
            [
                *(self._ttl, encode_event(event), bytes(raw), repr(time.time()), dedup),
                known,
            ],
            functools.partial(self._is_stored, known),
        )

    def _submit(
        self, name: str, keys: list[str], args: list[Any], read: Callable[[Any], T]
    ) -> asyncio.Future[T]:
        """Queue a put script and return a future for its reply, as ``read`` makes it.  In
        strict mode before the server's persistence is known, the script is queued once it is
        (and not at all if the server is refused)."""
        self._check_open()
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()
        if self.durability == RELAXED or self._step is not None:
            script = self._pipeline.queue(name, keys, args)
            script.add_done_callback(functools.partial(self._pass_on, answer, read))
        else:
            task = loop.create_task(self._submit_when_strict(name, keys, args, read, answer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return answer

    async def _submit_when_strict(
        self,
        name: str,
        keys: list[str],
        args: list[Any],
        read: Callable[[Any], T],
        answer: asyncio.Future[T],
    ) -> None:
        try:
            await self._strict_step()
        except Exception as exc:
            if not answer.done():
                answer.set_exception(exc)
            return
        script = self._pipeline.queue(name, keys, args)
        script.add_done_callback(functools.partial(self._pass_on, answer, read))

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
        known = self._high_water

        def handed_out(reply: Any) -> InboxEntry | None:
            if not self._is_stored(known, reply):
                return None
            return self._handed_out(reply[3:], reply[0], event, body, received_at, dedup)

        return self._submit(
            "PUT_CLAIMED",
            [*self._keys.keys, self._keys.dedup(dedup)],
            [
                *(self._ttl, encode_event(event), body, repr(received_at), dedup),
                *(known, _scripts.GROUP, consumer),
            ],
            handed_out,
        )

    def _is_stored(self, known: int, reply: Any) -> bool:
        """A put script's reply ``{new id or None, seq, lost}`` to a put sent with the mark
        ``known``: the sequence noted, and whether the entry was stored (``False`` for a
        duplicate)."""
        self._note(known, int(reply[1]), int(reply[2]))
        return reply[0] is not None

    def _note(self, known: int, seq: int, lost: int) -> None:
        """Remember the highest sequence answered; log a loss a script found below ``known``,
        the mark it was sent with."""
        if lost > 0:
            logger.error(loss_line(lost, known, where(self._redis), self.prefix))
        self._high_water = max(self._high_water, seq)

    def _handed_out(
        self,
        row: list[Any],
        new_id: bytes,
        event: StoredEvent,
        raw: bytes,
        received_at: float,
        dedup: str,
    ) -> InboxEntry:
        """The entry a PUT_CLAIMED script handed out (its ``row``): the new one is built from
        the event at hand; an older one is read from its row."""
        if row[0] != new_id:
            return self._hold(row)
        entry = InboxEntry(
            id=new_id.decode(),
            event=event,
            raw=raw,
            attempts=int(row[2]),
            received_at=received_at,
        )
        self._note_held(entry.id, dedup)
        return entry

    def _hold(self, row: list[Any]) -> InboxEntry:
        """The entry of a row a script handed out, its dedup key noted for its ack."""
        entry, dedup = _scripts.parse_held(row)
        self._note_held(entry.id, dedup)
        return entry

    def _note_held(self, entry_id: str, dedup: str | bytes) -> None:
        if len(self._held) >= _HELD_AT_MOST:
            self._held.popitem(last=False)
        self._held[entry_id] = dedup

    async def claim_batch(self, consumer: str, limit: int) -> list[InboxEntry]:
        """Due retries and replays first, then abandoned claims, then new entries."""
        consumer = check_consumer(consumer)
        check_limit(limit)
        if limit == 0:
            return []
        await self._maybe_prune()
        self._check_mark()
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
        return [self._hold(row) for row in rows]

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
        """:meth:`ack` for every id, in one script call per 1,000 ids (sent in the next
        pipeline)."""
        held: list[str | bytes] = []
        for entry_id in entry_ids:
            if _scripts.is_entry_id(entry_id):
                held += (entry_id, self._held.pop(entry_id, ""))
        step = 2 * _ACK_AT_MOST
        await asyncio.gather(
            *(
                self._batched(
                    "ACK",
                    list(self._keys.keys),
                    [_scripts.GROUP, self._keys.dedup_prefix, self._ttl, *held[at : at + step]],
                )
                for at in range(0, len(held), step)
            )
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
                self._held.pop(entry_id, ""),
                self._keys.dedup_prefix,
                self._ttl,
                *encode_writes(commands),
            ],
        )
        return bool(done)

    async def retry_later(self, entry_id: str, error: str, delay: float) -> None:
        """Release the entry, due again in ``delay`` s: :meth:`~webhooks.Inbox.retry_later`."""
        delay = require_seconds("delay", delay, zero_ok=True)
        self._held.pop(entry_id, None)
        if _scripts.is_entry_id(entry_id):
            delay_ms = round(min(delay, 10 * 365 * 86400.0) * 1000)
            await self._run(
                "RETRY_LATER",
                self._keys.keys,
                [_scripts.GROUP, entry_id, str(error), delay_ms, self._ttl],
            )

    async def dead_letter(self, entry_id: str, error: str) -> None:
        """Park the entry until replayed; record ``error``: :meth:`~webhooks.Inbox.dead_letter`."""
        self._held.pop(entry_id, None)
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
            "REPLAY", [*self._keys.keys, self._keys.replayed], [entry_id, self._ttl]
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
        """Depth, oldest age, dead letters; what a host crash can lose, as the server's
        persistence said within the last 30 s; acknowledged entries found lost; replays so far."""
        keys = [*self._keys.keys, self._keys.replayed]
        depth, dead, age_ms, lost, last, replayed = await self._run("STATS", keys, [_scripts.GROUP])
        age = None if int(age_ms) < 0 else int(age_ms) / 1000
        persistence = await self._recent_persistence()
        return InboxStats(
            depth=int(depth),
            oldest_age=age,
            dead=int(dead),
            durability=f"{persistence.describe()}: {crash_loss(persistence)}",
            lost=int(lost),
            last_loss=last_loss(last),
            replayed=int(replayed),
        )

    async def pending_count(self) -> int:
        """Entries neither acked nor dead-lettered: :meth:`~webhooks.Inbox.pending_count`."""
        return int(await self._run("PENDING_COUNT", self._keys.keys, []))

    async def check(self) -> None:
        """PING; the first time, also read the server's persistence and log what a crash of its
        host can lose; in strict mode, refuse a server that cannot promise it
        (:class:`~asyncsdk.ConfigurationError`)."""
        self._check_open()
        with translate_errors(InboxUnavailableError, InboxError, "inbox check", self._redis):
            await self._redis.ping()
        if self.durability == STRICT:
            await self._strict_step()
        elif not self._announced:
            persistence = await self._persistence()
            self._announced = True
            logger.info(start_line(persistence, where(self._redis), None))

    async def exists(self) -> bool:
        """Whether anything is stored under the prefix, asked without writing anything (a
        receiver's keys appear with its first delivery)."""
        self._check_open()
        with translate_errors(InboxUnavailableError, InboxError, "inbox exists", self._redis):
            # The prefix holds no glob character (checked when the inbox is made).
            async for _ in self._redis.scan_iter(match=self.prefix + "*", count=1000):
                return True
        return False

    async def close(self) -> None:
        """Release the connections (if this inbox opened them).  Entries stay in Redis."""
        if self._closed:
            return
        self._closed = True
        if self._tasks:  # strict puts waiting for the first read of the server
            await asyncio.wait(self._tasks)
        await self._pipeline.sent()  # the queued puts and acks go out first
        if self.client is None:
            await close(self._redis)

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

    async def _persistence(self) -> Persistence:
        with translate_errors(
            InboxUnavailableError, InboxError, "inbox persistence check", self._redis
        ):
            persistence = await read_persistence(self._redis)
        refuse_cluster(persistence, where(self._redis))
        return persistence

    async def _recent_persistence(self) -> Persistence:
        """The server's persistence, read again only when the last read is over
        ``_PERSISTENCE_FRESH`` seconds old."""
        now = time.monotonic()
        if self._persistence_read is not None:
            read_at, persistence = self._persistence_read
            if now - read_at < _PERSISTENCE_FRESH:
                return persistence
        persistence = await self._persistence()
        self._persistence_read = (now, persistence)
        return persistence

    async def _strict_step(self) -> StrictStep:
        """Strict mode's step on this server, read once (one read for concurrent callers)."""
        if self._step is not None:
            return self._step
        if self._planning is None:
            self._planning = asyncio.get_running_loop().create_task(self._plan())
            self._planning.add_done_callback(self._planned)
        return await asyncio.shield(self._planning)

    def _planned(self, planning: asyncio.Task[StrictStep]) -> None:
        """A failed read is read again by the next put or check (its error is theirs)."""
        if planning.cancelled() or planning.exception() is not None:
            self._planning = None

    async def _plan(self) -> StrictStep:
        persistence = await self._persistence()
        step = strict_step(persistence, self.replicas, self.replica_timeout, where(self._redis))
        self._use(step)
        if not self._announced:
            self._announced = True
            logger.info(start_line(persistence, where(self._redis), step))
        return step

    def _use(self, step: StrictStep) -> None:
        self._step = step
        self._pipeline.after_puts = step

    def _check_mark(self) -> None:
        """At most every ``_MARK_EVERY`` seconds, send the node's mark with the next claim (in
        its round trip), so that a node that stores nothing finds a loss too."""
        now = asyncio.get_running_loop().time()
        if not self._high_water or now < self._next_mark:
            return
        self._next_mark = now + _MARK_EVERY
        known = self._high_water
        mark = self._queued("HIGH_WATER", self._keys.keys, [known])
        mark.add_done_callback(functools.partial(self._noted, known))

    def _noted(self, known: int, reply: asyncio.Future[Any]) -> None:
        """A HIGH_WATER script's reply ``{seq, lost}`` noted (an error is the claim's too).

        In relaxed mode every entry counted in the sequence was answered 2xx once Redis had it,
        so the mark rises to it.  In strict mode the sequence also counts puts whose write was
        never confirmed (answered 503, as when the server stopped fsyncing each write): only
        this node's own confirmed puts raise its mark, so that a restart losing unconfirmed
        writes is not reported as a loss of acknowledged deliveries."""
        if not reply.cancelled() and reply.exception() is None:
            seq, lost = reply.result()
            self._note(known, int(seq) if self.durability == RELAXED else known, int(lost))

    async def _maybe_prune(self) -> None:
        now = asyncio.get_running_loop().time()
        if now < self._next_prune:
            return
        self._next_prune = now + _PRUNE_EVERY
        idle_ms = round(max(_PRUNE_IDLE, 10 * self.claim_timeout) * 1000)
        await self._run("PRUNE_CONSUMERS", self._keys.keys, [_scripts.GROUP, idle_ms])
