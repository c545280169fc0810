"""Soak: webhook deliveries through three receiver processes on one Redis, one of them killed.

::

    .venv/bin/python -m benchmarks.soak [--events N] [--concurrency C] [--redis URL]
                                        [--out benchmarks/SOAK.md] [--json PATH] [--no-report]

``N`` deliveries (default 100,000): 65 % new valid events, 30 % duplicates of them (with re-signed
result URLs, as the service sends), 5 % malformed.  Three receiver processes (this module run as
``python -m benchmarks.soak node ...``) share a :class:`~webhooks.RedisInbox` and a
:class:`~webhooks.RedisRegistry` under one key prefix; a load balancer (the generator here)
spreads deliveries over the live ones and, like the service, retries a delivery on any non-2xx or
broken connection.  When a third of the deliveries are acknowledged one process gets SIGKILL; at
two thirds it is started again.

The handler is an ``atomic=True`` one: it queues ``HINCRBY <prefix>soak:calls <process_id> 1`` on
its :class:`~webhooks.RedisWrites`, which the inbox applies in the same script as the ack, so a
call counts only once its effect is committed.  It also notes each run as it starts, outside that
step (``<prefix>soak:runs``, and the process that ran it first in ``<prefix>soak:first``), so after
the inbox has drained:

* **lost**: valid events acknowledged (or never acknowledged) but never handled (must be 0);
* **handler calls per valid event** (committed effects): exactly 1 (must be);
* **handler runs per valid event**: 1, except for an entry whose handler ran in the killed process
  before its ack: it runs again elsewhere (at least once delivery), at most ``workers`` of them,
  all first run by the killed process, and the killed run's writes were never applied;
* no handler call for a malformed delivery, no dead letter, every waiter resolved;
* the load held (deliveries per second, generator to last acknowledgement), and the ack latency
  seen by the sender (p50, p99) and by the receivers (their own histogram).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shlex
import signal
import sys
import tempfile
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Final

import aiohttp
import attrs

ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_OUT: Final = Path(__file__).resolve().parent / "SOAK.md"
DEFAULT_REDIS: Final = os.environ.get("ASYNCSDK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
TOKEN: Final = "soak-" + "Hq3vT9xK2mWp" * 3
METRICS_TOKEN: Final = "scrape-" + "Rz8wQ4nL" * 3
DUPLICATE_SHARE: Final = 0.30
MALFORMED_SHARE: Final = 0.05
WORKERS: Final = 8
START_TIMEOUT: Final = 60.0
DELIVERY_TIMEOUT: Final = 10.0  # the service wants a 2xx within 10 s


# --- one receiver process ---------------------------------------------------------------------


async def run_node(url: str, prefix: str, name: str, claim_timeout: float) -> None:
    """Serve the receiver on 127.0.0.1 until SIGTERM; print ``{"ready": name, "port": p}``."""
    import redis.asyncio
    from aiohttp import web

    from asyncsdk import ProcessCompleted
    from webhooks import RedisInbox, RedisRegistry, RedisWrites, TokenVerifier, WebhookReceiver

    recorder = redis.asyncio.Redis.from_url(url)
    registry = RedisRegistry(url, prefix=prefix)
    receiver = WebhookReceiver(
        inbox=RedisInbox(url, prefix=prefix, claim_timeout=claim_timeout),
        verifier=TokenVerifier(TOKEN),
        registry=registry,
        workers=WORKERS,
        poll_interval=0.1,
        queue_limit=1_000_000,
        metrics_route=True,
        metrics_token=METRICS_TOKEN,
        consumer=f"soak-{name}",
    )
    calls, runs, first = f"{prefix}soak:calls", f"{prefix}soak:runs", f"{prefix}soak:first"

    @receiver.on_completed(atomic=True)
    async def record(event: ProcessCompleted, writes: RedisWrites) -> None:
        async with recorder.pipeline(transaction=False) as pipe:
            pipe.hincrby(runs, event.process_id, 1)
            pipe.hsetnx(first, event.process_id, name)
            await pipe.execute()
        writes.call("HINCRBY", calls, event.process_id, 1)

    async def close(_: web.Application) -> None:
        await registry.close()
        await recorder.aclose()

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    app.on_cleanup.append(close)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    await registry.start()
    print(json.dumps({"ready": name, "port": runner.addresses[0][1]}), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


# --- the parent: nodes -----------------------------------------------------------------------


def ack_p99(exposition: str) -> float | None:
    """The upper bound of the ack-latency bucket holding the 99th percentile, from a scrape."""
    from prometheus_client.parser import text_string_to_metric_families

    buckets = [
        (float(sample.labels["le"]), sample.value)
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "webhooks_ack_latency_seconds_bucket"
    ]
    total = max((count for _, count in buckets), default=0.0)
    if not total:
        return None
    # None past the last finite bound (10 s): the exposition does not say how far past.
    finite = [(bound, count) for bound, count in sorted(buckets) if bound != float("inf")]
    return next((bound for bound, count in finite if count >= 0.99 * total), None)


@attrs.define(eq=False)
class Node:
    name: str
    process: asyncio.subprocess.Process
    port: int
    log: Path

    @property
    def hook_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{TOKEN}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/metrics"


async def start_node(url: str, prefix: str, name: str, claim_timeout: float, logs: Path) -> Node:
    log = logs / f"node-{name}.log"
    with log.open("wb") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.soak",
            "node",
            url,
            prefix,
            name,
            str(claim_timeout),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
        )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(START_TIMEOUT):
            line = await process.stdout.readline()
    except TimeoutError:
        line = b""
    if not line:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        raise RuntimeError(
            f"receiver {name} did not start (exit {process.returncode}):\n{log.read_text()[-2000:]}"
        )
    return Node(name, process, int(json.loads(line)["port"]), log)


async def stop_node(node: Node, sig: int = signal.SIGTERM) -> int:
    if node.process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            node.process.send_signal(sig)
    try:
        async with asyncio.timeout(30):
            await node.process.wait()
    except TimeoutError:
        node.process.kill()
        await node.process.wait()
    return int(node.process.returncode or 0)


# --- the parent: what to send ------------------------------------------------------------------


@attrs.frozen
class Delivery:
    kind: str  # "new", "duplicate", "malformed"
    body: bytes
    content_type: str
    process_id: str | None = None


def event_body(process_id: str, status: str, copy: int) -> bytes:
    assets = (
        [
            {
                "asset_id": f"{process_id}-out",
                "asset_type": "image",
                "temp_src": f"https://cdn.example/{process_id}.jpg?sig={copy}",
                "temp_thumbnail_src": f"https://cdn.example/{process_id}-t.jpg?sig={copy}",
            }
        ]
        if status == "done"
        else []
    )
    return json.dumps(
        {
            "event": "process.completed",
            "process_id": process_id,
            "order_id": f"order-{process_id}",
            "tool": "tool-virtual-staging",
            "status": status,
            "final_assets": assets,
        }
    ).encode()


def malformed(index: int, process_id: str) -> Delivery:
    """One of seven ways to send garbage; each is answered 4xx and never retried."""
    good = json.loads(event_body(process_id, "done", 0))
    kind = index % 7
    if kind == 0:
        return Delivery("malformed", event_body(process_id, "done", 0)[:40], "application/json")
    if kind == 1:
        return Delivery("malformed", json.dumps({**good, "status": 3}).encode(), "application/json")
    if kind == 2:
        del good["order_id"]
        return Delivery("malformed", json.dumps(good).encode(), "application/json", process_id)
    if kind == 3:
        return Delivery("malformed", event_body(process_id, "done", 0), "text/plain", process_id)
    if kind == 4:
        return Delivery("malformed", b"", "application/json")
    if kind == 5:
        return Delivery("malformed", b"[" * 100 + b"]" * 100, "application/json")
    return Delivery(
        "malformed", b"\xff\xfe" + event_body(process_id, "done", 0), "application/json"
    )


def plan(events: int, run: str, rng: random.Random) -> tuple[list[Delivery], list[str]]:
    duplicates = round(events * DUPLICATE_SHARE)
    bad = round(events * MALFORMED_SHARE)
    new = events - duplicates - bad
    ids = [f"{run}-{n}" for n in range(new)]
    statuses = {pid: ("failed" if rng.random() < 0.1 else "done") for pid in ids}
    deliveries = [
        Delivery("new", event_body(pid, statuses[pid], 0), "application/json", pid) for pid in ids
    ]
    for copy in range(1, duplicates + 1):
        pid = rng.choice(ids)
        deliveries.append(
            Delivery("duplicate", event_body(pid, statuses[pid], copy), "application/json", pid)
        )
    deliveries += [malformed(n, f"bad-{run}-{n}") for n in range(bad)]
    rng.shuffle(deliveries)
    return deliveries, ids


# --- the parent: sending -----------------------------------------------------------------------


@attrs.define
class Tally:
    acked: int = 0
    rejected: int = 0
    valid_rejected: int = 0
    malformed_accepted: int = 0
    retries: int = 0
    gave_up: int = 0
    answers: Counter[str] = attrs.Factory(Counter)
    latencies: list[float] = attrs.Factory(list)
    done: int = 0


class LoadBalancer:
    """Round robin over the live nodes; the service's retry loop around each delivery."""

    def __init__(self, nodes: list[Node]) -> None:
        self.live = list(nodes)
        self._next = 0

    def pick(self) -> Node:
        self._next = (self._next + 1) % len(self.live)
        return self.live[self._next]


