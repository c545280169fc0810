""":class:`RedisRegistry`: the waiter registry across processes, on Redis keys and one channel.

::

    instance B (receiver)                        instance A (waiters)
    resolve(event)                               wait(pid) ─ enrolls in the local Registry
      SET P result:<pid> NX PX keep_for            └─ MGET P result:<pid> (batched) ──┐
      PUBLISH P results <event>  ────────────►  listener (ONE subscription) ─────────┴─► resolve

Why no result is lost: a waiter enrolls locally first, then its result key is read; a result set
after that read is published after that read too, and either the subscription hears it or, if the
subscription was down, the listener re-reads the keys of every pending id as soon as it has
subscribed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from webhooks._checks import positive_seconds
from webhooks._codec import encode_event
from webhooks._errors import RegistryUnavailableError
from webhooks._redis import _scripts
from webhooks._redis._connect import (
    DEFAULT_PREFIX,
    DEFAULT_REDIS_URL,
    check_prefix,
    close,
    connect,
    require_redis,
    translate_errors,
    where,
)
from webhooks._registry import DEFAULT_KEEP_FOR
from webhooks._remote_registry import RemoteRegistry, Wording

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.client import PubSub
    from redis.commands.core import AsyncScript

    from asyncsdk import ProcessCompleted

__all__ = ["RedisRegistry"]

logger = logging.getLogger("webhooks.redis")

_READ_CHUNK: Final = 1000
"""Result keys per MGET."""
_PUBSUB_CLOSE_TIMEOUT: Final = 2.0
"""Seconds a subscription gets to close before its connection is dropped without waiting."""
_CLOSE_TIMEOUT: Final = 5.0
"""Seconds close() waits for its connections to close before moving on."""


@attrs.define(eq=False, repr=False)
class RedisRegistry(RemoteRegistry):
    """A waiter registry shared by every process using the same Redis server and prefix.

    Same API as :class:`~webhooks.Registry`: ``wait`` (the client's ``ResultWaiter``), ``resolve``
    and ``set_healthy`` (the receiver's sink), ``close`` / ``async with``.  A waiter in one process
    is woken by a ``resolve`` in any other::

        async with RedisRegistry("redis://127.0.0.1:6379/0", prefix="myapp:") as registry:
            event = await registry.wait(process_id, timeout=600)

    Each instance holds one pub/sub subscription and at most a small pool of connections, however
    many coroutines wait.  Results are kept in Redis for ``keep_for`` seconds (the first event of a
    process id wins), so a wait that starts late still finds them.
    """

    url: str = DEFAULT_REDIS_URL
    prefix: str = attrs.field(default=DEFAULT_PREFIX, kw_only=True, converter=check_prefix)
    keep_for: float = attrs.field(
        default=DEFAULT_KEEP_FOR, kw_only=True, validator=positive_seconds
    )
    """Seconds a result stays in Redis for waiters that start after it landed."""
    client: Redis | None = attrs.field(default=None, kw_only=True)
    """Your own ``redis.asyncio.Redis`` (then yours to close); by default one is opened on url."""
    ping_interval: float = attrs.field(default=10.0, kw_only=True, validator=positive_seconds)
    """Seconds of silence after which the subscription is pinged; twice that without an answer
    and it is dropped and made again."""
    _redis: Redis = attrs.field(init=False)
    _resolve_script: AsyncScript = attrs.field(init=False)
    _key_prefix: str = attrs.field(init=False)
    _WORDING: ClassVar[Wording] = Wording(
        logger=logger,
        tasks="redis-registry",
        store="Redis",
        lost="subscription to %s lost (%r); subscribing again in %.2f s",
        undecodable="ignoring an undecodable message on %s",
    )

    def __repr__(self) -> str:  # host:port/db only: the URL may hold a password
        return f"RedisRegistry({where(self._redis)!r}, prefix={self.prefix!r})"

    def __attrs_post_init__(self) -> None:
        require_redis()
        self._redis = connect(self.url) if self.client is None else self.client
        self._resolve_script = self._redis.register_script(_scripts.RESOLVE)
        self._key_prefix = _scripts.result_key(self.prefix, "")
        channel = _scripts.results_channel(self.prefix)
        self._setup(keep_for=self.keep_for, scope=self.prefix, channel=channel, source=channel)

    async def resolve(self, event: ProcessCompleted) -> None:
        """Store the event under its process id (first wins), then publish it to every instance.

        Raises :class:`RegistryUnavailableError` when Redis cannot be reached, so the receiver
        retries the event later.
        """
        self._check_can_resolve(event)
        payload = encode_event(event)
        with translate_errors(
            RegistryUnavailableError, RegistryUnavailableError, "registry resolve", self._redis
        ):
            stored = await self._resolve_script(
                keys=[self._key_prefix + event.process_id],
                args=[payload, max(1, round(self.keep_for * 1000)), self._channel],
            )
        if stored:
            self._local.resolve_nowait(event)  # no need to wait for our own echo

    # -- the store's side of listening and reading ----------------------------------------------

    def _unreachable(self, timeout: float) -> str:
        return (
            f"could not subscribe to {self._channel!r} on Redis at {where(self._redis)}"
            f" within {timeout} s; is the server running?"
        )

    async def _release(self) -> None:
        if self.client is None:
            try:
                await asyncio.wait_for(close(self._redis), timeout=_CLOSE_TIMEOUT)
            except TimeoutError:
                logger.warning("Redis connections did not close within %s s", _CLOSE_TIMEOUT)

    async def _listen(self, connected: Callable[[], None]) -> None:
        """The one subscription: deliver messages; each (re)subscribe re-reads pending ids.

        redis-py reconnects and resubscribes by itself after a dropped connection; each new
        subscription is confirmed by a ``subscribe`` message, which is what triggers the re-read.
        """
        loop = asyncio.get_running_loop()
        pubsub: PubSub = self._redis.pubsub()
        try:
            with translate_errors(  # a wrong password: a ConfigurationError that start() raises
                RegistryUnavailableError, RegistryUnavailableError, "registry listen", self._redis
            ):
                await pubsub.subscribe(self._channel)
            heard = loop.time()
            while True:
                message: Any = await pubsub.get_message(timeout=self.ping_interval)
                now = loop.time()
                if message is None:
                    if now - heard >= 2 * self.ping_interval:
                        raise ConnectionError("the subscription stopped answering pings")
                    await pubsub.ping()
                    continue
                heard = now
                kind = message.get("type")
                if kind == "message":
                    self._deliver(message.get("data"))
                elif kind == "subscribe":
                    connected()
        finally:
            await _close_pubsub(pubsub)

    async def _read(self, ids: list[str]) -> None:
        """Read the result keys of ``ids`` (one MGET per chunk)."""
        for chunk in _chunks(ids, _READ_CHUNK):
            values = await self._redis.mget([self._key_prefix + pid for pid in chunk])
            for value in values:
                if value is not None:
                    self._deliver(value)


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def _close_pubsub(pubsub: PubSub) -> None:
    """Close a subscription within a bounded time, so shutting down can never hang on it.

    Its connection is closed first, waiting until it is: ``PubSub.aclose()`` alone drops it
    without waiting, and over TLS closing takes a round trip with the server that would still be
    under way when ``close()`` returned (a socket left open if the event loop ends then).  Should
    that or ``aclose()`` (which waits for the subscription's lock) take too long, the connection
    is dropped without waiting instead.
    """
    connection = pubsub.connection
    try:
        async with asyncio.timeout(_PUBSUB_CLOSE_TIMEOUT):
            if connection is not None:
                await connection.disconnect()  # nobody else reads it: this task was its reader
            await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    except Exception:  # a timeout or a broken connection: drop it without waiting
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.disconnect(nowait=True)
