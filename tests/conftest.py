"""Fixtures shared by every test area: the real Redis server used by ``@pytest.mark.redis`` tests
and the real PostgreSQL server used by ``@pytest.mark.postgres`` tests.

Those tests skip with a reason when the server is unreachable, except under ``CI=true``, where they
fail: a CI run must not go green by skipping them.  ``ASYNCSDK_TEST_REDIS_URL`` and
``ASYNCSDK_TEST_POSTGRES_DSN`` point elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from own_servers import own_pgbouncer
from store_places import Place, place_for, store_params

if TYPE_CHECKING:
    import redis.asyncio

REDIS_URL = os.environ.get("ASYNCSDK_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "ASYNCSDK_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)


def _redis_problem(url: str) -> str | None:
    """None if Redis at ``url`` answers PING, else why not."""
    try:
        import redis
    except ImportError:
        return "redis-py is not installed (pip install 'asyncsdk[redis]')"
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return f"no Redis at {url}: {exc}"
    finally:
        client.close()
    return None


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis URL; skips (fails under CI=true) when the server does not answer."""
    problem = _redis_problem(REDIS_URL)
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{problem}; CI=true requires Redis for the tests marked redis")
        pytest.skip(f"{problem}; start redis-server or set ASYNCSDK_TEST_REDIS_URL")
    return REDIS_URL


@pytest.fixture
async def redis_prefix(redis_url: str) -> AsyncIterator[str]:
    """A key prefix of this test's own; every key under it is deleted afterwards."""
    import redis.asyncio

    prefix = f"asyncsdk-test:{uuid.uuid4().hex}:"
    yield prefix
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
async def raw_redis(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """A plain client on the test Redis, to look at keys behind the code under test."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def _postgres_problem(dsn: str) -> str | None:
    """None if PostgreSQL at ``dsn`` accepts a connection, else why not."""
    try:
        import asyncpg
    except ImportError:
        return "asyncpg is not installed (pip install 'asyncsdk[postgres]')"
    try:
        conn = await asyncpg.connect(dsn, timeout=2)
    except (asyncpg.PostgresError, OSError, TimeoutError) as exc:
        return f"no PostgreSQL at {dsn}: {exc!r}"
    await conn.close()
    return None


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The test PostgreSQL DSN; skips (fails under CI=true) when the server does not answer."""
    problem = asyncio.run(_postgres_problem(POSTGRES_DSN))
    if problem is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{problem}; CI=true requires PostgreSQL for the tests marked postgres")
        pytest.skip(f"{problem}; start PostgreSQL or set ASYNCSDK_TEST_POSTGRES_DSN")
    return POSTGRES_DSN


@pytest.fixture
async def postgres_schema(postgres_dsn: str) -> AsyncIterator[str]:
    """A schema of this test's own (made by the backend under test), dropped afterwards."""
    import asyncpg

    schema = f"asyncsdk_test_{uuid.uuid4().hex[:24]}"
    yield schema
    conn = await asyncpg.connect(postgres_dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


_POOL_SIZES = {"transaction": 4, "session": 40}


@pytest.fixture(scope="session")
def through_pgbouncer(postgres_dsn: str) -> Iterator[Callable[[str], str]]:
    """``through_pgbouncer(mode)``: a DSN of the test database through a PgBouncer of the test
    run's own in ``mode`` (``transaction`` or ``session``), saying so (``?pooler=MODE``); each
    PgBouncer is started at its first use and stopped at the end of the run.

    In transaction mode four server connections serve every client (so clients' transactions do
    share them); in session mode each client connection holds one, so there are enough for a
    test's several registries' pools."""
    with contextlib.ExitStack() as stack:
        started: dict[str, str] = {}

        def through(mode: str) -> str:
            if mode not in started:
                server = stack.enter_context(own_pgbouncer(postgres_dsn, mode, _POOL_SIZES[mode]))
                started[mode] = f"{server.url}?pooler={mode}"
            return started[mode]

        yield through


@pytest.fixture(params=["direct", "pgbouncer-transaction", "pgbouncer-session"])
def store_dsn(
    request: pytest.FixtureRequest,
    postgres_dsn: str,
    through_pgbouncer: Callable[[str], str],
) -> str:
    """The test database's DSN: direct, then through PgBouncer in each pool mode (for the
    PostgreSQL contract suites)."""
    route = str(request.param)
    if route == "direct":
        return postgres_dsn
    return through_pgbouncer(route.removeprefix("pgbouncer-"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked ``slow`` run first, in their order, then the others in theirs: the test
    processes start on the long tests and end on short ones, instead of one of them running a
    long test alone while the others are done."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# -- each store of webhooks.stores.STORES ---------------------------------------------------------


@pytest.fixture(params=store_params())
def store_place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    """Each store, with a fresh place for an inbox on it."""
    return place_for(request.param, request, tmp_path)


@pytest.fixture(params=store_params(durable=True))
def durable_place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    """Each store whose entries outlive the process, with a fresh place for an inbox on it."""
    return place_for(request.param, request, tmp_path)


@pytest.fixture(params=store_params(shared=True))
def shared_place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    """Each store several nodes share, with a fresh place (a namespace on its server)."""
    return place_for(request.param, request, tmp_path)
