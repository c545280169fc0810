"""The in-memory waiter registry: waiters, kept events, cancellation, timeouts, memory, close."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Coroutine
from typing import Any

import pytest
from whtools import HOOK, JSON, TOKEN, encode, event, payload, serve

from asyncsdk import (
    AsyncSDKError,
    ConfigurationError,
    ProcessCompleted,
    WaitTimeoutError,
)
from webhooks import (
    MemoryInbox,
    Registry,
    RegistryClosedError,
    RegistryStats,
    TokenVerifier,
    WebhookReceiver,
)


async def started(
    *coros: Coroutine[Any, Any, ProcessCompleted],
) -> list[asyncio.Task[ProcessCompleted]]:
    """Tasks for the waits, run until each is blocked inside the registry."""
    tasks = [asyncio.create_task(c) for c in coros]
    await asyncio.sleep(0)
    return tasks


async def test_a_receiver_feeds_its_registry_and_keeps_it_healthy_while_it_runs() -> None:
    registry = Registry()
    receiver = WebhookReceiver(
        inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), registry=registry, poll_interval=0.05
    )
    assert not registry.healthy  # no receiver yet: a client waiting on it would poll
    async with serve(receiver) as client:
        assert registry.healthy
        waiting = asyncio.create_task(registry.wait("p-1", timeout=10))
        response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
        assert response.status == 200
        assert (await waiting).process_id == "p-1"
    assert not registry.healthy  # the receiver stopped: waiters fall back to polling


async def test_every_waiter_of_an_id_gets_the_event() -> None:
    registry = Registry()
    tasks = await started(*(registry.wait("p-1", timeout=10) for _ in range(5)))
    other = await started(registry.wait("p-2", timeout=10))
    assert registry.stats == RegistryStats(pending_waiters=6, pending_ids=2, kept_events=0)

    assert registry.resolve_nowait(event("p-1")) == 5
    assert await asyncio.gather(*tasks) == [event("p-1")] * 5
    assert not other[0].done()
    await registry.resolve(event("p-2", status="failed"))
    assert (await other[0]).status == "failed"
    assert registry.pending_count == 0
    assert registry.pending_ids() == []


async def test_an_event_that_lands_first_is_kept_for_later_waiters() -> None:
    registry = Registry()
    await registry.resolve(event("p-1"))
    # timeout=0 still returns a kept event: nothing has to be waited for.
    assert await registry.wait("p-1", timeout=0) == event("p-1")
    assert await registry.wait("p-1") == event("p-1")
    assert registry.stats.kept_events == 1
    assert registry.pending_count == 0


async def test_kept_events_expire_after_keep_for() -> None:
    registry = Registry(keep_for=0.05)
    await registry.resolve(event("p-1"))
    await registry.resolve(event("p-2"))
    await asyncio.sleep(0.08)
    with pytest.raises(WaitTimeoutError):
        await registry.wait("p-1", timeout=0)
    # The sweeper (one timer, due at expiry + min(1 s, keep_for)) drops what nobody asked for.
    await asyncio.sleep(0.1)
    assert registry.stats.kept_events == 0
    with pytest.raises(WaitTimeoutError):
        await registry.wait("p-2", timeout=0)


async def test_keep_for_zero_keeps_nothing_and_max_kept_drops_the_oldest() -> None:
    nothing = Registry(keep_for=0)
    await nothing.resolve(event("p-1"))
    assert nothing.stats.kept_events == 0

    small = Registry(max_kept=2)
    for n in range(3):
        await small.resolve(event(f"p-{n}"))
    assert small.stats.kept_events == 2
    with pytest.raises(WaitTimeoutError):
        await small.wait("p-0", timeout=0)
    assert (await small.wait("p-2", timeout=0)).process_id == "p-2"


async def test_the_first_event_of_an_id_wins() -> None:
    registry = Registry()
    await registry.resolve(event("p-1", src="first"))
    await registry.resolve(event("p-1", src="second"))
    await registry.resolve(event("p-1", status="failed"))
    kept = await registry.wait("p-1", timeout=0)
    assert kept.status == "done"
    assert kept.final_assets[0].src == "first"


async def test_cancelling_one_waiter_leaves_the_others_waiting() -> None:
    registry = Registry()
    keep, cancel, alone = await started(
        registry.wait("p-1", timeout=10),
        registry.wait("p-1", timeout=10),
        registry.wait("p-2", timeout=10),
    )
    cancel.cancel()
    alone.cancel()
    await asyncio.sleep(0)
    assert cancel.cancelled()
    assert alone.cancelled()
    assert registry.stats == RegistryStats(pending_waiters=1, pending_ids=1, kept_events=0)

    await registry.resolve(event("p-1"))
    assert await keep == event("p-1")


async def test_a_timed_out_waiter_removes_itself() -> None:
    registry = Registry()
    slow, fast = await started(registry.wait("p-1", timeout=10), registry.wait("p-1", timeout=0.01))
    with pytest.raises(WaitTimeoutError) as caught:
        await fast
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.process_id == "p-1"
    assert "p-1" in str(caught.value)
    assert registry.pending_count == 1
    await registry.resolve(event("p-1"))
    assert (await slow).process_id == "p-1"
    assert registry.stats == RegistryStats(pending_waiters=0, pending_ids=0, kept_events=1)


async def test_100000_waiters_resolve_or_time_out_and_leave_nothing_behind() -> None:
    registry = Registry(keep_for=0)
    ids = [f"p-{n}" for n in range(50_000)]
    await asyncio.sleep(0)
    gc.collect()
    # Live small-object blocks: a cheap, trace-free measure of what is still allocated.
    before = sys.getallocatedblocks()
    # Two waiters per id; the first half of the ids gets an event, the rest time out.
    tasks = [asyncio.create_task(registry.wait(pid, timeout=0.5)) for pid in ids * 2]
    await asyncio.sleep(0)
    assert registry.stats == RegistryStats(
        pending_waiters=100_000, pending_ids=50_000, kept_events=0
    )
    held = sys.getallocatedblocks() - before
    for pid in ids[:25_000]:
        registry.resolve_nowait(event(pid))
    assert registry.stats.pending_waiters == 50_000

    results = await asyncio.gather(*tasks, return_exceptions=True)
    resolved = [r for r in results if isinstance(r, ProcessCompleted)]
    assert len(resolved) == 50_000
    assert {r.process_id for r in resolved} == set(ids[:25_000])
    assert sum(isinstance(r, WaitTimeoutError) for r in results) == 50_000
    assert registry.stats == RegistryStats(pending_waiters=0, pending_ids=0, kept_events=0)

    del tasks, results, resolved
    await asyncio.sleep(0)  # let go of the handle that woke this task with the results
    gc.collect()
    left = sys.getallocatedblocks() - before
    assert held > 500_000  # the waiters did take memory...
    assert left < held // 100  # ...and gave it back


async def test_close_fails_every_pending_waiter_and_later_waits() -> None:
    registry = Registry(healthy=True)
    await registry.resolve(event("kept"))
    tasks = await started(registry.wait("p-1"), registry.wait("p-1"), registry.wait("p-2"))
    await registry.close()
    for task in tasks:
        with pytest.raises(RegistryClosedError) as caught:
            await task
        assert isinstance(caught.value, AsyncSDKError)
    assert "closed" in str(caught.value)
    assert registry.pending_count == 0
    assert not registry.healthy
    assert registry.closed

    with pytest.raises(RegistryClosedError):
        await registry.wait("kept")
    # Events after close are ignored; close is idempotent.
    assert registry.resolve_nowait(event("p-3")) == 0
    await registry.close()


async def test_async_with_closes_the_registry() -> None:
    async with Registry() as registry:
        task = (await started(registry.wait("p-1")))[0]
    with pytest.raises(RegistryClosedError):
        await task


async def test_healthy_follows_set_healthy() -> None:
    registry = Registry()
    assert not registry.healthy
    registry.set_healthy(True)
    assert registry.healthy
    registry.set_healthy(False)
    assert not registry.healthy


@pytest.mark.parametrize(
    ("process_id", "timeout", "message"),
    [
        ("", None, "process_id must be a non-empty str"),
        (42, None, "process_id must be a non-empty str"),
        ("p-1", -1, "timeout must be 0 or more"),
        ("p-1", "5", "timeout must be None or a number"),
        ("p-1", float("nan"), "timeout must be None or a number"),
    ],
)
async def test_bad_wait_arguments_are_refused(
    process_id: object, timeout: object, message: str
) -> None:
    registry = Registry()
    with pytest.raises(ConfigurationError, match=message):
        await registry.wait(process_id, timeout=timeout)  # type: ignore[arg-type]
    assert registry.pending_count == 0


def test_bad_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="keep_for must be 0 or more"):
        Registry(keep_for=-1)
    with pytest.raises(ConfigurationError, match="keep_for must be a finite number"):
        Registry(keep_for=float("inf"))
    with pytest.raises(ConfigurationError, match="max_kept must be an int"):
        Registry(max_kept=-5)
    registry = Registry()
    with pytest.raises(ConfigurationError):
        registry.keep_for = -3


async def test_the_redis_backends_name_the_extra_when_redis_py_is_missing() -> None:
    # A fresh interpreter in which "import redis" fails, as in an install without the extra.
    code = (
        "import sys; sys.modules['redis'] = None\n"
        "import webhooks\n"
        "from asyncsdk import ConfigurationError\n"
        "for backend in (webhooks.RedisInbox, webhooks.RedisRegistry):\n"
        "    try:\n"
        "        backend()\n"
        "    except ConfigurationError as exc:\n"
        "        print(exc)\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    assert out.decode().count("pip install 'asyncsdk[redis]'") == 2
