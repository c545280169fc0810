"""Chaos rules (from Python and over /_sandbox/), the envelope and the generation rate limit."""

from __future__ import annotations

import json
import math

import aiohttp
import pytest

from asyncsdk.sandbox import Sandbox

from .conftest import Flow, error_of


def process_body(order: dict[str, object]) -> dict[str, object]:
    assets = order["assets"]
    assert isinstance(assets, list)
    return {
        "order_id": order["order_id"],
        "tool": "tool-day-to-dusk",
        "asset_map": {"tool-day-to-dusk-input-image": assets[0]["id"]},
    }


async def test_next_two_posts_answer_503_then_pass(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    order = await flow.order()
    rule = sandbox.chaos.add(method="POST", path="/v3/process", status=503, times=2)
    statuses = []
    for _ in range(3):
        async with api.post("/v3/process", json=process_body(order)) as r:
            statuses.append(r.status)
            if r.status == 503:
                await error_of(r)
                assert "Retry-After" not in r.headers
    assert statuses == [503, 503, 201]
    assert rule.fired == 2
    assert sandbox.stats.processes_created == 1
    assert sandbox.stats.requests["POST /v3/process"] == 3


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_server_errors_with_retry_after(
    sandbox: Sandbox, api: aiohttp.ClientSession, status: int
) -> None:
    sandbox.chaos.add(method="GET", path="/v3/project", status=status, retry_after=2)
    async with api.get("/v3/project") as r:
        assert r.status == status
        assert r.headers["Retry-After"] == "2"
    async with api.get("/v3/project") as r:
        assert r.status == 200


async def test_rate_limit_kind(sandbox: Sandbox, api: aiohttp.ClientSession) -> None:
    sandbox.chaos.add(path="/v3/project", kind="rate_limit", times=1)
    sandbox.chaos.add(path="/v3/project", kind="rate_limit", retry_after=7, times=1)
    async with api.get("/v3/project") as r:
        assert r.status == 429
        assert "Retry-After" not in r.headers
        assert (await r.json()) == {"error": "rate-limit exceeded, try again later"}
    async with api.get("/v3/project") as r:
        assert r.status == 429
        assert r.headers["Retry-After"] == "7"


async def test_route_template_and_glob_patterns(
    sandbox: Sandbox, api: aiohttp.ClientSession
) -> None:
    sandbox.chaos.add(method="GET", path="/v3/process/{id}", status=502)
    sandbox.chaos.add(method="GET", path="/v3/order/*", status=504)
    async with api.get("/v3/process/abc") as r:
        assert r.status == 502
    async with api.get("/v3/order/abc") as r:
        assert r.status == 504
    async with api.get("/v3/process/abc") as r:
        assert r.status == 404


async def test_probability_zero_never_fires(sandbox: Sandbox, api: aiohttp.ClientSession) -> None:
    rule = sandbox.chaos.add(path="/v3/project", status=500, times=None, probability=0.0)
    for _ in range(5):
        async with api.get("/v3/project") as r:
            assert r.status == 200
    assert rule.fired == 0
    sandbox.chaos.clear()
    assert sandbox.chaos.rules == []


async def test_drop_before_changes_nothing(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    order = await flow.order()
    sandbox.chaos.add(method="POST", path="/v3/process", kind="drop_before")
    with pytest.raises(aiohttp.ClientConnectionError):
        async with api.post("/v3/process", json=process_body(order)) as r:
            await r.read()
    assert sandbox.stats.processes_created == 0
    assert sandbox.stats.requests["POST /v3/process"] == 1


async def test_drop_after_changes_state_without_an_answer(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    order = await flow.order()
    sandbox.chaos.add(method="POST", path="/v3/process", kind="drop_after")
    with pytest.raises(aiohttp.ClientConnectionError):
        async with api.post("/v3/process", json=process_body(order)) as r:
            await r.read()
    assert sandbox.stats.processes_created == 1
    await sandbox.wait_idle()
    got = await flow.get(f"/v3/order/{order['order_id']}")
    assert len(got["processes"]) == 1


async def test_truncated_json(sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow) -> None:
    project = await flow.project()
    sandbox.chaos.add(method="GET", path="/v3/project/{id}", kind="truncated_json")
    async with api.get(f"/v3/project/{project['id']}") as r:
        assert r.status == 200
        text = await r.text()
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert text
    assert json.dumps(project).startswith(text[:10])


async def test_html_error_page(sandbox: Sandbox, api: aiohttp.ClientSession) -> None:
    sandbox.chaos.add(path="/v3/project", kind="html")
    sandbox.chaos.add(path="/v3/project", kind="html", status=200)
    async with api.get("/v3/project") as r:
        assert r.status == 502
        assert r.content_type == "text/html"
        assert "<html>" in await r.text()
    async with api.get("/v3/project") as r:
        assert r.status == 200
        assert r.content_type == "text/html"


async def test_slow_and_slow_body_still_answer_fully(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    project = await flow.project()
    sandbox.chaos.add(path="/v3/project/{id}", kind="slow", delay=0.05)
    sandbox.chaos.add(path="/v3/project/{id}", kind="slow_body", delay=0.05)
    assert await flow.get(f"/v3/project/{project['id']}") == project
    assert await flow.get(f"/v3/project/{project['id']}") == project
    assert sandbox.stats.chaos_fired == {"slow": 1, "slow_body": 1}


async def test_slow_hits_a_client_timeout(sandbox: Sandbox, api: aiohttp.ClientSession) -> None:
    sandbox.chaos.add(path="/v3/project", kind="slow", delay=0.8)
    with pytest.raises(TimeoutError):
        async with api.get("/v3/project", timeout=aiohttp.ClientTimeout(total=0.2)) as r:
            await r.read()


async def test_chaos_over_http(sandbox: Sandbox, api: aiohttp.ClientSession) -> None:
    async with api.post(
        "/_sandbox/chaos", json={"method": "GET", "path": "/v3/project", "status": 500, "times": 1}
    ) as r:
        assert r.status == 201
    async with api.get("/_sandbox/chaos") as r:
        assert len((await r.json())["rules"]) == 1
    async with api.get("/v3/project") as r:
        assert r.status == 500
    async with api.post("/_sandbox/chaos", json={"kind": "meteor"}) as r:
        assert r.status == 400
        assert "meteor" in (await error_of(r))["error"]
    async with api.post("/_sandbox/chaos", json={"colour": "red"}) as r:
        assert r.status == 400
    async with api.delete("/_sandbox/chaos") as r:
        assert (await r.json()) == {"cleared": 1}
    async with api.get("/_sandbox/stats") as r:
        stats = await r.json()
    assert stats["requests"]["GET /v3/project"] == 1
    assert stats["chaos_fired"] == {"status": 1}


async def test_config_over_http(sandbox: Sandbox, api: aiohttp.ClientSession) -> None:
    async with api.patch(
        "/_sandbox/config", json={"enveloped": True, "fail_tools": ["tool-x"]}
    ) as r:
        assert r.status == 200
        assert (await r.json())["fail_tools"] == ["tool-x"]
    assert sandbox.config.enveloped is True
    assert sandbox.config.fail_tools == frozenset({"tool-x"})
    async with api.patch("/_sandbox/config", json={"warp_speed": 9}) as r:
        assert r.status == 400
        assert "warp_speed" in (await error_of(r))["error"]


async def test_advance_and_wait_idle_over_http(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    sandbox.config.pending_delay = math.inf
    pid = await flow.process()
    async with api.post("/_sandbox/wait-idle", params={"timeout": "0.05"}) as r:
        assert (r.status, await r.json()) == (408, {"idle": False})
    async with api.post("/_sandbox/advance") as r:
        assert r.status == 200
    async with api.post("/_sandbox/wait-idle") as r:
        assert (await r.json()) == {"idle": True}
    assert (await flow.get(f"/v3/process/{pid}"))["status"] == "done"


async def test_enveloped_shape(sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow) -> None:
    sandbox.config.enveloped = True
    async with api.post("/v3/project", json={"address": "Env Street"}) as r:
        assert r.status == 201
        body = await r.json()
    assert body["message"] == "ok"
    assert body["data"]["address"] == "Env Street"
    listing = await flow.get("/v3/project")
    assert set(listing) == {"data", "pagination", "message"}
    assert listing["data"][0]["address"] == "Env Street"
    tools = await flow.get("/api/tools")
    assert tools["message"] == "ok"
    assert len(tools["data"]) == 14
    async with api.get("/v3/project/nope") as r:  # errors keep their shape
        assert r.status == 404
        await error_of(r)


async def test_generation_rate_limit(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    sandbox.config.rate_limit = True
    sandbox.config.rate_limit_count = 3
    order = await flow.order()
    statuses = []
    for _ in range(4):
        async with api.post("/v3/process", json=process_body(order)) as r:
            statuses.append(r.status)
            if r.status == 429:
                assert (await r.json()) == {"error": "rate-limit exceeded, try again later"}
                assert "Retry-After" not in r.headers
    assert statuses == [201, 201, 201, 429]
    assert sandbox.stats.processes_created == 3
    # Other endpoints are not limited; a fresh window lets generations through again.
    async with api.get("/v3/project") as r:
        assert r.status == 200
    sandbox.config.rate_limit_window = 0.0
    async with api.post("/v3/process", json=process_body(order)) as r:
        assert r.status == 201


async def test_poll_limit(sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow) -> None:
    order = await flow.order()
    async with api.post("/v3/process", json=process_body(order)) as r:
        first = (await r.json())["process_ids"][0]
    async with api.post("/v3/process", json=process_body(order)) as r:
        second = (await r.json())["process_ids"][0]
    async with api.get(f"/v3/process/{first}") as r:  # off by default
        assert r.status == 200
    sandbox.config.poll_limit = True
    sandbox.config.poll_limit_interval = 60.0
    statuses = []
    for process_id in (first, first, second, first):
        async with api.get(f"/v3/process/{process_id}") as r:
            statuses.append(r.status)
            if r.status == 429:
                assert (await r.json()) == {"error": "rate-limit exceeded, try again later"}
                assert "Retry-After" not in r.headers
    # The limit is per process, counted from the last GET that was answered.
    assert statuses == [200, 429, 200, 429]
    sandbox.config.poll_limit_interval = 0.0
    async with api.get(f"/v3/process/{first}") as r:
        assert r.status == 200
