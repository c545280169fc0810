"""``client.run_mask_removal``: the mask flow in one call, end to end against the sandbox."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from PIL import Image

from asyncsdk import (
    REMOVE_BLUE,
    AssetRole,
    Client,
    InputError,
    MaskError,
    NotFoundError,
    PermissionDeniedError,
    ProcessStatus,
    ToolSlug,
    Upload,
    ValidationError,
)
from asyncsdk.sandbox import LIMITED_API_KEY, Sandbox

SIZE = (64, 48)
GREY = (128, 128, 128)
RED = (220, 30, 30)
ITEM = (20, 15, 40, 35)  # the red "item" on the photo
AROUND_ITEM = (18, 13, 42, 37)  # the area the mask removes
CENTRE = (30, 25)


def encode(image: Image.Image, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt)
    return buffer.getvalue()


def photo() -> bytes:
    image = Image.new("RGB", SIZE, GREY)
    image.paste(RED, ITEM)
    return encode(image, "JPEG")


def mask_image(colour: tuple[int, int, int] = REMOVE_BLUE, size: tuple[int, int] = SIZE) -> bytes:
    image = Image.new("RGB", size, (0, 0, 0))
    image.paste(colour, AROUND_ITEM)
    return encode(image)


def near(pixel: tuple[int, ...], colour: tuple[int, int, int], tolerance: int = 40) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel[:3], colour, strict=True))


@pytest.fixture
async def sdk(sandbox: Sandbox) -> AsyncIterator[Client]:
    async with sandbox.client(strict=True) as client:
        yield client


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as http:
        yield http


async def download(session: aiohttp.ClientSession, url: str) -> Image.Image:
    async with session.get(url) as response:
        assert response.status == 200
        data = await response.read()
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


async def appended_mask(
    sdk: Client, session: aiohttp.ClientSession, project_id: str
) -> Image.Image:
    """The mask image of the project's one order, as the sandbox stored it."""
    [order] = (await sdk.projects.orders(project_id)).data
    roles = sorted(asset.asset_role for asset in order.entry_assets)
    assert roles == ["mask", "primary_angle"]
    [mask] = [asset for asset in order.entry_assets if asset.asset_role == "mask"]
    return await download(session, mask.src)


