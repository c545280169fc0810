"""A receiver node as a process of its own: how a node script serves, and how a test starts one.

A node script builds its app and hands it to :func:`serve_until_terminated`, which prints one
line ``{"ready": NAME, "port": N}`` once serving; :func:`start_node_process` runs such a script
and returns when that line came, and :func:`node_running` does so for a ``with`` block and kills
the process at its end if it still runs.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
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
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before the ready line: a SIGTERM sent the moment it is read must find the handler.
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGUSR2, _print_tasks)
    print(json.dumps({"ready": name, "port": port}), flush=True)
    await stop.wait()
    await runner.cleanup()


def _print_tasks() -> None:
    """SIGUSR2: every task's stack on stdout, for a test to show what a node that does not stop
    is waiting for."""
    for task in asyncio.all_tasks():
        task.print_stack(file=sys.stdout)
    sys.stdout.flush()


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


@asynccontextmanager
async def node_running(
    script: Path, *args: str, name: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    """``python SCRIPT ARGS...`` serving for the block: the process and its port.  The block may
    signal or wait for the process itself; if it still runs at the end, it is killed."""
    process, port = await start_node_process(script, *args, name=name)
    try:
        yield process, port
    finally:
        if process.returncode is None:
            process.kill()
        await process.communicate()
