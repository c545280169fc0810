"""A refused key and a refused connection say what to change: the key's origin and its first
characters (never all of it), the address nothing listens on, and for this machine the sandbox."""

from __future__ import annotations

import pytest

import asyncsdk
from asyncsdk.sandbox import Sandbox

WRONG_KEY = "sk_wrong_0123456789abcdef"


async def test_a_refused_key_passed_as_an_argument_names_api_key_and_its_start(
    sandbox: Sandbox,
) -> None:
    async with asyncsdk.Client(api_key=WRONG_KEY, base_url=sandbox.base_url) as client:
        with pytest.raises(asyncsdk.AuthenticationError) as info:
            await client.projects.create("12 Oak Street")
    message = str(info.value)
    assert message.startswith("401 [api_error_unauthorized]: invalid API key")  # the service's
    assert message.endswith(
        "; the API key 'sk_wro...' (from api_key=) was refused: give the key shown in the "
        "dashboard's API section as api_key= or in ASYNCSDK_API_KEY"
    )
    assert info.value.message.startswith("invalid API key")  # the service's words, unchanged
    assert WRONG_KEY not in message
    assert WRONG_KEY[:7] not in message  # six characters of this key, no more


async def test_a_refused_key_from_the_environment_names_the_variable(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCSDK_API_KEY", "sk_env_but_wrong")
    async with asyncsdk.Client(base_url=sandbox.base_url) as client:
        with pytest.raises(asyncsdk.AuthenticationError) as info:
            await client.projects.create("12 Oak Street")
    assert "the API key 'sk_en...' (from ASYNCSDK_API_KEY) was refused" in str(info.value)
    assert "sk_env_but_wrong" not in repr(info.value) + str(info.value)
    assert sandbox.stats.requests["POST /v3/project"] == 1  # refused once, not retried


async def test_a_short_key_shows_a_third_of_itself_at_most(sandbox: Sandbox) -> None:
    async with asyncsdk.Client(api_key="abcdefgh", base_url=sandbox.base_url) as client:
        with pytest.raises(asyncsdk.AuthenticationError, match=r"the API key 'ab\.\.\.'"):
            await client.projects.create("12 Oak Street")


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_refused_local_connection_suggests_the_sandbox(host: str, free_port: int) -> None:
    client = asyncsdk.Client(api_key="sk_x", base_url=f"http://{host}:{free_port}", max_retries=0)
    async with client:
        with pytest.raises(asyncsdk.APIConnectionError) as info:
            await client.tools.list()
    message = str(info.value)
    assert (
        f"GET http://{host}:{free_port}/api/tools: could not connect to {host}:{free_port}"
        in message
    )
    assert "nothing listens there" in message
    assert f"asyncsdk sandbox --port {free_port}" in message
    assert "ssl:default" not in message  # aiohttp's words, wrong for an http:// URL
    assert info.value.request_sent is False


async def test_a_refused_remote_connection_points_at_the_address(free_port: int) -> None:
    # 127.0.0.2 is this machine too, but not a name the sandbox is served on by default.
    client = asyncsdk.Client(
        api_key="sk_x", base_url=f"http://127.0.0.2:{free_port}", max_retries=0
    )
    async with client:
        with pytest.raises(asyncsdk.APIConnectionError) as info:
            await client.tools.list()
    message = str(info.value)
    assert f"could not connect to 127.0.0.2:{free_port}" in message
    assert "check the address (base_url / ASYNCSDK_BASE_URL)" in message
    assert "asyncsdk sandbox" not in message
    assert "ssl:default" not in message


async def test_a_host_that_does_not_resolve_says_so_without_ssl_default() -> None:
    client = asyncsdk.Client(api_key="sk_x", base_url="http://no-such-host.invalid", max_retries=0)
    async with client:
        with pytest.raises(asyncsdk.APIConnectionError) as info:
            await client.tools.list()
    assert "the host name 'no-such-host.invalid' did not resolve" in str(info.value)
    assert "ssl:default" not in str(info.value)
