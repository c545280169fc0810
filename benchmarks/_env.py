"""The machine, the versions, and the small statistics every section uses."""

from __future__ import annotations

import contextlib
import importlib.metadata
import math
import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._procs import ROOT, can_pin, which

REDIS_URL = os.environ.get("ASYNCSDK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "ASYNCSDK_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)


def cpu_ticks() -> tuple[int, int] | None:
    """All CPU time and the part of it the hypervisor gave to other guests ("steal"), in ticks
    since boot (``/proc/stat``); ``None`` where the system does not say."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:9]]
    return sum(ticks), ticks[7]


def steal_share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float:
    """The share of the CPU time between two :func:`cpu_ticks` that went to other guests."""
    if before is None or after is None or after[0] <= before[0]:
        return math.nan
    return (after[1] - before[1]) / (after[0] - before[0])


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _ram_gib() -> float:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return math.nan


def machine() -> dict[str, Any]:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count() or 0,
        "ram_gib": _ram_gib(),
        "kernel": f"{platform.system()} {platform.release()}",
        "pinning": can_pin(),
        "load_at_start": [round(x, 2) for x in load],
    }


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 - git from PATH
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],  # noqa: S607
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+local changes" if dirty else "")


def _wrk_version() -> str:
    path = which("wrk")
    if path is None:
        return "not installed (Python load generator used)"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
        text = (out.stdout + out.stderr).strip().splitlines()
        if text:
            return text[0].split(" Copyright")[0]
    return "unknown"


def _redis_server() -> str:
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        try:
            info = client.info("server")
        finally:
            client.close()
        return str(info.get("redis_version", "unknown"))
    except Exception as exc:  # any failure only means "not available"
        return f"unreachable ({type(exc).__name__})"


def versions() -> dict[str, str]:
    import asyncsdk

    return {
        "Python": platform.python_version(),
        "aiohttp": _version("aiohttp"),
        "httpx": _version("httpx"),
        "redis-py": _version("redis"),
        "asyncsdk": f"{asyncsdk.__version__} (git {git_revision()})",
        "attrs / cattrs / yarl": " / ".join(_version(d) for d in ("attrs", "cattrs", "yarl")),
        "Redis server": _redis_server(),
        "wrk": _wrk_version(),
    }


async def imported_from(_io: object) -> dict[str, str]:
    """Where a helper process found ``asyncsdk`` and ``webhooks`` (see
    ``benchmarks.sidebyside.check_baseline``): a helper in a module that imports neither at its
    top, so that a tree of any age can run it."""
    import asyncsdk
    import webhooks

    return {"asyncsdk": str(asyncsdk.__file__), "webhooks": str(webhooks.__file__)}
