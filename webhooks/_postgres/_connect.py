"""What both PostgreSQL backends share: the lazy import of asyncpg, the pool, the schema, errors.

asyncpg is an optional dependency (``pip install 'asyncsdk[postgres]'``): it is imported when a
PostgreSQL backend is built, never when :mod:`webhooks` is imported.

A DSN may name the connection pooler it goes through with the query parameter ``pooler``
(``?pooler=transaction`` or ``?pooler=session``); it is read here and never sent to the server.
Through a pooler in transaction mode (PgBouncer's ``pool_mode = transaction``) a statement
prepared on one server connection is gone on the next, so connections are opened without
asyncpg's statement cache (``statement_cache_size=0``), and no connection can LISTEN.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import re
import ssl
import urllib.parse
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Final

import yarl

from asyncsdk import ConfigurationError
from webhooks._checks import host_port, shown_url, url_scheme
from webhooks._postgres import _sql

if TYPE_CHECKING:
    import asyncpg

__all__ = [
    "DEFAULT_SCHEMA",
    "TRANSACTION",
    "check_dsn",
    "check_listen_dsn",
    "check_schema",
    "close_connection",
    "create_pool",
    "ensure_schema",
    "listen",
    "open_connection",
    "pooler",
    "require_asyncpg",
    "translate_errors",
    "where",
]

logger = logging.getLogger("webhooks.postgres")

DEFAULT_SCHEMA: Final = "webhooks"

_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,47}")
"""Lower-case, unquoted-safe names; 48 characters leave room for the suffix of the channel name
within PostgreSQL's 63-byte identifiers."""
_CONNECT_TIMEOUT: Final = 10.0
_COMMAND_TIMEOUT: Final = 30.0
_MAX_CONNECTIONS: Final = 16
_CLOSE_TIMEOUT: Final = 5.0
TRANSACTION: Final = "transaction"
_POOLERS: Final = (TRANSACTION, "session")
_POOLER: Final = "pooler"
"""The DSN's query parameter naming the pooler between the client and the server."""
_LOST_STATEMENT: Final = "__asyncpg_stmt_"


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
    named = _query(dsn).get(_POOLER)
    if named is not None and named not in _POOLERS:
        raise ConfigurationError(
            f"the DSN's pooler= must be one of {', '.join(_POOLERS)} (the pool mode of the"
            f" PgBouncer it goes through), not {named!r}"
        )
    return dsn


def check_listen_dsn(dsn: object) -> str | None:
    """``None``, or a DSN that reaches the server without a transaction pooler (LISTEN needs a
    session of its own)."""
    if dsn is None:
        return None
    checked = check_dsn(dsn)
    if pooler(checked) == TRANSACTION:
        raise ConfigurationError(
            "listen_dsn must reach PostgreSQL directly or through a pooler in session mode:"
            " notifications never arrive through a pooler in transaction mode"
        )
    return checked


def pooler(dsn: str) -> str | None:
    """The pooler the DSN names (``transaction`` or ``session``), ``None`` for none."""
    return _query(dsn).get(_POOLER)


def _query(dsn: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(dsn.partition("?")[2]))


def _asyncpg_options(dsn: str) -> dict[str, Any]:
    """asyncpg's arguments for ``dsn``: the DSN without ``pooler``, and no statement cache
    through a pooler in transaction mode."""
    options: dict[str, Any] = {"dsn": dsn, "timeout": _CONNECT_TIMEOUT}
    named = pooler(dsn)
    if named is None:
        return options  # the DSN as given
    base, _, query = dsn.partition("?")
    kept = [(key, value) for key, value in urllib.parse.parse_qsl(query) if key != _POOLER]
    options["dsn"] = f"{base}?{urllib.parse.urlencode(kept)}" if kept else base
    if named == TRANSACTION:
        options["statement_cache_size"] = 0
    return options


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


