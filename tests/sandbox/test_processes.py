"""Process creation rules (spec 4.8, 5, 7), lifecycle and order status (spec 3)."""

from __future__ import annotations

import math
from typing import Any

import aiohttp
import pytest

from asyncsdk.sandbox import Sandbox

from .conftest import LIMITED_KEY, Flow, error_of, image_bytes

ENH = "tool-image-enhancement"
AREA = f"widget-area-{ENH}"
OPTIONS = f"widget-enhancement-options-{ENH}"
INDOOR = f"item-indoor-{AREA}"
OUTDOOR = f"item-outdoor-{AREA}"


def opt(value: str) -> str:
    return f"item-{value}-{OPTIONS}"


async def post_process(api: aiohttp.ClientSession, body: Any) -> tuple[int, dict[str, Any]]:
    async with api.post("/v3/process", json=body) as r:
        return r.status, dict(await r.json())


async def test_create_and_finish_a_process(sandbox: Sandbox, flow: Flow) -> None:
    order = await flow.order()
    pid = await flow.process("tool-day-to-dusk", order)
    await sandbox.wait_idle()
    process = await flow.get(f"/v3/process/{pid}")
    assert process["status"] == "done"
    assert process["tool"] == "tool-day-to-dusk"
    assert process["bookmarked"] is False
    assert process["feedback"] == {"type": "", "description": ""}
    [result] = process["final_assets"]
    assert set(result) == {"asset_id", "asset_type", "asset_role", "src", "thumbnail_src"}
    assert (result["asset_type"], result["asset_role"]) == ("image", "result")
    got = await flow.get(f"/v3/order/{order['order_id']}")
    assert got["processes"][0]["id"] == pid
    assert got["processes"][0]["final_assets"][0]["asset_id"] == result["asset_id"]
    assert sandbox.stats.processes_created == 1


async def test_lifecycle_pending_processing_done_and_order_status(
    sandbox: Sandbox, flow: Flow
) -> None:
    sandbox.config.pending_delay = math.inf
    sandbox.config.processing_delay = math.inf
    order = await flow.order()
    pid = await flow.process("tool-day-to-dusk", order)
    assert (await flow.get(f"/v3/process/{pid}"))["status"] == "pending"
    assert (await flow.get(f"/v3/order/{order['order_id']}"))["status"] == "active"
    sandbox.advance()
    assert (await flow.get(f"/v3/process/{pid}"))["status"] == "processing"
    assert (await flow.get(f"/v3/process/{pid}"))["final_assets"] == []
    assert (await flow.get(f"/v3/order/{order['order_id']}"))["status"] == "active"
    sandbox.advance()
    await sandbox.wait_idle()
    assert (await flow.get(f"/v3/process/{pid}"))["status"] == "done"
    assert (await flow.get(f"/v3/order/{order['order_id']}"))["status"] == "idle"


async def test_order_stays_active_while_any_process_runs(sandbox: Sandbox, flow: Flow) -> None:
    order = await flow.order()
    first = await flow.process("tool-day-to-dusk", order)
    await sandbox.wait_idle()
    sandbox.config.pending_delay = math.inf
    await flow.process("tool-item-removal", order)
    got = await flow.get(f"/v3/order/{order['order_id']}")
    assert got["status"] == "active"
    assert {p["id"]: p["status"] for p in got["processes"]}[first] == "done"
    sandbox.advance()
    await sandbox.wait_idle()
    assert (await flow.get(f"/v3/order/{order['order_id']}"))["status"] == "idle"


async def test_fail_tools_fail_with_empty_final_assets(sandbox: Sandbox, flow: Flow) -> None:
    sandbox.config.fail_tools = frozenset({"tool-day-to-dusk"})
    pid = await flow.process("tool-day-to-dusk")
    other = await flow.process("tool-item-removal")
    await sandbox.wait_idle()
    failed = await flow.get(f"/v3/process/{pid}")
    assert failed["status"] == "failed"
    assert failed["final_assets"] == []
    assert (await flow.get(f"/v3/process/{other}"))["status"] == "done"
    # A failed process is retried by creating a new one.
    sandbox.config.fail_tools = frozenset()
    retry = await flow.process("tool-day-to-dusk")
    await sandbox.wait_idle()
    assert (await flow.get(f"/v3/process/{retry}"))["status"] == "done"


