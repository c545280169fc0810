"""A receiver node as a process of its own: how a node script serves, and how a test starts one.

A node script builds its app and hands it to :func:`serve_until_terminated`, which prints one
line ``{"ready": NAME, "port": N}`` once serving; :func:`start_node_process` runs such a script
and returns when that line came.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web


async def serve_until_terminated(
    app: web.Application, name: str, *, ready: Callable[[], Awaitable[None]] | None = None
) -> None:
    """Serve ``app`` on a free port of 127.0.0.1; once serving (and ``ready`` awaited), print the
    ready line; on SIGTERM, clean the app up and return."""
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    if ready is not None:
        await ready()
    print(json.dumps({"ready": name, "port": port}), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


async def start_node_process(
    script: Path, *args: str, name: str
) -> tuple[asyncio.subprocess.Process, int]:
    """``python SCRIPT ARGS...`` started and serving: the process and its port."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), *args, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    async with asyncio.timeout(60):  # a guard against a hang, not a speed requirement
        line = await process.stdout.readline()
    if not line:
        await process.wait()
        raise AssertionError(f"node {name} exited with {process.returncode} before serving")
    return process, int(json.loads(line)["port"])
