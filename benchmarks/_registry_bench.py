"""Section 4: the waiter registry: memory per pending waiter, resolving them all, Redis wake-up.

* Memory (tracemalloc, in a fresh child): ``n`` tasks each awaiting ``asyncio.Event.wait()`` form
  the baseline (the caller's own task, coroutine and a future); then ``n`` tasks each awaiting
  ``registry.wait(pid, timeout=...)``.  Bytes per waiter = (second - first) / ``n``.  Process ids
  and events are made before either measurement: they are the caller's data.
* Resolve time (another fresh child, no tracemalloc): ``n`` waiters pending, then
  ``await registry.resolve(event)`` for each; the clock stops when every waiting coroutine has
  returned.
* Redis wake-up: two processes, each with its own :class:`~webhooks.RedisRegistry` (own
  connections and subscription).  The waiter process enrolls ``wait(pid)``, lets the first read of
  the result key pass, then tells the parent; the parent tells the resolver process, which notes
  ``time.monotonic()`` and calls ``resolve``; the waiter notes ``time.monotonic()`` the moment its
  ``wait`` returns.  Both clocks are the machine's one ``CLOCK_MONOTONIC``.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from typing import Any, Final

import attrs

from benchmarks._child import ChildIO

WAIT_TIMEOUT: Final = 600.0


def _events(n: int, run: str) -> tuple[list[str], list[Any]]:
    from asyncsdk import ProcessCompleted, ResultAsset

    ids = [f"{run}-{i}" for i in range(n)]
    events = [
        ProcessCompleted(
            event="process.completed",
            process_id=pid,
            order_id="order-bench-1",
            tool="tool-virtual-staging",
            status="done",
            final_assets=(ResultAsset(asset_id=f"a-{pid}", src=f"https://x.example/{pid}.jpg"),),
        )
        for pid in ids
    ]
    return ids, events


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def _pending(kind: str, ids: list[str]) -> tuple[list[asyncio.Task[Any]], Any]:
    """Tasks waiting in the way ``kind`` says, all blocked by the time this returns."""
    from webhooks import Registry

    if kind == "event":
        event = asyncio.Event()

        async def bare() -> None:
            await event.wait()

        tasks = [asyncio.create_task(bare()) for _ in ids]
        await _settle()
        return tasks, event
    registry = Registry(healthy=True)
    timeout = WAIT_TIMEOUT if kind == "registry" else None

    async def waiter(pid: str) -> Any:
        return await registry.wait(pid, timeout=timeout)

    tasks = [asyncio.create_task(waiter(pid)) for pid in ids]
    await _settle()
    assert registry.pending_count == len(ids)
    return tasks, registry


async def _release(tasks: list[asyncio.Task[Any]], holder: Any) -> None:
    if isinstance(holder, asyncio.Event):
        holder.set()
    else:
        await holder.close()
    await asyncio.gather(*tasks, return_exceptions=True)
    await _settle()


async def memory_job(io: ChildIO, *, kind: str, waiters: int) -> dict[str, Any]:
    """Traced bytes per pending waiter of one ``kind``, in this fresh process.

    ``event``: a bare task awaiting ``asyncio.Event.wait()`` (the baseline); ``registry``:
    a task awaiting ``Registry.wait(pid, timeout=600)``; ``registry-no-timeout``: the same
    without a timeout.  A small round of the same kind runs first, so that one-time costs (code
    objects, caches) are not counted; the process ids exist before the measurement starts.
    """
    warm, _ = _events(1000, "warm")
    await _release(*await _pending(kind, warm))
    ids, _ = _events(waiters, "mem")
    tracemalloc.start()
    before = _traced()
    tasks, holder = await _pending(kind, ids)
    per_waiter = (_traced() - before) / waiters
    tracemalloc.stop()
    await _release(tasks, holder)
    return {"kind": kind, "waiters": waiters, "bytes": per_waiter}


async def resolve_job(io: ChildIO, *, waiters: int) -> dict[str, Any]:
    """Seconds from the first ``resolve`` until every one of ``waiters`` coroutines returned.

    Each waiting coroutine counts itself out when its ``wait`` returns; the last one sets an
    event (no ``gather``, whose own bookkeeping per task would be timed too).
    """
    from webhooks import Registry

    ids, events = _events(waiters, "res")
    registry = Registry(healthy=True)
    left = waiters
    all_back = asyncio.Event()
    wrong = 0

    async def waiter(pid: str) -> None:
        nonlocal left, wrong
        event = await registry.wait(pid, timeout=WAIT_TIMEOUT)
        wrong += event.process_id != pid
        left -= 1
        if not left:
            all_back.set()

    tasks = [asyncio.create_task(waiter(pid)) for pid in ids]
    await _settle()
    assert registry.pending_count == waiters
    gc.collect()
    started = time.perf_counter()
    for event in events:
        await registry.resolve(event)
    resolved = time.perf_counter()
    await all_back.wait()
    finished = time.perf_counter()
    await asyncio.gather(*tasks)
    await registry.close()
    assert wrong == 0
    return {
        "waiters": waiters,
        "resolve_calls_s": resolved - started,
        "all_returned_s": finished - started,
    }


async def redis_waiter(
    io: ChildIO, *, redis_url: str, prefix: str, samples: int, settle: float
) -> dict[str, Any]:
    """The waiting side of the wake-up measurement (see the module docstring)."""
    from webhooks import RedisRegistry

    registry = RedisRegistry(redis_url, prefix=prefix)
    await registry.start()
    woke: list[float] = []

    async def waiter(pid: str) -> float:
        await registry.wait(pid, timeout=30)
        return time.monotonic()

    try:
        for number in range(samples):
            task = asyncio.create_task(waiter(f"wake-{number}"))
            await asyncio.sleep(settle)  # enrolled, and the first read of its key is done
            io.send({"ready": number})
            woke.append(await task)
    finally:
        await registry.close()
    return {"woke": woke, "subscriptions": registry.subscriptions}


async def redis_resolver(io: ChildIO, *, redis_url: str, prefix: str) -> dict[str, Any]:
    """The resolving side: ``resolve`` each process id the parent names, noting the time first."""
    from webhooks import RedisRegistry

    registry = RedisRegistry(redis_url, prefix=prefix)
    await registry.start()
    _, (template,) = _events(1, "wake")
    io.ready({})
    sent: list[float] = []
    try:
        while (message := await io.recv()) is not None:
            number = int(message["go"])
            event = attrs.evolve(template, process_id=f"wake-{number}")
            started = time.monotonic()
            await registry.resolve(event)
            sent.append(started)
            io.send({"sent": number, "t0": started})
    finally:
        await registry.close()
    return {"sent": len(sent)}
