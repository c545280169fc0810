"""One soak run: three receivers, the deliveries, a kill and a restart, then what the inbox and the
handler's notes say happened."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import random
import shlex
import signal
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import attrs

from benchmarks.soak._deliveries import LoadBalancer, Tally, deliver, http_session, percentile, plan
from benchmarks.soak._node import METRICS_TOKEN, WORKERS, Node, ack_p99, start_node, stop_node


@attrs.frozen(kw_only=True)
class Options:
    events: int
    concurrency: int
    redis_url: str
    claim_timeout: float
    seed: int
    prefix: str | None = None


async def soak(options: Options) -> dict[str, Any]:
    import redis.asyncio

    from webhooks import RedisInbox, RedisRegistry

    rng = random.Random(options.seed)
    run = uuid.uuid4().hex[:8]
    prefix = options.prefix or f"soak:{run}:"
    deliveries, ids = plan(options.events, run, rng)
    total = len(deliveries)
    tally = Tally()
    nodes: list[Node] = []
    timeline: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="asyncsdk-soak-") as folder:
        logs = Path(folder)
        try:
            nodes = list(
                await asyncio.gather(
                    *(
                        start_node(options.redis_url, prefix, str(n), options.claim_timeout, logs)
                        for n in range(3)
                    )
                )
            )
            balancer = LoadBalancer(nodes)
            victim = nodes[2]
            progress = asyncio.Condition()
            cursor = iter(range(total))

            async def sender(http: aiohttp.ClientSession) -> None:
                for index in cursor:
                    await deliver(http, balancer, deliveries[index], tally)
                    async with progress:
                        tally.done += 1
                        progress.notify_all()

            async def chaos(started: float) -> None:
                async with progress:
                    await progress.wait_for(lambda: tally.done >= total // 3)
                timeline["killed_at"] = time.perf_counter() - started
                assert await stop_node(victim, signal.SIGKILL) == -signal.SIGKILL
                balancer.live.remove(victim)
                async with progress:
                    await progress.wait_for(lambda: tally.done >= 2 * total // 3)
                timeline["restart_at"] = time.perf_counter() - started
                restarted = await start_node(
                    options.redis_url, prefix, "2-restarted", options.claim_timeout, logs
                )
                nodes.append(restarted)
                balancer.live.append(restarted)
                timeline["restarted_at"] = time.perf_counter() - started

            async with http_session(options.concurrency) as http:
                started = time.perf_counter()
                chaos_task = asyncio.create_task(chaos(started))
                await asyncio.gather(*(sender(http) for _ in range(options.concurrency)))
                elapsed = time.perf_counter() - started
                await chaos_task
                node_metrics = {}
                scraper = {"Authorization": f"Bearer {METRICS_TOKEN}"}
                for node in balancer.live:
                    async with http.get(node.metrics_url, headers=scraper) as response:
                        node_metrics[node.name] = ack_p99(await response.text())

            inbox = RedisInbox(options.redis_url, prefix=prefix)
            recorder = redis.asyncio.Redis.from_url(options.redis_url)
            registry = RedisRegistry(options.redis_url, prefix=prefix)
            try:
                drain_started = time.perf_counter()
                backlog = await inbox.pending_count()
                async with asyncio.timeout(max(600.0, 10 * options.claim_timeout)):
                    while await inbox.pending_count():  # noqa: ASYNC110 - state is in Redis
                        await asyncio.sleep(0.1)
                drained_in = time.perf_counter() - drain_started
                dead = len(await inbox.dead_letters())
                calls = {
                    text(k): int(v)
                    for k, v in (await recorder.hgetall(f"{prefix}soak:calls")).items()
                }
                runs = {
                    text(k): int(v)
                    for k, v in (await recorder.hgetall(f"{prefix}soak:runs")).items()
                }
                first = {
                    text(k): text(v)
                    for k, v in (await recorder.hgetall(f"{prefix}soak:first")).items()
                }
                await registry.start()
                sample = rng.sample(ids, min(200, len(ids)))
                waited = await asyncio.gather(
                    *(registry.wait(pid, timeout=30) for pid in sample), return_exceptions=True
                )
                unresolved = sum(isinstance(w, BaseException) for w in waited)
            finally:
                await registry.close()
                await inbox.close()
                keys = [key async for key in recorder.scan_iter(match=f"{prefix}*", count=1000)]
                for start in range(0, len(keys), 1000):
                    await recorder.delete(*keys[start : start + 1000])
                await recorder.aclose()
        finally:
            for node in nodes:
                await stop_node(node)
        tracebacks = count_tracebacks(logs)

    per_event = Counter(calls.get(pid, 0) for pid in ids)
    runs_per_event = Counter(runs.get(pid, 0) for pid in ids)
    repeated = [pid for pid in ids if calls.get(pid, 0) > 1]
    rerun = [pid for pid in ids if runs.get(pid, 0) > 1]
    rerun_after_kill = [pid for pid in rerun if first.get(pid) == victim.name]
    new_valid = len(ids)
    return {
        "command": command_line(options),
        "events": total,
        "new_valid_events": new_valid,
        "duplicates_sent": sum(d.kind == "duplicate" for d in deliveries),
        "malformed_sent": sum(d.kind == "malformed" for d in deliveries),
        "concurrency": options.concurrency,
        "claim_timeout_s": options.claim_timeout,
        "workers_per_receiver": WORKERS,
        "elapsed_s": round(elapsed, 3),
        "events_per_s": round(total / elapsed, 1),
        "ack_latency_ms": {
            "p50": round(1000 * percentile(tally.latencies, 50), 2),
            "p99": round(1000 * percentile(tally.latencies, 99), 2),
            "max": round(1000 * max(tally.latencies, default=0.0), 2),
        },
        "receiver_ack_latency_p99_ms": {
            name: round(1000 * p99, 2) for name, p99 in node_metrics.items() if p99 is not None
        },
        "answers": dict(tally.answers),
        "retried_deliveries": tally.retries,
        "gave_up": tally.gave_up,
        "valid_rejected": tally.valid_rejected,
        "malformed_accepted": tally.malformed_accepted,
        "malformed_rejected": tally.rejected,
        "lost": sum(1 for pid in ids if calls.get(pid, 0) == 0),
        "handler_calls_per_valid_event": {str(k): v for k, v in sorted(per_event.items())},
        "handler_runs_per_valid_event": {str(k): v for k, v in sorted(runs_per_event.items())},
        "rerun_after_kill": len(rerun_after_kill),
        "rerun_otherwise": len(rerun) - len(rerun_after_kill),
        "repeated_calls": len(repeated),
        "malformed_handled": sum(1 for pid in runs if pid.startswith("bad-")),
        "unknown_handled": sum(1 for pid in runs if not pid.startswith(("bad-", f"{run}-"))),
        "dead_letters": dead,
        "waiters_unresolved_of_200": unresolved,
        "backlog_at_last_ack": backlog,
        "drained_in_s": round(drained_in, 2),
        "handled_per_s": round(new_valid / (elapsed + drained_in), 1),
        "timeline_s": {k: round(v, 2) for k, v in timeline.items()},
        "receiver_tracebacks": tracebacks,
        "machine": machine(),
    }


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def count_tracebacks(logs: Path) -> int:
    return sum(log.read_text().count("Traceback") for log in logs.glob("*.log"))


def machine() -> dict[str, str]:
    load = ""
    with contextlib.suppress(OSError):
        load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    return {
        "cpus": str(os.cpu_count()),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "load_average_after": load,
    }


def command_line(options: Options) -> str:
    parts = [".venv/bin/python", "-m", "benchmarks.soak", "--events", str(options.events)]
    if options.concurrency != 32:
        parts += ["--concurrency", str(options.concurrency)]
    if options.claim_timeout != 5.0:
        parts += ["--claim-timeout", str(options.claim_timeout)]
    return shlex.join(parts)
