"""``python -m benchmarks.redis_server_cpu [--deliveries N]``: what a delivery costs the Redis
server, for the receiver with a :class:`~webhooks.RedisInbox` and for the hand-written handler
that stores the same event in one Lua call (``benchmarks/_peers.py``).

The shared Redis (6379) serves other work too, so its ``INFO`` says nothing about one benchmark:
each variant gets a ``redis-server`` of its own on a free port of 127.0.0.1 (no persistence, as
the shared one is set up).  A receiver server (``_receiver_bench:serve``) is warmed up, then
``N`` new deliveries are posted over 16 connections; once its workers have acked every event (the
peer has none), the Redis server's ``used_cpu_sys`` + ``used_cpu_user`` (``INFO cpu``) and its
``INFO commandstats`` are read against those before the load: the server's CPU per delivery, the
calls per delivery (commands a script runs are counted too, beside the ``EVALSHA``), and the
microseconds the server spent inside commands.  CPU time is the machine's, not a count: read it
beside the calls, which do not move.  Needs ``redis-server`` on PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import redis

from benchmarks._procs import Child
from benchmarks._receiver_run import NAMES
from benchmarks._shared import fmt, table
from benchmarks.instructions import _deliver

VARIANTS: Final = ("redis-peer", "redis")
SETTLE_WITHIN: Final = 60.0
"""Seconds the receiver's workers have, after the load, to ack every event."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def own_redis(folder: Path) -> Iterator[str]:
    """A ``redis-server`` of this run's own for the block (no persistence): its URL."""
    port = _free_port()
    server = subprocess.Popen(
        [  # noqa: S607 - the server from PATH
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _snapshot(url: str) -> dict[str, float]:
    """The server's CPU seconds, and per command its calls and microseconds."""
    client = redis.Redis.from_url(url)
    try:
        cpu: dict[str, Any] = client.info("cpu")
        stats: dict[str, Any] = client.info("commandstats")
    finally:
        client.close()
    found = {"cpu_s": float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])}
    for name, figures in stats.items():
        command = name.removeprefix("cmdstat_")
        found[f"calls:{command}"] = float(figures["calls"])
        found[f"usec:{command}"] = float(figures["usec"])
    return found


def measure(variant: str, deliveries: int, folder: Path) -> dict[str, float]:
    """Per delivery of ``variant`` on a Redis of its own: ``cpu_us``, ``calls``, ``usec``, and
    ``calls:<command>`` for each command the server ran."""
    run = uuid.uuid4().hex[:10]
    (folder / run).mkdir()
    with own_redis(folder / run) as url:
        child = Child(
            "_receiver_bench:serve",
            {"store": variant, "workdir": str(folder / run), "place": url, "namespace": "cpu:"},
        )
        try:
            address = child.ready()["url"]
            refused = asyncio.run(_deliver(address, max(200, deliveries // 5), "warm-" + run))
            before = _snapshot(url)
            refused += asyncio.run(_deliver(address, deliveries, run))
            deadline = time.monotonic() + SETTLE_WITHIN
            while variant != "redis-peer":
                child.send("stats")
                stats = child.recv()
                if stats["processed"] >= stats["accepted"] or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            after = _snapshot(url)
        finally:
            child.stop()
    if refused:
        raise SystemExit(f"{variant}: {refused} deliveries not answered 200")
    per = {key: (after[key] - before.get(key, 0.0)) / deliveries for key in after}
    calls = sum(value for key, value in per.items() if key.startswith("calls:"))
    usec = sum(value for key, value in per.items() if key.startswith("usec:"))
    return {**per, "cpu_us": per["cpu_s"] * 1e6, "calls": calls, "usec": usec}


def report(found: dict[str, dict[str, float]], deliveries: int) -> list[str]:
    rows = []
    for variant, figures in found.items():
        commands = sorted(
            (key.removeprefix("calls:"), value)
            for key, value in figures.items()
            if key.startswith("calls:") and value >= 0.005
        )
        rows.append(
            [
                NAMES[variant],
                fmt(figures["cpu_us"], 1),
                fmt(figures["usec"], 1),
                fmt(figures["calls"], 2),
                ", ".join(f"{name} {value:.2f}" for name, value in commands),
            ]
        )
    return [
        f"The Redis server's work per delivery (a `redis-server` of its own per variant), "
        f"{deliveries:,} new deliveries over 16 connections after a warm-up, the receiver's "
        "workers' claims and acks included (no handler).",
        "",
        *table(
            [
                "variant",
                "server CPU us (INFO cpu)",
                "us inside commands (commandstats; a script's own commands counted twice)",
                "calls",
                "calls by command",
            ],
            rows,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.redis_server_cpu")
    parser.add_argument("--deliveries", type=int, default=5000, help="deliveries measured")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}"
    )
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if shutil.which("redis-server") is None:
        parser.error("redis-server is needed on PATH")
    with tempfile.TemporaryDirectory(prefix="bench-redis-cpu-") as tmp:
        found = {}
        for variant in variants:
            print(f"[redis_server_cpu] {variant} ...", file=sys.stderr, flush=True)
            found[variant] = measure(variant, args.deliveries, Path(tmp))
    print("\n".join(report(found, args.deliveries)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