async def test_failure_rate_is_deterministic_per_seed() -> None:
    async def outcomes(seed: int) -> list[str]:
        from asyncsdk.sandbox import SandboxConfig

        async with (
            Sandbox(SandboxConfig(failure_rate=0.5, seed=seed)) as sb,
            aiohttp.ClientSession(base_url=sb.base_url, headers={"x-api-key": sb.api_key}) as s,
        ):
            f = Flow(s)
            order = await f.order()
            ids = [await f.process("tool-item-removal", order) for _ in range(12)]
            await sb.wait_idle()
            return [(await f.get(f"/v3/process/{i}"))["status"] for i in ids]

    first, again, other = await outcomes(3), await outcomes(3), await outcomes(4)
    assert first == again
    assert set(first) == {"done", "failed"}
    assert first != other


async def test_processes_per_request(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    sandbox.config.processes_per_request = 3
    order = await flow.order()
    status, body = await post_process(
        api,
        {
            "order_id": order["order_id"],
            "tool": "tool-day-to-dusk",
            "asset_map": {"tool-day-to-dusk-input-image": order["assets"][0]["id"]},
        },
    )
    assert status == 201
    assert len(set(body["process_ids"])) == 3
    assert sandbox.stats.processes_created == 3


@pytest.mark.parametrize("missing", ["order_id", "tool", "asset_map"])
async def test_missing_required_field_is_400(
    api: aiohttp.ClientSession, flow: Flow, missing: str
) -> None:
    order = await flow.order()
    body = {
        "order_id": order["order_id"],
        "tool": "tool-day-to-dusk",
        "asset_map": {"tool-day-to-dusk-input-image": order["assets"][0]["id"]},
    }
    del body[missing]
    status, err = await post_process(api, body)
    assert status == 400
    assert err["key"] == "api_error_missing_field"
    assert missing in err["error"]


@pytest.mark.parametrize(
    "patch",
    [
        {"asset_map": ["a"]},
        {"widgets": {"slug": "x"}},
        {"widgets": [{"slug": "x", "item_slugs": "y"}]},
        {"order_id": 5},
        {"process_group_id": 7},
    ],
)
async def test_ill_typed_fields_are_400(
    api: aiohttp.ClientSession, flow: Flow, patch: dict[str, Any]
) -> None:
    order = await flow.order()
    body = {
        "order_id": order["order_id"],
        "tool": "tool-day-to-dusk",
        "asset_map": {"tool-day-to-dusk-input-image": order["assets"][0]["id"]},
        **patch,
    }
    status, _ = await post_process(api, body)
    assert status == 400


async def test_non_object_body_is_400(api: aiohttp.ClientSession) -> None:
    status, err = await post_process(api, ["order_id"])
    assert status == 400
    assert err["key"] == "api_error_invalid_body"


async def test_unknown_tool_is_400(api: aiohttp.ClientSession, flow: Flow) -> None:
    order = await flow.order()
    status, err = await post_process(
        api, {"order_id": order["order_id"], "tool": "tool-teleport", "asset_map": {"x": "y"}}
    )
    assert status == 400
    assert err["key"] == "api_error_invalid_tool"
    assert "tool-virtual-staging" in err["error"]


async def test_tool_outside_the_plan_is_403(sandbox: Sandbox, flow: Flow) -> None:
    order = await flow.order()
    async with aiohttp.ClientSession(
        base_url=sandbox.base_url, headers={"x-api-key": LIMITED_KEY}
    ) as limited:
        lf = Flow(limited)
        own = await lf.order()
        status, err = await post_process(
            limited,
            {
                "order_id": own["order_id"],
                "tool": "tool-day-to-dusk",
                "asset_map": {"tool-day-to-dusk-input-image": own["assets"][0]["id"]},
            },
        )
        assert status == 403
        assert err["key"] == "api_error_forbidden"
        async with limited.get("/v1/cathub/tools/tool-day-to-dusk/widgets") as r:
            assert r.status == 403
        # The plan's own tools work, and other keys' orders stay invisible.
        pid = await lf.process(ENH, own, widgets=[{"slug": AREA, "item_slugs": [INDOOR]}])
        assert pid
        status, _ = await post_process(
            limited,
            {
                "order_id": order["order_id"],
                "tool": ENH,
                "asset_map": {f"{ENH}-input-image": order["assets"][0]["id"]},
                "widgets": [{"slug": AREA, "item_slugs": [INDOOR]}],
            },
        )
        assert status == 404
    assert sandbox.stats.processes_created == 1


async def test_unknown_order_is_404(api: aiohttp.ClientSession) -> None:
    status, err = await post_process(
        api,
        {
            "order_id": "nope",
            "tool": "tool-day-to-dusk",
            "asset_map": {"tool-day-to-dusk-input-image": "a"},
        },
    )
    assert status == 404
    assert err["key"] == "api_error_order_not_found"


async def test_unknown_process_is_404(api: aiohttp.ClientSession) -> None:
    async with api.get("/v3/process/nope") as r:
        assert r.status == 404
        assert (await error_of(r))["key"] == "api_error_process_not_found"


@pytest.mark.parametrize(
    "keys",
    [
        [],
        ["tool-day-to-dusk-input"],
        ["tool-day-to-dusk-input-image", "tool-day-to-dusk-input-image-after"],
        ["tool-item-removal-input-image"],
    ],
)
async def test_asset_map_keys_must_equal_the_slots(
    api: aiohttp.ClientSession, flow: Flow, keys: list[str]
) -> None:
    order = await flow.order()
    asset = order["assets"][0]["id"]
    status, err = await post_process(
        api,
        {
            "order_id": order["order_id"],
            "tool": "tool-day-to-dusk",
            "asset_map": {k: asset for k in keys} or {"": asset},
        },
    )
    assert status == 422
    assert err["key"] == "api_error_invalid_asset_map"
    assert "tool-day-to-dusk-input-image" in err["error"]


async def test_asset_of_another_order_is_422_and_unknown_asset_404(
    api: aiohttp.ClientSession, flow: Flow
) -> None:
    order, other = await flow.order(), await flow.order()
    slot = "tool-day-to-dusk-input-image"
    status, err = await post_process(
        api,
        {
            "order_id": order["order_id"],
            "tool": "tool-day-to-dusk",
            "asset_map": {slot: other["assets"][0]["id"]},
        },
    )
    assert (status, err["key"]) == (422, "api_error_asset_not_in_order")
    status, err = await post_process(
        api,
        {"order_id": order["order_id"], "tool": "tool-day-to-dusk", "asset_map": {slot: "nope"}},
    )
    assert (status, err["key"]) == (404, "api_error_asset_not_found")


async def enhancement(
    api: aiohttp.ClientSession, flow: Flow, widgets: list[dict[str, Any]]
) -> tuple[int, dict[str, Any]]:
    order = await flow.order()
    return await post_process(
        api,
        {
            "order_id": order["order_id"],
            "tool": ENH,
            "asset_map": {f"{ENH}-input-image": order["assets"][0]["id"]},
            "widgets": widgets,
        },
    )


@pytest.mark.parametrize(
    ("widgets", "key"),
    [
        (
            [
                {"slug": AREA, "item_slugs": [INDOOR]},
                {
                    "slug": "widget-style-tool-virtual-staging",
                    "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
                },
            ],
            "api_error_invalid_widget",
        ),
        (
            [{"slug": AREA, "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"]}],
            "api_error_invalid_item",
        ),
        ([], "api_error_widget_required"),
        (
            [{"slug": OPTIONS, "item_slugs": [opt("turn-on-the-light")]}],
            "api_error_widget_required",
        ),
        ([{"slug": AREA, "item_slugs": [INDOOR, OUTDOOR]}], "api_error_too_many_items"),
        ([{"slug": AREA, "item_slugs": []}], "api_error_missing_item"),
        (
            [{"slug": AREA, "item_slugs": [INDOOR]}, {"slug": AREA, "item_slugs": [INDOOR]}],
            "api_error_duplicate_widget",
        ),
        (
            [
                {"slug": AREA, "item_slugs": [INDOOR]},
                {"slug": OPTIONS, "item_slugs": [opt("sky-replacement")]},
            ],
            "api_error_item_not_available",
        ),
        (
            [
                {"slug": AREA, "item_slugs": [OUTDOOR]},
                {"slug": OPTIONS, "item_slugs": [opt("add-screen-to-tv")]},
            ],
            "api_error_item_not_available",
        ),
    ],
)
async def test_widget_rules_are_422(
    api: aiohttp.ClientSession, flow: Flow, widgets: list[dict[str, Any]], key: str
) -> None:
    status, err = await enhancement(api, flow, widgets)
    assert status == 422, err
    assert err["key"] == key


