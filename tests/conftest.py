"""Fixtures shared by every test area: the real Redis server used by ``@pytest.mark.redis`` tests.

Redis tests skip with a reason when the server is unreachable, except under ``CI=true``, where they
fail: a CI run must not go green by skipping them.  ``ASYNCSDK_TEST_REDIS_URL`` points elsewhere.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import redis.asyncio

REDIS_URL = os.environ.get("ASYNCSDK_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


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
