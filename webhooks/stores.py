"""The stores a receiver keeps deliveries in, one :class:`Store` row each in :data:`STORES`.

The command line (``asyncsdk inbox``, ``asyncsdk receiver``), the test suite's parametrization
and the benchmarks iterate this table; a new store is its package under ``webhooks/`` and one row
here (and, if it is public, its exports and reference entry)::

    from webhooks.stores import store_named

    redis = store_named("redis")
    inbox = redis.open_inbox("redis://127.0.0.1:6379/0", "myapp:")
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, Generic, Protocol, TypeVar

import attrs

from asyncsdk import ConfigurationError
from webhooks._contract import Backend, InspectableInbox
from webhooks._memory import MemoryInbox
from webhooks._postgres import DEFAULT_SCHEMA, PostgresBackend, PostgresInbox
from webhooks._redis import DEFAULT_PREFIX, RedisBackend, RedisInbox
from webhooks._sqlite import SQLiteInbox

__all__ = ["STORES", "Store", "store_named"]

I = TypeVar("I", bound=InspectableInbox)  # noqa: E741 - the inbox class of a row
I_co = TypeVar("I_co", bound=InspectableInbox, covariant=True)


class Opener(Protocol[I_co]):
    """Opens a store's inbox: at a place (URL, DSN, path; ignored in memory), under a namespace
    (ignored by a store without one), with its class's keyword options (``claim_timeout``...)."""

    def __call__(self, place: str, namespace: str, /, **options: Any) -> I_co: ...


class BackendOpener(Protocol):
    """Opens the inbox and registry nodes share, as :class:`Opener` opens an inbox."""

    def __call__(self, place: str, namespace: str, /, **options: Any) -> Backend: ...


@attrs.frozen
class Store(Generic[I]):
    """One kind of store: how it is named, what it needs, how an inbox (and, for a store that
    nodes share, a :class:`~webhooks.Backend`) opens on it."""

    name: str
    """Its short name: the command line's option (``--redis``), the tests' and benchmarks' id."""
    title: str
    """Its name in prose: ``"Redis"``."""
    place: str
    """What names one (``"URL"``, ``"DSN"``, ``"PATH"``); ``""``: it lives in the process."""
    example: str
    """A place, as the command line's help shows it."""
    open_inbox: Opener[I]
    """The inbox at a place, under a namespace."""
    exists: Callable[[I], Awaitable[bool]]
    """Whether a receiver's inbox is at the inbox's place, asked without creating one."""
    inbox_type: type[I]
    """The class of its inbox."""
    extra: str = ""
    """The package extra its driver comes with (``pip install 'asyncsdk[redis]'``); ``""``:
    none."""
    server: str = ""
    """The server it runs on (``"redis"``, ``"postgres"``), which tests and benchmarks start;
    ``""``: none."""
    namespace: str = ""
    """The option that keeps receivers sharing one server apart (``"prefix"``, ``"schema"``);
    ``""``: none."""
    default_namespace: str = ""
    open_backend: BackendOpener | None = None
    """The inbox and registry nodes share at a place, under a namespace; ``None``: a store one
    process owns."""
    empty_until_first_delivery: bool = False
    """A receiver's inbox shows in the store only once it has stored a delivery (so
    :attr:`exists` is false for a receiver that has received nothing yet)."""

    @property
    def shared(self) -> bool:
        """Whether several processes can share one inbox on it."""
        return self.open_backend is not None

    @property
    def durable(self) -> bool:
        """Whether its entries outlive the process."""
        return bool(self.place)


def _memory(_place: str, _namespace: str, /, **options: Any) -> MemoryInbox:
    return MemoryInbox(**options)


async def _always(_: MemoryInbox) -> bool:
    return True


def _sqlite(path: str, _namespace: str, /, **options: Any) -> SQLiteInbox:
    return SQLiteInbox(Path(path), **options)


def _redis(url: str, prefix: str, /, **options: Any) -> RedisInbox:
    return RedisInbox(url, prefix=prefix, **options)


def _redis_backend(url: str, prefix: str, /, **options: Any) -> RedisBackend:
    return RedisBackend(url, prefix=prefix, **options)


def _postgres(dsn: str, schema: str, /, **options: Any) -> PostgresInbox:
    return PostgresInbox(dsn, schema=schema, **options)


def _postgres_backend(dsn: str, schema: str, /, **options: Any) -> PostgresBackend:
    return PostgresBackend(dsn, schema=schema, **options)


STORES: Final[tuple[Store[Any], ...]] = (
    Store(
        name="memory",
        title="memory",
        place="",
        example="",
        open_inbox=_memory,
        exists=_always,
        inbox_type=MemoryInbox,
    ),
    Store(
        name="sqlite",
        title="SQLite",
        place="PATH",
        example="hooks.sqlite3",
        open_inbox=_sqlite,
        exists=SQLiteInbox.exists,
        inbox_type=SQLiteInbox,
    ),
    Store(
        name="redis",
        title="Redis",
        place="URL",
        example="redis://host:6379/0",
        open_inbox=_redis,
        exists=RedisInbox.exists,
        inbox_type=RedisInbox,
        extra="redis",
        server="redis",
        namespace="prefix",
        default_namespace=DEFAULT_PREFIX,
        open_backend=_redis_backend,
        empty_until_first_delivery=True,
    ),
    Store(
        name="postgres",
        title="PostgreSQL",
        place="DSN",
        example="postgresql://host/db",
        open_inbox=_postgres,
        exists=PostgresInbox.exists,
        inbox_type=PostgresInbox,
        extra="postgres",
        server="postgres",
        namespace="schema",
        default_namespace=DEFAULT_SCHEMA,
        open_backend=_postgres_backend,
    ),
)
"""Every store, the in-process one first, then by how much they need."""


def store_named(name: str) -> Store[Any]:
    """The row of the store called ``name``; a :class:`~asyncsdk.ConfigurationError` naming the
    stores there are otherwise."""
    for store in STORES:
        if store.name == name:
            return store
    names = ", ".join(store.name for store in STORES)
    raise ConfigurationError(f"no store is called {name!r}; the stores are: {names}")
