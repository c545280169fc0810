"""Settings from arguments and the environment, session ownership, closing."""

from __future__ import annotations

import math
import traceback

import aiohttp
import pytest

from asyncsdk import Client, ConfigurationError, Timeout

from ._fake import API_KEY, FakeService, Reply, project_json
from .conftest import MakeClient


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ASYNCSDK_API_KEY", "ASYNCSDK_BASE_URL", "ASYNCSDK_APP_URL"):
        monkeypatch.delenv(name, raising=False)


def test_missing_key_names_the_environment_variable() -> None:
    with pytest.raises(ConfigurationError, match="ASYNCSDK_API_KEY"):
        Client(base_url="https://api.example.com")
    with pytest.raises(ConfigurationError, match="ASYNCSDK_API_KEY"):
        Client(api_key="  ", base_url="https://api.example.com")


def test_missing_base_url_names_the_environment_variable() -> None:
    with pytest.raises(ConfigurationError, match="ASYNCSDK_BASE_URL") as info:
        Client(api_key=API_KEY)
    assert API_KEY not in "".join(traceback.format_exception(info.value))


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCSDK_API_KEY", API_KEY)
    monkeypatch.setenv("ASYNCSDK_BASE_URL", "https://api.example.com/")
    monkeypatch.setenv("ASYNCSDK_APP_URL", "https://app.example.com")

    client = Client()

    assert client.settings.api_key.reveal() == API_KEY
    assert str(client.settings.base_url) == "https://api.example.com/"
    assert str(client.settings.app_url) == "https://app.example.com/"


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCSDK_API_KEY", "sk_from_env")
    monkeypatch.setenv("ASYNCSDK_BASE_URL", "https://env.example.com")

    client = Client(api_key=API_KEY, base_url="https://arg.example.com/prefix/")

    assert client.settings.api_key.reveal() == API_KEY
    assert str(client.settings.base_url) == "https://arg.example.com/prefix"
    assert client.settings.app_url == client.settings.base_url  # app_url defaults to base_url


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"base_url": "api.example.com"}, "absolute http"),
        ({"base_url": "ftp://api.example.com"}, "absolute http"),
        ({"base_url": "https://user:pw@api.example.com"}, "credentials"),
        ({"base_url": "https://api.example.com/?x=1"}, "query string"),
        ({"app_url": "nope"}, "app_url"),
        ({"api_key": "sk with space"}, "whitespace"),
        ({"api_key": "sk_caf\u00e9"}, "non-ASCII"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"role_field": "roles"}, "asset_roles"),
        ({"min_poll_interval": 0}, "min_poll_interval"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_retries": 2.5}, "max_retries must be an int"),
        ({"timeout": "60"}, "timeout"),
        # A number of seconds is finite; "no limit" is None (Timeout(total=None)), not infinity.
        ({"timeout": math.inf}, "finite number of seconds > 0, or None for no limit"),
        ({"timeout": math.nan}, "finite number of seconds"),
        ({"min_poll_interval": math.inf}, "min_poll_interval must be a finite number"),
        ({"catalogue_ttl": math.inf}, "catalogue_ttl must be a finite number"),
        ({"backoff_max": math.inf}, "backoff_max must be a finite number"),
        ({"session": object()}, "aiohttp.ClientSession"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], fix: str) -> None:
    options: dict[str, object] = {"api_key": API_KEY, "base_url": "https://api.example.com"}
    options.update(kwargs)
    with pytest.raises(ConfigurationError, match=fix):
        Client(**options)  # type: ignore[arg-type]


def test_timeouts() -> None:
    client = Client(api_key=API_KEY, base_url="https://api.example.com", timeout=12)
    assert client.settings.timeout == Timeout(connect=10, total=12)
    with pytest.raises(ConfigurationError, match="total"):
        Timeout(total=0)
    with pytest.raises(ConfigurationError, match="or None for no limit"):
        Timeout(connect=math.inf)
    assert Timeout(connect=None, total=None).total is None  # no limit at all


def test_the_key_is_masked_everywhere_a_client_shows() -> None:
    client = Client(api_key=API_KEY, base_url="https://api.example.com")

    for text in (repr(client), str(client), repr(client.settings), str(client.settings.api_key)):
        assert API_KEY not in text
    assert "hidden" in repr(client)
    assert API_KEY not in repr(vars(client))


def test_construction_needs_no_event_loop() -> None:
    client = Client(api_key=API_KEY, base_url="https://api.example.com")
    assert not client.closed


async def test_closed_client_refuses_calls(fake: FakeService, make_client: MakeClient) -> None:
    fake.script("GET", "/v3/project/p1", Reply(json=project_json()))
    client = make_client()
    async with client:
        await client.projects.get("p1")

    assert client.closed
    with pytest.raises(ConfigurationError, match="client is closed"):
        await client.projects.get("p1")
    with pytest.raises(ConfigurationError, match="client is closed"):
        async with client:
            pass
    await client.close()  # twice is fine


async def test_own_session_is_used_and_never_closed(
    fake: FakeService, make_client: MakeClient
) -> None:
    fake.script("GET", "/v3/project/p1", Reply(json=project_json()))
    async with aiohttp.ClientSession(headers={"X-Caller": "mine"}) as session:
        async with make_client(session=session) as client:
            await client.projects.get("p1")
        assert not session.closed
        assert fake.seen[0].headers["X-Caller"] == "mine"
        with pytest.raises(ConfigurationError, match="client is closed"):
            await client.projects.get("p1")

    client = make_client(session=session)
    with pytest.raises(ConfigurationError, match="session given to Client is closed"):
        await client.projects.get("p1")


async def test_own_session_raise_for_status_does_not_leak_through(
    fake: FakeService, make_client: MakeClient
) -> None:
    from asyncsdk import NotFoundError

    fake.script("GET", "/v3/project/p1", Reply(status=404, json={"error": "no such project"}))
    async with aiohttp.ClientSession(raise_for_status=True) as session:
        client = make_client(session=session)
        with pytest.raises(NotFoundError, match="no such project"):
            await client.projects.get("p1")
