"""The client section's pacing figure: a batch under the generation limit against the sandbox.

A server child runs the sandbox with its generation limit on (``rate_limit_count`` per a
shortened ``rate_limit_window``); a job child runs a client whose ``GenerationLimit`` has the same
numbers.
``photos`` concurrent ``client.run()`` calls each upload one photo and wait for their process.
The photo is a small JPEG, so the figure shows the pacing rather than the upload speed.
The limit-bound minimum of the batch is ``(ceil(photos / max_calls) - 1) * window`` (the last
group cannot start sooner) plus the time of one ``run()`` alone, measured first on a fresh
window; the figure is the batch's time over that minimum.
"""

from __future__ import annotations

import asyncio
import io
import math
import time
from typing import Any, Final

from benchmarks._child import ChildIO

TOOL: Final = "tool-image-enhancement"
WIDGETS: Final = {"area": "indoor"}


def _small_photo() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 140, 160)).save(buffer, "JPEG")
    return buffer.getvalue()


async def serve(child: ChildIO, *, max_calls: int, window: float) -> None:
    """The sandbox with its generation limit on, until the parent says stop."""
    from asyncsdk.sandbox import Sandbox, SandboxConfig

    config = SandboxConfig(
        rate_limit=True,
        rate_limit_count=max_calls,
        rate_limit_window=window,
        processing_delay=0.05,
    )
    sandbox = Sandbox(config)
    await sandbox.start()
    try:
        child.ready(
            {"base_url": sandbox.base_url, "app_url": sandbox.app_url, "api_key": sandbox.api_key}
        )
        await child.stopped()
    finally:
        await sandbox.stop()


async def job(
    child: ChildIO,
    *,
    base_url: str,
    app_url: str,
    api_key: str,
    photos: int,
    max_calls: int,
    window: float,
) -> dict[str, Any]:
    from asyncsdk import Client, GenerationLimit, RateLimitError

    photo = _small_photo()
    limit = GenerationLimit(max_calls=max_calls, period=window)
    async with Client(
        api_key=api_key,
        base_url=base_url,
        app_url=app_url,
        generation_limit=limit,
        min_poll_interval=0.02,
        max_in_flight=photos,
    ) as client:
        started = time.monotonic()
        await client.run(TOOL, photo, widgets=WIDGETS, timeout=60)
        single = time.monotonic() - started
        await asyncio.sleep(window)  # a fresh window for the batch

        started = time.monotonic()
        processes = await asyncio.gather(
            *(client.run(TOOL, photo, widgets=WIDGETS, timeout=600) for _ in range(photos)),
            return_exceptions=True,
        )
        elapsed = time.monotonic() - started
    refused = sum(1 for process in processes if isinstance(process, RateLimitError))
    if any(isinstance(process, BaseException) for process in processes):
        raise RuntimeError(f"the batch failed: {processes}")
    minimum = (math.ceil(photos / max_calls) - 1) * window + single
    return {
        "photos": photos,
        "max_calls": max_calls,
        "window": window,
        "single": single,
        "elapsed": elapsed,
        "minimum": minimum,
        "ratio": elapsed / minimum,
        "refused": refused,
    }
