"""PostgresRegistry: waiters in one process woken by resolve() in another, through a real
PostgreSQL (results in a table, wake-ups by LISTEN/NOTIFY)."""

from __future__ import annotations

import asyncio
import datetime
import functools
import json
from collections.abc import AsyncIterator, Callable

import asyncpg
import attrs
import pytest
from registry_contract import MakeRegistry, RegistryContract, registries
from whtools import event

from webhooks import PostgresRegistry, RegistryUnavailableError

pytestmark = pytest.mark.postgres


class TestPostgresRegistry(RegistryContract):
    """The shared registry's contract, on PostgreSQL (with the module's make_registry)."""


@pytest.fixture
async def make_registry(postgres_dsn: str, postgres_schema: str) -> AsyncIterator[MakeRegistry]:
    """Registries on the test's schema (each one stands for another process)."""
    async with registries(
        functools.partial(PostgresRegistry, postgres_dsn, schema=postgres_schema)
    ) as make:
        yield make


class TestPostgresRegistryThroughPgBouncer(RegistryContract):
    """The contract through PgBouncer: in session mode as directly; in transaction mode with a
    direct ``listen_dsn`` for LISTEN, and polling without one."""

    @pytest.fixture(params=["session", "transaction+listen_dsn", "transaction+polling"])
    async def make_registry(
        self,
        request: pytest.FixtureRequest,
        postgres_dsn: str,
        postgres_schema: str,
        through_pgbouncer: Callable[[str], str],
    ) -> AsyncIterator[MakeRegistry]:
        mode, _, listening = str(request.param).partition("+")
        options: dict[str, object] = {"schema": postgres_schema, "poll_interval": 0.1}
        if listening == "listen_dsn":
            options["listen_dsn"] = postgres_dsn
        create = functools.partial(PostgresRegistry, through_pgbouncer(mode), **options)
        async with registries(create) as make:
            yield make


@pytest.fixture
async def raw_postgres(postgres_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(postgres_dsn)
    yield conn
    await conn.close()


async def listeners(raw: asyncpg.Connection, name: str) -> list[int]:
    """Server process ids of the connections named ``name`` that listen."""
    rows = await raw.fetch(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'",
        name,
    )
    return [row["pid"] for row in rows]


async def test_each_instance_listens_on_one_connection_however_many_wait(
    postgres_dsn: str, postgres_schema: str, raw_postgres: asyncpg.Connection
) -> None:
    name = postgres_schema[-12:]
    registry = PostgresRegistry(f"{postgres_dsn}?application_name={name}", schema=postgres_schema)
    try:
        await registry.start()
        tasks = [asyncio.create_task(registry.wait(f"p-{n}", timeout=10)) for n in range(300)]
        await asyncio.sleep(0.05)
        assert len(await listeners(raw_postgres, name)) == 1
        await asyncio.gather(*(registry.resolve(event(f"p-{n}")) for n in range(300)))
        assert len(await asyncio.gather(*tasks)) == 300
    finally:
        await registry.close()
    assert await listeners(raw_postgres, name) == []


async def test_a_result_stored_while_the_listener_is_down_still_arrives(
    postgres_dsn: str, postgres_schema: str, raw_postgres: asyncpg.Connection
) -> None:
    name = postgres_schema[-12:]
    registry = PostgresRegistry(f"{postgres_dsn}?application_name={name}", schema=postgres_schema)
    try:
        await registry.start()
        waiter = asyncio.create_task(registry.wait("p-1", timeout=10))
        await asyncio.sleep(0.05)
        (pid,) = await listeners(raw_postgres, name)
        # End the listening connection (and wait until it is gone), then store and announce the
        # result: the notification reaches nobody; only the re-read after reconnecting finds it.
        assert await raw_postgres.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
        async with raw_postgres.transaction():
            await raw_postgres.execute(
                f'INSERT INTO "{postgres_schema}".results VALUES ($1, $2, now() + $3::interval)',
                "p-1",
                # The stored form: the event's fields as compact JSON.
                json.dumps(attrs.asdict(event("p-1")), separators=(",", ":")).encode(),
                datetime.timedelta(minutes=1),
            )
            await raw_postgres.execute("SELECT pg_notify($1, 'p-1')", f"{postgres_schema}.results")
        assert await waiter == event("p-1")
        assert registry.subscriptions == 2
        assert registry.healthy
    finally:
        await registry.close()


async def test_results_are_kept_for_keep_for_in_the_schema(
    make_registry: MakeRegistry, postgres_schema: str, raw_postgres: asyncpg.Connection
) -> None:
    registry = await make_registry(keep_for=120)
    await registry.resolve(event("p-1"))
    rows = await raw_postgres.fetch(
        "SELECT process_id, extract(epoch FROM expires_at - now()) AS left"
        f' FROM "{postgres_schema}".results'
    )
    assert [row["process_id"] for row in rows] == ["p-1"]
    assert 110 < rows[0]["left"] <= 120


async def test_an_expired_result_gives_way_to_a_new_one(make_registry: MakeRegistry) -> None:
    a, b = await make_registry(keep_for=0.2), await make_registry(keep_for=0.2)
    await a.resolve(event("p-1", src="first"))
    await asyncio.sleep(0.3)
    await a.resolve(event("p-1", src="second"))
    assert (await b.wait("p-1", timeout=5)).final_assets[0].src == "second"


async def test_unreachable_server_is_reported() -> None:
    registry = PostgresRegistry("postgresql://postgres@127.0.0.1:1/test")
    with pytest.raises(RegistryUnavailableError, match="cannot be reached"):
        await registry.resolve(event())
    with pytest.raises(RegistryUnavailableError, match="is the server running"):
        await registry.start(timeout=0.3)
    assert registry.closed
