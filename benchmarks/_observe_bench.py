"""Section 6's helper processes: telemetry off and on, side by side inside one process.

Telemetry's cost is a few microseconds a request, less than what separates two processes that run
the same code on a shared machine.  So each process here holds every variant at once, and takes
turns between them in blocks: a variant's CPU per request is compared with that of telemetry off
measured in the same process, in the same round, seconds apart.

* :func:`client_job`: one ``Client`` per variant against the minimal server; a block is
  ``requests`` creates (or gets) through one of them.
* :func:`serve`: one ``WebhookReceiver`` (``MemoryInbox``, no handler) per variant, mounted on
  one application at ``/hooks/<variant>/``; the parent points the load generator at one of them
  per block and reads this process's CPU around it.
"""

from __future__ import annotations

from typing import Any, Final

from aiohttp import web

from benchmarks._child import ChildIO
from benchmarks._client_bench import WARMUP_START, Sdk, drive, timed
from benchmarks._observed import MODES
from benchmarks._receiver_bench import QUEUE_LIMIT, TOKEN, run_server

VARIANTS: Final = ("off", *MODES)
"""Telemetry off, then each mode of ``_observed.py``."""


def turn(round_number: int) -> tuple[str, ...]:
    """The variants in the order of round ``round_number``: each starts a round in turn, so that
    none is always measured first (on a cold cache) or last."""
    shift = round_number % len(VARIANTS)
    return VARIANTS[shift:] + VARIANTS[:shift]


async def client_job(
    io: ChildIO,
    *,
    base_url: str,
    api_key: str,
    requests: int,
    concurrency: int,
    warmup: int,
    rounds: int,
    phases: tuple[str, ...] = ("create", "get"),
) -> dict[str, Any]:
    """``{phase: {variant: [{"rps", "cpu_us", "seconds"} per round]}}``."""
    clients = {variant: Sdk(observed="" if variant == "off" else variant) for variant in VARIANTS}
    result: dict[str, dict[str, list[dict[str, float]]]] = {
        phase: {variant: [] for variant in VARIANTS} for phase in phases
    }
    try:
        for sdk in clients.values():
            await sdk.open(base_url, api_key, concurrency)
            for phase in phases:
                await drive(warmup, concurrency, getattr(sdk, phase), start=WARMUP_START)
        for number in range(rounds):
            for phase in phases:
                for variant in turn(number):
                    call = getattr(clients[variant], phase)
                    # Numbers never repeat within a client: a repeated GET would wait out the
                    # client's minimum poll interval instead of timing the request path.
                    block = await timed(requests, concurrency, call, start=number * requests)
                    result[phase][variant].append(block)
    finally:
        for sdk in clients.values():
            await sdk.close()
    return result


async def serve(io: ChildIO) -> None:
    """One receiver per variant on one application, until stdin closes (see
    :func:`~benchmarks._receiver_bench.run_server` for the messages)."""
    from benchmarks._observed import receiver_telemetry
    from webhooks import MemoryInbox, TokenVerifier, WebhookReceiver

    app = web.Application()
    for variant in VARIANTS:
        receiver = WebhookReceiver(
            inbox=MemoryInbox(),
            verifier=TokenVerifier(TOKEN),
            queue_limit=QUEUE_LIMIT,
            drain_timeout=0.5,
            **({} if variant == "off" else {"telemetry": receiver_telemetry(variant)}),
        )
        receiver.setup(app, f"/hooks/{variant}/")

    def urls(port: int) -> dict[str, Any]:
        base = f"http://127.0.0.1:{port}/hooks"
        return {"urls": {variant: f"{base}/{variant}/{TOKEN}" for variant in VARIANTS}}

    await run_server(io, app, urls, dict)


async def counted_client(
    io: ChildIO, *, base_url: str, api_key: str, variant: str, requests: int, concurrency: int
) -> None:
    """One ``Client`` of ``variant``, warmed up, then ``requests`` GETs when the parent says so
    (``benchmarks.trace_instructions`` counts their instructions in between)."""
    sdk = Sdk(observed="" if variant == "off" else variant)
    await sdk.open(base_url, api_key, concurrency)
    try:
        await drive(max(100, requests // 4), concurrency, sdk.get, start=WARMUP_START)
        io.ready({})
        await io.recv()
        await drive(requests, concurrency, sdk.get)
        io.send({"done": requests})
        await io.recv()
    finally:
        await sdk.close()
