"""Friendly failures and options: sync ``with``, a client across event loops, public module names,
``with_options``."""

from __future__ import annotations

import asyncio
import traceback

import pytest

import asyncsdk
import webhooks
from asyncsdk import APITimeoutError, Client, ConfigurationError, NotFoundError, ServerError

from ._fake import API_KEY, FakeService, Reply, project_json
from .conftest import MakeClient


def test_a_sync_with_names_async_with() -> None:
    client = Client(api_key=API_KEY, base_url="http://127.0.0.1:9")

    with pytest.raises(ConfigurationError, match=r"use `async with asyncsdk\.Client\(\)"), client:
        pass


def test_a_client_used_across_event_loops_names_the_fix(free_port: int) -> None:
    """A client kept between two asyncio.run() calls: the second says what to do instead of
    failing inside aiohttp with "Event loop is closed"."""
    client = Client(api_key=API_KEY, base_url=f"http://127.0.0.1:{free_port}", max_retries=0)

    async def first() -> None:
        with pytest.raises(asyncsdk.APIConnectionError):  # nothing listens: refused
            await client.projects.list()

    async def second() -> None:
        await client.projects.list()

    asyncio.run(first())
    with pytest.raises(ConfigurationError, match=r"one Client per asyncio\.run\(\)"):
        asyncio.run(second())
    asyncio.run(client.close())


@pytest.mark.parametrize("package", [asyncsdk, webhooks], ids=["asyncsdk", "webhooks"])
def test_every_exported_class_shows_the_package_as_its_module(package: object) -> None:
    names = package.__all__  # type: ignore[attr-defined]
    classes = [vars(package)[name] for name in names if isinstance(vars(package)[name], type)]

    assert len(classes) > 10
    assert [c.__qualname__ for c in classes if c.__module__ != package.__name__] == []  # type: ignore[attr-defined]


async def test_an_error_prints_as_users_import_it(fake: FakeService, client: Client) -> None:
    fake.script("GET", "/v3/project/p9", Reply(status=404, json={"error": "no such project"}))

    with pytest.raises(NotFoundError) as info:
        await client.projects.get("p9")

    printed = "".join(traceback.format_exception_only(info.value))
    assert printed.startswith("asyncsdk.NotFoundError: 404")


async def test_with_options_is_a_copy_on_the_same_session(
    fake: FakeService, make_client: MakeClient
) -> None:
    fake.script(
        "GET",
        "/v3/project/p1",
        Reply(json=project_json(), delay=0.3),
        Reply(status=503, text="busy"),
        Reply(json=project_json()),
    )
    client = make_client(max_retries=2)
    quick = client.with_options(timeout=0.1, max_retries=0)

    with pytest.raises(APITimeoutError, match=r"within 0\.1 s"):
        await quick.projects.get("p1")  # the 0.3 s answer: too slow for the copy
    with pytest.raises(ServerError):
        await quick.projects.get("p1")  # the 503: not retried by the copy
    assert (await client.projects.get("p1")).id == "p1"  # the original keeps its settings

    assert quick.settings.timeout.total == 0.1
    assert client.settings.timeout.total == 60.0
    assert (quick.settings.retry.max_retries, client.settings.retry.max_retries) == (0, 2)
    assert quick.catalogue is client.catalogue
    assert quick.generation_limit is client.generation_limit
    await quick.close()
    assert client.closed  # one session: closing either closes both


def test_with_options_checks_its_values() -> None:
    client = Client(api_key=API_KEY, base_url="http://127.0.0.1:9")

    with pytest.raises(ConfigurationError, match="total"):
        client.with_options(timeout=-1)
    with pytest.raises(ConfigurationError, match="max_retries"):
        client.with_options(max_retries=-2)
