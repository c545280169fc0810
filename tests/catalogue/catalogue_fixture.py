"""A realistic catalogue (spec 2.4, 2.5) built from the shared models, and a counting source.

Imported by the tests of this folder (which pytest puts on ``sys.path``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

import attrs

from asyncsdk import (
    APIConnectionError,
    Asset,
    AssetRole,
    BadRequestError,
    CatalogueCache,
    NotFoundError,
    Tool,
    ToolSlug,
    Widget,
    WidgetItem,
)

TOOLS: tuple[Tool, ...] = tuple(
    Tool(id=str(n), name=name, slug=slug)
    for n, (slug, name) in enumerate(
        [
            (ToolSlug.VIRTUAL_STAGING, "AI Virtual Staging"),
            (ToolSlug.VIRTUAL_RESTAGING, "AI Virtual Restaging"),
            (ToolSlug.ITEM_REMOVAL, "AI Item Removal"),
            (ToolSlug.ITEM_REMOVAL_MASK, "AI Item Removal (Mask)"),
            (ToolSlug.IMAGE_ENHANCEMENT, "AI Image Enhancement"),
            (ToolSlug.INTERIOR_DESIGN, "AI Interior Designer"),
            (ToolSlug.FURNITURE_SET_RESTYLE, "AI Furniture Restyle"),
            (ToolSlug.WALL_CHANGE, "AI Wall Change"),
            (ToolSlug.FLOOR_CHANGE, "AI Floor Change"),
            (ToolSlug.CEILING_CHANGE, "AI Ceiling Change"),
            (ToolSlug.BACKSPLASH_CHANGE, "AI Backsplash Change"),
            (ToolSlug.UNDER_CONSTRUCTION, "AI Under Construction"),
            (ToolSlug.DAY_TO_DUSK, "AI Day to Dusk"),
        ],
        start=1,
    )
)

_ids = iter(range(1, 1000))


def make_widget(
    tool: str,
    purpose: str,
    values: Iterable[str],
    *,
    key: str,
    name: str = "",
    type: str = "tile",
    optional: bool = False,
    active: bool = True,
    inactive: Iterable[str] = (),
    default: str | None = None,
    accessible: Mapping[str, tuple[str, ...]] | None = None,
) -> Widget:
    slug = f"widget-{purpose}-{tool}"
    off = set(inactive)
    return Widget(
        id=str(next(_ids)),
        slug=slug,
        name=name or purpose.replace("-", " ").capitalize(),
        is_optional=optional,
        is_active=active,
        type=type,
        tool=tool,
        key=key,
        items=tuple(
            WidgetItem(
                slug=f"item-{value}-{slug}",
                name=value.replace("-", " ").title(),
                priority=pos,
                is_active=value not in off,
                is_default=value == default,
                accessible_in=(accessible or {}).get(value),
            )
            for pos, value in enumerate(values, start=1)
        ),
    )


def _room_and_style(tool: str) -> tuple[Widget, Widget]:
    return (
        make_widget(
            tool,
            "space",
            ["bedroom", "kitchen", "living-room", "dining-room", "bathroom", "garage"],
            key="space",
            name="Room type",
            inactive=["garage"],
            default="bedroom",
        ),
        make_widget(
            tool,
            "style",
            ["modern", "scandinavian", "industrial", "hampton", "art-deco"],
            key="style",
            name="Design style",
            inactive=["art-deco"],
            default="modern",
        ),
    )


ENH = ToolSlug.IMAGE_ENHANCEMENT
INDOOR = f"item-indoor-widget-area-{ENH}"
OUTDOOR = f"item-outdoor-widget-area-{ENH}"
OPTIONS = f"widget-enhancement-options-{ENH}"

WIDGETS: dict[str, tuple[Widget, ...]] = {
    ToolSlug.VIRTUAL_STAGING: _room_and_style(ToolSlug.VIRTUAL_STAGING),
    ToolSlug.VIRTUAL_RESTAGING: _room_and_style(ToolSlug.VIRTUAL_RESTAGING),
    # The catalogue lists the set-restyle slug; the widgets keep the reference's slug (decision 6).
    ToolSlug.FURNITURE_SET_RESTYLE: _room_and_style(ToolSlug.FURNITURE_RESTYLE),
    ToolSlug.BACKSPLASH_CHANGE: (
        make_widget(ToolSlug.BACKSPLASH_CHANGE, "space", ["kitchen", "bathroom"], key="space"),
        make_widget(
            ToolSlug.BACKSPLASH_CHANGE,
            "material",
            ["grey-marble", "subway-tile", "white-marble"],
            key="material",
            name="Backsplash material",
        ),
    ),
    ToolSlug.ITEM_REMOVAL_MASK: (),
    ToolSlug.ITEM_REMOVAL: (),
    ENH: (
        make_widget(ENH, "area", ["indoor", "outdoor"], key="space", name="Area"),
        make_widget(
            ENH,
            "enhancement-options",
            [
                "lawn-replacement",
                "sky-replacement",
                "add-fire-to-fireplace",
                "add-screen-to-tv",
                "remove-extra-objects",
                "remove-minor-blemishes",
                "turn-on-the-light",
            ],
            key="enhancement_options",
            name="Enhancement options",
            type="toggle",
            optional=True,
            accessible={
                "lawn-replacement": (OUTDOOR,),
                "sky-replacement": (OUTDOOR,),
                "add-fire-to-fireplace": (INDOOR, OUTDOOR),
                "add-screen-to-tv": (INDOOR,),
                "remove-extra-objects": (INDOOR, OUTDOOR),
                "remove-minor-blemishes": (INDOOR, OUTDOOR),
                "turn-on-the-light": (INDOOR, OUTDOOR),
            },
        ),
    ),
    ToolSlug.INTERIOR_DESIGN: (
        *_room_and_style(ToolSlug.INTERIOR_DESIGN),
        make_widget(
            ToolSlug.INTERIOR_DESIGN,
            "lighting",
            ["warm", "cool"],
            key="lighting",
            optional=True,
            active=False,
        ),
    ),
    ToolSlug.DAY_TO_DUSK: (),
}

ORDER_ASSETS: tuple[Asset, ...] = (
    Asset(id="photo-1", asset_role=AssetRole.PRIMARY_ANGLE),
    Asset(id="photo-2", asset_role=AssetRole.SECONDARY_ANGLE),
    Asset(id="mask-1", asset_role=AssetRole.MASK),
)


@attrs.define
class CatalogueSource:
    """Answers like the catalogue endpoints, counting every call; optionally held at a gate."""

    tools: tuple[Tool, ...] = TOOLS
    widgets: dict[str, tuple[Widget, ...]] = attrs.Factory(lambda: dict(WIDGETS))
    tool_calls: int = 0
    widget_calls: list[str] = attrs.Factory(list)
    gate: asyncio.Event | None = None
    failures: int = 0
    unknown_status: int = 404
    """How a slug the source does not know is refused: 404, or 400 as the spec's error table
    reads (an invalid value; 404 is for ids)."""

    async def fetch_tools(self) -> tuple[Tool, ...]:
        self.tool_calls += 1
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)
        if self.failures:
            self.failures -= 1
            raise APIConnectionError("connection refused", request_sent=False)
        return self.tools

    async def fetch_widgets(self, slug: str) -> tuple[Widget, ...]:
        self.widget_calls.append(slug)
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)
        if slug not in self.widgets:
            if self.unknown_status == 400:
                raise BadRequestError(
                    f"unknown tool {slug!r}", status=400, key="api_error_invalid_tool"
                )
            raise NotFoundError(f"tool {slug} not found", status=404, key="api_error_not_found")
        return self.widgets[slug]

    def cache(self, **options: object) -> CatalogueCache:
        return CatalogueCache(self.fetch_tools, self.fetch_widgets, **options)  # type: ignore[arg-type]


class Clock:
    """A hand-moved monotonic clock for TTL tests."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
