"""Retries: which failures are tried again, how often, how long apart, and never a sent POST."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from asyncsdk import (
    APIConnectionError,
    APITimeoutError,
    Client,
    RateLimitError,
    ServerError,
    Timeout,
)

from ._fake import JPEG, FakeService, Reply, created_order_json, project_json
from .conftest import MakeClient

OK = Reply(json=project_json())


async def test_get_is_retried_on_gateway_errors_until_it_succeeds(
    fake: FakeService, client: Client
) -> None:
    fake.script(
        "GET", "/v3/project/p1", Reply(status=502), Reply(status=503), Reply(status=504), OK
    )

    project = await client.projects.get("p1")

    assert project.id == "p1"
    assert len(fake.seen) == 4


@pytest.mark.parametrize("max_retries", [0, 1, 2])
async def test_retries_stop_at_max_retries(
    fake: FakeService, make_client: MakeClient, max_retries: int
) -> None:
    client = make_client(max_retries=max_retries)
    fake.script("GET", "/v3/project/p1", Reply(status=503, json={"error": "down"}))

    with pytest.raises(ServerError):
        await client.projects.get("p1")

    assert len(fake.seen) == max_retries + 1


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_post_is_not_retried_on_5xx(fake: FakeService, client: Client, status: int) -> None:
    fake.script("POST", "/v3/project", Reply(status=status), Reply(status=201, json=project_json()))

    with pytest.raises(ServerError):
        await client.projects.create("12 Oak Street")

    assert len(fake.seen) == 1


async def test_post_is_retried_on_429(fake: FakeService, client: Client) -> None:
    fake.script(
        "POST",
        "/v3/process",
        Reply(status=429, json={"error": "rate-limit exceeded"}),
        Reply(status=201, json={"process_ids": ["pr1"]}),
    )

    created = await client.processes.create("o1", "tool-x", {"tool-x-input-image": "a1"})

    assert created.process_ids == ("pr1",)
    assert len(fake.seen) == 2


async def test_post_dropped_after_sending_is_not_retried(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/process", Reply(action="drop"), Reply(json={"process_ids": ["x"]}))

    with pytest.raises(APIConnectionError) as info:
        await client.processes.create("o1", "tool-x", {"tool-x-input-image": "a1"})

    assert info.value.request_sent is True
    assert not isinstance(info.value, APITimeoutError)
    assert len(fake.seen) == 1


async def test_post_with_cut_off_answer_is_not_retried(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/project", Reply(action="cut", status=201), OK)

    with pytest.raises(APIConnectionError, match="cut off") as info:
        await client.projects.create("x")

    assert info.value.request_sent is True
    assert len(fake.seen) == 1


@pytest.mark.parametrize("action", ["drop", "cut"])
async def test_get_is_retried_after_a_dropped_answer(
    fake: FakeService, client: Client, action: str
) -> None:
    fake.script("GET", "/v3/project/p1", Reply(action=action), Reply(action=action), OK)

    assert (await client.projects.get("p1")).id == "p1"
    assert len(fake.seen) >= 3


async def test_get_gives_up_on_repeated_drops(fake: FakeService, make_client: MakeClient) -> None:
    client = make_client(max_retries=2)
    fake.script("GET", "/v3/project/p1", Reply(action="drop"))

    with pytest.raises(APIConnectionError, match="closed the connection"):
        await client.projects.get("p1")

    assert len(fake.seen) >= 3


async def test_refused_connection_fails_with_request_not_sent(
    make_client: MakeClient, free_port: int
) -> None:
    client = make_client(base_url=f"http://127.0.0.1:{free_port}", max_retries=2)

    with pytest.raises(APIConnectionError, match="could not connect") as info:
        await client.projects.create("x")

    assert info.value.request_sent is False


class _RetryLogged(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("retrying"):
            self.event.set()


async def test_post_is_retried_when_the_connection_was_refused(
    make_client: MakeClient, free_port: int
) -> None:
    """The server comes up only after the first attempt was refused: the POST still lands once."""
    client = make_client(
        base_url=f"http://127.0.0.1:{free_port}",
        max_retries=200,
        backoff_initial=0.01,
        backoff_max=0.02,
    )
    handler = _RetryLogged()
    logger = logging.getLogger("asyncsdk")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    late = FakeService()
    late.script("POST", "/v3/project", Reply(status=201, json=project_json()))
    try:
        call = asyncio.create_task(client.projects.create("12 Oak Street"))
        await asyncio.wait_for(handler.event.wait(), 10)
        await late.start(port=free_port)
        project = await asyncio.wait_for(call, 10)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        await late.stop()

    assert project.id == "p1"
    assert len(late.seen) == 1


async def test_retry_after_is_honoured(fake: FakeService, client: Client) -> None:
    fake.script(
        "POST",
        "/v3/process",
        Reply(status=429, json={"error": "slow down"}, headers={"Retry-After": "0.3"}),
        Reply(status=201, json={"process_ids": ["pr1"]}),
    )

    await client.processes.create("o1", "tool-x", {"tool-x-input-image": "a1"})

    first, second = fake.seen
    # The backoff alone is at most 5 ms in these clients: the gap comes from Retry-After.
    assert second.at - first.at >= 0.3


async def test_retry_after_longer_than_the_cap_is_raised_at_once(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(max_retry_after=5)
    fake.script("GET", "/v3/project/p1", Reply(status=429, headers={"Retry-After": "600"}), OK)

    with pytest.raises(RateLimitError) as info:
        await client.projects.get("p1")

    assert info.value.retry_after == 600
    assert len(fake.seen) == 1


async def test_total_timeout_on_get_is_retried_then_raised(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(timeout=Timeout(connect=1, total=0.1), max_retries=1)
    fake.script("GET", "/v3/project/p1", Reply(action="hang"))

    with pytest.raises(APITimeoutError, match=r"0\.1 s"):
        await client.projects.get("p1")

    assert len(fake.seen) == 2


async def test_total_timeout_on_post_is_not_retried(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(timeout=0.1)
    fake.script("POST", "/v3/project", Reply(action="hang"))

    with pytest.raises(APITimeoutError) as info:
        await client.projects.create("x")

    assert info.value.request_sent is True
    assert len(fake.seen) == 1


async def test_per_call_timeout_overrides_the_client(fake: FakeService, client: Client) -> None:
    fake.script("GET", "/v3/project/p1", Reply(delay=0.3, json=project_json()))

    with pytest.raises(APITimeoutError):
        await client.projects.get("p1", timeout=Timeout(connect=1, total=0.05))
    assert (await client.projects.get("p1", timeout=5)).id == "p1"


async def test_replayable_uploads_are_retried_on_429(fake: FakeService, client: Client) -> None:
    fake.script(
        "POST", "/v3/order", Reply(status=429), Reply(status=201, json=created_order_json())
    )

    await client.orders.create(JPEG)

    assert [[f.data for f in seen.files()] for seen in fake.seen] == [[JPEG], [JPEG]]


async def test_streamed_uploads_are_never_retried(fake: FakeService, client: Client) -> None:
    fake.script(
        "POST", "/v3/order", Reply(status=429), Reply(status=201, json=created_order_json())
    )

    async def chunks() -> AsyncIterator[bytes]:
        yield JPEG

    with pytest.raises(RateLimitError):
        await client.orders.create(chunks())

    assert len(fake.seen) == 1
