"""What every shared waiter registry keeps (Redis, PostgreSQL), as tests run against each backend.

A backend's test module subclasses :class:`RegistryContract` (the name does not start with
``Test``, so it is not collected on its own) and provides a ``make_registry`` fixture: an async
factory of registries on one fresh store, each standing for another process, started unless
called with ``started=False``, all closed after the test::

    class TestRedisRegistry(RegistryContract):
        @pytest.fixture
        async def make_registry(self, redis_url, redis_prefix) -> AsyncIterator[MakeRegistry]:
            ...
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import pytest
from whtools import HOOK, JSON, TOKEN, encode, event, payload, serve

from asyncsdk import ResultWaiter, WaitTimeoutError
from webhooks import MemoryInbox, RegistryClosedError, TokenVerifier, WebhookReceiver
from webhooks.contract import RegistrySink


class SharedRegistry(ResultWaiter, RegistrySink, Protocol):
    """What the tests use of a shared registry."""

    @property
    def pending_count(self) -> int: ...

    @property
    def subscriptions(self) -> int: ...

    async def start(self, *, timeout: float = 10.0) -> None: ...

    async def close(self) -> None: ...


class MakeRegistry(Protocol):
    def __call__(self, *, started: bool = True, **options: Any) -> Awaitable[SharedRegistry]: ...


@contextlib.asynccontextmanager
async def registries(create: Callable[..., SharedRegistry]) -> AsyncIterator[MakeRegistry]:
    """A :class:`MakeRegistry` of ``create(**options)``; every registry it made is closed at the
    end of the block."""
    made: list[SharedRegistry] = []

    async def make(*, started: bool = True, **options: Any) -> SharedRegistry:
        registry = create(**options)
        made.append(registry)
        if started:
            await registry.start()
        return registry

    try:
        yield make
    finally:
        for registry in made:
            await registry.close()


class RegistryContract:
    async def test_a_receiver_on_one_instance_wakes_a_waiter_on_another(
        self, make_registry: MakeRegistry
    ) -> None:
        fed, other = await make_registry(), await make_registry()
        receiver = WebhookReceiver(
            inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), registry=fed, poll_interval=0.05
        )
        async with serve(receiver) as client:
            waiting = asyncio.create_task(other.wait("p-1", timeout=10))
            response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
            assert response.status == 200
            assert (await waiting).process_id == "p-1"
        # The stopped receiver's instance tells its waiters to poll; the other is not fed by it.
        assert not fed.healthy
        assert other.healthy

    async def test_a_waiter_on_one_instance_is_resolved_by_another(
        self, make_registry: MakeRegistry
    ) -> None:
        a, b = await make_registry(), await make_registry()
        waiters = [asyncio.create_task(a.wait("p-1", timeout=10)) for _ in range(3)]
        other = asyncio.create_task(a.wait("p-2", timeout=10))
        await asyncio.sleep(0.05)
        await b.resolve(event("p-1"))
        assert await asyncio.gather(*waiters) == [event("p-1")] * 3
        assert not other.done()
        await b.resolve(event("p-2", status="failed"))
        assert (await other).status == "failed"
        assert a.pending_count == 0

    async def test_an_event_that_landed_before_the_wait_is_read_from_the_store(
        self, make_registry: MakeRegistry
    ) -> None:
        b = await make_registry()
        await b.resolve(event("p-early"))
        a = await make_registry()  # started after the announcement: only the store can tell it
        assert await a.wait("p-early", timeout=5) == event("p-early")

    async def test_a_wait_before_start_still_finds_the_result(
        self, make_registry: MakeRegistry
    ) -> None:
        b = await make_registry()
        await b.resolve(event("p-1"))
        fresh = await make_registry(started=False)
        async with fresh:  # type: ignore[attr-defined]  # both backends are context managers
            assert await fresh.wait("p-1", timeout=5) == event("p-1")
        lazy = await make_registry(started=False)
        assert not lazy.healthy  # nothing started it yet
        assert await lazy.wait("p-1", timeout=5) == event("p-1")  # wait() starts it

    async def test_many_waiters_early_and_late_events(self, make_registry: MakeRegistry) -> None:
        a, b = await make_registry(), await make_registry()
        ids = [f"p-{n}" for n in range(2000)]
        await asyncio.gather(*(b.resolve(event(pid)) for pid in ids[:1000]))
        tasks = [asyncio.create_task(a.wait(pid, timeout=20)) for pid in ids]
        await asyncio.sleep(0.05)
        await asyncio.gather(*(b.resolve(event(pid)) for pid in ids[1000:]))
        assert [e.process_id for e in await asyncio.gather(*tasks)] == ids

    async def test_the_first_event_wins_across_instances(self, make_registry: MakeRegistry) -> None:
        a, b, c = await make_registry(), await make_registry(), await make_registry()
        await b.resolve(event("p-1", src="first"))
        await c.resolve(event("p-1", src="second"))
        await c.resolve(event("p-1", status="failed"))
        assert (await a.wait("p-1", timeout=5)).final_assets[0].src == "first"
        assert (await c.wait("p-1", timeout=5)).final_assets[0].src == "first"

    async def test_one_subscription_per_instance_however_many_wait(
        self, make_registry: MakeRegistry
    ) -> None:
        a, b = await make_registry(), await make_registry()
        tasks = [asyncio.create_task(a.wait(f"p-{n}", timeout=10)) for n in range(500)]
        tasks += [asyncio.create_task(b.wait(f"p-{n}", timeout=10)) for n in range(500)]
        await asyncio.sleep(0.05)
        await asyncio.gather(*(a.resolve(event(f"p-{n}")) for n in range(500)))
        assert len(await asyncio.gather(*tasks)) == 1000
        assert a.subscriptions == b.subscriptions == 1

    async def test_timeouts_and_cancellation_leave_no_local_waiters(
        self, make_registry: MakeRegistry
    ) -> None:
        registry = await make_registry()
        slow = asyncio.create_task(registry.wait("p-1", timeout=10))
        cancelled = asyncio.create_task(registry.wait("p-1", timeout=10))
        with pytest.raises(WaitTimeoutError):
            await registry.wait("p-1", timeout=0.05)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert registry.pending_count == 1
        await registry.resolve(event("p-1"))
        assert (await slow).process_id == "p-1"
        assert registry.pending_count == 0

    async def test_close_fails_pending_waiters_and_health_follows_state(
        self, make_registry: MakeRegistry
    ) -> None:
        registry = await make_registry()
        assert registry.healthy
        registry.set_healthy(False)  # this process's receiver stopped
        assert not registry.healthy
        registry.set_healthy(True)
        assert registry.healthy
        waiter = asyncio.create_task(registry.wait("p-1"))
        await asyncio.sleep(0.01)
        await registry.close()
        with pytest.raises(RegistryClosedError):
            await waiter
        assert not registry.healthy
        with pytest.raises(RegistryClosedError):
            await registry.wait("p-1")
        with pytest.raises(RegistryClosedError):
            await registry.resolve(event("p-1"))
