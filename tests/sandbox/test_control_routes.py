"""The ``/_sandbox/`` control routes answer local callers only, never a web page of another site.

A page open in the developer's browser can send a "simple" cross-site request (a POST with a
``text/plain`` body) to ``http://127.0.0.1:<port>``, or point its own name at 127.0.0.1 and read
the answers (DNS rebinding).  These tests send what such a page would send.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from asyncsdk.sandbox import Sandbox

from .conftest import error_of

EVIL = "http://evil.example"


async def _registered(api: aiohttp.ClientSession) -> list[str]:
    async with api.post("/_sandbox/webhooks", json={"url": "http://127.0.0.1:9/hook"}) as r:
        assert r.status == 201
        return list((await r.json())["webhook_urls"])


async def test_a_text_plain_body_registers_no_webhook(api: aiohttp.ClientSession) -> None:
    body = '{"url": "http://evil.example/hook"}'
    async with api.post(
        "/_sandbox/webhooks", data=body, headers={"Content-Type": "text/plain"}
    ) as r:
        assert r.status == 415
        error = await error_of(r)
        assert "application/json" in error["error"]
    assert "http://evil.example/hook" not in await _registered(api)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PATCH", "/_sandbox/config", '{"failure_rate": 1}'),
        ("POST", "/_sandbox/chaos", '{"status": 500}'),
        ("POST", "/_sandbox/webhooks", '{"url": "http://evil.example/hook"}'),
    ],
)
async def test_bodies_must_be_declared_json(
    sandbox: Sandbox, api: aiohttp.ClientSession, method: str, path: str, body: str
) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {} if content_type is None else {"Content-Type": content_type}
        async with api.request(method, path, data=body.encode(), headers=headers) as r:
            assert r.status == 415, (content_type, await r.text())
    assert sandbox.config.failure_rate == 0
    assert sandbox.chaos.rules == []


async def test_a_page_of_another_site_is_refused(
    sandbox: Sandbox, api: aiohttp.ClientSession
) -> None:
    hostile = {"Origin": EVIL}
    async with api.post("/_sandbox/webhooks", json={"url": f"{EVIL}/hook"}, headers=hostile) as r:
        assert r.status == 403
        assert "Origin" in (await error_of(r))["error"]
    for method, path in [
        ("GET", "/_sandbox/config"),
        ("POST", "/_sandbox/advance"),
        ("DELETE", "/_sandbox/chaos"),
        ("POST", "/_sandbox/wait-idle"),
    ]:
        async with api.request(method, path, headers=hostile) as r:
            assert r.status == 403, (method, path)
            assert sandbox.api_key not in await r.text()
    async with api.get("/_sandbox/config", headers={"Origin": "null"}) as r:
        assert r.status == 403
    assert f"{EVIL}/hook" not in await _registered(api)
    # A page served from this machine (a local front end) may steer it.
    for local in ("http://localhost:3000", "http://127.0.0.1:5173", "http://[::1]:8000"):
        async with api.get("/_sandbox/health", headers={"Origin": local}) as r:
            assert r.status == 200, local


async def test_a_rebound_host_name_cannot_read_the_keys(
    sandbox: Sandbox, api: aiohttp.ClientSession
) -> None:
    port = sandbox.base_url.rsplit(":", 1)[1]
    async with api.get("/_sandbox/config", headers={"Host": f"evil.example:{port}"}) as r:
        assert r.status == 403
        text = await r.text()
    assert sandbox.api_key not in text
    for local in (f"localhost:{port}", f"127.0.0.1:{port}", f"app.localhost:{port}"):
        async with api.get("/_sandbox/config", headers={"Host": local}) as r:
            assert r.status == 200, local
            keys: dict[str, Any] = (await r.json())["api_keys"]
            assert sandbox.api_key in keys


async def test_control_hosts_admit_a_named_host(
    sandbox: Sandbox, api: aiohttp.ClientSession
) -> None:
    named = {"Host": "sandbox.internal"}
    async with api.get("/_sandbox/health", headers=named) as r:
        assert r.status == 403
        assert "control_hosts" in (await error_of(r))["error"]
    async with api.patch("/_sandbox/config", json={"control_hosts": ["sandbox.internal"]}) as r:
        assert r.status == 200
    async with api.get("/_sandbox/health", headers=named) as r:
        assert r.status == 200


async def test_the_service_routes_are_not_restricted(api: aiohttp.ClientSession) -> None:
    async with api.get("/api/tools", headers={"Origin": EVIL}) as r:
        assert r.status == 200
