"""Section 1: ``processes.create`` and ``processes.get`` through this SDK, raw aiohttp and httpx.

Each (implementation, round) runs in a fresh child pinned to the client core, against the minimal
server (``_api.py``) pinned to the other core.  A child first warms up (connections opened, code
paths run), then times ``requests`` creates and ``requests`` gets at ``concurrency`` coroutines.
Requests/s is wall time; CPU per request is ``time.process_time()`` of the client process
(every thread of it) divided by the requests.

Every create names a new input asset (:func:`asset_map`), as a user's batch of photos does: the
client plans each one afresh, so its plan memo never answers and its cost is measured, not hidden.
:func:`counted_calls` runs one phase for ``benchmarks.instructions`` to count.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final

from benchmarks._child import ChildIO

IMPLEMENTATIONS: Final = ("sdk", "sdk-novalidate", "aiohttp", "httpx")
ORDER_ID: Final = "order-bench-1"
TOOL: Final = "tool-virtual-staging"
INPUT: Final = "tool-virtual-staging-input-image"
WIDGETS: Final = [
    {
        "slug": "widget-space-tool-virtual-staging",
        "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"],
    },
    {
        "slug": "widget-style-tool-virtual-staging",
        "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
    },
]


def asset_map(number: int) -> dict[str, str]:
    """The input of create ``number``: a new asset each call."""
    return {INPUT: f"asset-bench-{number}"}


def body(number: int) -> dict[str, Any]:
    """The JSON body of create ``number`` as raw aiohttp and httpx send it."""
    return {"order_id": ORDER_ID, "tool": TOOL, "asset_map": asset_map(number), "widgets": WIDGETS}


Call = Callable[[int], Awaitable[Any]]


#: The warm-up's numbers start here, so the timed phase never GETs a process the warm-up just
#: fetched: the client keeps one GET of a process id per ``min_poll_interval`` (the service's
#: limit), and a repeated id would measure that wait instead of the request path.
WARMUP_START = 10_000_000


async def drive(total: int, concurrency: int, call: Call, *, start: int = 0) -> None:
    numbers = iter(range(start, start + total))

    async def worker() -> None:
        for number in numbers:
            await call(number)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def timed(total: int, concurrency: int, call: Call, *, start: int = 0) -> dict[str, float]:
    """``total`` calls numbered from ``start``: req/s (wall time) and CPU us per request (every
    thread of this process)."""
    gc.collect()
    cpu = time.process_time()
    wall = time.perf_counter()
    await drive(total, concurrency, call, start=start)
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    return {"rps": total / wall, "cpu_us": cpu / total * 1e6, "seconds": wall}


class _Calls:
    """The two calls of one implementation, plus how to open and close it."""

    async def open(self, base_url: str, api_key: str, concurrency: int) -> None:
        raise NotImplementedError

    async def create(self, number: int) -> Any:
        raise NotImplementedError

    async def get(self, number: int) -> Any:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError


class Sdk(_Calls):
    """The client as configured by default: process requests checked against the catalogue
    (fetched once, during the warm-up, and cached for its TTL).  ``validate=False``: the request
    is sent as given.  ``observed``: a telemetry mode of ``_observed.py`` (empty: none).
    ``same``: every create names the same asset, so the plan memo answers each one (what the
    memo saves, for ``benchmarks.instructions``)."""

    def __init__(self, *, validate: bool = True, observed: str = "", same: bool = False) -> None:
        self.validate = validate
        self.observed = observed
        self.same = same

    async def open(self, base_url: str, api_key: str, concurrency: int) -> None:
        from asyncsdk import Client

        options: dict[str, Any] = {}
        if self.observed:
            from benchmarks._observed import client_telemetry

            options["telemetry"] = client_telemetry(self.observed)
        self.client = Client(
            api_key=api_key,
            base_url=base_url,
            max_in_flight=concurrency,
            validate=self.validate,
            # The request path is measured here, not the pacing: the documented opt-out.
            generation_limit=None,
            **options,
        )

    async def create(self, number: int) -> Any:
        assets = asset_map(1 if self.same else number)
        created = await self.client.processes.create(ORDER_ID, TOOL, assets, WIDGETS)
        return created.process_ids[0]

    async def get(self, number: int) -> Any:
        process = await self.client.processes.get(f"proc-{number}")
        return process.status

    async def close(self) -> None:
        await self.client.close()


class _Aiohttp(_Calls):
    async def open(self, base_url: str, api_key: str, concurrency: int) -> None:
        import aiohttp

        self.base = base_url
        self.headers = {"x-api-key": api_key, "Accept": "application/json"}
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency),
            timeout=aiohttp.ClientTimeout(total=60),
        )

    async def create(self, number: int) -> Any:
        async with self.session.post(
            f"{self.base}/v3/process", json=body(number), headers=self.headers
        ) as response:
            if response.status != 201:
                raise RuntimeError(f"HTTP {response.status}")
            data = await response.json()
        return data["process_ids"][0]

    async def get(self, number: int) -> Any:
        async with self.session.get(
            f"{self.base}/v3/process/proc-{number}", headers=self.headers
        ) as response:
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}")
            data = await response.json()
        return data["status"]

    async def close(self) -> None:
        await self.session.close()


class _Httpx(_Calls):
    async def open(self, base_url: str, api_key: str, concurrency: int) -> None:
        import httpx

        self.client = httpx.AsyncClient(
            base_url=base_url,
            headers={"x-api-key": api_key, "Accept": "application/json"},
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
            timeout=60,
        )

    async def create(self, number: int) -> Any:
        response = await self.client.post("/v3/process", json=body(number))
        if response.status_code != 201:
            raise RuntimeError(f"HTTP {response.status_code}")
        return response.json()["process_ids"][0]

    async def get(self, number: int) -> Any:
        response = await self.client.get(f"/v3/process/proc-{number}")
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}")
        return response.json()["status"]

    async def close(self) -> None:
        await self.client.aclose()


KINDS: Final[dict[str, Callable[[], _Calls]]] = {
    "sdk": Sdk,
    "sdk-novalidate": functools.partial(Sdk, validate=False),
    "sdk-same": functools.partial(Sdk, same=True),
    "aiohttp": _Aiohttp,
    "httpx": _Httpx,
}


async def job(
    io: ChildIO,
    *,
    impl: str,
    base_url: str,
    api_key: str,
    requests: int,
    concurrency: int,
    warmup: int,
    phases: tuple[str, ...] = ("create", "get"),
) -> dict[str, Any]:
    """One implementation, one round: ``{"create": {...}, "get": {...}}``."""
    calls = KINDS[impl]()
    await calls.open(base_url, api_key, concurrency)
    result: dict[str, Any] = {}
    try:
        for phase in phases:
            await drive(warmup, concurrency, getattr(calls, phase), start=WARMUP_START)
        for phase in phases:
            result[phase] = await timed(requests, concurrency, getattr(calls, phase))
    finally:
        await calls.close()
    return result


async def counted_calls(
    io: ChildIO,
    *,
    impl: str,
    phase: str,
    base_url: str,
    api_key: str,
    requests: int,
    concurrency: int,
) -> None:
    """One implementation, warmed up, then ``requests`` calls of ``phase`` when the parent says
    so (``benchmarks.instructions`` counts their instructions in between)."""
    calls = KINDS[impl]()
    await calls.open(base_url, api_key, concurrency)
    try:
        await drive(max(100, requests // 4), concurrency, getattr(calls, phase), start=WARMUP_START)
        io.ready({})
        await io.recv()
        await drive(requests, concurrency, getattr(calls, phase))
        io.send({"done": requests})
        await io.recv()
    finally:
        await calls.close()
