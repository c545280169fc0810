"""Bounded concurrency (max_in_flight) and the client-side generation limit."""

from __future__ import annotations

import asyncio

import pytest

from asyncsdk import ConfigurationError, GenerationLimit

from ._fake import JPEG, FakeService, Reply, created_order_json
from .conftest import MakeClient


async def test_a_thousand_concurrent_uploads_stay_within_max_in_flight(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(max_in_flight=8, timeout=30)
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json(), delay=0.001))

    results = await asyncio.gather(*(client.orders.create(JPEG) for _ in range(1000)))

    assert len(results) == 1000
    assert all(result.order_id == "o1" for result in results)
    assert len(fake.seen) == 1000
    assert 1 < fake.max_in_flight <= 8


async def test_waiting_for_a_slot_does_not_count_against_the_timeout(
    fake: FakeService, make_client: MakeClient
) -> None:
    """Each request takes 0.1 s of a 0.5 s timeout, but 20 of them share 2 slots (1 s in all):
    none fails, because the timeout starts only once a request holds a slot."""
    client = make_client(max_in_flight=2, timeout=0.5, max_retries=0)
    fake.script("GET", "/v3/order/o1", Reply(json={"id": "o1"}, delay=0.1))

    orders = await asyncio.gather(*(client.orders.get("o1") for _ in range(20)))

    assert len(orders) == 20
    assert fake.max_in_flight <= 2


async def test_own_session_connector_limit_lowers_the_in_flight_limit(
    fake: FakeService, make_client: MakeClient
) -> None:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=3)) as session:
        client = make_client(session=session, max_in_flight=50, timeout=0.5, max_retries=0)
        fake.script("GET", "/v3/order/o1", Reply(json={"id": "o1"}, delay=0.05))

        await asyncio.gather(*(client.orders.get("o1") for _ in range(30)))

    assert fake.max_in_flight <= 3


async def test_generation_limit_spaces_process_creation(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(generation_limit=GenerationLimit(max_calls=2, period=0.3))
    fake.script("POST", "/v3/process", Reply(status=201, json={"process_ids": ["pr1"]}))

    await asyncio.gather(
        *(client.processes.create("o1", "tool-x", {"tool-x-input-image": "a1"}) for _ in range(5))
    )

    arrivals = [seen.at for seen in fake.seen]
    assert len(arrivals) == 5
    # No three creations inside any 0.3 s window (server arrival times, hence some slack).
    for first, third in zip(arrivals, arrivals[2:], strict=False):
        assert third - first >= 0.3 - 0.05


async def test_generation_limit_serves_callers_in_arrival_order() -> None:
    limit = GenerationLimit(max_calls=1, period=0.02)
    served: list[int] = []

    async def caller(n: int) -> None:
        await limit.acquire()
        served.append(n)

    tasks = []
    for n in range(8):
        tasks.append(asyncio.create_task(caller(n)))
        await asyncio.sleep(0)  # each caller reaches the queue before the next starts
    await asyncio.gather(*tasks)

    assert served == list(range(8))


async def test_invalid_generation_limit() -> None:
    with pytest.raises(ConfigurationError, match="max_calls"):
        GenerationLimit(max_calls=0)
    with pytest.raises(ConfigurationError, match="period"):
        GenerationLimit(period=-1)


async def test_generation_limit_is_not_used_for_other_posts(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(generation_limit=GenerationLimit(max_calls=1, period=60))
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json()))
    fake.script("POST", "/v3/process", Reply(status=201, json={"process_ids": ["pr1"]}))

    await client.processes.create("o1", "tool-x", {"tool-x-input-image": "a1"})
    # Were uploads counted too, these would wait a minute for the window: fail fast instead.
    await asyncio.wait_for(asyncio.gather(*(client.orders.create(JPEG) for _ in range(3))), 5)

    assert len(fake.seen) == 4
