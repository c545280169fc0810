"""The rules of creating a process (spec 4.8) and of the legacy V1 submit (spec 4.12, 9).

Functions of a :class:`~asyncsdk.sandbox._state.SandboxState`: which tool a slug names and whether
the key's plan has it, the generation rate limit, the ``asset_map`` and ``widgets`` checks, and
the translation of both V1 submit shapes into a V3 process.  A broken rule raises
:class:`~asyncsdk.sandbox._records.SandboxError`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from asyncsdk.sandbox._catalogue import ToolDef, WidgetDef
from asyncsdk.sandbox._records import (
    OrderRecord,
    ProcessRecord,
    RateLimited,
    SandboxError,
    bad_request,
    not_found,
    unprocessable,
)
from asyncsdk.sandbox._state import SandboxState

__all__ = ["check_widgets", "create_process", "resolve_tool", "v1_submit", "v1_tool"]


def resolve_tool(state: SandboxState, key: str, slug: object) -> ToolDef:
    """The tool named by ``slug`` (aliases accepted); 400 when unknown, 403 outside the plan."""
    if not isinstance(slug, str) or not slug:
        raise bad_request(
            "missing_field", "tool is required: send a tool slug such as tool-day-to-dusk"
        )
    tool = state.catalogue.resolve(slug)
    if tool is None:
        known = ", ".join(t.slug for t in state.catalogue.tools)
        raise bad_request("invalid_tool", f"unknown tool {slug!r}; known tools: {known}")
    allowed = state.config.api_keys.get(key)
    if allowed is not None and not ({tool.slug, *tool.aliases} & allowed):
        raise SandboxError(
            403,
            "api_error_forbidden",
            f"your plan does not include {slug}; upgrade the plan to use this tool",
        )
    return tool


def check_rate_limit(state: SandboxState, key: str, now: float) -> None:
    """429 when the key already made ``rate_limit_count`` generations in the window."""
    if not state.config.rate_limit:
        return
    window = state.generations.setdefault(key, deque())
    while window and now - window[0] >= state.config.rate_limit_window:
        window.popleft()
    if len(window) >= state.config.rate_limit_count:
        raise RateLimited()


def create_process(state: SandboxState, key: str, body: object, now: float) -> list[ProcessRecord]:
    """Validate a process request (spec 4.8) and create its process(es), all ``pending``."""
    if not isinstance(body, Mapping):
        raise bad_request(
            "invalid_body", "the body must be a JSON object with order_id, tool, asset_map"
        )
    for name in ("order_id", "tool", "asset_map"):
        if body.get(name) in (None, ""):
            raise bad_request("missing_field", f"{name} is required")
    order_id = body["order_id"]
    if not isinstance(order_id, str):
        raise bad_request("invalid_field", "order_id must be a string")
    asset_map = body["asset_map"]
    if not isinstance(asset_map, Mapping):
        raise bad_request(
            "invalid_field", "asset_map must be an object mapping slot names to asset ids"
        )
    widgets = body.get("widgets")
    if widgets is None:
        widgets = []
    if not isinstance(widgets, list):
        raise bad_request("invalid_field", "widgets must be a list of {slug, item_slugs} objects")
    group_id = body.get("process_group_id")
    if group_id is not None and not isinstance(group_id, str):
        raise bad_request("invalid_field", "process_group_id must be a string")
    sent_tool = body["tool"]
    tool = resolve_tool(state, key, sent_tool)
    assert isinstance(sent_tool, str)
    check_rate_limit(state, key, now)
    order = state.get_order(key, order_id)
    clean_map = _check_asset_map(state, tool, sent_tool, order, asset_map)
    selections = check_widgets(tool, widgets)
    if group_id:
        if group_id not in state.groups:
            raise not_found("process_group", group_id)
    elif tool.creates_group:
        group_id = state.new_id()
        state.groups.add(group_id)
    created = []
    for _ in range(max(1, state.config.processes_per_request)):
        will_fail = sent_tool in state.config.fail_tools or tool.slug in state.config.fail_tools
        draw = state.draw_failure()
        process = ProcessRecord(
            id=state.new_id(),
            order_id=order.id,
            api_key=key,
            tool=sent_tool,
            tool_def=tool,
            asset_map=clean_map,
            selections=selections,
            process_group_id=group_id or None,
            will_fail=will_fail or draw < state.config.failure_rate,
        )
        state.processes[process.id] = process
        order.processes.append(process)
        created.append(process)
        state.stats.processes_created += 1
        if state.config.rate_limit:
            state.generations.setdefault(key, deque()).append(now)
    state.touch_order(order)
    return created


def _check_asset_map(
    state: SandboxState, tool: ToolDef, sent: str, order: OrderRecord, asset_map: Mapping[str, Any]
) -> dict[str, str]:
    accepted = {frozenset(tool.slots_for(s)): s for s in (tool.slug, *tool.aliases)}
    keys = frozenset(asset_map)
    if keys not in accepted:
        wanted = ", ".join(tool.slots_for(sent))
        raise unprocessable(
            "invalid_asset_map",
            f"asset_map keys must be exactly the input slots of {sent}: {wanted}; "
            f"got {', '.join(sorted(keys)) or 'none'}",
        )
    clean: dict[str, str] = {}
    for slot, asset_id in asset_map.items():
        if not isinstance(asset_id, str) or not asset_id:
            raise bad_request("invalid_field", f"asset_map[{slot!r}] must be an asset id string")
        asset = state.assets.get(asset_id)
        if asset is None or state.orders[asset.order_id].api_key != order.api_key:
            raise not_found("asset", asset_id)
        if asset.order_id != order.id:
            raise unprocessable(
                "asset_not_in_order",
                f"asset {asset_id!r} belongs to another order, not to {order.id!r}; "
                "map only assets of the order named by order_id",
            )
        is_mask_slot = slot.endswith("-input-mask")
        if is_mask_slot and asset.role != "mask":
            raise unprocessable(
                "invalid_asset_map",
                f"slot {slot} takes a mask asset (append it with asset_role=mask); "
                f"asset {asset_id!r} is a {asset.role}",
            )
        if not is_mask_slot and asset.role == "mask":
            raise unprocessable(
                "invalid_asset_map", f"slot {slot} takes a photo; asset {asset_id!r} is a mask"
            )
        clean[slot.replace(sent, tool.slug, 1)] = asset_id
    return clean


def check_widgets(tool: ToolDef, widgets: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Selections per widget slug, after every widget rule of spec 2.5 and 4.8."""
    chosen: dict[str, tuple[str, ...]] = {}
    for entry in widgets:
        if not isinstance(entry, Mapping):
            raise bad_request("invalid_field", "each widgets entry must be {slug, item_slugs}")
        slug, items = entry.get("slug"), entry.get("item_slugs")
        if not isinstance(slug, str) or not slug:
            raise bad_request("missing_field", "each widgets entry needs a slug")
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise bad_request("invalid_field", f"item_slugs of {slug} must be a list of item slugs")
        widget = tool.widget(slug)
        if widget is None:
            known = ", ".join(w.slug for w in tool.widgets) or "none"
            raise unprocessable(
                "invalid_widget",
                f"widget {slug!r} is not a widget of {tool.slug}; known: {known}",
            )
        if slug in chosen:
            raise unprocessable("duplicate_widget", f"widget {slug} is given twice")
        if not items:
            raise unprocessable(
                "missing_item", f"widget {slug} needs at least one item slug, or leave it out"
            )
        for item in items:
            if widget.item(item) is None:
                raise unprocessable(
                    "invalid_item", f"item {item!r} does not belong to widget {slug}"
                )
        if len(items) > 1 and not widget.multiple:
            raise unprocessable(
                "too_many_items", f"widget {slug} is single-select; send exactly one item slug"
            )
        if len(set(items)) != len(items):
            raise unprocessable("duplicate_item", f"widget {slug} lists an item twice")
        chosen[slug] = tuple(items)
    for widget in tool.widgets:
        if not widget.is_optional and widget.slug not in chosen:
            raise unprocessable(
                "widget_required",
                f"widget {widget.slug} is required; choose one of its items "
                f"(e.g. {widget.items[0].slug})",
            )
    selected = {i for items in chosen.values() for i in items}
    for slug, items in chosen.items():
        widget = tool.widget(slug)
        assert widget is not None
        _check_accessible(widget, items, selected)
    return chosen


