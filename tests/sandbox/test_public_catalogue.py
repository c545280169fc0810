"""The sandbox's catalogue follows the service's public facts (``docs/sandbox.md``, "Catalogue").

The service's public MCP server builds process requests from its own catalogue: one example
request per tool (the first listed value of each widget, the first two of a multi-select one) and
one per convenience command.  Each such request, restated below as data, is sent to the sandbox
over HTTP and must be accepted, so that a request that works on the live service also works here.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from asyncsdk.sandbox import Sandbox

from .conftest import Flow, gradient_jpeg, image_bytes

#: (what sends it, tool, {widget purpose: item values}).  Slugs are built by the spec's
#: conventions: ``widget-<purpose>-<tool>`` and ``item-<value>-<widget slug>``.
REQUESTS: list[tuple[str, str, dict[str, list[str]]]] = [
    # The example request of each tool: first value of each widget, two of a multi-select one.
    ("example", "tool-virtual-staging", {"space": ["bedroom"], "style": ["prime"]}),
    ("example", "tool-virtual-restaging", {"space": ["bedroom"], "style": ["prime"]}),
    (
        "example",
        "tool-interior-design",
        {"space": ["bedroom"], "style": ["prime"], "color": ["earthy-neutrals"]},
    ),
    (
        "example",
        "tool-image-enhancement",
        {"area": ["indoor"], "enhancement-options": ["add-fire-to-fireplace", "add-screen-to-tv"]},
    ),
    ("example", "tool-item-removal", {}),
    ("example", "tool-item-removal-mask", {}),
    ("example", "tool-darkness", {"darkness-factor": ["factor-darker"]}),
    ("example", "tool-wall-change", {"space": ["bedroom"], "material": ["brick-wall"]}),
    ("example", "tool-floor-change", {"space": ["bedroom"], "material": ["white-marble"]}),
    ("example", "tool-ceiling-change", {"space": ["bedroom"], "material": ["wooden-ceiling"]}),
    ("example", "tool-backsplash-change", {"space": ["kitchen"], "material": ["grey-marble"]}),
    ("example", "tool-under-construction", {"space": ["bedroom"], "style": ["prime"]}),
    (
        "example",
        "tool-day-to-dusk",
        {
            "sky-style": ["dusk-with-cloud"],
            "day-to-dusk-options": ["shadow-removal", "lawn-touch-up"],
        },
    ),
    # The convenience commands: a style and a detected room; the rest left to the service.
    ("staging", "tool-virtual-staging", {"space": ["living-room"], "style": ["hampton"]}),
    ("restaging", "tool-virtual-restaging", {"space": ["kitchen"], "style": ["contemporary"]}),
    ("redesign", "tool-interior-design", {"space": ["nursery"], "style": ["traditional"]}),
    ("enhance", "tool-image-enhancement", {"area": ["outdoor"]}),
    ("dusk, default sky", "tool-day-to-dusk", {}),
    ("dusk, named sky", "tool-day-to-dusk", {"sky-style": ["golden-hour"]}),
    ("wall, room only", "tool-wall-change", {"space": ["bathroom"]}),
    ("floor, room only", "tool-floor-change", {"space": ["living-room"]}),
    ("ceiling, room only", "tool-ceiling-change", {"space": ["kitchen"]}),
]


def _widgets(tool: str, picks: dict[str, list[str]]) -> list[dict[str, Any]]:
    out = []
    for purpose, values in picks.items():
        slug = f"widget-{purpose}-{tool}"
        out.append({"slug": slug, "item_slugs": [f"item-{value}-{slug}" for value in values]})
    return out


async def _asset_map(flow: Flow, tool: str) -> dict[str, str]:
    if tool == "tool-item-removal-mask":
        order = await flow.order()
        mask = await flow.append_mask(order["order_id"], image_bytes("PNG", colour=(0, 0, 0)))
        return {
            "order_id": order["order_id"],
            f"{tool}-input-image": order["assets"][0]["id"],
            f"{tool}-input-mask": mask["assets"][0]["id"],
        }
    if tool == "tool-darkness":
        order = await flow.order(
            [gradient_jpeg(), gradient_jpeg()], ["primary_angle", "secondary_angle"]
        )
        before, after = (a["id"] for a in order["assets"])
        return {
            "order_id": order["order_id"],
            f"{tool}-input-image-before": before,
            f"{tool}-input-image-after": after,
        }
    order = await flow.order()
    return {"order_id": order["order_id"], f"{tool}-input-image": order["assets"][0]["id"]}


@pytest.mark.parametrize(
    ("sender", "tool", "picks"), REQUESTS, ids=[f"{s}:{t}" for s, t, _ in REQUESTS]
)
async def test_the_public_servers_requests_are_accepted(
    sandbox: Sandbox,
    api: aiohttp.ClientSession,
    flow: Flow,
    sender: str,
    tool: str,
    picks: dict[str, list[str]],
) -> None:
    slots = await _asset_map(flow, tool)
    order_id = slots.pop("order_id")
    body: dict[str, Any] = {"order_id": order_id, "tool": tool, "asset_map": slots}
    if picks:
        body["widgets"] = _widgets(tool, picks)
    async with api.post("/v3/process", json=body) as r:
        assert r.status == 201, (sender, await r.text())
        created = await r.json()
    await sandbox.wait_idle()
    process = await flow.get(f"/v3/process/{created['process_ids'][0]}")
    assert (process["tool"], process["status"]) == (tool, "done")


async def test_widgets_list_the_public_values(api: aiohttp.ClientSession) -> None:
    async def items(tool: str, purpose: str) -> list[str]:
        async with api.get(f"/v1/cathub/tools/{tool}/widgets") as r:
            assert r.status == 200
            widgets = (await r.json())["data"]
        widget = next(w for w in widgets if w["slug"] == f"widget-{purpose}-{tool}")
        suffix = f"-widget-{purpose}-{tool}"
        return [i["slug"].removeprefix("item-").removesuffix(suffix) for i in widget["items"]]

    styles = await items("tool-virtual-staging", "style")
    assert {"prime", "hampton", "modern"} <= set(styles)
    assert not {"coastal", "luxury"} & set(styles)
    rooms = await items("tool-virtual-staging", "space")
    assert {"nursery", "bedroom", "kitchen", "living-room"} <= set(rooms)
    assert "kids-room" not in rooms
    assert await items("tool-backsplash-change", "space") == ["kitchen", "bathroom"]
    assert "grey-marble" in await items("tool-backsplash-change", "material")


async def test_which_widgets_are_required(api: aiohttp.ClientSession) -> None:
    async def required(tool: str) -> dict[str, bool]:
        async with api.get(f"/v1/cathub/tools/{tool}/widgets") as r:
            return {w["slug"]: not w["isOptional"] for w in (await r.json())["data"]}

    assert await required("tool-wall-change") == {
        "widget-space-tool-wall-change": True,
        "widget-material-tool-wall-change": False,
    }
    assert await required("tool-day-to-dusk") == {
        "widget-sky-style-tool-day-to-dusk": False,
        "widget-day-to-dusk-options-tool-day-to-dusk": False,
    }
    assert await required("tool-under-construction") == {
        "widget-space-tool-under-construction": True,
        "widget-style-tool-under-construction": True,
    }
    assert await required("tool-image-enhancement") == {
        "widget-area-tool-image-enhancement": True,
        "widget-enhancement-options-tool-image-enhancement": False,
    }
