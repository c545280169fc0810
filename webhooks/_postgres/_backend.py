""":class:`PostgresBackend`: a PostgreSQL inbox and registry in one schema, closed together."""

from __future__ import annotations

import attrs

from webhooks._contract import DEFAULT_CLAIM_TIMEOUT, DEFAULT_DEDUP_RETENTION
from webhooks._postgres._connect import DEFAULT_SCHEMA
from webhooks._postgres._inbox import PostgresInbox
from webhooks._postgres._registry import PostgresRegistry
from webhooks._registry import DEFAULT_KEEP_FOR

__all__ = ["PostgresBackend"]


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
    listen_dsn: str | None = attrs.field(default=None, kw_only=True)
    """The registry's :attr:`~webhooks.PostgresRegistry.listen_dsn`: a direct connection for
    its LISTEN when ``dsn`` goes through a pooler in transaction mode."""
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
        self.registry = PostgresRegistry(
            self.dsn, schema=self.schema, keep_for=self.keep_for, listen_dsn=self.listen_dsn
        )

    async def close(self) -> None:
        """Close the registry (its waiters get RegistryClosedError) and the inbox."""
        await self.registry.close()
        await self.inbox.close()