async def deliver(
    http: aiohttp.ClientSession, balancer: LoadBalancer, delivery: Delivery, tally: Tally
) -> None:
    deadline = time.monotonic() + 120
    attempt = 0
    while time.monotonic() < deadline:
        node = balancer.pick()
        started = time.perf_counter()
        status: int | None = None
        answer = ""
        try:
            async with http.post(
                node.hook_url, data=delivery.body, headers={"Content-Type": delivery.content_type}
            ) as response:
                status = response.status
                if status == 200:
                    answer = (await response.json())["status"]
                else:
                    await response.read()
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
            status = None
        elapsed = time.perf_counter() - started
        if status == 200:
            tally.latencies.append(elapsed)
            tally.answers[answer] += 1
            tally.acked += 1
            if delivery.kind == "malformed":
                tally.malformed_accepted += 1
            return
        if status is not None and 400 <= status < 500:
            tally.latencies.append(elapsed)
            tally.answers[str(status)] += 1
            if delivery.kind == "malformed":
                tally.rejected += 1
            else:
                tally.valid_rejected += 1
            return
        tally.retries += 1
        attempt += 1
        await asyncio.sleep(min(0.5, 0.01 * attempt))
    tally.gave_up += 1


@contextlib.asynccontextmanager
async def http_session(concurrency: int) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(limit=concurrency * 2, limit_per_host=0)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=DELIVERY_TIMEOUT)
    ) as http:
        yield http


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


