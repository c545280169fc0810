"""Projects (spec 4.1-4.3), authentication (spec 5) and pagination (spec 4.3, 8)."""

from __future__ import annotations

import re

import aiohttp
import pytest

from asyncsdk.sandbox import Sandbox

from .conftest import Flow, error_of


async def test_create_project_answers_201_with_spec_fields(api: aiohttp.ClientSession) -> None:
    async with api.post("/v3/project", json={"address": "12 Elm Road"}) as r:
        assert r.status == 201
        body = await r.json()
    assert body["address"] == "12 Elm Road"
    assert body["cover_src"] == ""
    assert (body["input_count"], body["result_count"], body["bookmarked_count"]) == (0, 0, 0)
    assert body["default"] is False
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", body["updated_at"])
    assert isinstance(body["id"], str)
    assert body["id"]


@pytest.mark.parametrize("payload", [{}, {"address": ""}, {"address": "   "}])
async def test_create_project_without_address_is_400(
    api: aiohttp.ClientSession, payload: dict[str, str]
) -> None:
    async with api.post("/v3/project", json=payload) as r:
        assert r.status == 400
        body = await error_of(r)
    assert "address" in body["error"]


async def test_create_project_with_invalid_json_is_400(api: aiohttp.ClientSession) -> None:
    async with api.post(
        "/v3/project", data=b"{not json", headers={"Content-Type": "application/json"}
    ) as r:
        assert r.status == 400
        await error_of(r)


