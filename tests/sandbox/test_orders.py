"""Orders (spec 4.5-4.7): uploads, roles, formats, size cap, append of a mask."""

from __future__ import annotations

import tempfile
from pathlib import Path

import aiohttp
import pytest

from asyncsdk.sandbox import Sandbox

from .conftest import Flow, error_of, gradient_jpeg, image_bytes, order_form


async def test_create_order_answers_order_id_and_assets(
    api: aiohttp.ClientSession, flow: Flow
) -> None:
    project = await flow.project()
    form = order_form(
        [gradient_jpeg(), gradient_jpeg()],
        ["primary_angle", "secondary_angle"],
        project_id=project["id"],
    )
    async with api.post("/v3/order", data=form) as r:
        assert r.status == 201
        body = await r.json()
    assert set(body) == {"order_id", "assets"}
    assert [a["asset_role"] for a in body["assets"]] == ["primary_angle", "secondary_angle"]
    for asset in body["assets"]:
        assert set(asset) == {"id", "src", "asset_type", "asset_role"}
        assert asset["asset_type"] == "image"
    order = await flow.get(f"/v3/order/{body['order_id']}")
    assert order["project_id"] == project["id"]
    assert order["status"] == "idle"
    assert order["processes"] == []
    assert [a["id"] for a in order["entry_assets"]] == [a["id"] for a in body["assets"]]
    assert all(a["thumbnail_src"] for a in order["entry_assets"])
    assert order["created_at"].endswith("Z")


async def test_asset_roles_spelling_is_accepted_too(api: aiohttp.ClientSession) -> None:
    form = order_form(
        [gradient_jpeg(), gradient_jpeg()],
        ["secondary_angle", "primary_angle"],
        role_field="asset_roles",
    )
    async with api.post("/v3/order", data=form) as r:
        assert r.status == 201
        roles = [a["asset_role"] for a in (await r.json())["assets"]]
    assert roles == ["secondary_angle", "primary_angle"]


async def test_role_defaults_to_primary_angle(api: aiohttp.ClientSession) -> None:
    async with api.post("/v3/order", data=order_form([gradient_jpeg()])) as r:
        assert r.status == 201
        assert (await r.json())["assets"][0]["asset_role"] == "primary_angle"


async def test_order_without_project_lands_in_the_default_project(flow: Flow) -> None:
    order = await flow.order()
    got = await flow.get(f"/v3/order/{order['order_id']}")
    project = await flow.get(f"/v3/project/{got['project_id']}")
    assert project["default"] is True


@pytest.mark.parametrize(
    ("n_files", "roles", "key"),
    [
        (2, ["primary_angle", "primary_angle"], "api_error_duplicate_asset_role"),
        (2, [], "api_error_duplicate_asset_role"),  # both default to primary_angle
        (
            3,
            ["primary_angle", "secondary_angle", "secondary_angle"],
            "api_error_duplicate_asset_role",
        ),
        (1, ["front_view"], "api_error_invalid_asset_role"),
        (1, ["primary_angle", "secondary_angle"], "api_error_invalid_asset_role"),
        (1, ["secondary_angle"], "api_error_missing_primary_angle"),
    ],
)
async def test_wrong_roles_are_400(
    sandbox: Sandbox, api: aiohttp.ClientSession, n_files: int, roles: list[str], key: str
) -> None:
    async with api.post("/v3/order", data=order_form([gradient_jpeg()] * n_files, roles)) as r:
        assert r.status == 400
        assert (await error_of(r))["key"] == key
    assert sandbox.stats.orders_created == 0


async def test_both_role_spellings_at_once_are_400(api: aiohttp.ClientSession) -> None:
    form = order_form([gradient_jpeg()], ["primary_angle"])
    form.add_field("asset_roles", "primary_angle")
    async with api.post("/v3/order", data=form) as r:
        assert r.status == 400
        assert "not both" in (await error_of(r))["error"]


async def test_order_without_file_is_400(api: aiohttp.ClientSession) -> None:
    form = aiohttp.FormData(default_to_multipart=True)
    form.add_field("project_id", "x")
    form.add_field("asset_role", "primary_angle")
    async with api.post("/v3/order", data=form) as r:
        assert r.status == 400
        assert "asset_file" in (await error_of(r))["error"]


async def test_order_must_be_multipart(api: aiohttp.ClientSession) -> None:
    async with api.post("/v3/order", json={"asset_file": "x"}) as r:
        assert r.status == 400
        assert "multipart/form-data" in (await error_of(r))["error"]


async def test_unknown_project_is_404(api: aiohttp.ClientSession) -> None:
    async with api.post("/v3/order", data=order_form([gradient_jpeg()], project_id="nope")) as r:
        assert r.status == 404
        assert (await error_of(r))["key"] == "api_error_project_not_found"


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "JPEG"])
async def test_accepted_formats(api: aiohttp.ClientSession, fmt: str) -> None:
    async with api.post("/v3/order", data=order_form([image_bytes(fmt)])) as r:
        assert r.status == 201, await r.text()