async def test_mask_file_removes_the_item(
    sandbox: Sandbox, sdk: Client, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    photo_path = tmp_path / "room.jpg"
    photo_path.write_bytes(photo())
    mask_path = tmp_path / "mask.png"
    mask_path.write_bytes(mask_image())
    project = await sdk.projects.create("1 Mask Lane")

    process = await sdk.run_mask_removal(
        photo_path, mask=mask_path, project_id=project.id, timeout=30
    )

    assert process.status == ProcessStatus.DONE
    assert process.tool == ToolSlug.ITEM_REMOVAL_MASK
    result = await download(session, process.final_assets[0].src)
    assert near(result.getpixel(CENTRE), GREY)  # the red item is gone
    assert not near(result.getpixel(CENTRE), RED)
    assert sandbox.stats.requests["POST /v3/order"] == 1
    assert sandbox.stats.requests["POST /v3/order/{id}/append"] == 1
    assert sandbox.stats.processes_created == 1
    stored = await appended_mask(sdk, session, project.id)
    assert near(stored.getpixel(CENTRE), REMOVE_BLUE)


async def test_mask_drawn_from_rectangles(
    sandbox: Sandbox, sdk: Client, session: aiohttp.ClientSession
) -> None:
    project = await sdk.projects.create("2 Mask Lane")

    process = await sdk.run_mask_removal(photo(), rectangles=[AROUND_ITEM], project_id=project.id)

    assert process.status == ProcessStatus.DONE
    stored = await appended_mask(sdk, session, project.id)
    assert stored.size == SIZE
    assert near(stored.getpixel(CENTRE), REMOVE_BLUE)
    assert near(stored.getpixel((2, 2)), (0, 0, 0))


async def test_mask_as_a_pil_image(sdk: Client) -> None:
    with Image.open(io.BytesIO(mask_image())) as mask:
        process = await sdk.run_mask_removal(photo(), mask=mask)

    assert process.status == ProcessStatus.DONE


async def test_white_mask_is_refused_then_converted(
    sandbox: Sandbox, sdk: Client, session: aiohttp.ClientSession
) -> None:
    white = mask_image((255, 255, 255))

    with pytest.raises(MaskError, match="convert_white_mask"):
        await sdk.run_mask_removal(photo(), mask=white)
    assert sum(sandbox.stats.requests.values()) == 0  # not even the catalogue was asked

    project = await sdk.projects.create("3 Mask Lane")
    process = await sdk.run_mask_removal(
        photo(), mask=white, convert_white=True, project_id=project.id
    )

    assert process.status == ProcessStatus.DONE
    stored = await appended_mask(sdk, session, project.id)
    assert near(stored.getpixel(CENTRE), REMOVE_BLUE)


async def test_mask_of_the_wrong_size_is_refused(sandbox: Sandbox, sdk: Client) -> None:
    with pytest.raises(MaskError, match="size"):
        await sdk.run_mask_removal(photo(), mask=mask_image(size=(32, 24)))

    assert sandbox.stats.orders_created == 0


async def test_after_auto_removal_links_the_group(sandbox: Sandbox, sdk: Client) -> None:
    auto = await sdk.run(ToolSlug.ITEM_REMOVAL, photo())
    assert auto.process_group_id

    by_process = await sdk.run_mask_removal(photo(), mask=mask_image(), after_auto_removal=auto.id)
    by_group = await sdk.run_mask_removal(
        photo(), mask=mask_image(), after_auto_removal=auto.process_group_id
    )
    by_object = await sdk.run_mask_removal(photo(), mask=mask_image(), after_auto_removal=auto)
    alone = await sdk.run_mask_removal(photo(), mask=mask_image())

    for process in (by_process, by_group, by_object):
        assert process.status == ProcessStatus.DONE
        # What the sandbox recorded, read back from the service.
        fetched = await sdk.processes.get(process.id)
        assert fetched.process_group_id == auto.process_group_id
    assert alone.process_group_id
    assert alone.process_group_id != auto.process_group_id


async def test_after_auto_removal_from_created_processes(sdk: Client) -> None:
    order = await sdk.orders.create(photo())
    created = await sdk.processes.create(order.order_id, ToolSlug.ITEM_REMOVAL)
    assert created.process_group_id

    process = await sdk.run_mask_removal(photo(), mask=mask_image(), after_auto_removal=created)

    assert process.process_group_id == created.process_group_id


async def test_after_a_process_of_another_tool_is_refused(sandbox: Sandbox, sdk: Client) -> None:
    dusk = await sdk.run(ToolSlug.DAY_TO_DUSK, photo())

    with pytest.raises(ValidationError, match="tool-item-removal"):
        await sdk.run_mask_removal(photo(), mask=mask_image(), after_auto_removal=dusk.id)

    assert sandbox.stats.orders_created == 1  # only the dusk run's


async def test_unknown_group_is_the_services_call(sandbox: Sandbox, sdk: Client) -> None:
    with pytest.raises(NotFoundError):
        await sdk.run_mask_removal(photo(), mask=mask_image(), after_auto_removal="f" * 24)

    assert sandbox.stats.requests["POST /v3/process"] == 1
    assert sandbox.stats.processes_created == 0


async def test_a_plan_without_the_tool_stops_before_uploading(sandbox: Sandbox) -> None:
    async with Client(api_key=LIMITED_API_KEY, base_url=sandbox.base_url) as limited:
        with pytest.raises(PermissionDeniedError):
            await limited.run_mask_removal(photo(), mask=mask_image())

    assert sandbox.stats.orders_created == 0
    assert sandbox.stats.requests["POST /v3/process"] == 0


async def test_bad_arguments_fail_before_anything_is_sent(sandbox: Sandbox, sdk: Client) -> None:
    async def stream() -> AsyncIterator[bytes]:
        yield photo()

    with pytest.raises(ValidationError, match="not both"):
        await sdk.run_mask_removal(photo(), mask=mask_image(), rectangles=[AROUND_ITEM])
    with pytest.raises(ValidationError, match="no mask given"):
        await sdk.run_mask_removal(photo())
    with pytest.raises(ValidationError, match="photo's size"):
        await sdk.run_mask_removal(stream(), rectangles=[AROUND_ITEM])
    with pytest.raises(ValidationError, match="not a PNG"):
        await sdk.run_mask_removal(photo(), mask=b"GIF89a not a mask", check=False)
    with pytest.raises(MaskError, match="outside"):
        await sdk.run_mask_removal(photo(), rectangles=[(100, 100, 120, 120)])
    with pytest.raises(ValidationError, match=r"use client\.run_mask_removal"):
        await sdk.run(ToolSlug.ITEM_REMOVAL_MASK, photo())

    assert sum(sandbox.stats.requests.values()) == 0


async def test_run_checks_slot_roles_before_uploading(sandbox: Sandbox, sdk: Client) -> None:
    """``run()`` checks the roles of its images against the slots before uploading them."""
    with pytest.raises(InputError, match="not a mask"):
        await sdk.run(
            ToolSlug.ITEM_REMOVAL_MASK,
            photo(),
            Upload(photo(), role=AssetRole.SECONDARY_ANGLE),
            asset_map={"image": 0, "mask": 1},
        )
    assert sandbox.stats.orders_created == 0

    process = await sdk.run(
        ToolSlug.ITEM_REMOVAL_MASK,
        photo(),
        Upload(mask_image(), role=AssetRole.MASK),
        asset_map={"image": 0, "mask": 1},
    )
    assert process.status == ProcessStatus.DONE
