"""One shared store, everything a receiver node needs from it: inbox and registry together.

``RedisBackend(url)`` and ``PostgresBackend(dsn)`` build the inbox and the registry on one store
(for Redis, on one connection pool), and close them together; ``WebhookReceiver.from_redis`` and
``from_postgres`` build one and hand it to the receiver, which closes it when it stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

from webhooks._contract import DEFAULT_CLAIM_TIMEOUT, DEFAULT_DEDUP_RETENTION, Inbox, RegistrySink
from webhooks._postgres import DEFAULT_SCHEMA, PostgresRegistry
from webhooks._redis import RedisRegistry
from webhooks._redis._connect import DEFAULT_PREFIX, DEFAULT_REDIS_URL, connect
from webhooks._redis._durability import RELAXED
from webhooks._registry import DEFAULT_KEEP_FOR
from webhooks.inboxes.postgres import PostgresInbox
from webhooks.inboxes.redis import RedisInbox

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["Backend", "PostgresBackend", "RedisBackend"]


@runtime_checkable
class Backend(Protocol):
    """An inbox and a registry on one shared store, closed together."""

    @property
    def inbox(self) -> Inbox:
        """The inbox on the shared store."""

    @property
    def registry(self) -> RegistrySink:
        """The registry on the shared store, fed by the receiver."""

    async def close(self) -> None:
        """Close the inbox and the registry; idempotent."""


@attrs.define(eq=False, repr=False)
class RedisBackend:
    """A :class:`~webhooks.RedisInbox` and a :class:`~webhooks.RedisRegistry` under one prefix,
    on one connection pool to ``url``.

    Every node given the same ``url`` and ``prefix`` shares one inbox (each delivery is stored
    once, handled by one node) and one registry (a waiter on any node wakes).
    """

    url: str = DEFAULT_REDIS_URL
    prefix: str = attrs.field(default=DEFAULT_PREFIX, kw_only=True)
    claim_timeout: float = attrs.field(default=DEFAULT_CLAIM_TIMEOUT, kw_only=True)
    retention: float = attrs.field(default=DEFAULT_DEDUP_RETENTION, kw_only=True)
    keep_for: float = attrs.field(default=DEFAULT_KEEP_FOR, kw_only=True)
    durability: str = attrs.field(default=RELAXED, kw_only=True)
    """The inbox's: ``"relaxed"`` or ``"strict"`` (see :class:`~webhooks.RedisInbox`)."""
    replicas: int = attrs.field(default=0, kw_only=True)
    replica_timeout: float = attrs.field(default=1.0, kw_only=True)
    inbox: RedisInbox = attrs.field(init=False)
    registry: RedisRegistry = attrs.field(init=False)
    _client: Redis = attrs.field(init=False)

    def __repr__(self) -> str:  # the stores' own reprs: never the password of the URL
        return f"RedisBackend(inbox={self.inbox!r}, registry={self.registry!r})"

    def __attrs_post_init__(self) -> None:
        self.inbox = RedisInbox(
            self.url,
            prefix=self.prefix,
            claim_timeout=self.claim_timeout,
            retention=self.retention,
            durability=self.durability,
            replicas=self.replicas,
            replica_timeout=self.replica_timeout,
        )
        self._client = connect(self.url)
        # The inbox checked url and prefix; the registry shares one pool with nothing to close.
        self.registry = RedisRegistry(
            self.url, prefix=self.prefix, keep_for=self.keep_for, client=self._client
        )

    async def close(self) -> None:
        """Close the registry (its waiters get RegistryClosedError), the inbox, the pool."""
        await self.registry.close()
        await self.inbox.close()
        await self._client.aclose()


@attrs.define(eq=False, repr=False)
class PostgresBackend:
    """A :class:`~webhooks.PostgresInbox` and a :class:`~webhooks.PostgresRegistry` in one
    schema of the database at ``dsn``.

    Every node given the same ``dsn`` and ``schema`` shares one inbox and one registry.
    """

    dsn: str
    schema: str = attrs.field(default=DEFAULT_SCHEMA, kw_only=True)
    claim_timeout: float = attrs.field(default=DEFAULT_CLAIM_TIMEOUT, kw_only=True)
    retention: float = attrs.field(default=DEFAULT_DEDUP_RETENTION, kw_only=True)
    keep_for: float = attrs.field(default=DEFAULT_KEEP_FOR, kw_only=True)
    inbox: PostgresInbox = attrs.field(init=False)
    registry: PostgresRegistry = attrs.field(init=False)

    def __repr__(self) -> str:  # the stores' own reprs: never the password of the URL
        return f"PostgresBackend(inbox={self.inbox!r}, registry={self.registry!r})"

    def __attrs_post_init__(self) -> None:
        self.inbox = PostgresInbox(
            self.dsn,
            schema=self.schema,
            claim_timeout=self.claim_timeout,
            retention=self.retention,
        )
        self.registry = PostgresRegistry(self.dsn, schema=self.schema, keep_for=self.keep_for)

    async def close(self) -> None:
        """Close the registry (its waiters get RegistryClosedError) and the inbox."""
        await self.registry.close()
        await self.inbox.close()
