"""The PostgreSQL journal of runs: one table several nodes share (asyncpg, the ``postgres``
extra).

asyncpg is imported when a journal connects, never when :mod:`asyncsdk` is imported.  Each call
is one transaction on a pooled connection; a claim locks the run's row (``SELECT ... FOR
UPDATE``), so two nodes asking for one key at once see one owner.

Through PgBouncer in transaction mode, the DSN says so with ``?pooler=transaction`` (read here,
never sent to the server): connections are then opened without asyncpg's statement cache, whose
prepared statements a transaction pooler loses between transactions.
"""

from __future__ import annotations

import importlib
import re
import ssl
import time
import urllib.parse
from typing import TYPE_CHECKING, Any, Final

import attrs

from asyncsdk._checks import require_number
from asyncsdk._errors import ConfigurationError, JournalError
from asyncsdk._journal.contract import (
    Claim,
    RunEntry,
    RunStage,
    recorded,
    stored_ids,
    takeable,
    taken_over,
    translated,
)

if TYPE_CHECKING:
    import asyncpg

__all__ = ["PostgresJournal"]

DEFAULT_SCHEMA: Final = "asyncsdk"
_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_COLUMNS: Final = (
    "key, digest, arguments, stage, order_id, request, process_ids, result, owner, "
    "lease_until, updated_at"
)


_POOLERS: Final = ("transaction", "session")


def _pool_options(dsn: str) -> dict[str, Any]:
    """asyncpg's arguments for ``dsn``: the DSN without its ``pooler`` query parameter (checked),
    and no statement cache through a pooler in transaction mode."""
    base, _, query = dsn.partition("?")
    pairs = urllib.parse.parse_qsl(query)
    named = dict(pairs).get("pooler")
    if named is not None and named not in _POOLERS:
        raise ConfigurationError(
            f"the DSN's pooler= must be one of {', '.join(_POOLERS)} (the pool mode of the"
            f" PgBouncer it goes through), not {named!r}"
        )
    if named is None:
        return {"dsn": dsn}  # as given
    kept = urllib.parse.urlencode([(key, value) for key, value in pairs if key != "pooler"])
    options: dict[str, Any] = {"dsn": f"{base}?{kept}" if kept else base}
    if named == "transaction":
        options["statement_cache_size"] = 0
    return options


