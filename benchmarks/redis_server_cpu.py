"""``python -m benchmarks.redis_server_cpu [--deliveries N] [--rounds R]``: what a delivery costs
the Redis server, for the receiver with a :class:`~webhooks.RedisInbox` and for the hand-written
handler that stores the same event in one Lua call (``benchmarks/_peers.py``); section 8 of
``python -m benchmarks``.

The shared Redis (6379) serves other work too, so its ``INFO`` says nothing about one benchmark:
each variant gets a ``redis-server`` of its own on a free port of 127.0.0.1 (no persistence, as
the shared one is set up).  A receiver server (``_receiver_bench:serve``) is warmed up, then
``N`` new deliveries are posted over 16 connections; once its workers have acked every event (the
peer has none), the Redis server's ``used_cpu_sys`` + ``used_cpu_user`` (``INFO cpu``) and its
``INFO commandstats`` are read against those before the load: the server's CPU per delivery, the
calls per delivery (commands a script runs are counted too, beside the ``EVALSHA``), and the
microseconds the server spent inside commands.  CPU time is the machine's, not a count: the
variants take turns in each of ``R`` rounds and the ratio is the median of the rounds' ratios;
read it beside the calls, and beside the server's instructions per delivery, counted once more
under callgrind (instrumentation on around the measured deliveries only), which the machine's
load does not move.  Needs ``redis-server`` on PATH (and valgrind for the instructions).
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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, TypeVar

import redis

from benchmarks._env import median
from benchmarks._procs import Child, which
from benchmarks._receiver_run import NAMES
from benchmarks._shared import Goal, Section, fmt, paired, runs_of, table, workdir
from benchmarks.instructions import _callgrind, _deliver, callgrind_wrapper, counted_instructions

VARIANTS: Final = ("redis-peer", "redis")
T = TypeVar("T")
Found = dict[str, list[dict[str, float]]]
SETTLE_WITHIN: Final = 600.0
"""Seconds the receiver's workers have, after the load, to ack every event (under callgrind, the
server runs some fifty times slower)."""
GOAL: Final = 1.5
"""The receiver's Redis server CPU per delivery, at most this many times the peer's."""
COUNTED: Final = 2000
"""Deliveries whose server instructions are counted under callgrind."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def own_redis(folder: Path, wrapper: Sequence[str] = ()) -> Iterator[tuple[str, int]]:
    """A ``redis-server`` of this run's own for the block (no persistence), run by ``wrapper``
    (e.g. callgrind's command) if given: its URL and pid."""
    port = _free_port()
    server = subprocess.Popen(
        [
            *wrapper,
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
        deadline = time.monotonic() + 60
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()
        yield url, server.pid
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


def _load(
    variant: str,
    deliveries: int,
    folder: Path,
    url: str,
    start: Callable[[], T],
    end: Callable[[], T],
) -> tuple[T, T]:
    """Serve ``variant`` on the Redis at ``url``, warm it up, then post ``deliveries`` new ones and
    wait until its workers have acked them: what ``start()`` gives before those, and ``end()``
    after."""
    run = uuid.uuid4().hex[:10]
    (folder / run).mkdir()
    child = Child(
        "_receiver_bench:serve",
        {"store": variant, "workdir": str(folder / run), "place": url, "namespace": "cpu:"},
    )
    try:
        address = child.ready()["url"]
        refused = asyncio.run(_deliver(address, max(200, deliveries // 5), "warm-" + run))
        before = start()
        refused += asyncio.run(_deliver(address, deliveries, run))
        deadline = time.monotonic() + SETTLE_WITHIN
        while variant != "redis-peer":
            child.send("stats")
            stats = child.recv()
            if stats["processed"] >= stats["accepted"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        after = end()
    finally:
        child.stop()
    if refused:
        raise SystemExit(f"{variant}: {refused} deliveries not answered 200")
    return before, after


def instructions(variant: str, deliveries: int, folder: Path) -> float:
    """The Redis server's instructions per delivery of ``variant`` (callgrind)."""
    out = folder / f"redis-{variant}-{uuid.uuid4().hex[:10]}.callgrind"
    with own_redis(folder, callgrind_wrapper(out)) as (url, pid):
        _load(
            variant,
            deliveries,
            folder,
            url,
            lambda: _callgrind(pid, "--instr=on"),
            lambda: _callgrind(pid, "--dump"),
        )
    return counted_instructions(out) / deliveries


def measure(variant: str, deliveries: int, folder: Path) -> dict[str, float]:
    """Per delivery of ``variant`` on a Redis of its own: ``cpu_us``, ``calls``, ``usec``, and
    ``calls:<command>`` for each command the server ran."""
    with own_redis(folder) as (url, _):
        before, after = _load(
            variant, deliveries, folder, url, lambda: _snapshot(url), lambda: _snapshot(url)
        )
    per = {key: (after[key] - before.get(key, 0.0)) / deliveries for key in after}
    calls = sum(value for key, value in per.items() if key.startswith("calls:"))
    usec = sum(value for key, value in per.items() if key.startswith("usec:"))
    return {**per, "cpu_us": per["cpu_s"] * 1e6, "calls": calls, "usec": usec}


def rounds(variants: Sequence[str], deliveries: int, runs: int, folder: Path) -> Found:
    """Each variant's figures in each of ``runs`` rounds, the variants taking turns."""
    found: Found = {variant: [] for variant in variants}
    for _ in range(runs):
        for variant in variants:
            print(f"[redis_server_cpu] {variant} ...", file=sys.stderr, flush=True)
            found[variant].append(measure(variant, deliveries, folder))
    return found


def report(found: Found, counted: dict[str, float], deliveries: int) -> list[str]:
    rows = []
    peer = found.get("redis-peer")
    for variant, runs in found.items():
        cpu = [r["cpu_us"] for r in runs]
        last = runs[-1]
        commands = sorted(
            (key.removeprefix("calls:"), value)
            for key, value in last.items()
            if key.startswith("calls:") and value >= 0.005
        )
        ratio = ""
        if peer is not None and variant != "redis-peer":
            value, each = paired(cpu, [r["cpu_us"] for r in peer])
            ratio = f"**{fmt(value, 2)}** ({runs_of(each, 2)})"
        rows.append(
            [
                NAMES[variant],
                f"**{fmt(median(cpu), 1)}** ({runs_of(cpu, 1)})",
                ratio,
                fmt(counted[variant], 0) if variant in counted else "not counted",
                fmt(median([r["usec"] for r in runs]), 1),
                fmt(last["calls"], 2),
                ", ".join(f"{name} {value:.2f}" for name, value in commands),
            ]
        )
    return [
        f"The Redis server's work per delivery, a `redis-server` of its own per variant and "
        f"round (no persistence), {deliveries:,} new deliveries over 16 connections after a "
        "warm-up, the receiver's workers' claims and acks included (no handler); "
        f"{len(next(iter(found.values())))} round(s), the variants taking turns.  CPU: the "
        "server's `used_cpu_user` + `used_cpu_sys` (`INFO cpu`) over the measured deliveries; "
        f"instructions: the server under callgrind for {COUNTED:,} deliveries more.",
        "",
        *table(
            [
                "variant",
                "server CPU us/delivery (rounds)",
                "x peer's CPU (per-round median)",
                "server instructions/delivery",
                "us inside commands (a script's own commands counted twice)",
                "commands",
                "commands by name",
            ],
            rows,
        ),
    ]


def goal(found: Found) -> Goal:
    title = f"redis: Redis server CPU per delivery <= {GOAL} x the one-call peer's"
    if "redis" not in found or "redis-peer" not in found:
        return Goal("redis", title, "not run", f"<= {GOAL}", None)
    value, each = paired(
        [r["cpu_us"] for r in found["redis"]], [r["cpu_us"] for r in found["redis-peer"]]
    )
    measured = f"{fmt(value, 2)}x (rounds {', '.join(f'{fmt(v, 2)}x' for v in each)})"
    return Goal("redis", title, measured, f"<= {GOAL}", value <= GOAL)


def count_all(variants: Sequence[str], folder: Path) -> dict[str, float]:
    """Each variant's server instructions per delivery, if valgrind is here."""
    if which("valgrind") is None or which("callgrind_control") is None:
        return {}
    counted = {}
    for variant in variants:
        print(f"[redis_server_cpu] {variant} under callgrind ...", file=sys.stderr, flush=True)
        counted[variant] = instructions(variant, COUNTED, folder)
    return counted


def run_redis(runs: int, deliveries: int) -> Section:
    """Section 8 of ``python -m benchmarks``."""
    section = Section("redis", "8. What a delivery costs the Redis server")
    if which("redis-server") is None:
        section.lines.append("Not run: redis-server is not on PATH.")
        section.goals.append(goal({}))
        return section
    with workdir("bench-redis-cpu-") as folder:
        found = rounds(VARIANTS, deliveries, runs, folder)
        counted = count_all(VARIANTS, folder)
    section.lines += [
        "Command: `.venv/bin/python -m benchmarks.redis_server_cpu` (this section alone).",
        "",
        *report(found, counted, deliveries),
    ]
    section.goals.append(goal(found))
    return section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.redis_server_cpu")
    parser.add_argument("--deliveries", type=int, default=20_000, help="deliveries measured")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the variants taking turns")
    parser.add_argument(
        "--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}"
    )
    parser.add_argument(
        "--no-instructions", action="store_true", help="skip the count under callgrind"
    )
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    if args.rounds < 1 or args.deliveries < 1:
        parser.error("--rounds and --deliveries must be at least 1")
    if shutil.which("redis-server") is None:
        parser.error("redis-server is needed on PATH")
    with tempfile.TemporaryDirectory(prefix="bench-redis-cpu-") as tmp:
        found = rounds(variants, args.deliveries, args.rounds, Path(tmp))
        counted = {} if args.no_instructions else count_all(variants, Path(tmp))
    print("\n".join(report(found, counted, args.deliveries)))
    met = goal(found)
    print(f"\n{met.goal}: {met.measured}")
    return 0 if met.met is not False else 1


if __name__ == "__main__":
    sys.exit(main())
