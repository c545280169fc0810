"""Part of section 3: what retained dedup keys cost each durable inbox, in ack time and in bytes.

A finished event keeps its dedup key for the retention (7 days by default), so a busy receiver's
store holds millions of them.  For SQLite, Redis and PostgreSQL: fill a fresh inbox with
``plan.retained_keys`` finished events through the public API (put, claim, ack), measure what the
store grew by per key, then serve it and measure the paced load's p99 ack beside the same load on
an empty inbox.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from benchmarks._plan import Plan
from benchmarks._receiver_bench import TAIL_FROM, TAIL_STEP, body_for
from benchmarks._receiver_run import Kept
from benchmarks._shared import fmt, paired, pooled_percentile, table
from benchmarks._stores import StorePlace, drop_place, new_place
from webhooks.stores import store_named

__all__ = ["retention"]

STORES: Final = ("sqlite", "redis", "postgres")
"""The stores whose size per retained key :func:`_size` knows how to read."""
_CHUNK: Final = 2_000
"""Events put (concurrently) then claimed and acked per step of the filling."""
_SAMPLE: Final = 1_000
"""Redis dedup keys whose MEMORY USAGE is averaged."""

Measure = Callable[[str, Kept | None], dict[str, Any]]
"""One paced load on a store, on a new inbox (``None``) or on the one kept at a place."""


async def _fill(inbox: Any, count: int) -> None:
    """``count`` finished events, acked as the worker pool acks them."""
    from asyncsdk import ProcessCompleted

    run = uuid.uuid4().hex[:8]
    made = 0
    while made < count:
        size = min(_CHUNK, count - made)
        pids = [f"retained-{run}-{made + n}" for n in range(size)]
        events = [
            ProcessCompleted(
                event="process.completed",
                process_id=pid,
                order_id="order-bench-1",
                tool="tool-virtual-staging",
                status="done",
            )
            for pid in pids
        ]
        await asyncio.gather(*(inbox.put(e, body_for(e.process_id)) for e in events))
        while batch := await inbox.claim_batch("filler", size):
            await inbox.ack_many([entry.id for entry in batch])
        made += size


def _file_size(path: Path) -> float:
    """The database file and its WAL and shared-memory files, in bytes."""
    return float(sum(p.stat().st_size for p in path.parent.glob(path.name + "*")))


async def _size(store: str, place: StorePlace) -> float:
    """What the store holds for this inbox, in bytes (Redis: the dedup keys' sampled mean)."""
    where, namespace = place
    if store == "sqlite":
        return await asyncio.to_thread(_file_size, Path(where))
    if store == "redis":
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(where)
        try:
            sizes = []
            async for key in client.scan_iter(match=f"{namespace}inbox:dedup:*", count=1000):
                sizes.append(int(await client.memory_usage(key) or 0))
                if len(sizes) >= _SAMPLE:
                    break
            return sum(sizes) / len(sizes) if sizes else math.nan
        finally:
            await client.aclose()
    import asyncpg

    conn = await asyncpg.connect(where)
    try:
        return float(await conn.fetchval(f"SELECT pg_total_relation_size('\"{namespace}\".inbox')"))
    finally:
        await conn.close()


async def _vacuum(place: StorePlace) -> None:
    """What autovacuum and the checkpointer do to the filled table in a deployment (the inbox
    asks for a vacuum every 10,000 dead rows), done at once: the server here may run with
    autovacuum off, and a fill of millions of events in minutes, with its gigabytes of WAL, is not
    the steady state that retention builds over days.  Without the checkpoint, the one the fill's
    WAL calls for lands in the measured minute."""
    import asyncpg

    dsn, schema = place
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'VACUUM ANALYZE "{schema}".inbox')
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


async def _prepare(store: str, place: StorePlace, count: int) -> float:
    """Fill the inbox; bytes per retained key."""
    inbox: Any = store_named(store).open_inbox(*place)
    try:
        await inbox.check()  # creates the file, the schema and its tables
        before = await _size(store, place)
        await _fill(inbox, count)
    finally:
        await inbox.close()
    if store == "postgres":
        await _vacuum(place)
    after = await _size(store, place)
    return after if store == "redis" else (after - before) / count


