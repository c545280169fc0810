"""What the soak sends, and the sender: the service's retry loop over the live receivers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Final

import aiohttp
import attrs

from benchmarks.soak._node import Node

DUPLICATE_SHARE: Final = 0.30
MALFORMED_SHARE: Final = 0.05
DELIVERY_TIMEOUT: Final = 10.0  # the service wants a 2xx within 10 s


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


# --- sending ----------------------------------------------------------------------------------


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
