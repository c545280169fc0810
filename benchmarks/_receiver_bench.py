"""Section 3: ``process.completed`` POSTs against the mounted receiver, beside its peers.

The server child (pinned to the server core) runs one variant: one of the hand-written handlers
of ``_peers.py`` (bare, or an inbox's work done by hand), or :class:`~webhooks.WebhookReceiver`
mounted at ``/hooks/`` with a memory, SQLite, Redis or PostgreSQL inbox, with no handler (or, for
the burst, one that notes each process id); or the same receiver served by uvicorn through
:class:`~webhooks.asgi.ReceiverASGI` (section 7).  The load generator (wrk with a Lua script
that gives every request its own ``process_id``, so dedup never short-circuits; else a
Python/aiohttp child) runs pinned to the client core and measures latency on its side.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

from aiohttp import web

from benchmarks._child import ChildIO
from benchmarks._env import percentile
from benchmarks._peers import PEERS, add_peer

TOKEN: Final = "bench-token-0123456789abcdefABCDEF"  # noqa: S105 - a fixture, not a secret
QUEUE_LIMIT: Final = 10_000_000
"""Raised from the default 10,000 so that backpressure (503) does not mix into the ack timing."""

_ASSET_URL: Final = "https://files.example.com/result/%s.jpg?token=0a1b2c3d4e5f"
BODY_TEMPLATE: Final = (
    '{"event":"process.completed","process_id":"%s","order_id":"order-bench-1",'
    '"tool":"tool-virtual-staging","status":"done","final_assets":[{"asset_id":"asset-%s",'
    '"asset_type":"image","temp_src":"'
    + _ASSET_URL
    + '","temp_thumbnail_src":"'
    + _ASSET_URL
    + '"}]}'
)


UVICORN: Final = "-uvicorn"
"""A receiver store's name with this suffix: the same receiver served by uvicorn through
:class:`~webhooks.asgi.ReceiverASGI` instead of mounted in an aiohttp app."""


def body_for(process_id: str) -> bytes:
    return (BODY_TEMPLATE % (process_id, process_id, process_id, process_id)).encode()


TAIL_FROM: Final = 90.0
TAIL_STEP: Final = 0.01
TAIL_STEPS: Final = 1_000
"""A load reports its latency percentiles 90.00, 90.01, ... 99.99 as ``tail_us``, so that the
tails of several loads can be pooled (``benchmarks._shared.pooled_percentile``)."""


def tail_of(latencies_us: Sequence[float]) -> list[int]:
    """The ``tail_us`` of a load from its latencies."""
    ordered = sorted(latencies_us)  # sorted once: percentile's own sort is then linear
    return [int(percentile(ordered, TAIL_FROM + k * TAIL_STEP)) for k in range(TAIL_STEPS)]


LUA_SCRIPT: Final = """
-- One process_id per request: "<run>-<thread>-<n>", so the dedup claim never short-circuits.
local threads = 0
local counter = 0
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
local template = [[%(template)s]]
local headers = {["Content-Type"] = "application/json"}
request = function()
  counter = counter + 1
  local pid = string.format("%%s-%%d-%%d", "%(run)s", tid, counter)
  local body = string.format(template, pid, pid, pid, pid)
  return wrk.format("POST", nil, headers, body)
