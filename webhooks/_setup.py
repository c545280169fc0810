"""The one-call constructors of :class:`~webhooks.WebhookReceiver`: one node on a backend.

``WebhookReceiver.from_redis(url, ...)``, ``from_postgres(dsn, ...)`` and ``from_backend(...)``
build the inbox and the registry on one store and hand both to the receiver, which owns them:
they close when it stops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Self

from webhooks._contract import DEFAULT_CLAIM_TIMEOUT, Backend, Verifier
from webhooks._postgres import DEFAULT_SCHEMA, PostgresBackend
from webhooks._redis import DEFAULT_PREFIX, DEFAULT_REDIS_URL, RELAXED, RedisBackend

if TYPE_CHECKING:
    from webhooks._contract import Inbox, ResultSink
    from webhooks._lifecycle import Lifecycle

__all__ = ["OneCallSetup"]


class OneCallSetup:
    """The ``from_*`` class methods, kept apart from the receiver's request and worker wiring."""

    if TYPE_CHECKING:  # what the receiver provides
        _life: Lifecycle

        def __init__(
            self, *, inbox: Inbox, verifier: Verifier, registry: ResultSink | None, **options: Any
        ) -> None: ...

        def add_handler(self, func: Callable[..., Awaitable[None]]) -> None: ...

    @classmethod
    def from_backend(
        cls,
        backend: Backend,
        *,
        verifier: Verifier,
        handler: Callable[..., Awaitable[None]] | None = None,
        **options: Any,
    ) -> Self:
        """A receiver on ``backend``'s inbox and registry, which it owns: they close when it
        stops.  ``handler`` (optional) is registered for every event; ``options`` are the
        constructor's."""
        receiver = cls(inbox=backend.inbox, registry=backend.registry, verifier=verifier, **options)
        receiver._life.backend = backend
        if handler is not None:
            receiver.add_handler(handler)
        return receiver

    @classmethod
    def from_redis(
        cls,
        url: str = DEFAULT_REDIS_URL,
        *,
        verifier: Verifier,
        handler: Callable[..., Awaitable[None]] | None = None,
        prefix: str = DEFAULT_PREFIX,
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        durability: str = RELAXED,
        replicas: int = 0,
        **options: Any,
    ) -> Self:
        """One node of a group sharing Redis at ``url`` under ``prefix``: a
        :class:`~webhooks.RedisBackend`'s inbox and registry (``receiver.registry``, to wait on),
        closed when the receiver stops.  ``durability="strict"`` answers 2xx only once the
        delivery is on disk (or on ``replicas`` replicas): see :class:`~webhooks.RedisInbox`."""
        backend = RedisBackend(
            url,
            prefix=prefix,
            claim_timeout=claim_timeout,
            durability=durability,
            replicas=replicas,
        )
        return cls.from_backend(backend, verifier=verifier, handler=handler, **options)

    @classmethod
    def from_postgres(
        cls,
        dsn: str,
        *,
        verifier: Verifier,
        handler: Callable[..., Awaitable[None]] | None = None,
        schema: str = DEFAULT_SCHEMA,
        claim_timeout: float = DEFAULT_CLAIM_TIMEOUT,
        **options: Any,
    ) -> Self:
        """One node of a group sharing the PostgreSQL ``schema`` at ``dsn``: a
        :class:`~webhooks.PostgresBackend`'s inbox and registry (``receiver.registry``, to wait
        on), closed when the receiver stops."""
        backend = PostgresBackend(dsn, schema=schema, claim_timeout=claim_timeout)
        return cls.from_backend(backend, verifier=verifier, handler=handler, **options)