# --- the run -----------------------------------------------------------------------------------


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


def verdict(result: dict[str, Any]) -> list[str]:
    """What must hold; empty when everything does."""
    problems = []
    for name in (
        "lost",
        "gave_up",
        "valid_rejected",
        "malformed_accepted",
        "repeated_calls",
        "rerun_otherwise",
        "malformed_handled",
        "unknown_handled",
        "dead_letters",
        "waiters_unresolved_of_200",
    ):
        if result[name]:
            problems.append(f"{name} = {result[name]}")
    if result["rerun_after_kill"] > WORKERS:
        problems.append(f"rerun_after_kill = {result['rerun_after_kill']} > {WORKERS} workers")
    return problems


def render(result: dict[str, Any]) -> str:
    calls = result["handler_calls_per_valid_event"]
    once = calls.get("1", 0)
    lat = result["ack_latency_ms"]
    problems = verdict(result)
    rows = [
        ("Deliveries sent", f"{result['events']:,}"),
        (
            "of which new / duplicate / malformed",
            f"{result['new_valid_events']:,} / {result['duplicates_sent']:,} / "
            f"{result['malformed_sent']:,}",
        ),
        ("Load held (deliveries/s, first send to last ack)", f"{result['events_per_s']:,}"),
        (
            "Valid events handled per second (first send to empty inbox)",
            f"{result['handled_per_s']:,}",
        ),
        ("Wall time of the sending phase", f"{result['elapsed_s']} s"),
        (
            "Ack latency seen by the sender p50 / p99 / max",
            f"{lat['p50']} / {lat['p99']} / {lat['max']} ms",
        ),
        (
            "Ack latency p99 inside each receiver",
            ", ".join(f"{k}: {v} ms" for k, v in result["receiver_ack_latency_p99_ms"].items()),
        ),
        ("**Events lost**", f"**{result['lost']}**"),
        (
            "**Handler calls per valid event** (effects committed with the ack)",
            f"**exactly 1 for {once:,} of {result['new_valid_events']:,}**; "
            + ", ".join(f"{k}: {v}" for k, v in calls.items() if k != "1")
            if len(calls) > 1
            else f"**exactly 1 for all {once:,}**",
        ),
        (
            "Handler runs per valid event (started, committed or not)",
            ", ".join(f"{k}: {v:,}" for k, v in result["handler_runs_per_valid_event"].items()),
        ),
        (
            "Runs again of entries the killed process had started (their writes never applied)",
            result["rerun_after_kill"],
        ),
        ("Runs again for any other reason", result["rerun_otherwise"]),
        (
            "Malformed deliveries answered 4xx / reaching a handler",
            f"{result['malformed_rejected']:,} / {result['malformed_handled']}",
        ),
        ("Valid deliveries refused", result["valid_rejected"]),
        ("Deliveries retried by the sender (kill, restart)", f"{result['retried_deliveries']:,}"),
        ("Dead letters", result["dead_letters"]),
        ("Waiters (RedisRegistry) unresolved, of 200 sampled", result["waiters_unresolved_of_200"]),
        (
            "Events stored but not yet handled at the last ack / drained in",
            f"{result['backlog_at_last_ack']:,} / {result['drained_in_s']} s",
        ),
        ("Tracebacks in the receivers' logs", result["receiver_tracebacks"]),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    summary = (
        "**pass**: nothing lost, no handler call for a duplicate or a malformed delivery, "
        "no dead letter."
        if not problems
        else "**FAIL**: " + "; ".join(problems)
    )
    timeline = result["timeline_s"]
    m = result["machine"]
    workers = result["workers_per_receiver"]
    setup = (
        f"Three receiver processes (`WebhookReceiver` with `RedisInbox` + `RedisRegistry` under "
        f"one prefix, `TokenVerifier` in the path, {workers} workers each, claim timeout "
        f"{result['claim_timeout_s']} s) behind a round-robin sender with "
        f"{result['concurrency']} deliveries in flight that, like the service, retries every "
        f"non-2xx or broken connection on the next process. Process 2 got SIGKILL at "
        f"{timeline.get('killed_at', '?')} s (a third of the deliveries done) and a new process "
        f"joined at {timeline.get('restarted_at', '?')} s (two thirds done). Machine: "
        f"{m['cpus']} CPUs, Python {m['python']}, {m['platform']}; the sender, the receivers and "
        f"Redis share it (load average {m['load_average_after']} at the end of the run)."
    )
    notes = [
        "*Lost* counts valid events that never reached the handler, acknowledged or not. The "
        "inbox stores before it answers 2xx, so an event acknowledged by the killed process is "
        "still handled: its claim times out and another process takes it over.",
        "*Handler calls per valid event* counts committed effects: the handler is registered "
        "with `atomic=True` and queues its `HINCRBY` on a `RedisWrites`, which the inbox applies "
        "in the same script as the ack, and only while the process still holds the entry. An "
        "entry the killed process had started is handed out again after its claim times out "
        "and runs a second time (the *runs* row: at most "
        f"{workers} of them, each first run by the killed process), but the killed run's writes "
        "were never applied, so every effect lands once. Duplicates sent by the service never "
        "reach a handler: the dedup claim is one atomic `SET NX` shared by all processes.",
        (
            "The receivers acknowledged faster than their handlers finished (each handled event "
            "costs a claim, the registry's `SET NX` + `PUBLISH` heard by every process, the "
            "handler's own note of its run, and the ack with the handler's writes), so a backlog "
            "built while the load lasted and drained after it. "
            if result["backlog_at_last_ack"]
            else "The workers kept up: nothing was waiting when the last delivery was "
            "acknowledged, so the handled rate is the valid share of the load, not a limit of "
            "the workers. "
        )
        + "This run set `queue_limit` high; with the default (10,000 unfinished events) "
        "receivers that fall behind answer 503 with `Retry-After` instead and the service "
        "retries.",
        f"Latency is measured by the sender around each POST, at {result['concurrency']} in "
        "flight; it includes the durable store (one Redis script) before the 2xx. The "
        "receivers' own figure is the upper bound of their histogram bucket.",
    ]
    bullets = "\n".join(
        textwrap.fill(
            note,
            width=100,
            initial_indent="- ",
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
        for note in notes
    )
    return f"""# Webhook soak

Reproduce (Redis on 127.0.0.1:6379, from the repository root):

```
{result["command"]}
```

{textwrap.fill(setup, width=100, break_on_hyphens=False)}

| Measure | Result |
|---|---|
{table}

Verdict: {summary}

How to read it:

{bullets}
"""


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--events", type=int, default=100_000, help="deliveries to send")
    parser.add_argument("--concurrency", type=int, default=32, help="deliveries in flight")
    parser.add_argument(
        "--redis", default=DEFAULT_REDIS, help="Redis URL (a unique prefix is used)"
    )
    parser.add_argument("--prefix", default=None, help="key prefix (default: a fresh one)")
    parser.add_argument("--claim-timeout", type=float, default=5.0, help="RedisInbox claim_timeout")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown report")
    parser.add_argument("--no-report", action="store_true", help="do not write the report")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.events < 100:
        parser.error("--events must be at least 100")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["node"]:
        url, prefix, name, claim_timeout = arguments[1:5]
        asyncio.run(run_node(url, prefix, name, float(claim_timeout)))
        return 0
    args = parse(arguments)
    options = Options(
        events=args.events,
        concurrency=args.concurrency,
        redis_url=args.redis,
        claim_timeout=args.claim_timeout,
        seed=args.seed,
        prefix=args.prefix,
    )
    result = asyncio.run(soak(options))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if not args.no_report:
        args.out.write_text(render(result))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))
    problems = verdict(result)
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
