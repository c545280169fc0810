"""Section 2: uploads through ``orders.create`` against raw aiohttp streaming.

Each (variant, round) runs in a fresh child pinned to the client core; the server (``_api.py``)
counts the body and keeps nothing.  The child warms up with one small upload, then takes its
baseline (RSS after imports, client open, code paths run), resets the kernel's peak-RSS mark
(``/proc/self/clear_refs``; where that is refused the fresh process's ``ru_maxrss`` is used), runs
the uploads, and reports the peak minus the baseline.

The large file goes through the public ``orders.create`` of a ``Client(max_upload_bytes=...)``
(the 50 MB limit raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import re
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from benchmarks._child import ChildIO

JPEG_HEAD: Final = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
_WRITE_BLOCK: Final = 16 * 1024 * 1024
MIB: Final = 1024 * 1024


def make_jpeg_file(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that starts like a JPEG (the SDK checks magic bytes) then zeros."""
    zeros = bytes(_WRITE_BLOCK)
    with open(path, "wb") as file:
        file.write(JPEG_HEAD)
        left = size - len(JPEG_HEAD)
        while left > 0:
            step = min(left, _WRITE_BLOCK)
            file.write(zeros[:step])
            left -= step
    return path


def _status_kib(field: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _sizes(paths: list[str]) -> dict[str, int]:
    return {path: Path(path).stat().st_size for path in paths}


class _Memory:
    """Peak RSS growth over a baseline taken when the block starts."""

    def __init__(self) -> None:
        gc.collect()
        self.reset = _reset_peak()
        current = _status_kib("VmRSS")
        self.baseline = current if current is not None else _maxrss_kib()
        self.method = "VmHWM reset" if self.reset else "ru_maxrss of a fresh process"

    def growth_mib(self) -> float:
        peak = _status_kib("VmHWM") if self.reset else None
        if peak is None:
            peak = _maxrss_kib()
        return max(0, peak - self.baseline) / 1024


async def job(
    io: ChildIO,
    *,
    impl: str,
    base_url: str,
    api_key: str,
    files: list[str],
    concurrency: int,
    max_bytes: int,
    warmup_file: str,
) -> dict[str, Any]:
    """Upload every file of ``files`` (one order each) ``concurrency`` at a time."""
    import aiohttp

    from asyncsdk import Client, Upload

    client = Client(api_key=api_key, base_url=base_url)
    raised = Client(api_key=api_key, base_url=base_url, max_upload_bytes=max_bytes)
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))
    headers = {"x-api-key": api_key}

    sizes = _sizes([*files, warmup_file])  # before any timing

    async def sdk_public(path: str) -> int:
        await client.orders.create(Upload(path))
        return sizes[path]

    async def sdk_raised_limit(path: str) -> int:
        await raised.orders.create(Upload(path))
        return sizes[path]

    async def raw_aiohttp(path: str) -> int:
        # aiohttp reads the open file in its executor; opening it is what a user would write.
        with open(path, "rb") as file:  # noqa: ASYNC230
            form = aiohttp.FormData()
            form.add_field("asset_role", "primary_angle")
            form.add_field(
                "asset_file", file, filename=os.path.basename(path), content_type="image/jpeg"
            )
            async with session.post(f"{base_url}/v3/order", data=form, headers=headers) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"HTTP {resp.status}: {await resp.text()}")
                await resp.json()
        return sizes[path]

    kinds: dict[str, Callable[[str], Any]] = {
        "sdk": sdk_public,
        "sdk-raised-limit": sdk_raised_limit,
        "aiohttp": raw_aiohttp,
    }
    upload = kinds[impl]
    try:
        await upload(warmup_file)
        memory = _Memory()
        queue = iter(files)
        sent = 0

        async def worker() -> None:
            nonlocal sent
            for path in queue:
                size = await upload(path)
                sent += size

        started = time.perf_counter()
        cpu = time.process_time()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu
        growth = memory.growth_mib()
    finally:
        with contextlib.suppress(Exception):
            await session.close()
        await client.close()
        await raised.close()
    return {
        "bytes": sent,
        "seconds": seconds,
        "mib_s": sent / MIB / seconds,
        "cpu_s": cpu,
        "rss_growth_mib": growth,
        "baseline_mib": memory.baseline / 1024,
        "memory_method": memory.method,
    }
