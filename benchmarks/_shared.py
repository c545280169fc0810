"""What every section uses: the report's pieces and ratios, scratch folders, Redis prefixes."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import math
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

from benchmarks._env import POSTGRES_DSN, REDIS_URL, median

# -- report pieces --------------------------------------------------------------------------------


@attrs.frozen
class Goal:
    section: str
    goal: str
    measured: str
    target: str
    met: bool | None  # None: not measured


@attrs.define
class Section:
    key: str
    title: str
    lines: list[str] = attrs.Factory(list)
    goals: list[Goal] = attrs.Factory(list)
    seconds: float = 0.0
    steal: float = math.nan
    """The share of the machine's CPU time its hypervisor gave to other guests meanwhile."""


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def fmt(value: float, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def runs_of(values: Sequence[float], digits: int = 0) -> str:
    return ", ".join(fmt(v, digits) for v in values)


def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def paired(mine: Sequence[float], theirs: Sequence[float]) -> tuple[float, list[float]]:
    """The median of the per-round ratios (each pair measured back to back), and the ratios.

    Load from other work on a shared machine drifts over minutes; a ratio of two figures taken
    seconds apart is steadier than a ratio of medians taken over the whole section.
    """
    ratios = [ratio(a, b) for a, b in zip(mine, theirs, strict=True)]
    return median(ratios), ratios


def pooled_percentile(
    tails: Sequence[Sequence[float]], q: float, first: float, step: float
) -> float:
    """The ``q``-th percentile of several loads' latencies taken together, from each load's tail
    percentiles ``first``, ``first + step``, ... (loads of about the same number of requests).

    A p99 of one paced load is decided by its 1 % slowest answers, a few dozen; pooling the
    rounds decides it by a few hundred.  The pooled share of answers at or below ``x`` is the
    mean over the loads of the highest tail percentile each has at or below ``x``; the answer is
    the smallest ``x`` whose share reaches ``q``.
    """
    if not tails:
        return math.nan

    def share(tail: Sequence[float], x: float) -> float:
        at_or_below = bisect.bisect_right(tail, x)  # a tail's percentiles never decrease
        return round(first + (at_or_below - 1) * step, 6) if at_or_below else first

    for x in sorted({value for tail in tails for value in tail}):
        if sum(share(tail, x) for tail in tails) / len(tails) >= q:
            return x
    return max(value for tail in tails for value in tail)


def met_if_measured(value: float, ok: bool) -> bool | None:
    return None if math.isnan(value) else ok


@contextlib.contextmanager
def workdir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def redis_problem() -> str | None:
    """None when the Redis backends can be used, else why not."""
    try:
        from webhooks import RedisInbox, RedisRegistry  # noqa: F401 - importability
    except Exception as exc:  # any failure to import is the reason to report
        return f"the Redis backends do not import: {type(exc).__name__}: {exc}"
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # unreachable server, missing redis-py: the reason to report
        return f"no Redis at {REDIS_URL}: {type(exc).__name__}: {exc}"
    return None


def postgres_problem() -> str | None:
    """None when the PostgreSQL backends can be used, else why not."""
    try:
        import asyncpg

        from webhooks import PostgresInbox  # noqa: F401 - importability
    except Exception as exc:  # any failure to import is the reason to report
        return f"the PostgreSQL backends do not import: {type(exc).__name__}: {exc}"

    async def ping() -> None:
        conn = await asyncpg.connect(POSTGRES_DSN, timeout=2)
        await conn.close()

    try:
        asyncio.run(ping())
    except Exception as exc:  # unreachable server: the reason to report
        return f"no PostgreSQL at {POSTGRES_DSN}: {type(exc).__name__}: {exc}"
    return None


def new_schema(what: str) -> str:
    """A schema name of the benchmarks' own (dropped by drop_schema)."""
    return f"asyncsdk_bench_{what}_{uuid.uuid4().hex[:12]}"


def drop_schema(schema: str) -> None:
    """Drop a schema made by new_schema, and everything in it."""

    async def drop() -> None:
        import asyncpg

        conn = await asyncpg.connect(POSTGRES_DSN, timeout=5)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    with contextlib.suppress(Exception):
        asyncio.run(drop())


def new_prefix(what: str) -> str:
    return f"asyncsdk-bench:{what}:{uuid.uuid4().hex[:12]}:"


def drop_prefix(prefix: str) -> None:
    """Delete every Redis key under ``prefix`` (the benchmarks' own, made by new_prefix)."""
    with contextlib.suppress(Exception):
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=10)
        try:
            batch = list(client.scan_iter(match=prefix + "*", count=1000))
            for start in range(0, len(batch), 1000):
                client.delete(*batch[start : start + 1000])
        finally:
            client.close()