def _check_accessible(widget: WidgetDef, items: Sequence[str], selected: set[str]) -> None:
    for slug in items:
        item = widget.item(slug)
        assert item is not None
        if item.accessible_in is not None and not set(item.accessible_in) & selected:
            raise unprocessable(
                "item_not_available",
                f"item {slug} is available only when one of "
                f"{', '.join(item.accessible_in)} is selected",
            )


def v1_tool(state: SandboxState, key: str, service_name: object) -> ToolDef:
    """``service-ai-virtual-staging`` -> the tool ``tool-virtual-staging`` (spec 9)."""
    if not isinstance(service_name, str) or not service_name:
        raise bad_request(
            "missing_field", "service_name is required, e.g. service-ai-virtual-staging"
        )
    if not service_name.startswith("service-ai-"):
        raise bad_request(
            "invalid_service",
            f"unknown service {service_name!r}; V1 names look like service-ai-virtual-staging",
        )
    return resolve_tool(state, key, "tool-" + service_name.removeprefix("service-ai-"))


def v1_submit(state: SandboxState, key: str, body: object, now: float) -> list[ProcessRecord]:
    """Both V1 submit shapes, translated into a V3 process on the uploaded order."""
    if not isinstance(body, Mapping):
        raise bad_request("invalid_body", "the body must be a JSON object with order_id")
    order_id = body.get("order_id")
    if not isinstance(order_id, str) or not order_id:
        raise bad_request("missing_field", "order_id is required (from POST /v1/order/image)")
    order = state.get_order(key, order_id)
    service = body.get("service_name") or order.v1_service
    tool = v1_tool(state, key, service)
    widgets: dict[str, list[str]] = {}

    def select(widget: WidgetDef, item_slug: str) -> None:
        widgets.setdefault(widget.slug, []).append(item_slug)

    if "selected_widgets" in body or "space_name" in body:
        space = body.get("space_name")
        if space:
            space_widget = next((w for w in tool.widgets if w.key == "space"), None)
            value = str(space).removeprefix("space-")
            item = (
                None
                if space_widget is None
                else space_widget.item(f"item-{value}-{space_widget.slug}")
            )
            if space_widget is None or item is None:
                raise unprocessable(
                    "invalid_space", f"space {space!r} is not a space of {tool.slug}"
                )
            select(space_widget, item.slug)
        for entry in body.get("selected_widgets") or []:
            if not isinstance(entry, Mapping):
                raise bad_request("invalid_field", "selected_widgets entries are {id, item_id}")
            found = state.catalogue.widget_by_id(str(entry.get("id")))
            if found is None or found[0] is not tool:
                raise unprocessable(
                    "invalid_widget", f"widget id {entry.get('id')!r} is not of {tool.slug}"
                )
            widget = found[1]
            item_id = str(entry.get("item_id"))
            item = widget.item(item_id) or next(
                (i for i in widget.items if str(i.legacy_id) == item_id), None
            )
            if item is None:
                raise unprocessable(
                    "invalid_item", f"item {item_id!r} does not belong to widget {widget.id}"
                )
            select(widget, item.slug)
    elif "widget_ids" in body:
        ids = body.get("widget_ids")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise bad_request("invalid_field", "widget_ids must be a list of integers")
        for legacy in ids:
            hit = state.catalogue.item_by_legacy_id(legacy)
            if hit is not None and hit[0] is tool:
                select(hit[1], hit[2].slug)
                continue
            found = state.catalogue.widget_by_id(str(legacy))
            if found is None or found[0] is not tool:
                raise unprocessable("invalid_widget", f"widget id {legacy} is not of {tool.slug}")
            default = next((i for i in found[1].items if i.is_default), found[1].items[0])
            select(found[1], default.slug)
    style = next((w for w in tool.widgets if w.key == "style"), None)
    if style is not None and style.slug not in widgets:
        raise bad_request("missing_field", f"the style widget is mandatory for {service}")
    for widget in tool.widgets:  # V1 fills other required settings with their defaults
        if not widget.is_optional and widget.slug not in widgets:
            default = next((i for i in widget.items if i.is_default), widget.items[0])
            select(widget, default.slug)
    primary = next(a for a in order.assets if a.role == "primary_angle")
    return create_process(
        state,
        key,
        {
            "order_id": order.id,
            "tool": tool.slug,
            "asset_map": {tool.slots[0]: primary.id},
            "widgets": [{"slug": s, "item_slugs": i} for s, i in widgets.items()],
        },
        now,
    )