async def create_pool(
    dsn: str,
    max_size: int = _MAX_CONNECTIONS,
    init: Callable[[asyncpg.Connection], Coroutine[Any, Any, None]] | None = None,
) -> asyncpg.Pool:
    """A pool on ``dsn`` that this package owns (and closes); opened with one connection.
    ``init`` runs on each new connection (asyncpg's ``init``)."""
    import asyncpg

    return await asyncpg.create_pool(
        **_asyncpg_options(dsn),
        min_size=1,
        max_size=max_size,
        command_timeout=_COMMAND_TIMEOUT,
        reset=_keep_session,
        init=init,
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


async def ensure_schema(pool: asyncpg.Pool, schema: str, dsn: str) -> None:
    """Create the schema, its tables and indexes unless they exist.

    Under a transaction-scoped advisory lock: ``CREATE ... IF NOT EXISTS`` run by two processes
    at once can still collide on the catalog's unique indexes.  Also warns when the server
    answers on another port than the DSN's while the DSN names no pooler (see
    :func:`_warn_if_between`).
    """
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(_sql.LOCK_SCHEMA, f"asyncsdk-webhooks:{schema}")
        await conn.execute(_sql.schema_ddl(schema))
        if pooler(dsn) is None:
            _warn_if_between(dsn, await conn.fetchval("SELECT inet_server_port()"))


def _warn_if_between(dsn: str, server_port: int | None) -> None:
    """Warn when PostgreSQL listens on another port than the DSN names: something (PgBouncer,
    a proxy, a port mapping) is between, and only the user knows whether it pools
    transactions, which this package must be told of."""
    query = _query(dsn)
    if "host" in query or "port" in query:  # the URL's own host and port are not the ones used
        return
    try:
        port = yarl.URL(dsn).port or 5432
    except ValueError:  # several hosts: nothing to compare with
        return
    if server_port is not None and server_port != port:
        logger.warning(
            "PostgreSQL at %s answers from its port %d: a pooler or proxy is between; if it is"
            " PgBouncer in pool_mode=transaction, add ?pooler=transaction to the DSN",
            where(dsn),
            server_port,
        )


async def listen(
    dsn: str, channel: str, callback: Callable[[Any, int, str, Any], None]
) -> tuple[asyncpg.Connection, asyncio.Event]:
    """A connection of its own on ``dsn`` that LISTENs on ``channel``, and an event set when the
    connection ends (the server closed it, or it broke)."""
    conn = await open_connection(dsn)
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


async def open_connection(dsn: str) -> asyncpg.Connection:
    """One connection on ``dsn``, not pooled (the caller closes it)."""
    import asyncpg

    return await asyncpg.connect(**_asyncpg_options(dsn), command_timeout=_COMMAND_TIMEOUT)


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
    """Turn asyncpg's exceptions into ours: ``unavailable`` when the server cannot be reached,
    :class:`~asyncsdk.ConfigurationError` when it refuses the login or the client refuses its
    TLS certificate, or a pooler lost a prepared statement (each names the fix)."""
    import asyncpg

    try:
        yield
    except asyncpg.InvalidAuthorizationSpecificationError as exc:  # wrong password, unknown user
        raise ConfigurationError(
            f"{what}: PostgreSQL at {where(dsn)} refused the login ({exc}); check the user and"
            " password of the DSN (or PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf"
        ) from exc
    except ssl.SSLCertVerificationError as exc:
        raise ConfigurationError(
            f"{what}: the TLS certificate of PostgreSQL at {where(dsn)} was refused"
            f" ({exc.verify_message}); give the CA that signed it (sslrootcert= in the DSN) and"
            " connect by the host name it was issued for"
        ) from exc
    except (asyncpg.InvalidSQLStatementNameError, asyncpg.DuplicatePreparedStatementError) as exc:
        if _LOST_STATEMENT not in str(exc):
            raise other(
                f"{what}: PostgreSQL at {where(dsn)} answered with an error ({exc})"
            ) from exc
        raise ConfigurationError(
            f"{what}: a prepared statement was lost between two statements ({exc}): PostgreSQL"
            f" at {where(dsn)} is reached through a pooler in transaction mode; add"
            " ?pooler=transaction to the DSN"
        ) from exc
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