@pytest.mark.parametrize("path", ["/v3/project", "/v3/process", "/v1/order"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_a_json_body_not_declared_json_is_400(
    sandbox: Sandbox, api: aiohttp.ClientSession, path: str, content_type: str | None
) -> None:
    # A JSON parser in front of the service reads no other body: code that forgets the header
    # must fail here as it would there.
    headers = {} if content_type is None else {"Content-Type": content_type}
    body = b'{"address": "12 Oak Street", "order_id": "o1", "tool": "tool-day-to-dusk"}'
    async with api.post(path, data=body, headers=headers) as r:
        assert r.status == 400
        assert "Content-Type: application/json" in (await error_of(r))["error"]
    assert sandbox.stats.processes_created == 0


@pytest.mark.parametrize("headers", [{}, {"x-api-key": "sk_wrong"}, {"x-api-key": ""}])
async def test_missing_or_invalid_key_is_401(sandbox: Sandbox, headers: dict[str, str]) -> None:
    async with aiohttp.ClientSession(base_url=sandbox.base_url, headers=headers) as s:
        for method, path in [
            ("POST", "/v3/project"),
            ("GET", "/v3/project"),
            ("GET", "/v3/order/x"),
            ("POST", "/v3/process"),
            ("GET", "/v1/cathub/tools/tool-day-to-dusk/widgets"),
        ]:
            async with s.request(method, path, json={}) as r:
                assert r.status == 401, (method, path)
                body = await error_of(r)
                assert body["key"] == "api_error_unauthorized"
                assert "sk_wrong" not in body["error"]


async def test_header_name_is_case_insensitive_on_the_wire(sandbox: Sandbox) -> None:
    async with (
        aiohttp.ClientSession(base_url=sandbox.base_url) as s,
        s.get("/v3/project", headers={"X-API-KEY": sandbox.api_key}) as r,
    ):
        assert r.status == 200


async def test_get_project_and_404(api: aiohttp.ClientSession, flow: Flow) -> None:
    project = await flow.project("7 Quay Lane")
    got = await flow.get(f"/v3/project/{project['id']}")
    assert got == project
    async with api.get("/v3/project/does-not-exist") as r:
        assert r.status == 404
        assert (await error_of(r))["key"] == "api_error_project_not_found"


async def test_projects_are_private_to_their_key(sandbox: Sandbox, flow: Flow) -> None:
    project = await flow.project()
    async with aiohttp.ClientSession(
        base_url=sandbox.base_url, headers={"x-api-key": "sk_sandbox_limited"}
    ) as other:
        async with other.get(f"/v3/project/{project['id']}") as r:
            assert r.status == 404
        async with other.get("/v3/project") as r:
            assert (await r.json())["pagination"]["total_count"] == 0


async def test_cover_and_counts_follow_orders(flow: Flow) -> None:
    project = await flow.project()
    await flow.order(project_id=project["id"])
    got = await flow.get(f"/v3/project/{project['id']}")
    assert got["input_count"] == 1
    assert got["cover_src"].startswith("http")
    resized = await flow.get(f"/v3/project/{project['id']}", width="40")
    assert "width=40" in resized["cover_src"]


async def test_pagination_shape_and_links(flow: Flow) -> None:
    for n in range(23):
        await flow.project(f"{n} Pagination Avenue")
    first = await flow.get("/v3/project")
    assert len(first["data"]) == 10
    assert first["pagination"] == {
        "page": 1,
        "limit": 10,
        "total_count": 23,
        "total_pages": 3,
        "previous_page": "",
        "next_page": "?page=2&limit=10",
    }
    middle = await flow.get("/v3/project", page="2", limit="10")
    assert middle["pagination"]["previous_page"] == "?page=1&limit=10"
    assert middle["pagination"]["next_page"] == "?page=3&limit=10"
    last = await flow.get("/v3/project", page="3")
    assert len(last["data"]) == 3
    assert last["pagination"]["next_page"] == ""
    beyond = await flow.get("/v3/project", page="9")
    assert beyond["data"] == []
    everything = await flow.get("/v3/project", limit="30")
    assert len(everything["data"]) == 23
    ids = [p["id"] for p in everything["data"]]
    assert len(set(ids)) == 23


async def test_sort_orders(flow: Flow) -> None:
    a = await flow.project("A street")
    b = await flow.project("B street")
    c = await flow.project("C street")
    desc = [p["id"] for p in (await flow.get("/v3/project"))["data"]]
    asc = [p["id"] for p in (await flow.get("/v3/project", sort="asc"))["data"]]
    assert desc == [c["id"], b["id"], a["id"]]
    assert asc == [a["id"], b["id"], c["id"]]
    await flow.order(project_id=a["id"])  # touches A
    modified = [p["id"] for p in (await flow.get("/v3/project", sort="modified"))["data"]]
    assert modified[0] == a["id"]


async def test_search_on_address(flow: Flow) -> None:
    await flow.project("10 Downing Street")
    await flow.project("221B Baker Street")
    await flow.project("Villa Rosa")
    found = await flow.get("/v3/project", s="street")
    assert {p["address"] for p in found["data"]} == {"10 Downing Street", "221B Baker Street"}
    assert found["pagination"]["total_count"] == 2
    assert (await flow.get("/v3/project", s="baker"))["data"][0]["address"] == "221B Baker Street"


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"limit": "31"}, "api_error_invalid_limit"),
        ({"limit": "0"}, "api_error_invalid_limit"),
        ({"limit": "ten"}, "api_error_invalid_limit"),
        ({"page": "0"}, "api_error_invalid_page"),
        ({"page": "-1"}, "api_error_invalid_page"),
        ({"page": "x"}, "api_error_invalid_page"),
        ({"sort": "newest"}, "api_error_invalid_sort"),
        ({"width": "0"}, "api_error_invalid_width"),
        ({"height": "tall"}, "api_error_invalid_height"),
    ],
)
async def test_bad_listing_query_is_400(
    api: aiohttp.ClientSession, params: dict[str, str], key: str
) -> None:
    async with api.get("/v3/project", params=params) as r:
        assert r.status == 400
        body = await error_of(r)
    assert body["key"] == key
    name = next(iter(params))
    assert name in body["error"]


async def test_orders_of_a_project_are_paginated(api: aiohttp.ClientSession, flow: Flow) -> None:
    project = await flow.project()
    orders = [await flow.order(project_id=project["id"]) for _ in range(3)]
    page = await flow.get(f"/v3/project/{project['id']}/order", limit="2")
    assert [o["id"] for o in page["data"]] == [orders[2]["order_id"], orders[1]["order_id"]]
    assert page["pagination"]["total_count"] == 3
    assert page["pagination"]["next_page"] == "?page=2&limit=2"
    asc = await flow.get(f"/v3/project/{project['id']}/order", sort="asc")
    assert asc["data"][0]["id"] == orders[0]["order_id"]
    assert asc["data"][0]["entry_assets"][0]["thumbnail_src"]
    async with api.get(f"/v3/project/{project['id']}/order", params={"limit": "99"}) as r:
        assert r.status == 400
    async with api.get("/v3/project/nope/order") as r:
        assert r.status == 404


async def test_unknown_route_is_a_json_404(api: aiohttp.ClientSession) -> None:
    async with api.get("/v3/nothing-here") as r:
        assert r.status == 404
        await error_of(r)
