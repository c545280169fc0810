"""The inside of every helper process the benchmarks start.

``python -m benchmarks._child --cpu N module:function '{"kw": ...}'`` pins itself to core ``N``,
imports ``benchmarks.<module>``, and awaits ``function(io, **kw)``.  The function talks to the
parent through :class:`ChildIO`: ``ready(info)`` for servers (then ``await io.stopped()``),
``send``/``recv`` for lock-step protocols, and its return value (a JSON-able dict) becomes the
final ``RESULT`` line.  The child ends when its function returns, when the parent closes its
stdin (the parent died or is done with it) or on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

READY = "READY "
RESULT = "RESULT "
MESSAGE = "MSG "


def pin(cpu: int | None) -> None:
    """Run this process on core ``cpu`` only, where the machine allows it."""
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return
    with contextlib.suppress(OSError, ValueError):
        if cpu in os.sched_getaffinity(0):
            os.sched_setaffinity(0, {cpu})


def _emit(prefix: str, payload: Any) -> None:
    sys.stdout.write(prefix + json.dumps(payload) + "\n")
    sys.stdout.flush()


class ChildIO:
    """The child's side of the line protocol with the parent."""

    def __init__(self) -> None:
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._stop = asyncio.Event()

    def ready(self, info: dict[str, Any]) -> None:
        """Tell the parent the service is up (``info`` holds its port and the like)."""
        _emit(READY, info)

    def send(self, payload: Any) -> None:
        _emit(MESSAGE, payload)

    async def recv(self) -> Any:
        """The next JSON message from the parent; ``None`` once the parent closed stdin."""
        line = await self._lines.get()
        return None if line is None else json.loads(line)

    async def stopped(self) -> None:
        """Wait until the parent says stop (stdin closed or SIGTERM)."""
        await self._stop.wait()

    def _feed(self, line: str | None) -> None:
        if line is None:
            self._stop.set()
        self._lines.put_nowait(line)

    def start_reading(self, loop: asyncio.AbstractEventLoop) -> None:
        fd = sys.stdin.fileno()
        buffer = bytearray()

        def readable() -> None:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(fd)
                self._feed(None)
                return
            buffer.extend(data)
            while (end := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:end]).decode()
                del buffer[: end + 1]
                if line.strip() == "stop":
                    self._stop.set()
                else:
                    self._feed(line)

        loop.add_reader(fd, readable)
        loop.add_signal_handler(signal.SIGTERM, self._stop.set)


async def _main(target: str, kwargs: dict[str, Any]) -> None:
    module_name, _, function_name = target.partition(":")
    module = importlib.import_module(f"benchmarks.{module_name}")
    function: Callable[..., Awaitable[dict[str, Any] | None]] = getattr(module, function_name)
    io = ChildIO()
    io.start_reading(asyncio.get_running_loop())
    result = await function(io, **kwargs)
    if result is not None:
        _emit(RESULT, result)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._child")
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("target")
    parser.add_argument("kwargs")
    args = parser.parse_args()
    pin(args.cpu)
    asyncio.run(_main(args.target, json.loads(args.kwargs)))


if __name__ == "__main__":
    main()
