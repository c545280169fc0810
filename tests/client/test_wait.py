"""Waiting for a process: polling pace, one deadline, failures, and webhook registries."""

from __future__ import annotations

import asyncio
import math

import pytest

import webhooks
from asyncsdk import (
    AsyncSDKError,
    Client,
    Process,
    ProcessCompleted,
    ProcessFailedError,
    ProcessStatus,
    ResultAsset,
    ResultWaiter,
    ValidationError,
    WaitTimeoutError,
)

from ._fake import FakeService, Reply, process_json
from .conftest import MakeClient

PATH = "/v3/process/pr1"


def event(status: str = "done") -> ProcessCompleted:
    return ProcessCompleted(
        event="process.completed",
        process_id="pr1",
        order_id="o1",
        tool="tool-virtual-staging",
        status=status,
        final_assets=(ResultAsset(asset_id="r1", src="https://cdn.example/r1.jpg"),),
    )


class FakeRegistry:
    """A stand-in for a webhook registry (the ResultWaiter protocol), driven by the test."""

    def __init__(self, *, healthy: bool = True) -> None:
        self.healthy = healthy
        self.events: dict[str, asyncio.Future[ProcessCompleted]] = {}
        self.calls = 0
        self.fail_with: Exception | None = None

    def deliver(self, completed: ProcessCompleted) -> None:
        future = self._future(completed.process_id)
        if not future.done():
            future.set_result(completed)

    def _future(self, process_id: str) -> asyncio.Future[ProcessCompleted]:
        if process_id not in self.events:
            self.events[process_id] = asyncio.get_running_loop().create_future()
        return self.events[process_id]

    async def wait(self, process_id: str, *, timeout: float | None = None) -> ProcessCompleted:
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        return await asyncio.wait_for(asyncio.shield(self._future(process_id)), timeout)


async def test_the_registry_webhooks_ships_ends_a_wait_without_polling(
    fake: FakeService, client: Client
) -> None:
    """The receiver's own registry fits ``registry=``: the event it resolves is the result, and
    the service is never asked."""
    async with webhooks.Registry(healthy=True) as registry:
        assert isinstance(registry, ResultWaiter)
        waiting = asyncio.create_task(client.processes.wait("pr1", registry=registry, timeout=5))
        await asyncio.sleep(0.05)
        await registry.resolve(event("done"))
        process = await waiting

    assert process.status == ProcessStatus.DONE
    assert process.final_assets == event().final_assets
    assert fake.seen == []


async def test_polls_until_done(fake: FakeService, make_client: MakeClient) -> None:
    client = make_client(min_poll_interval=0.05)
    fake.script(
        "GET",
        PATH,
        Reply(json=process_json(status="pending")),
        Reply(json=process_json(status="processing")),
        Reply(json=process_json(status="done")),
    )

    process = await client.processes.wait("pr1", timeout=10)

    assert process.status == ProcessStatus.DONE
    assert process.final_assets[0].src == "https://cdn.example/r1.jpg"
    gaps = [b.at - a.at for a, b in zip(fake.seen, fake.seen[1:], strict=False)]
    assert len(gaps) == 2
    # Server arrival times: each poll is sent an interval after the answer to the one before, so
    # the service sees them at least an interval apart whatever the network did.
    assert all(gap >= 0.05 for gap in gaps)


