"""Whether the running task is being stopped from outside: how the worker pool, the registries
and the store gauges tell their own stop from a ``CancelledError`` a handler or a driver raised."""

from __future__ import annotations

import asyncio

__all__ = ["stopped_from_outside"]


def stopped_from_outside() -> bool:
    """True when the running task itself is being cancelled (the pool stopping its workers), not
    when a handler raises ``CancelledError`` of its own (say, from a future someone cancelled)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
