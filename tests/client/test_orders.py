"""Orders: the files and roles sent, masks appended, and the order read back."""

from __future__ import annotations

import io
from typing import Any

import pytest
from PIL import Image, ImageDraw

from asyncsdk import AssetRole, Client, CreatedOrder, MaskError, Order, Upload, ValidationError

from ._fake import JPEG, PNG, FakeService, Reply, created_order_json
from .conftest import MakeClient


async def test_ids_are_percent_encoded_in_paths(fake: FakeService, client: Client) -> None:
    fake.script("GET", "/v3/order/a/b?", Reply(json={"id": "a/b?"}))

    order = await client.orders.get("a/b?")

    assert order.id == "a/b?"
    assert fake.seen[0].raw_path == "/v3/order/a%2Fb%3F"


async def test_create_order_sends_files_and_roles_in_order(
    fake: FakeService, client: Client
) -> None:
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json("o1", 2)))

    created = await client.orders.create(
        JPEG, Upload(PNG, role=AssetRole.SECONDARY_ANGLE, filename="side.png"), project_id="p1"
    )

    assert isinstance(created, CreatedOrder)
    assert [a.id for a in created.assets] == ["a0", "a1"]
    [seen] = fake.seen
    assert seen.fields("project_id") == ["p1"]
    assert seen.fields("asset_role") == ["primary_angle", "secondary_angle"]
    files = seen.files()
    assert [(f.filename, f.content_type, f.data) for f in files] == [
        ("image-1.jpg", "image/jpeg", JPEG),
        ("side.png", "image/png", PNG),
    ]


async def test_role_field_switches_to_asset_roles(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(role_field="asset_roles")
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json()))

    await client.orders.create(JPEG)

    assert fake.seen[0].fields("asset_roles") == ["primary_angle"]
    assert fake.seen[0].fields("asset_role") == []


@pytest.mark.parametrize(
    "images",
    [
        (JPEG, PNG),
        (Upload(JPEG, role="secondary_angle"), Upload(PNG, role="secondary_angle")),
        (),
    ],
)
async def test_wrong_roles_fail_before_sending(
    fake: FakeService, client: Client, images: tuple[Any, ...]
) -> None:
    with pytest.raises(ValidationError, match=r"at most one|at least one"):
        await client.orders.create(*images)
    assert fake.seen == []


def mask_png() -> bytes:
    """A mask that passes the mask checks: a blue rectangle (remove) on black (keep)."""
    image = Image.new("RGB", (40, 30), (0, 0, 0))
    ImageDraw.Draw(image).rectangle((5, 5, 20, 20), fill=(0x78, 0x78, 0xCD))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


async def test_append_mask_sends_mask_role_and_type(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/order/o1/append", Reply(status=201, json=created_order_json("o1")))
    mask = mask_png()

    created = await client.orders.append_mask("o1", mask, project_id="p1")

    assert created.order_id == "o1"
    [seen] = fake.seen
    assert seen.fields("asset_role") == ["mask"]
    assert seen.fields("asset_type") == ["mask"]
    assert seen.fields("project_id") == ["p1"]
    assert [f.data for f in seen.files()] == [mask]


async def test_append_mask_checks_the_mask_before_sending(
    fake: FakeService, client: Client
) -> None:
    white = Image.new("RGB", (40, 30), (255, 255, 255))
    buffer = io.BytesIO()
    white.save(buffer, "PNG")

    with pytest.raises(MaskError, match="white-on-black"):
        await client.orders.append_mask("o1", buffer.getvalue())
    with pytest.raises(MaskError, match="not a readable image"):
        await client.orders.append_mask("o1", PNG)
    with pytest.raises(MaskError, match="white-on-black"):
        await client.orders.append_mask("o1", io.BytesIO(buffer.getvalue()))  # a file, read whole
    assert fake.seen == []  # nothing was uploaded


async def test_append_mask_accepts_an_order_or_no_body(fake: FakeService, client: Client) -> None:
    order = {"id": "o1", "entry_assets": [{"id": "m1", "asset_role": "mask"}]}
    fake.script("POST", "/v3/order/o1/append", Reply(json=order), Reply(status=204))

    assert (await client.orders.append_mask("o1", PNG, check=False)).assets[0].id == "m1"
    assert (await client.orders.append_mask("o1", PNG, check=False)) == CreatedOrder(order_id="o1")


async def test_get_order(fake: FakeService, client: Client) -> None:
    fake.script(
        "GET",
        "/v3/order/o1",
        Reply(
            json={
                "id": "o1",
                "project_id": "p1",
                "entry_assets": [
                    {
                        "id": "a1",
                        "asset_type": "image",
                        "asset_role": "primary_angle",
                        "src": "https://cdn.example/a1.jpg",
                        "thumbnail_src": "https://cdn.example/a1_t.jpg",
                    }
                ],
                "status": "active",
                "created_at": "2025-01-31T10:00:00Z",
                "updated_at": "2025-01-31T10:00:00Z",
                "processes": [
                    {"id": "pr1", "tool": "tool-day-to-dusk", "status": "done", "final_assets": []}
                ],
            }
        ),
    )

    order = await client.orders.get("o1", width=100)

    assert isinstance(order, Order)
    assert order.status == "active"
    assert order.processes[0].tool == "tool-day-to-dusk"
    assert fake.seen[0].query == {"width": "100"}