async def test_poll_interval_below_the_minimum_is_raised_to_it(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(min_poll_interval=0.05)
    fake.script("GET", PATH, Reply(json=process_json()), Reply(json=process_json(status="done")))

    await client.processes.wait("pr1", poll_interval=0.0001)

    first, second = fake.seen
    assert second.at - first.at >= 0.05


async def test_poll_interval_above_the_minimum_is_used(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(min_poll_interval=0.01)
    fake.script("GET", PATH, Reply(json=process_json()), Reply(json=process_json(status="done")))

    await client.processes.wait("pr1", poll_interval=0.1)

    first, second = fake.seen
    assert second.at - first.at >= 0.1


async def test_deadline_raises_wait_timeout_with_last_status(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(min_poll_interval=0.05)
    fake.script("GET", PATH, Reply(json=process_json(status="processing")))

    with pytest.raises(WaitTimeoutError) as info:
        await client.processes.wait("pr1", timeout=0.3)

    assert isinstance(info.value, TimeoutError)
    assert info.value.process_id == "pr1"
    assert info.value.last_status == "processing"
    assert "0.3 s" in str(info.value)
    # Polled at most once per interval within the deadline: at most 0.3 / 0.05 + 1 requests.
    assert 2 <= len(fake.seen) <= 7


async def test_deadline_covers_a_slow_request(fake: FakeService, make_client: MakeClient) -> None:
    client = make_client()
    fake.script("GET", PATH, Reply(action="hang"))

    with pytest.raises(WaitTimeoutError) as info:
        await client.processes.wait("pr1", timeout=0.2)

    assert info.value.last_status is None


async def test_failed_process_is_returned_or_raised(fake: FakeService, client: Client) -> None:
    fake.script("GET", PATH, Reply(json=process_json(status="failed")))

    process = await client.processes.wait("pr1")
    assert process.status == ProcessStatus.FAILED

    with pytest.raises(ProcessFailedError) as info:
        await client.processes.wait("pr1", raise_on_failure=True)
    assert isinstance(info.value.process, Process)


async def test_bad_wait_arguments(client: Client) -> None:
    with pytest.raises(ValidationError, match="timeout"):
        await client.processes.wait("pr1", timeout=-1)
    # A wait without end is not a number: infinity is refused like any other non-finite value.
    with pytest.raises(ValidationError, match="timeout must be a finite number of seconds"):
        await client.processes.wait("pr1", timeout=math.inf)
    with pytest.raises(ValidationError, match="webhook_grace must be a finite number"):
        await client.processes.wait("pr1", webhook_grace=math.nan)
    with pytest.raises(ValidationError, match="poll_interval must be a finite number"):
        await client.processes.wait("pr1", poll_interval=math.inf)


async def test_registry_event_is_used_without_polling(fake: FakeService, client: Client) -> None:
    registry = FakeRegistry()
    fake.script("GET", PATH, Reply(json=process_json(status="pending")))

    async def deliver_later() -> None:
        await asyncio.sleep(0.05)
        registry.deliver(event("done"))

    delivery = asyncio.create_task(deliver_later())
    process = await client.processes.wait("pr1", registry=registry, timeout=5)
    await delivery

    assert process == Process(
        id="pr1",
        tool="tool-virtual-staging",
        status="done",
        final_assets=(ResultAsset(asset_id="r1", src="https://cdn.example/r1.jpg"),),
    )
    assert fake.seen == []


async def test_unhealthy_registry_falls_back_to_polling_at_once(
    fake: FakeService, client: Client
) -> None:
    registry = FakeRegistry(healthy=False)
    fake.script("GET", PATH, Reply(json=process_json(status="done")))

    process = await client.processes.wait("pr1", registry=registry, timeout=5)

    assert process.status == "done"
    assert registry.calls == 0
    assert len(fake.seen) == 1


async def test_silent_registry_falls_back_after_the_grace(
    fake: FakeService, client: Client
) -> None:
    registry = FakeRegistry()
    fake.script("GET", PATH, Reply(json=process_json(status="done")))

    process = await client.processes.wait("pr1", registry=registry, webhook_grace=0.1, timeout=5)

    assert process.status == "done"
    assert registry.calls >= 1
    assert len(fake.seen) == 1


async def test_registry_going_down_mid_wait_switches_to_polling(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(min_poll_interval=0.05)
    registry = FakeRegistry()
    fake.script("GET", PATH, Reply(json=process_json(status="done")))

    async def break_later() -> None:
        await asyncio.sleep(0.1)
        registry.healthy = False

    breaker = asyncio.create_task(break_later())
    process = await client.processes.wait("pr1", registry=registry, timeout=5)
    await breaker

    assert process.status == "done"
    assert len(fake.seen) == 1


async def test_registry_shutting_down_switches_to_polling(
    fake: FakeService, client: Client
) -> None:
    registry = FakeRegistry()
    registry.fail_with = AsyncSDKError("registry closed")
    fake.script("GET", PATH, Reply(json=process_json(status="done")))

    assert (await client.processes.wait("pr1", registry=registry)).status == "done"
    assert len(fake.seen) == 1


async def test_one_deadline_covers_registry_and_polling(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(min_poll_interval=0.05)
    registry = FakeRegistry()
    fake.script("GET", PATH, Reply(json=process_json(status="processing")))

    with pytest.raises(WaitTimeoutError) as info:
        await client.processes.wait("pr1", registry=registry, webhook_grace=0.15, timeout=0.3)

    assert info.value.last_status == "processing"
    assert 1 <= len(fake.seen) <= 4  # polling had only the 0.15 s left after the grace


async def test_a_grace_as_long_as_the_timeout_awaits_the_webhook_alone(
    fake: FakeService, client: Client
) -> None:
    registry = FakeRegistry()

    with pytest.raises(WaitTimeoutError) as info:
        await client.processes.wait("pr1", registry=registry, webhook_grace=0.1, timeout=0.1)

    assert info.value.last_status is None
    assert fake.seen == []


async def test_a_webhook_that_comes_between_polls_ends_the_wait_at_once(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(min_poll_interval=5)
    registry = FakeRegistry()
    fake.script("GET", PATH, Reply(json=process_json(status="processing")))

    async def deliver_after_the_first_poll() -> None:
        await asyncio.sleep(0.3)  # the grace is 0: the first poll comes at once
        registry.deliver(event("done"))

    delivery = asyncio.create_task(deliver_after_the_first_poll())
    process = await client.processes.wait("pr1", registry=registry, webhook_grace=0, timeout=3)
    await delivery

    assert process.status == "done"  # not a WaitTimeoutError at 3 s, the next poll being at 5 s
    assert len(fake.seen) == 1


async def test_a_lost_webhook_still_gets_the_result_by_default(
    fake: FakeService, make_client: MakeClient
) -> None:
    """No ``webhook_grace``: the webhook has half the deadline, then the process is polled."""
    client = make_client(min_poll_interval=0.05)
    registry = FakeRegistry()  # healthy, but the event never comes
    fake.script("GET", PATH, Reply(json=process_json(status="done")))
    loop = asyncio.get_running_loop()
    started = loop.time()

    process = await client.processes.wait("pr1", registry=registry, timeout=0.4)

    assert process.status == "done"
    assert len(fake.seen) == 1
    assert loop.time() - started >= 0.2  # the first GET came once half the wait had passed
