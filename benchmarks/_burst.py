"""Part of section 3: a burst of deliveries against every receiver, as a sender's backlog arrives
after an outage: the p99 of its answers, every answer 2xx or 503 with ``Retry-After``, none lost.

Each round, for each receiver: a fresh server (``_receiver_bench:serve`` with ``recorded``: a
handler that notes each ``process_id``, and a ``queue_limit`` of a fifth of the burst, so that the
burst fills the inbox and its 503 path is measured), and a sender child that posts
``plan.burst_deliveries`` new events over the top connection count at once, then sends the ones
answered 503 again after their ``Retry-After``, as the service retries, until each was accepted
(its recovery).  Then the server is asked until its handler has seen every process id (or a
minute has passed): a process id the handler never saw is lost.  A run without a 503 did not
measure the 503 path, and misses the goal.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from benchmarks import _plan as goals
from benchmarks._env import median, percentile
from benchmarks._plan import Plan
from benchmarks._procs import run_job
from benchmarks._receiver_bench import body_for
from benchmarks._receiver_run import NAMES, receiver_server
from benchmarks._shared import Goal, fmt, table
from benchmarks._stores import STORE_NAMES, server_of

__all__ = ["STORES", "burst", "send"]

STORES: Final = STORE_NAMES
_RESENDS: Final = 30
"""Rounds of resending what was answered 503 before the sender gives up on it."""
QUEUE_SHARE: Final = 5
"""The burst is this many times the receiver's ``queue_limit``: the inbox fills, and the rest of
the burst is answered 503 until the workers have made room."""
_HANDLED_WITHIN: Final = 60.0
"""Seconds the handler has, once the last delivery was accepted, to see every process id."""


@attrs.define
class _Answers:
    """What the sender saw: the latency of every answer, the answers by status, the 503s
    without a ``Retry-After`` in whole seconds, and the requests that got no answer."""

    latencies: list[float] = attrs.Factory(list)
    statuses: Counter[int] = attrs.Factory(Counter)
    no_retry_after: int = 0
    errors: int = 0


async def _round(
    session: Any, url: str, process_ids: Sequence[str], connections: int, answers: _Answers
) -> tuple[list[str], int]:
    """Post each of ``process_ids`` once over ``connections``: the ones not accepted, and the
    longest ``Retry-After`` (s) among their answers."""
    import aiohttp

    todo = iter(process_ids)
    refused: list[str] = []
    wait = 0
    headers = {"Content-Type": "application/json"}

    async def post_all() -> None:
        nonlocal wait
        for process_id in todo:  # one iterator shared by every connection's task
            started = time.perf_counter()
            try:
                async with session.post(url, data=body_for(process_id), headers=headers) as answer:
                    await answer.read()
                    status, retry_after = answer.status, answer.headers.get("Retry-After", "")
            except (aiohttp.ClientError, TimeoutError):
                answers.errors += 1
                refused.append(process_id)
                continue
            answers.latencies.append(time.perf_counter() - started)
            answers.statuses[status] += 1
            if 200 <= status < 300:
                continue
            refused.append(process_id)
            if status == 503 and retry_after.isdigit():
                wait = max(wait, int(retry_after))
            elif status == 503:
                answers.no_retry_after += 1

    await asyncio.gather(*(post_all() for _ in range(connections)))
    return refused, wait


async def send(
    io: Any, *, url: str, deliveries: int, connections: int, run: str, resends: int = _RESENDS
) -> dict[str, Any]:
    """Post ``deliveries`` new events over ``connections`` at once; send each one not accepted
    again after the longest ``Retry-After`` of its round (1 s without one), ``resends`` times at
    most."""
    import aiohttp

    answers = _Answers()
    pending = [f"{run}-{n}" for n in range(deliveries)]
    resent = 0
    connector = aiohttp.TCPConnector(limit=connections)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        started = time.perf_counter()
        pending, wait = await _round(session, url, pending, connections, answers)
        burst_seconds = time.perf_counter() - started
        for _ in range(resends):
            if not pending:
                break
            resent += len(pending)
            await asyncio.sleep(wait or 1)
            pending, wait = await _round(session, url, pending, connections, answers)
        accepted_seconds = time.perf_counter() - started
    ordered = sorted(answers.latencies)
    ok = sum(n for status, n in answers.statuses.items() if 200 <= status < 300)
    unavailable = answers.statuses[503]
    return {
        "burst_s": burst_seconds,
        "accepted_s": accepted_seconds,
        "p50_s": percentile(ordered, 50),
        "p99_s": percentile(ordered, 99),
        "max_s": ordered[-1] if ordered else 0.0,
        "ok": ok,
        "unavailable": unavailable,
        "other": len(ordered) - ok - unavailable,
        "no_retry_after": answers.no_retry_after,
        "errors": answers.errors,
        "resent": resent,
        "never_accepted": len(pending),
    }


def _once(plan: Plan, folder: Path, store: str, run: str) -> dict[str, Any]:
    """One burst against a fresh ``store`` receiver; the sender's figures, and ``lost``."""
    limit = max(1, plan.burst_deliveries // QUEUE_SHARE)
    with receiver_server(store, folder, recorded=True, queue_limit=limit) as (child, url):
        result = run_job(
            "_burst:send",
            {
                "url": url,
                "deliveries": plan.burst_deliveries,
                "connections": max(plan.receiver_connections),
                "run": run,
            },
            timeout=600,
        )
        deadline = time.monotonic() + _HANDLED_WITHIN
        while True:
            child.send("stats")
            seen = child.recv()["seen"]
            if seen >= plan.burst_deliveries or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    return {**result, "lost": plan.burst_deliveries - seen}


def _answered_well(result: dict[str, Any]) -> bool:
    """The inbox filled (503s were answered), every answer 2xx or 503 with ``Retry-After``,
    every delivery accepted in the end, and none lost."""
    return result["unavailable"] > 0 and not (
        result["other"]
        or result["no_retry_after"]
        or result["errors"]
        or result["never_accepted"]
        or result["lost"]
    )


def burst(
    plan: Plan, folder: Path, stores: Sequence[str], reasons: dict[str, str]
) -> tuple[list[str], list[Goal]]:
    """The burst's table and its goal per receiver (``reasons``: why a server's rows were not
    run)."""
    results: dict[str, list[dict[str, Any]]] = {store: [] for store in stores}
    for round_number in range(plan.runs):
        for store in stores:
            results[store].append(_once(plan, folder, store, f"b{round_number}-{store}"))
    top = max(plan.receiver_connections)
    count = plan.burst_deliveries
    rows: list[list[str]] = []
    found: list[Goal] = []
    target = f"<= {goals.BURST_P99_S * 1000:,.0f} ms; 503s; 0 other; 0 lost"
    for store in STORES:
        runs = results.get(store)
        title = (
            f"{store}: a burst of {count:,} deliveries @{top}: p99 <= {goals.BURST_P99_S:g} s,"
            f" past a queue_limit of {count // QUEUE_SHARE:,}: every answer 2xx or 503 +"
            " Retry-After, none lost"
        )
        if not runs:
            reason = reasons.get(server_of(store), "?")
            rows.append([NAMES[store], f"not run: {reason}", *[""] * 7])
            found.append(Goal("receiver", title, "not run", target, None))
            continue
        worst_p99 = max(r["p99_s"] for r in runs)
        each = ", ".join(fmt(r["p99_s"] * 1000, 1) for r in runs)
        well = all(_answered_well(r) for r in runs)
        rows.append(
            [
                NAMES[store],
                fmt(median([r["burst_s"] for r in runs]), 2),
                fmt(median([r["p50_s"] for r in runs]) * 1000, 1),
                f"**{fmt(worst_p99 * 1000, 1)}** ({each})",
                ", ".join(f"{r['ok']:,} / {r['unavailable']:,}" for r in runs),
                fmt(median([r["accepted_s"] for r in runs]), 1),
                str(sum(r["other"] + r["no_retry_after"] + r["errors"] for r in runs)),
                str(sum(r["resent"] for r in runs)),
                str(sum(r["never_accepted"] + r["lost"] for r in runs)),
            ]
        )
        found.append(
            Goal(
                "receiver",
                title,
                f"p99 {fmt(worst_p99 * 1000, 0)} ms (worst run); "
                + (
                    "503s past the limit, every answer 2xx/503, none lost"
                    if well
                    else "see the burst table"
                ),
                target,
                worst_p99 <= goals.BURST_P99_S and well,
            )
        )
    lines = [
        f"Burst: {count:,} new `process.completed` deliveries sent at once over {top} "
        "connections by a Python/aiohttp sender (pinned to core 0) to a fresh receiver with a "
        f"`queue_limit` of {count // QUEUE_SHARE:,} (a fifth of the burst: the inbox fills, and "
        "what comes past it is answered 503 with `Retry-After`, 5 s by default), one handler "
        "that notes each `process_id` and then waits 10 ms, as its own write would, and 8 "
        "workers (800 events a second at most).  What is answered 503 is sent again after its "
        "`Retry-After`, as the service retries, until accepted: the recovery, from the burst's "
        f"start to the last delivery accepted.  p99 over every answer, in ms: the worst of "
        f"{plan.runs} run(s), each run's in brackets.  Once every delivery was accepted, the "
        "server is asked until its handler has seen every process id (for up to "
        f"{_HANDLED_WITHIN:.0f} s): one it never saw is lost.  A run with no 503 misses the "
        "goal: it did not measure the path it is there for.",
        "",
        *table(
            (
                "receiver",
                "burst sent in s (median)",
                "p50 ms (median)",
                "p99 ms, worst (runs)",
                "2xx / 503 answers (runs)",
                "all accepted after s (median)",
                "other answers, 503 without Retry-After, errors",
                "resent after 503",
                "never accepted or lost",
            ),
            rows,
        ),
    ]
    return lines, found