end
%(delay)s
done = function(summary, latency, requests)
  local e = summary.errors
  local tail = {}
  for k = 0, %(tail_steps)d - 1 do
    tail[#tail + 1] = string.format("%%d", latency:percentile(%(tail_from)s + k * %(tail_step)s))
  end
  io.write(string.format(
    'WRKJSON {"requests":%%d,"duration_us":%%d,"p50_us":%%d,"p99_us":%%d,"max_us":%%d,' ..
    '"errors":%%d,"non_2xx":%%d,"timeouts":%%d,"tail_us":[%%s]}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.max, e.connect + e.read + e.write, e.status, e.timeout, table.concat(tail, ",")))
end
"""


def lua_script(run: str, delay_ms: float | None = None) -> str:
    """The wrk script; ``delay_ms`` paces each connection: wrk waits a random 0 to 2 x
    ``delay_ms`` between its requests (random, so the connections do not fall into step), so the
    offered rate is about connections * 1000 / delay_ms per second."""
    delay = (
        ""
        if delay_ms is None
        else f"delay = function() return math.random(0, {2 * int(delay_ms)}) end"
    )
    return LUA_SCRIPT % {
        "template": BODY_TEMPLATE,
        "run": run,
        "delay": delay,
        "tail_steps": TAIL_STEPS,
        "tail_from": TAIL_FROM,
        "tail_step": TAIL_STEP,
    }


# -- the server child -----------------------------------------------------------------------------


async def serve(
    io: ChildIO,
    *,
    store: str,
    workdir: str,
    place: str = "",
    namespace: str = "",
    observed: str = "",
    recorded: bool = False,
    queue_limit: int = 0,
) -> None:
    """Serve one variant (:func:`run_server`; ``observed``: a telemetry mode of
    ``_observed.py``, or empty for none); ``"stats"`` adds the receiver's counters.

    ``recorded``: the receiver as a user mounts it (``queue_limit``, or the default when 0) with
    one handler that notes each event's ``process_id`` and then waits 10 ms, as a handler's own
    write would; ``"stats"`` then also says how many distinct process ids the handler saw
    (``seen``).  Not recorded, the queue limit is :data:`QUEUE_LIMIT`."""
    app = web.Application()
    receiver: Any = None
    seen: set[str] = set()
    served_by = "aiohttp"
    if store.endswith(UVICORN):
        store, served_by = store.removesuffix(UVICORN), "uvicorn"
    if store in PEERS:
        add_peer(
            app,
            store,
            token=TOKEN,
            workdir=Path(workdir),
            place=place,
            namespace=namespace,
        )
    else:
        from webhooks import TokenVerifier, WebhookReceiver

        # A recorded receiver answers 503 past its queue limit (the burst's, or the default).
        limits = {"queue_limit": queue_limit} if queue_limit else {}
        if not recorded:
            limits = {"queue_limit": QUEUE_LIMIT}
        mounted = WebhookReceiver(
            inbox=_inbox(store, place, namespace),
            verifier=TokenVerifier(TOKEN),
            **limits,
            drain_timeout=0.5,
            **_telemetry(observed),
        )
        if recorded:

            @mounted.on_completed()
            async def record(event: Any) -> None:
                seen.add(event.process_id)
                await asyncio.sleep(0.01)

        receiver = mounted
        if served_by == "uvicorn":
            from webhooks.asgi import ReceiverASGI

            await run_uvicorn(
                io,
                ReceiverASGI(mounted),
                lambda port: {"url": f"http://127.0.0.1:{port}/{TOKEN}"},
                lambda: {**_stats(receiver), "seen": len(seen)},
            )
            return
        mounted.setup(app, "/hooks/")
    await run_server(
        io,
        app,
        lambda port: {"url": f"http://127.0.0.1:{port}/hooks/{TOKEN}"},
        lambda: {**_stats(receiver), "seen": len(seen)},
    )


def _inbox(store: str, place: str, namespace: str) -> Any:
    """The receiver's inbox for ``store`` at ``place``, under ``namespace``."""
    try:
        from webhooks.stores import store_named
    except ImportError:  # a tree from before the table (benchmarks.sidebyside, --baseline)
        return _inbox_before_the_table(store, place, namespace)
    return store_named(store).open_inbox(place, namespace)


def _inbox_before_the_table(store: str, place: str, namespace: str) -> Any:
    """What :data:`webhooks.stores.STORES` opens, for a tree without it."""
    import webhooks

    if store == "memory":
        return webhooks.MemoryInbox()
    if store == "sqlite":
        return webhooks.SQLiteInbox(place)
    if store == "redis":
        return webhooks.RedisInbox(place, prefix=namespace)
    if store == "postgres":
        return webhooks.PostgresInbox(place, schema=namespace)
    raise ValueError(f"unknown store {store!r}")


async def run_server(
    io: ChildIO,
    app: web.Application,
    ready: Callable[[int], dict[str, Any]],
    counters: Callable[[], dict[str, Any]],
) -> None:
    """Serve ``app`` on 127.0.0.1 until stdin closes; ``ready(port)`` is what the parent is told,
    then the parent's messages are answered (:func:`_answer`)."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        port = runner.addresses[0][1]
        await _answer(io, ready(port), counters)
    finally:
        await runner.cleanup()


async def run_uvicorn(
    io: ChildIO,
    app: Any,
    ready: Callable[[int], dict[str, Any]],
    counters: Callable[[], dict[str, Any]],
) -> None:
    """Serve the ASGI ``app`` with uvicorn on 127.0.0.1 as :func:`run_server` serves an aiohttp
    app: no access log, the ASGI lifespan on (it starts and drains the receiver).  uvicorn's
    C parser (httptools) when installed, else h11, as uvicorn itself chooses; the counters say
    which (``http``)."""
    import uvicorn

    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        http=http,
        lifespan="on",
        access_log=False,
        log_level="warning",
        backlog=1024,
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()  # the failure to start, raised
            raise RuntimeError("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        await _answer(io, ready(port), lambda: {**counters(), "http": http})
    finally:
        server.should_exit = True
        await serving


async def _answer(
    io: ChildIO, info: dict[str, Any], counters: Callable[[], dict[str, Any]]
) -> None:
    """Say the server is ready (``info``), then answer the parent until stdin closes:
    ``"mark"`` starts the CPU clock (after the warm-up); ``"stats"`` answers the process's CPU
    seconds since the mark (every thread), its thread waits, and ``counters()``."""
    # The deployment docs/webhooks.md recommends, applied to every variant alike: once the
    # app has started, move what start-up made out of the collector's reach, so that full
    # collections walk only what requests create.
    gc.freeze()
    io.ready(info)
    cpu, waits = time.process_time(), thread_waits()
    while (message := await io.recv()) is not None:
        if message == "mark":
            cpu, waits = time.process_time(), thread_waits()
            io.send({})
        elif message == "stats":
            io.send(
                {
                    "cpu_s": time.process_time() - cpu,
                    "waits": thread_waits() - waits,
                    **counters(),
                }
            )


def thread_waits() -> int:
    """Times the threads of this process blocked and were woken (voluntary context switches,
    summed over ``/proc/self/task/*/status``; 0 where there is no ``/proc``)."""
    total = 0
    for status in Path("/proc/self/task").glob("*/status"):
        with contextlib.suppress(OSError):
            for line in status.read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split(":")[1])
    return total


def _telemetry(observed: str) -> dict[str, Any]:
    if not observed:
        return {}
    from benchmarks._observed import receiver_telemetry

    return {"telemetry": receiver_telemetry(observed)}


def _stats(receiver: Any) -> dict[str, Any]:
    if receiver is None:
        return {}
    metrics = receiver.metrics
    return {
        "received": metrics.received,
        "accepted": metrics.accepted,
        "duplicate": metrics.duplicate,
        "processed": metrics.processed,
        "unavailable": sum(metrics.unavailable.values()),
        "rejected": sum(metrics.rejected.values()),
    }


# -- the Python load generator (when wrk is not installed) ----------------------------------------


async def loadgen(
    io: ChildIO,
    *,
    url: str,
    connections: int,
    duration: float,
    run: str,
    delay_ms: float | None = None,
) -> dict[str, Any]:
    """``connections`` keep-alive connections posting for ``duration`` s (each waiting
    ``delay_ms`` between its requests when given); latency per request, and this process's own
    CPU seconds over the load (``cpu_s``), to tell when the generator, not the server, was the
    limit."""
    import aiohttp

    latencies: list[float] = []
    non_2xx = 0
    errors = 0
    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + duration

        async def worker(number: int) -> None:
            nonlocal non_2xx, errors
            count = 0
            while time.perf_counter() < deadline:
                count += 1
                body = body_for(f"{run}-{number}-{count}")
                started = time.perf_counter()
                try:
                    async with session.post(url, data=body, headers=headers) as response:
                        await response.read()
                        if not 200 <= response.status < 300:
                            non_2xx += 1
                except aiohttp.ClientError:
                    errors += 1
                    continue
                latencies.append(time.perf_counter() - started)
                if delay_ms:
                    await asyncio.sleep(random.uniform(0, 2 * delay_ms) / 1000)

        started = time.perf_counter()
        cpu = time.process_time()
        await asyncio.gather(*(worker(n) for n in range(connections)))
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
    return {
        "cpu_s": cpu,
        "requests": len(latencies) + errors,
        "duration_us": int(seconds * 1e6),
        "p50_us": int(percentile(latencies, 50) * 1e6),
        "p99_us": int(percentile(latencies, 99) * 1e6),
        "max_us": int(max(latencies, default=0.0) * 1e6),
        "tail_us": tail_of([latency * 1e6 for latency in latencies]),
        "errors": errors,
        "non_2xx": non_2xx,
        "timeouts": 0,
    }
