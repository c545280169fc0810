"""Result images: real files, differing from their input; resizing, thumbnails, mask removal."""

from __future__ import annotations

import io

import aiohttp
from PIL import Image, ImageChops, ImageDraw, ImageStat

from asyncsdk.sandbox import Sandbox

from .conftest import Flow, gradient_jpeg


async def fetch_image(api: aiohttp.ClientSession, url: str) -> Image.Image:
    async with api.get(url) as r:
        assert r.status == 200
        data = await r.read()
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


async def test_output_differs_from_input_and_resizes(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    order = await flow.order([gradient_jpeg((200, 150))])
    pid = await flow.process("tool-day-to-dusk", order)
    await sandbox.wait_idle()
    process = await flow.get(f"/v3/process/{pid}")
    source = await fetch_image(api, order["assets"][0]["src"])
    result = await fetch_image(api, process["final_assets"][0]["src"])
    assert result.size == source.size == (200, 150)
    diff = ImageChops.difference(source.convert("RGB"), result.convert("RGB"))
    assert max(hi for _, hi in diff.getextrema()) > 60
    # dusk darkens
    assert ImageStat.Stat(result.convert("L")).mean[0] < ImageStat.Stat(source.convert("L")).mean[0]

    sized = await flow.get(f"/v3/process/{pid}", width="80")
    small = await fetch_image(api, sized["final_assets"][0]["src"])
    assert small.size == (80, 60)
    both = await flow.get(f"/v3/process/{pid}", width="50", height="50")
    assert (await fetch_image(api, both["final_assets"][0]["src"])).size == (50, 50)
    thumb = await fetch_image(api, process["final_assets"][0]["thumbnail_src"])
    assert max(thumb.size) <= 256


async def test_thumbnails_of_large_inputs_are_small(api: aiohttp.ClientSession, flow: Flow) -> None:
    order = await flow.order([gradient_jpeg((800, 400))])
    got = await flow.get(f"/v3/order/{order['order_id']}")
    thumb = await fetch_image(api, got["entry_assets"][0]["thumbnail_src"])
    assert thumb.size == (256, 128)


async def test_every_tool_changes_the_image(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    order = await flow.order([gradient_jpeg((120, 90))])
    source = (await fetch_image(api, order["assets"][0]["src"])).convert("RGB")
    runs = {
        "tool-item-removal": [],
        "tool-wall-change": [("space", "bedroom"), ("material", "wallpaper")],
        "tool-floor-change": [("space", "kitchen"), ("material", "tile")],
        "tool-ceiling-change": [("space", "kitchen"), ("material", "coffered")],
        "tool-virtual-staging": [("space", "bedroom"), ("style", "modern")],
        "tool-under-construction": [("space", "kitchen"), ("style", "contemporary")],
    }
    outputs = {}
    for tool, picks in runs.items():
        widgets = [
            {"slug": f"widget-{p}-{tool}", "item_slugs": [f"item-{v}-widget-{p}-{tool}"]}
            for p, v in picks
        ]
        outputs[tool] = await flow.process(tool, order, widgets)
    await sandbox.wait_idle()
    for tool, pid in outputs.items():
        process = await flow.get(f"/v3/process/{pid}")
        result = (await fetch_image(api, process["final_assets"][0]["src"])).convert("RGB")
        diff = ImageChops.difference(source, result)
        assert max(hi for _, hi in diff.getextrema()) > 40, tool


async def test_mask_removal_fills_the_blue_region(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    photo = Image.new("RGB", (100, 100), (200, 30, 30))
    ImageDraw.Draw(photo).rectangle((40, 40, 59, 59), fill=(20, 220, 20))  # the item to remove
    buf = io.BytesIO()
    photo.save(buf, "PNG")
    mask = Image.new("RGB", (100, 100), (0, 0, 0))
    ImageDraw.Draw(mask).rectangle((36, 36, 63, 63), fill=(0x78, 0x78, 0xCD))
    mbuf = io.BytesIO()
    mask.save(mbuf, "PNG")

    order = await flow.order([buf.getvalue()])
    mask_asset = (await flow.append_mask(order["order_id"], mbuf.getvalue()))["assets"][0]
    tool = "tool-item-removal-mask"
    async with api.post(
        "/v3/process",
        json={
            "order_id": order["order_id"],
            "tool": tool,
            "asset_map": {
                f"{tool}-input-image": order["assets"][0]["id"],
                f"{tool}-input-mask": mask_asset["id"],
            },
        },
    ) as r:
        assert r.status == 201
        pid = (await r.json())["process_ids"][0]
    await sandbox.wait_idle()
    process = await flow.get(f"/v3/process/{pid}")
    result = (await fetch_image(api, process["final_assets"][0]["src"])).convert("RGB")
    r_, g, b = result.getpixel((50, 50))  # type: ignore[misc]
    # The green item is gone, filled with the red around it.
    assert r_ > 150, (r_, g, b)
    assert g < 80, (r_, g, b)
    assert result.getpixel((5, 5))[1] < 80  # type: ignore[index]


async def test_unknown_file_is_404(api: aiohttp.ClientSession) -> None:
    async with api.get("/files/nope/original.jpg") as r:
        assert r.status == 404
