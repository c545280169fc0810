"""The client section's journal figure: what ``Client(journal=...)`` adds to one ``client.run()``.

A server child runs the sandbox (processes finish at once, no generation limit); a job child runs
``client.run()`` one after the other, in pairs: one without a journal, then one with a fresh key
on an SQLite journal (``Client(journal=path)``: WAL, ``synchronous=FULL``) in a temporary folder.
The figure is the median time of a keyed run minus the median time of a plain one.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._child import ChildIO
from benchmarks._pacing_bench import TOOL, WIDGETS, _small_photo


async def serve(child: ChildIO) -> None:
    """The sandbox, processes done at once, until the parent says stop."""
    from asyncsdk.sandbox import Sandbox, SandboxConfig

    sandbox = Sandbox(SandboxConfig())
    await sandbox.start()
    try:
        child.ready(
            {"base_url": sandbox.base_url, "app_url": sandbox.app_url, "api_key": sandbox.api_key}
        )
        await child.stopped()
    finally:
        await sandbox.stop()


async def job(
    child: ChildIO, *, base_url: str, app_url: str, api_key: str, runs: int, warmup: int
) -> dict[str, Any]:
    from asyncsdk import Client

    photo = _small_photo()
    options: dict[str, Any] = {
        "api_key": api_key,
        "base_url": base_url,
        "app_url": app_url,
        "generation_limit": None,
        "min_poll_interval": 0.001,
    }
    plain: list[float] = []
    keyed: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        journal = Path(folder) / "runs.sqlite3"
        async with Client(**options) as bare, Client(**options, journal=journal) as journaled:
            for index in range(warmup + runs):
                started = time.perf_counter()
                await bare.run(TOOL, photo, widgets=WIDGETS)
                middle = time.perf_counter()
                await journaled.run(TOOL, photo, widgets=WIDGETS, key=f"run-{index}")
                ended = time.perf_counter()
                if index >= warmup:
                    plain.append(middle - started)
                    keyed.append(ended - middle)
    return {
        "runs": runs,
        "plain_ms": statistics.median(plain) * 1000,
        "keyed_ms": statistics.median(keyed) * 1000,
        "added_ms": (statistics.median(keyed) - statistics.median(plain)) * 1000,
    }
