"""Planning a process request: its input slots, its assets and its widgets, checked against a
catalogue snapshot (:func:`plan_process`, pure) or against the client's cache
(:func:`prepare_process`, which fetches what the plan needs)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from asyncsdk._catalogue.cache import CatalogueCache
from asyncsdk._catalogue.memo import KeptPlan, PlanMemo, plan_key
from asyncsdk._catalogue.slots import SlotLayout, input_slots, slot_suffix
from asyncsdk._catalogue.snapshot import Catalogue, WidgetSelection, quoted
from asyncsdk._catalogue.widgets import (
    Entry,
    WidgetsArg,
    plan_widgets_checked,
    plan_widgets_unchecked,
    widget_entries,
)
from asyncsdk._checks import is_mapping, require_text
from asyncsdk._errors import ConfigurationError, InputError, ValidationError
from asyncsdk._models import Asset, AssetRole

__all__ = ["PreparedProcess", "check_asset_map", "plan_process", "prepare_process"]


def _freeze_str_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _tuple_of_selections(value: Iterable[WidgetSelection]) -> tuple[WidgetSelection, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class PreparedProcess:
    """A process request ready to send: the tool slug, the asset map and the widgets, expanded.

    ``validated`` tells whether it was checked against the fetched catalogue.  Its shape is
    checked when it is made, as a prepared request may come from anywhere: a non-empty tool slug,
    an asset map of non-empty strings, :class:`~asyncsdk.WidgetSelection` values.
    """

    tool: str = attrs.field()
    asset_map: Mapping[str, str] = attrs.field(converter=_freeze_str_map, hash=False)
    widgets: tuple[WidgetSelection, ...] = attrs.field(default=(), converter=_tuple_of_selections)
    validated: bool = False

    @tool.validator
    def _check_tool(self, _: attrs.Attribute[str], value: str) -> None:
        require_text(value, "tool")

    @asset_map.validator
    def _check_asset_map(
        self, _: attrs.Attribute[Mapping[str, str]], value: Mapping[str, str]
    ) -> None:
        check_asset_map(self.tool, value)

    @widgets.validator
    def _check_widgets(
        self, _: attrs.Attribute[tuple[WidgetSelection, ...]], value: tuple[WidgetSelection, ...]
    ) -> None:
        for index, selection in enumerate(value):
            if not isinstance(selection, WidgetSelection):
                raise ValidationError(
                    f"widgets[{index}] of a PreparedProcess must be a WidgetSelection, not "
                    f"{type(selection).__name__}"
                )

    def widgets_json(self) -> list[dict[str, Any]]:
        """The ``widgets`` array as it goes on the wire."""
        return [selection.to_wire() for selection in self.widgets]

    def with_asset_ids(self, ids: Mapping[str, str]) -> PreparedProcess:
        """The same request with placeholder asset ids replaced by real ones.

        Lets a request be checked before its images are uploaded: prepare it with placeholders
        (``inputs={"image": "0", "mask": "1"}``), upload, then ``with_asset_ids({"0": id0, ...})``.
        """
        missing = sorted(set(self.asset_map.values()) - set(ids))
        if missing:
            raise InputError(f"no asset id given for the placeholder(s) {quoted(missing)}")
        return attrs.evolve(
            self, asset_map={slot: ids[value] for slot, value in self.asset_map.items()}
        )

    def request_body(self, *, order_id: str, process_group_id: str | None = None) -> dict[str, Any]:
        """The JSON body of ``POST /v3/process`` (spec 4.8); ``widgets`` is left out when empty."""
        body: dict[str, Any] = {
            "order_id": order_id,
            "tool": self.tool,
            "asset_map": dict(self.asset_map),
        }
        if self.widgets:
            body["widgets"] = self.widgets_json()
        if process_group_id is not None:
            body["process_group_id"] = process_group_id
        return body


def _input_entries(
    asset_map: Mapping[str, str] | None, inputs: Mapping[str, str] | str | None
) -> Mapping[str, str] | str | None:
    if asset_map is not None and inputs is not None:
        raise InputError(
            "give either asset_map= (full slot names) or inputs= (short names), not both"
        )
    chosen = asset_map if asset_map is not None else inputs
    if is_mapping(chosen):
        for slot, asset_id in chosen.items():
            if not isinstance(slot, str) or not isinstance(asset_id, str) or not asset_id:
                raise InputError(
                    f"inputs map slot names to asset ids (non-empty strings), got "
                    f"{slot!r}: {asset_id!r}"
                )
    elif chosen is not None and (not isinstance(chosen, str) or not chosen):
        raise InputError(f"inputs= takes an asset id or a mapping of slots, got {chosen!r}")
    return chosen


def _default_inputs(
    tool: str, layout: SlotLayout, order_assets: Sequence[Asset] | None
) -> dict[str, str]:
    """Inputs taken from the order when none were given: its photo (and its mask, for masks)."""
    if order_assets is None:
        raise InputError(
            f"no input image given for {tool!r}: pass inputs=<asset id> "
            f"(or {layout.describe()} with asset ids of the order)",
            tool=tool,
        )
    choice = layout.choices[0]
    if len(choice) > 2 or (len(choice) == 2 and not choice[1].endswith("-input-mask")):
        raise InputError(
            f"{tool!r} takes {layout.describe()}: say which asset goes where", tool=tool
        )
    primary = [a for a in order_assets if a.asset_role == AssetRole.PRIMARY_ANGLE]
    if len(primary) != 1:
        raise InputError(
            f"the order has {len(primary)} primary_angle assets, so the input of {tool!r} is "
            f"ambiguous: pass inputs=<asset id>",
            tool=tool,
        )
    chosen = {choice[0]: primary[0].id}
    if len(choice) == 2:
        masks = [a for a in order_assets if a.asset_role == AssetRole.MASK]
        if not masks:
            raise InputError(
                f"{tool!r} needs a mask, and the order has none: add one to the order with "
                "client.orders.append_mask(order_id, mask), then pass "
                "inputs={'image': ..., 'mask': ...}",
                tool=tool,
            )
        if len(masks) > 1:
            raise InputError(
                f"the order has {len(masks)} masks ({quoted(m.id for m in masks)}): pass "
                f"inputs={{'image': {primary[0].id!r}, 'mask': <one of them>}}",
                tool=tool,
            )
        chosen[choice[1]] = masks[0].id
    return chosen


def _plan_inputs(
    tool: str,
    asset_map: Mapping[str, str] | None,
    inputs: Mapping[str, str] | str | None,
    order_assets: Sequence[Asset] | None,
    *,
    check: bool,
) -> dict[str, str]:
    layout = input_slots(tool)
    given = _input_entries(asset_map, inputs)
    if given is None:
        result = _default_inputs(tool, layout, order_assets)
    elif isinstance(given, str):
        singles = [c for c in layout.choices if len(c) == 1]
        if not singles:
            raise InputError(
                f"{tool!r} takes several input images: pass inputs={layout.describe()}",
                tool=tool,
            )
        result = {singles[0][0]: given}
    else:
        result = {}
        unknown: list[str] = []
        for name, asset_id in given.items():
            suffix = slot_suffix(name, tool)
            if suffix is None:
                if not check:
                    result[name] = asset_id
                    continue
                unknown.append(name)
                continue
            slot = f"{layout.tool}-{suffix}"
            if slot in result:
                raise InputError(f"input slot {slot!r} is given twice", tool=tool)
            result[slot] = asset_id
        if check:
            allowed = [set(c) for c in layout.choices]
            if unknown or set(result) not in allowed:
                valid = [slot for choice in layout.choices for slot in choice]
                got = quoted(list(given))
                raise InputError(
                    f"{tool!r} takes the input slots {layout.describe()} "
                    f"(full names {quoted(valid)}); got {got}",
                    tool=tool,
                    valid=valid,
                )
    if check:
        _check_assets(tool, result, order_assets)
    return result


def _check_assets(
    tool: str, asset_map: Mapping[str, str], order_assets: Sequence[Asset] | None
) -> None:
    ids = list(asset_map.values())
    if len(set(ids)) != len(ids):
        raise InputError(
            f"the same asset goes into several input slots of {tool!r}: {dict(asset_map)!r}; "
            "each slot needs its own image",
            tool=tool,
        )
    if order_assets is None:
        return
    by_id = {asset.id: asset for asset in order_assets}
    listing = ", ".join(f"{a.id} ({a.asset_role})" for a in order_assets) or "none"
    photo_roles = {AssetRole.PRIMARY_ANGLE, AssetRole.SECONDARY_ANGLE}
    for slot, asset_id in asset_map.items():
        asset = by_id.get(asset_id)
        if asset is None:
            raise InputError(
                f"asset {asset_id!r} (slot {slot!r}) is not in the order; its assets are "
                f"{listing}. Upload the image to this order first, or use one of these ids",
                tool=tool,
                item=asset_id,
                valid=list(by_id),
            )
        if slot.endswith("-input-mask") and asset.asset_role in photo_roles:
            raise InputError(
                f"asset {asset_id!r} in the mask slot {slot!r} is the order's "
                f"{asset.asset_role} photo, not a mask; upload the mask to the order with the "
                "role 'mask' (client.orders.append_mask) and pass its id",
                tool=tool,
                item=asset_id,
            )
        if not slot.endswith("-input-mask") and asset.asset_role == AssetRole.MASK:
            raise InputError(
                f"asset {asset_id!r} in the image slot {slot!r} is a mask; pass the photo's id "
                f"there ({listing})",
                tool=tool,
                item=asset_id,
            )


def plan_process(
    catalogue: Catalogue | None,
    *,
    tool: str,
    asset_map: Mapping[str, str] | None = None,
    inputs: Mapping[str, str] | str | None = None,
    widgets: WidgetsArg | None = None,
    order_assets: Sequence[Asset] | None = None,
    validate: bool = True,
) -> PreparedProcess:
    """Check and expand one process request against ``catalogue`` (pure; no I/O).

    With ``validate=True`` the catalogue must hold the tool list and the tool's widgets, and every
    rule of the module docstring is enforced.  With ``validate=False`` only what can be expanded
    is expanded (by the catalogue when given, else by the slug convention) and the rest is passed
    through as given.
    """
    entries = _read_arguments(tool, asset_map, widgets)
    return _plan(catalogue, tool, asset_map, inputs, entries, order_assets, validate=validate)


async def prepare_process(
    cache: CatalogueCache,
    *,
    tool: str,
    asset_map: Mapping[str, str] | None,
    inputs: Mapping[str, str] | str | None,
    widgets: WidgetsArg | None,
    order_assets: Sequence[Asset] | None = None,
    validate: bool = True,
    memo: PlanMemo[PreparedProcess] | None = None,
) -> PreparedProcess:
    """Check the arguments of a process request, then expand and check it before it is sent
    (spec 4.8).

    ``inputs`` is an asset id (single-slot tools), or a mapping by short slot name (``image``,
    ``mask``, ``before``, ``after``) or full slot name; ``asset_map`` is the wire mapping by full
    slot name (give one of the two; with neither, the order's photo, and its mask for the mask
    tool, are used when ``order_assets`` is known).  ``widgets`` takes any :data:`WidgetsArg` form.

    With ``validate=True`` the tool list and the tool's widgets are fetched through ``cache`` (once
    per TTL, shared by concurrent callers) and a :class:`CatalogueError` explains any problem; the
    plan is kept in ``memo`` (see :mod:`asyncsdk._catalogue.memo`).  With ``validate=False``
    nothing is fetched: short forms are expanded by whatever the cache already holds, else by the
    slug convention, and everything else is passed through.
    """
    if not validate:
        given = _read_arguments(tool, asset_map, widgets)
        return _plan(cache.peek(), tool, asset_map, inputs, given, order_assets, validate=False)
    key = None
    if memo is not None and order_assets is None:
        key = plan_key(tool, asset_map, inputs, widgets)
    kept = memo.get(key) if memo is not None and key is not None else None
    # Arguments equal to a kept plan's passed these checks already; others are checked before
    # anything is fetched.
    entries = _read_arguments(tool, asset_map, widgets) if kept is None else None
    tools = await cache.tools()
    if kept is not None and kept.checked_against(tools, await cache.widgets(kept.prepared.tool)):
        return kept.prepared
    if entries is None:
        entries = _read_arguments(tool, asset_map, widgets)
    slug = Catalogue(tools=tools).active_tool(tool).slug
    listed = await cache.widgets(slug)
    catalogue = Catalogue(tools=tools, widgets={slug: listed})
    prepared = _plan(catalogue, slug, asset_map, inputs, entries, order_assets, validate=True)
    if memo is not None and key is not None:
        memo.keep(key, KeptPlan(prepared, tools, listed))
    return prepared


def _read_arguments(
    tool: str, asset_map: Mapping[str, str] | None, widgets: WidgetsArg | None
) -> list[Entry]:
    """The shape of the arguments, checked before the catalogue is consulted; the widgets given."""
    if not isinstance(tool, str) or not tool.strip():
        raise ValidationError(
            f"tool= must be a tool slug such as 'tool-virtual-staging', not {tool!r}"
        )
    if asset_map is not None:
        check_asset_map(tool, asset_map)
    return widget_entries(widgets)


def _plan(
    catalogue: Catalogue | None,
    tool: str,
    asset_map: Mapping[str, str] | None,
    inputs: Mapping[str, str] | str | None,
    entries: list[Entry],
    order_assets: Sequence[Asset] | None,
    *,
    validate: bool,
) -> PreparedProcess:
    """:func:`plan_process` on arguments whose shape is checked."""
    if validate:
        if catalogue is None:
            raise ConfigurationError("validate=True needs a catalogue; pass validate=False to skip")
        slug = catalogue.active_tool(tool).slug
        asset_ids = _plan_inputs(slug, asset_map, inputs, order_assets, check=True)
        selections = plan_widgets_checked(catalogue, slug, entries)
        return PreparedProcess(tool=slug, asset_map=asset_ids, widgets=selections, validated=True)
    found = catalogue.find_tool(tool) if catalogue is not None else None
    slug = found.slug if found is not None else tool.strip()
    asset_ids = _plan_inputs(slug, asset_map, inputs, order_assets, check=False)
    selections = plan_widgets_unchecked(catalogue, slug, entries)
    return PreparedProcess(tool=slug, asset_map=asset_ids, widgets=selections, validated=False)


def check_asset_map(tool: str, asset_map: Mapping[str, str]) -> None:
    """The shape of a wire ``asset_map``: slot names to asset ids, all non-empty strings."""
    if not is_mapping(asset_map) or not asset_map:
        raise ValidationError(
            f"asset_map must map the tool's input slots to asset ids, e.g. "
            f"{{'{tool}-input-image': '<asset id>'}}, not {asset_map!r}"
        )
    for slot, asset_id in asset_map.items():
        require_text(slot, "an asset_map slot name")
        require_text(asset_id, f"asset_map[{slot!r}]")
