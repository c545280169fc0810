"""Fixtures: ``fake`` (a scripted fake of the service) and clients pointed at it."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from asyncsdk import Client, GenerationLimit

from ._fake import API_KEY, FakeService

MakeClient = Callable[..., Client]


@pytest.fixture
async def fake() -> AsyncIterator[FakeService]:
    service = FakeService()
    await service.start()
    yield service
    await service.stop()


@pytest.fixture
async def make_client(fake: FakeService) -> AsyncIterator[MakeClient]:
    """Build clients pointed at the fake (tiny backoff and poll interval); closed after the test.

    The fake serves no tool catalogue, so catalogue validation is off here; it is tested against
    the sandbox (``test_catalogue_wiring.py``).
    """
    clients: list[Client] = []

    def make(**kwargs: Any) -> Client:
        kwargs.setdefault("api_key", API_KEY)
        kwargs.setdefault("base_url", str(fake.url))
        kwargs.setdefault("min_poll_interval", 0.01)
        kwargs.setdefault("backoff_initial", 0.001)
        kwargs.setdefault("backoff_max", 0.005)
        kwargs.setdefault("validate", False)
        # The service's window (10 per 600 s) shortened, as Sandbox.client does.
        kwargs.setdefault("generation_limit", GenerationLimit(max_calls=10, period=0.01))
        client = Client(**kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
async def client(make_client: MakeClient) -> Client:
    return make_client()


@pytest.fixture
def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