@pytest.mark.parametrize(
    "data", [b"GIF89a" + b"\0" * 64, b"%PDF-1.4 hello", b"\xff\xd8\xff broken"]
)
async def test_other_formats_are_400(api: aiohttp.ClientSession, data: bytes) -> None:
    async with api.post("/v3/order", data=order_form([data])) as r:
        assert r.status == 400
        assert (await error_of(r))["key"] == "api_error_invalid_file_format"


async def test_empty_file_is_400(api: aiohttp.ClientSession) -> None:
    async with api.post("/v3/order", data=order_form([b""])) as r:
        assert r.status == 400


async def test_upload_over_the_size_cap_is_413_naming_the_limit(
    sandbox: Sandbox, api: aiohttp.ClientSession
) -> None:
    sandbox.config.max_upload_bytes = 2000
    big = image_bytes("PNG", size=(300, 300)) + b"\0" * 5000
    async with api.post("/v3/order", data=order_form([big])) as r:
        assert r.status == 413
        body = await error_of(r)
    assert body["key"] == "api_error_file_too_large"
    assert "2000 bytes" in body["error"]
    assert sandbox.stats.orders_created == 0
    sandbox.config.max_upload_bytes = 50 * 1024 * 1024
    async with api.post("/v3/order", data=order_form([big])) as r:
        assert r.status == 201


async def test_too_many_files_is_400(sandbox: Sandbox, api: aiohttp.ClientSession) -> None:
    sandbox.config.max_files_per_order = 2
    form = order_form([gradient_jpeg()] * 3, ["primary_angle", "secondary_angle", "mask"])
    async with api.post("/v3/order", data=form) as r:
        assert r.status == 400
        assert (await error_of(r))["key"] == "api_error_too_many_files"


async def test_get_unknown_order_is_404(api: aiohttp.ClientSession) -> None:
    async with api.get("/v3/order/nope") as r:
        assert r.status == 404
        assert (await error_of(r))["key"] == "api_error_order_not_found"


async def test_order_get_resizes_urls(flow: Flow) -> None:
    order = await flow.order()
    got = await flow.get(f"/v3/order/{order['order_id']}", width="50", height="40")
    assert "width=50" in got["entry_assets"][0]["src"]
    assert "height=40" in got["entry_assets"][0]["src"]


async def test_append_mask(api: aiohttp.ClientSession, flow: Flow) -> None:
    order = await flow.order()
    appended = await flow.append_mask(order["order_id"], image_bytes("PNG", colour=(0, 0, 0)))
    assert appended["order_id"] == order["order_id"]
    assert appended["assets"][0]["asset_role"] == "mask"
    assert appended["assets"][0]["asset_type"] == "mask"
    got = await flow.get(f"/v3/order/{order['order_id']}")
    assert [a["asset_role"] for a in got["entry_assets"]] == ["primary_angle", "mask"]


async def test_append_rules(api: aiohttp.ClientSession, flow: Flow) -> None:
    order = await flow.order()
    oid = order["order_id"]

    def form(
        role: str, asset_type: str | None = None, project_id: str | None = None
    ) -> aiohttp.FormData:
        f = aiohttp.FormData()
        if project_id:
            f.add_field("project_id", project_id)
        f.add_field("asset_file", image_bytes("PNG"), filename="m.png", content_type="image/png")
        f.add_field("asset_role", role)
        if asset_type:
            f.add_field("asset_type", asset_type)
        return f

    async with api.post("/v3/order/nope/append", data=form("mask")) as r:
        assert r.status == 404
    async with api.post(f"/v3/order/{oid}/append", data=form("primary_angle")) as r:
        assert r.status == 400
        assert (await error_of(r))["key"] == "api_error_duplicate_asset_role"
    async with api.post(f"/v3/order/{oid}/append", data=form("outline")) as r:
        assert r.status == 400
    async with api.post(f"/v3/order/{oid}/append", data=form("mask", "drawing")) as r:
        assert r.status == 400
    other = await flow.project()
    async with api.post(f"/v3/order/{oid}/append", data=form("mask", project_id=other["id"])) as r:
        assert r.status == 422
    async with api.post(f"/v3/order/{oid}/append", data=form("secondary_angle")) as r:
        assert r.status == 201
    got = await flow.get(f"/v3/order/{oid}")
    assert [a["asset_role"] for a in got["entry_assets"]] == ["primary_angle", "secondary_angle"]


def _folders_under(root: Path) -> list[Path]:
    return [path for path in root.iterdir() if path.is_dir()]


def _files_under(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


async def test_rejected_uploads_leave_no_files_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sandbox keeps its files in a temporary directory of its own: here, one under tmp_path.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    async with (
        Sandbox() as sandbox,
        aiohttp.ClientSession(
            base_url=sandbox.base_url, headers={"x-api-key": sandbox.api_key}
        ) as api,
    ):
        form = order_form([gradient_jpeg()] * 2, ["mask", "mask"])
        async with api.post("/v3/order", data=form) as r:
            assert r.status == 400
        assert len(_folders_under(tmp_path)) == 1  # the sandbox's own folder
        assert _files_under(tmp_path) == []
