"""Client.run: the photos uploaded as one order, a process created from it, its result awaited."""

from __future__ import annotations

from typing import Any

import pytest

from asyncsdk import Client, Upload, ValidationError

from ._fake import JPEG, FakeService, Reply, created_order_json, process_json
from .conftest import MakeClient

PATH = "/v3/process/pr1"


async def test_run_uploads_creates_and_waits(fake: FakeService, make_client: MakeClient) -> None:
    client = make_client(min_poll_interval=0.01)
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json("o7")))
    fake.script("POST", "/v3/process", Reply(status=201, json={"process_ids": ["pr1"]}))
    fake.script(
        "GET",
        PATH,
        Reply(json=process_json(status="pending")),
        Reply(json=process_json(status="failed")),
    )
    widgets: list[dict[str, Any]] = [
        {
            "slug": "widget-style-tool-virtual-staging",
            "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
        }
    ]

    process = await client.run("tool-virtual-staging", JPEG, widgets=widgets, project_id="p1")

    assert process.status == "failed"  # returned, not raised
    body = fake.requests("POST", "/v3/process")[0].json()
    assert body["order_id"] == "o7"
    assert body["asset_map"] == {"tool-virtual-staging-input-image": "a0"}
    assert body["widgets"] == widgets


async def test_run_maps_several_images_by_index(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json("o1", 2)))
    fake.script("POST", "/v3/process", Reply(status=201, json={"process_ids": ["pr1"]}))
    fake.script("GET", PATH, Reply(json=process_json(status="done")))

    await client.run(
        "tool-x",
        JPEG,
        Upload(JPEG, role="secondary_angle"),
        asset_map={"tool-x-input-image-before": 0, "tool-x-input-image-after": 1},
    )

    body = fake.requests("POST", "/v3/process")[0].json()
    assert body["asset_map"] == {
        "tool-x-input-image-before": "a0",
        "tool-x-input-image-after": "a1",
    }


async def test_run_checks_its_arguments_before_uploading(fake: FakeService, client: Client) -> None:
    with pytest.raises(ValidationError, match="asset_map"):
        await client.run("tool-x", JPEG, JPEG)
    with pytest.raises(ValidationError, match="not an index"):
        await client.run("tool-x", JPEG, asset_map={"tool-x-input-image": 3})
    with pytest.raises(ValidationError, match="item_slugs"):
        await client.run("tool-x", JPEG, widgets=[{"slug": "w", "item_slugs": "i"}])
    assert fake.seen == []
