"""What both PostgreSQL backends share: the lazy import of asyncpg, the pool, the schema, errors.

asyncpg is an optional dependency (``pip install 'asyncsdk[postgres]'``): it is imported when a
PostgreSQL backend is built, never when :mod:`webhooks` is imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import yarl

from asyncsdk import ConfigurationError
from webhooks._checks import host_port, shown_url, url_scheme
from webhooks._postgres import _sql

if TYPE_CHECKING:
    import asyncpg

__all__ = [
    "DEFAULT_SCHEMA",
    "check_dsn",
    "check_schema",
    "close_connection",
    "create_pool",
    "ensure_schema",
    "listen",
    "require_asyncpg",
    "translate_errors",
    "where",
]

DEFAULT_SCHEMA: Final = "webhooks"

_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,47}")
"""Lower-case, unquoted-safe names; 48 characters leave room for the suffix of the channel name
within PostgreSQL's 63-byte identifiers."""
_CONNECT_TIMEOUT: Final = 10.0
_COMMAND_TIMEOUT: Final = 30.0
_MAX_CONNECTIONS: Final = 16
_CLOSE_TIMEOUT: Final = 5.0


def require_asyncpg() -> None:
    """Import asyncpg, or explain how to install it."""
    try:
        importlib.import_module("asyncpg")
    except ImportError as exc:
        raise ConfigurationError(
            "the PostgreSQL backends need asyncpg, which is not installed:"
            " pip install 'asyncsdk[postgres]'"
        ) from exc


def check_dsn(dsn: object) -> str:
    if not isinstance(dsn, str) or url_scheme(dsn) not in {"postgres", "postgresql"}:
        raise ConfigurationError(
            "dsn must be a postgresql:// URL such as"
            f" 'postgresql://postgres@127.0.0.1:5432/mydb', not {shown_url(dsn)}"
        )
    return dsn


def check_schema(schema: object) -> str:
    if not isinstance(schema, str) or _SCHEMA_NAME.fullmatch(schema) is None:
        raise ConfigurationError(
            f"schema must be a lower-case name of letters, digits and _ (at most 48, not starting"
            f" with a digit) such as {DEFAULT_SCHEMA!r}, not {schema!r}"
        )
    return schema


def where(dsn: str) -> str:
    """host:port/database of a DSN, for error messages (never the password)."""
    try:
        url = yarl.URL(dsn)
        return f"{host_port(url.host or 'localhost', url.port or 5432)}{url.path or '/'}"
    except ValueError:  # several hosts (h1:5432,h2:5433), which asyncpg takes and yarl does not
        hosts_and_path = dsn.partition("://")[2].rpartition("@")[2]
        return hosts_and_path.partition("?")[0]


async def create_pool(dsn: str, max_size: int = _MAX_CONNECTIONS) -> asyncpg.Pool:
    """A pool on ``dsn`` that this package owns (and closes); opened with one connection."""
    import asyncpg

    return await asyncpg.create_pool(
        dsn,
        min_size=1,
        max_size=max_size,
        timeout=_CONNECT_TIMEOUT,
        command_timeout=_COMMAND_TIMEOUT,
        reset=_keep_session,
    )


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset: nothing.

    asyncpg's default resets every connection it takes back (``RESET ALL``, ``UNLISTEN *``,
    releasing session locks): one more round trip per statement.  This package's statements each
    run in a transaction of their own, with transaction-scoped locks, and leave no session state
    to reset; the one place where a user's code runs on a pooled connection (the functions of an
    atomic handler, ``PostgresInbox.ack_with``) resets that connection itself.  Worth 10 to 15 %
    of the PostgreSQL receiver's req/s (benchmarks/RESULTS.md, "receiver | postgres: req/s >= 0.4
    x bare @128"; benchmarks/FINDINGS.md, "The pool's reset").
    """


async def ensure_schema(pool: asyncpg.Pool, schema: str) -> None:
    """Create the schema, its tables and indexes unless they exist.

    Under a transaction-scoped advisory lock: ``CREATE ... IF NOT EXISTS`` run by two processes
    at once can still collide on the catalog's unique indexes.
    """
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(_sql.LOCK_SCHEMA, f"asyncsdk-webhooks:{schema}")
        await conn.execute(_sql.schema_ddl(schema))


async def listen(
    dsn: str, channel: str, callback: Callable[[Any, int, str, Any], None]
) -> tuple[asyncpg.Connection, asyncio.Event]:
    """A connection of its own on ``dsn`` that LISTENs on ``channel``, and an event set when the
    connection ends (the server closed it, or it broke)."""
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=_CONNECT_TIMEOUT)
    ended = asyncio.Event()

    def on_end(_: object) -> None:
        ended.set()

    conn.add_termination_listener(on_end)
    try:
        await conn.add_listener(channel, callback)
    except BaseException:
        conn.terminate()
        raise
    return conn, ended


async def close_connection(conn: asyncpg.Connection) -> None:
    """Close a connection within a bounded time, so shutting down can never hang on it."""
    try:
        await asyncio.wait_for(conn.close(), timeout=_CLOSE_TIMEOUT)
    except Exception:  # a timeout or a broken connection: drop it without waiting
        conn.terminate()


@contextlib.contextmanager
def translate_errors(
    unavailable: type[Exception], other: type[Exception], what: str, dsn: str
) -> Iterator[None]:
    """Turn asyncpg's exceptions into ours: ``unavailable`` when the server cannot be reached."""
    import asyncpg

    try:
        yield
    except _unreachable(asyncpg) as exc:
        raise unavailable(
            f"{what}: PostgreSQL at {where(dsn)} cannot be reached ({exc!r})"
        ) from exc
    except (asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise other(f"{what}: PostgreSQL at {where(dsn)} answered with an error ({exc})") from exc


def _unreachable(asyncpg: Any) -> tuple[type[BaseException], ...]:
    return (
        OSError,
        TimeoutError,
        asyncpg.PostgresConnectionError,
        asyncpg.OperatorInterventionError,  # shutting down, or not accepting connections yet
        asyncpg.TooManyConnectionsError,
    )
