""":class:`RedisBackend`: a Redis inbox and registry on one connection pool, closed together."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from webhooks._contract import DEFAULT_CLAIM_TIMEOUT, DEFAULT_DEDUP_RETENTION
from webhooks._redis._connect import DEFAULT_PREFIX, DEFAULT_REDIS_URL, close, connect
from webhooks._redis._durability import RELAXED
from webhooks._redis._inbox import RedisInbox
from webhooks._redis._registry import RedisRegistry
from webhooks._registry import DEFAULT_KEEP_FOR

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisBackend"]


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
        self._client = connect(self.url)  # checks the URL; opens no connection yet
        # One pool for both: the server sees one set of connections per node, not two.
        self.inbox = RedisInbox(
            self.url,
            prefix=self.prefix,
            claim_timeout=self.claim_timeout,
            retention=self.retention,
            durability=self.durability,
            replicas=self.replicas,
            replica_timeout=self.replica_timeout,
            client=self._client,
        )
        self.registry = RedisRegistry(
            self.url, prefix=self.prefix, keep_for=self.keep_for, client=self._client
        )

    async def close(self) -> None:
        """Close the registry (its waiters get RegistryClosedError), the inbox (its queued puts
        and acks sent first), then the pool they share."""
        await self.registry.close()
        await self.inbox.close()
        await close(self._client)