async def test_multi_select_widget_takes_several_items(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    status, body = await enhancement(
        api,
        flow,
        [
            {"slug": AREA, "item_slugs": [OUTDOOR]},
            {
                "slug": OPTIONS,
                "item_slugs": [
                    opt("sky-replacement"),
                    opt("lawn-replacement"),
                    opt("turn-on-the-light"),
                ],
            },
        ],
    )
    assert status == 201
    await sandbox.wait_idle()
    assert (await flow.get(f"/v3/process/{body['process_ids'][0]}"))["status"] == "done"


async def test_widget_without_slug_is_400(api: aiohttp.ClientSession, flow: Flow) -> None:
    status, _ = await enhancement(api, flow, [{"item_slugs": [INDOOR]}])
    assert status == 400


async def test_staging_requires_space_and_style(api: aiohttp.ClientSession, flow: Flow) -> None:
    order = await flow.order()
    tool = "tool-virtual-staging"
    base = {
        "order_id": order["order_id"],
        "tool": tool,
        "asset_map": {f"{tool}-input-image": order["assets"][0]["id"]},
    }
    space = {"slug": f"widget-space-{tool}", "item_slugs": [f"item-bedroom-widget-space-{tool}"]}
    style = {"slug": f"widget-style-{tool}", "item_slugs": [f"item-modern-widget-style-{tool}"]}
    assert (await post_process(api, {**base, "widgets": [space]}))[0] == 422
    assert (await post_process(api, {**base, "widgets": [style]}))[0] == 422
    assert (await post_process(api, {**base, "widgets": [space, style]}))[0] == 201


@pytest.mark.parametrize("sent", ["tool-furniture-set-restyle", "tool-furniture-restyle"])
async def test_furniture_restyle_alias(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow, sent: str
) -> None:
    order = await flow.order()
    w = "tool-furniture-restyle"
    status, body = await post_process(
        api,
        {
            "order_id": order["order_id"],
            "tool": sent,
            "asset_map": {f"{sent}-input-image": order["assets"][0]["id"]},
            "widgets": [
                {"slug": f"widget-space-{w}", "item_slugs": [f"item-bedroom-widget-space-{w}"]},
                {"slug": f"widget-style-{w}", "item_slugs": [f"item-hampton-widget-style-{w}"]},
            ],
        },
    )
    assert status == 201, body
    await sandbox.wait_idle()
    got = await flow.get(f"/v3/process/{body['process_ids'][0]}")
    assert (got["tool"], got["status"]) == (sent, "done")


async def test_mask_tool_slots_roles_and_group(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    order = await flow.order()
    mask = (await flow.append_mask(order["order_id"], image_bytes("PNG", colour=(0, 0, 0))))[
        "assets"
    ][0]
    photo = order["assets"][0]["id"]
    tool = "tool-item-removal-mask"
    base = {"order_id": order["order_id"], "tool": tool}
    # Slots swapped: the mask slot needs the mask asset.
    status, err = await post_process(
        api, {**base, "asset_map": {f"{tool}-input-image": mask["id"], f"{tool}-input-mask": photo}}
    )
    assert (status, err["key"]) == (422, "api_error_invalid_asset_map")
    # Only one of the two slots.
    status, _ = await post_process(api, {**base, "asset_map": {f"{tool}-input-image": photo}})
    assert status == 422
    good = {f"{tool}-input-image": photo, f"{tool}-input-mask": mask["id"]}
    status, body = await post_process(api, {**base, "asset_map": good})
    assert status == 201
    group = body["process_group_id"]
    assert group
    # A later process joins the same group; an unknown group is 404.
    status, again = await post_process(api, {**base, "asset_map": good, "process_group_id": group})
    assert (status, again["process_group_id"]) == (201, group)
    status, err = await post_process(api, {**base, "asset_map": good, "process_group_id": "nope"})
    assert (status, err["key"]) == (404, "api_error_process_group_not_found")
    await sandbox.wait_idle()
    got = await flow.get(f"/v3/process/{body['process_ids'][0]}")
    assert got["process_group_id"] == group
    assert got["status"] == "done"


async def test_auto_removal_group_links_the_mask_process(
    api: aiohttp.ClientSession, flow: Flow
) -> None:
    order = await flow.order()
    status, auto = await post_process(
        api,
        {
            "order_id": order["order_id"],
            "tool": "tool-item-removal",
            "asset_map": {"tool-item-removal-input-image": order["assets"][0]["id"]},
        },
    )
    assert status == 201
    mask = (await flow.append_mask(order["order_id"], image_bytes("PNG", colour=(0, 0, 0))))[
        "assets"
    ][0]
    tool = "tool-item-removal-mask"
    status, body = await post_process(
        api,
        {
            "order_id": order["order_id"],
            "tool": tool,
            "asset_map": {
                f"{tool}-input-image": order["assets"][0]["id"],
                f"{tool}-input-mask": mask["id"],
            },
            "process_group_id": auto["process_group_id"],
        },
    )
    assert (status, body["process_group_id"]) == (201, auto["process_group_id"])


async def test_tools_without_groups_answer_no_group_id(
    api: aiohttp.ClientSession, flow: Flow
) -> None:
    order = await flow.order()
    status, body = await post_process(
        api,
        {
            "order_id": order["order_id"],
            "tool": "tool-day-to-dusk",
            "asset_map": {"tool-day-to-dusk-input-image": order["assets"][0]["id"]},
        },
    )
    assert status == 201
    assert set(body) == {"process_ids"}


@pytest.mark.parametrize(
    ("tool", "widgets"),
    [
        ("tool-virtual-restaging", ["space:kitchen", "style:industrial"]),
        ("tool-interior-design", ["space:bedroom", "style:scandinavian", "color:warm-tones"]),
        ("tool-wall-change", ["space:bathroom", "material:brick-wall"]),
        ("tool-floor-change", ["space:kitchen", "material:hardwood"]),
        ("tool-ceiling-change", ["space:living-room", "material:wooden-ceiling"]),
        ("tool-backsplash-change", ["space:kitchen", "material:grey-marble"]),
        ("tool-under-construction", ["space:nursery", "style:prime"]),
        ("tool-day-to-dusk", ["sky-style:golden-hour", "day-to-dusk-options:shadow-removal"]),
        ("tool-item-removal", []),
    ],
)
async def test_every_tool_runs(sandbox: Sandbox, flow: Flow, tool: str, widgets: list[str]) -> None:
    chosen = []
    for spec in widgets:
        purpose, value = spec.split(":")
        slug = f"widget-{purpose}-{tool}"
        chosen.append({"slug": slug, "item_slugs": [f"item-{value}-{slug}"]})
    pid = await flow.process(tool, widgets=chosen)
    await sandbox.wait_idle()
    assert (await flow.get(f"/v3/process/{pid}"))["status"] == "done"
    assert sandbox.errors == []