def _store_errors() -> tuple[type[BaseException], ...]:
    """asyncpg's errors, and the network's (asyncpg is loaded: the journal has a pool)."""
    asyncpg = importlib.import_module("asyncpg")
    return (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


def _advice(exc: BaseException) -> str:
    """The fix for a prepared statement a pooler lost (asyncpg names its ``__asyncpg_stmt_``)."""
    if "__asyncpg_stmt_" in str(exc):
        return (
            "; PostgreSQL is reached through a pooler in transaction mode, which loses prepared"
            " statements: add ?pooler=transaction to the DSN"
        )
    return ""


def _entry(journal: PostgresJournal, row: Any) -> RunEntry:
    return RunEntry(
        key=row["key"],
        digest=row["digest"],
        arguments=row["arguments"],
        stage=row["stage"],
        order_id=row["order_id"],
        request=row["request"],
        process_ids=stored_ids(journal, row["key"], row["process_ids"]),
        result=row["result"],
        owner=row["owner"],
        lease_until=row["lease_until"],
        updated_at=row["updated_at"],
    )


class PostgresJournal:
    """A :class:`~asyncsdk.Journal` in a PostgreSQL table, shared by several nodes.

    ::

        journal = await PostgresJournal.connect("postgresql://app@db/app")
        async with Client(journal=journal) as client:
            ...
        await journal.close()

    ``schema``: where its table ``runs`` lives (created when missing).  ``lease``: the seconds a
    node holds a run without renewing it; a run whose node stopped is taken over after that (at
    once by a process of the same host).  Nodes' clocks must agree to well within the lease.
    """

    def __init__(
        self, pool: asyncpg.Pool, *, schema: str = DEFAULT_SCHEMA, lease: float = 30.0
    ) -> None:
        if not isinstance(schema, str) or _NAME.fullmatch(schema) is None:
            raise ConfigurationError(
                "schema must be a lower-case name of letters, digits and _ (at most 48, not "
                f"starting with a digit) such as {DEFAULT_SCHEMA!r}, not {schema!r}"
            )
        require_number(
            lease, "lease must be a number of seconds above 0", above=True, error=ConfigurationError
        )
        self._pool = pool
        self.schema = schema
        self.lease = float(lease)
        self._table = f'"{schema}".runs'
        self._closed = False

    @classmethod
    async def connect(
        cls, dsn: str, *, schema: str = DEFAULT_SCHEMA, lease: float = 30.0
    ) -> PostgresJournal:
        """A journal on a pool of its own on ``dsn`` (closed by :meth:`close`), its table created
        when missing."""
        try:
            asyncpg = importlib.import_module("asyncpg")
        except ImportError as exc:
            raise ConfigurationError(
                "PostgresJournal needs asyncpg, which is not installed: "
                "pip install 'asyncsdk[postgres]'"
            ) from exc
        if not isinstance(dsn, str) or not dsn.startswith(("postgres://", "postgresql://")):
            raise ConfigurationError(
                "dsn must be a postgresql:// URL such as 'postgresql://app@127.0.0.1:5432/app'"
            )
        options = _pool_options(dsn)
        try:
            pool = await asyncpg.create_pool(**options, min_size=1, max_size=8, timeout=10.0)
        except asyncpg.InvalidAuthorizationSpecificationError as exc:
            raise ConfigurationError(
                f"the PostgreSQL journal's login was refused ({exc}); check the user and password"
                " of the DSN (or PGPASSWORD, ~/.pgpass) and the server's pg_hba.conf"
            ) from exc
        except ssl.SSLCertVerificationError as exc:
            raise ConfigurationError(
                f"the PostgreSQL server's TLS certificate was refused ({exc.verify_message});"
                " give the CA that signed it (sslrootcert= in the DSN) and connect by the host"
                " name it was issued for"
            ) from exc
        except _store_errors() as exc:
            raise JournalError(f"the PostgreSQL journal could not connect: {exc!r}") from exc
        journal = cls(pool, schema=schema, lease=lease)
        try:
            async with pool.acquire() as conn, conn.transaction():
                # Two nodes creating the table at once would collide on the catalog.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", schema)
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {journal._table} ("
                    "key TEXT PRIMARY KEY, digest TEXT NOT NULL, arguments TEXT NOT NULL, "
                    "stage TEXT NOT NULL, order_id TEXT NOT NULL DEFAULT '', "
                    "request TEXT NOT NULL DEFAULT '', process_ids TEXT NOT NULL DEFAULT '[]', "
                    "result TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '', "
                    "lease_until DOUBLE PRECISION NOT NULL DEFAULT 0, "
                    "updated_at DOUBLE PRECISION NOT NULL)"
                )
        except BaseException:
            await pool.close()
            raise
        return journal

    def __repr__(self) -> str:
        return f"<PostgresJournal schema={self.schema!r} lease={self.lease:g}>"

    def _check_open(self) -> None:
        if self._closed:
            raise ConfigurationError("the journal is closed; connect a new one")

    @translated(_store_errors, _advice)
    async def claim(self, key: str, digest: str, arguments: str, owner: str) -> Claim:
        """Record the run of ``key`` or take a lapsed one over: :meth:`~asyncsdk.Journal.claim`."""
        self._check_open()
        now = time.time()
        until = now + self.lease
        async with self._pool.acquire() as conn, conn.transaction():
            inserted = await conn.fetchrow(
                f"INSERT INTO {self._table} (key, digest, arguments, stage, owner, lease_until, "
                "updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (key) DO NOTHING "
                f"RETURNING {_COLUMNS}",
                key,
                digest,
                arguments,
                RunStage.INTENT,
                owner,
                until,
                now,
            )
            if inserted is not None:
                return Claim(_entry(self, inserted), owned=True)
            row = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM {self._table} WHERE key = $1 FOR UPDATE", key
            )
            entry = _entry(self, row)
            if not takeable(entry, digest, now):
                return Claim(entry, owned=False)
            await conn.execute(
                f"UPDATE {self._table} SET owner = $2, lease_until = $3 WHERE key = $1",
                key,
                owner,
                until,
            )
            return Claim(attrs.evolve(entry, owner=owner, lease_until=until), owned=True)

    @translated(_store_errors, _advice)
    async def advance(
        self,
        key: str,
        owner: str,
        stage: str,
        *,
        order_id: str | None = None,
        request: str | None = None,
        process_ids: tuple[str, ...] | None = None,
        result: str | None = None,
    ) -> None:
        """Record the run's next stage: :meth:`~asyncsdk.Journal.advance`."""
        self._check_open()
        changes: dict[str, Any] = recorded(
            stage,
            order_id=order_id,
            request=request,
            process_ids=process_ids,
            result=result,
        )
        now = time.time()
        changes["lease_until"] = now + self.lease
        changes["updated_at"] = now
        sets = ", ".join(f"{name} = ${index}" for index, name in enumerate(changes, start=3))
        status = await self._pool.execute(
            f"UPDATE {self._table} SET {sets} WHERE key = $1 AND owner = $2",
            key,
            owner,
            *changes.values(),
        )
        if status != "UPDATE 1":
            raise taken_over(key, self.lease)

    @translated(_store_errors, _advice)
    async def renew(self, key: str, owner: str) -> bool:
        """Extend ``owner``'s lease on ``key``: :meth:`~asyncsdk.Journal.renew`."""
        self._check_open()
        status = await self._pool.execute(
            f"UPDATE {self._table} SET lease_until = $3 WHERE key = $1 AND owner = $2",
            key,
            owner,
            time.time() + self.lease,
        )
        return bool(status == "UPDATE 1")

    @translated(_store_errors, _advice)
    async def release(self, key: str, owner: str) -> None:
        """Give the lease on ``key`` up: :meth:`~asyncsdk.Journal.release`."""
        self._check_open()
        await self._pool.execute(
            f"UPDATE {self._table} SET owner = '', lease_until = 0 WHERE key = $1 AND owner = $2",
            key,
            owner,
        )

    @translated(_store_errors, _advice)
    async def get(self, key: str) -> RunEntry | None:
        """The entry of ``key``, or None: :meth:`~asyncsdk.Journal.get`."""
        self._check_open()
        row = await self._pool.fetchrow(f"SELECT {_COLUMNS} FROM {self._table} WHERE key = $1", key)
        return None if row is None else _entry(self, row)

    @translated(_store_errors, _advice)
    async def unfinished(self) -> list[RunEntry]:
        """The runs not finished, oldest first: :meth:`~asyncsdk.Journal.unfinished`."""
        self._check_open()
        rows = await self._pool.fetch(
            f"SELECT {_COLUMNS} FROM {self._table} WHERE stage <> $1 ORDER BY updated_at, key",
            RunStage.FINISHED,
        )
        return [_entry(self, row) for row in rows]

    async def close(self) -> None:
        """Close the journal's pool.  Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await self._pool.close()