def _rounds(
    rounds: int, measure: Measure, store: str, kept: Kept
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The loads, retained and empty, of ``rounds`` back-to-back pairs, which of the two goes
    first alternating, so that a machine growing busier or quieter over the minutes weighs on
    both sides alike."""
    full: list[dict[str, Any]] = []
    empty: list[dict[str, Any]] = []

    def retained() -> dict[str, Any]:
        if store == "postgres":
            # Each empty load starts on a new table; the retained one is reused, and its earlier
            # loads' dead rows would stay where a deployment's autovacuum (every 10,000 dead
            # rows, about one load's worth) removes them.
            asyncio.run(_vacuum(kept[0]))
        return measure(store, kept)

    for number in range(rounds):
        if number % 2:
            empty.append(measure(store, None))
            full.append(retained())
        else:
            full.append(retained())
            empty.append(measure(store, None))
    return full, empty


def _pooled_p99_ms(loads: Sequence[dict[str, Any]]) -> float:
    tails = [load["tail_us"] for load in loads]
    return pooled_percentile(tails, 99.0, TAIL_FROM, TAIL_STEP) / 1000


def retention(plan: Plan, folder: Path, runnable: Sequence[str], measure: Measure) -> list[str]:
    """The report lines: per store, bytes per retained key and the paced p99 ack with
    ``plan.retained_keys`` retained beside an empty inbox."""
    rows: list[list[str]] = []
    count = plan.retained_keys
    for store in STORES:
        if store not in runnable:
            rows.append([store, "not run", "", "", ""])
            continue
        server_dir = folder / f"retained-{store}"
        server_dir.mkdir()
        place = new_place(store, server_dir, "retained")
        try:
            per_key = asyncio.run(_prepare(store, place, count))
            full, empty = _rounds(plan.retained_rounds, measure, store, (place, server_dir))
        finally:
            drop_place(store, place)
        p99_full, p99_empty = _pooled_p99_ms(full), _pooled_p99_ms(empty)
        ratio = p99_full / p99_empty if p99_empty else math.nan
        _, ratios = paired([r["p99_us"] for r in full], [r["p99_us"] for r in empty])
        cpu, _ = paired([r["cpu_us"] for r in full], [r["cpu_us"] for r in empty])
        rows.append(
            [
                store,
                fmt(per_key),
                fmt(p99_empty, 1),
                fmt(p99_full, 1),
                f"**{fmt(ratio, 2)}** ({', '.join(fmt(r, 2) for r in ratios)})",
                fmt(cpu, 2),
            ]
        )
    lines = [
        f"Retained dedup keys: a fresh inbox filled with {count:,} finished events (put, claim, "
        "ack through the inbox's API; bodies dropped at the ack, as always), then a load of "
        f"{max(plan.receiver_connections)} connections paced to about "
        f"{plan.receiver_paced_rate:,} req/s (each waits a random pause between its requests), "
        f"measured over {plan.retained_seconds} s, against it and against an empty "
        f"inbox: {plan.retained_rounds} pair(s) back to back, which goes first alternating.  "
        "Each p99 is that of all the answers of its side's loads taken together (a p99 of one "
        "load rests on its few dozen slowest answers, and one stall moves it); 'x empty' is the "
        "ratio of the two, and in brackets each pair's own ratio, for the spread.  Beside it, "
        "the server's CPU per request retained over empty (median of the pairs' ratios), "
        "which a stall of the machine does not move.  Bytes per key: SQLite, the growth of the "
        "database file and its WAL; Redis, `MEMORY USAGE` of the dedup keys (mean of a sample "
        f"of {_SAMPLE:,}); PostgreSQL, the growth of `pg_total_relation_size` of the inbox "
        "table (its indexes included).  The filled PostgreSQL table is vacuumed and "
        "checkpointed before each of its loads, as autovacuum and the checkpointer keep it in a "
        "deployment (the inbox sets its table to be vacuumed every 10,000 dead rows; this "
        "machine's server may run with autovacuum off): unvacuumed, the dead versions of the "
        "fill's million events sit in the index of pending rows that every claim scans.",
        "",
        *table(
            (
                "inbox",
                "bytes per retained key",
                "p99 ms, empty",
                "p99 ms, retained",
                "x empty (each pair)",
                "server CPU/req, x empty",
            ),
            rows,
        ),
    ]
    return lines
