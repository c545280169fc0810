"""The tool catalogue of the sandbox: tools, input slots, widgets and items (spec 2.4, 2.5, 4.8).

Pure data and look-ups; no I/O.  Slugs follow the service's conventions: a widget slug is
``widget-<purpose>-<tool-slug>`` and an item slug is ``item-<value>-<widget-slug>``.

``tool-furniture-set-restyle`` (the catalogue's slug) and ``tool-furniture-restyle`` (the slug of
the tool's own reference) are one tool: both are accepted wherever a tool slug is, the tool list
shows the set-restyle slug, and the widgets keep the reference's ``tool-furniture-restyle`` slugs.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

__all__ = [
    "CATALOGUE",
    "FURNITURE_RESTYLE",
    "FURNITURE_SET_RESTYLE",
    "Catalogue",
    "ToolDef",
    "WidgetDef",
    "WidgetItemDef",
]

FURNITURE_SET_RESTYLE: Final = "tool-furniture-set-restyle"
FURNITURE_RESTYLE: Final = "tool-furniture-restyle"
_STAMP: Final = "2024-01-15T09:00:00.000Z"


@attrs.frozen
class WidgetItemDef:
    slug: str
    value: str
    name: str
    legacy_id: int
    priority: int
    is_default: bool = False
    accessible_in: tuple[str, ...] | None = None

    def wire(self, icon_base: str) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "name": self.name,
            "description": f"{self.name}.",
            "prompt": f"{self.name.lower()}, photorealistic, real-estate photography",
            "priority": self.priority,
            "isActive": True,
            "isDefault": self.is_default,
            "iconSrc": f"{icon_base}/icons/{self.slug}.png",
            "accessibleIn": None if self.accessible_in is None else list(self.accessible_in),
        }


@attrs.frozen
class WidgetDef:
    id: str
    slug: str
    purpose: str
    name: str
    tool: str
    key: str
    type: str
    is_optional: bool
    multiple: bool
    priority: int
    items: tuple[WidgetItemDef, ...]
    related: tuple[str, ...] | None = None

    def item(self, slug: str) -> WidgetItemDef | None:
        return next((i for i in self.items if i.slug == slug), None)

    def wire(self, icon_base: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "slug": self.slug,
            "name": self.name,
            "description": f"{self.name} of the result.",
            "isOptional": self.is_optional,
            "isActive": True,
            "priority": self.priority,
            "type": self.type,
            "tool": self.tool,
            "items": [i.wire(icon_base) for i in self.items],
            "related": None if self.related is None else list(self.related),
            "key": self.key,
            "createdAt": _STAMP,
            "updatedAt": _STAMP,
        }


@attrs.frozen
class ToolDef:
    id: str
    slug: str
    name: str
    slots: tuple[str, ...]
    widgets: tuple[WidgetDef, ...]
    creates_group: bool = False
    aliases: tuple[str, ...] = ()

    def widget(self, slug: str) -> WidgetDef | None:
        return next((w for w in self.widgets if w.slug == slug), None)

    def slots_for(self, sent_slug: str) -> tuple[str, ...]:
        """Slot names when the tool is addressed as ``sent_slug`` (the slot prefix follows it)."""
        return tuple(s.replace(self.slug, sent_slug, 1) for s in self.slots)

    def wire(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "slug": self.slug, "isActive": True}


def _title(value: str) -> str:
    return value.replace("-", " ").capitalize()


class _Builder:
    def __init__(self) -> None:
        self.next_widget_id = 1

    def widget(
        self,
        tool: str,
        purpose: str,
        values: list[str],
        *,
        name: str,
        key: str,
        optional: bool = False,
        multiple: bool = False,
        wtype: str = "tile",
        default: str | None = "first",
        accessible: dict[str, tuple[str, ...]] | None = None,
        related: tuple[str, ...] | None = None,
    ) -> WidgetDef:
        wid = self.next_widget_id
        self.next_widget_id += 1
        slug = f"widget-{purpose}-{tool}"
        items = tuple(
            WidgetItemDef(
                slug=f"item-{value}-{slug}",
                value=value,
                name=_title(value),
                legacy_id=wid * 100 + pos,
                priority=pos,
                is_default=(default == "first" and pos == 1) or default == value,
                accessible_in=(accessible or {}).get(value),
            )
            for pos, value in enumerate(values, start=1)
        )
        return WidgetDef(
            id=str(wid),
            slug=slug,
            purpose=purpose,
            name=name,
            tool=tool,
            key=key,
            type=wtype,
            is_optional=optional,
            multiple=multiple,
            priority=self.next_widget_id - 1,
            items=items,
            related=related,
        )


ROOMS: Final = [
    "living-room",
    "bedroom",
    "kitchen",
    "bathroom",
    "dining-room",
    "home-office",
    "kids-room",
]
STYLES: Final = [
    "modern",
    "scandinavian",
    "industrial",
    "coastal",
    "farmhouse",
    "minimalist",
    "mid-century",
    "luxury",
]


def _build() -> tuple[ToolDef, ...]:
    b = _Builder()

    def space(tool: str, rooms: list[str] = ROOMS, optional: bool = False) -> WidgetDef:
        return b.widget(tool, "space", rooms, name="Room type", key="space", optional=optional)

    def style(tool: str, optional: bool = False) -> WidgetDef:
        return b.widget(tool, "style", STYLES, name="Design style", key="style", optional=optional)

    def material(tool: str, values: list[str], name: str) -> WidgetDef:
        return b.widget(tool, "material", values, name=name, key="material")

    enh = "tool-image-enhancement"
    area = b.widget(enh, "area", ["indoor", "outdoor"], name="Area", key="space")
    indoor, outdoor = (i.slug for i in area.items)
    options = b.widget(
        enh,
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
        name="Enhancement options",
        key="enhancement_options",
        optional=True,
        multiple=True,
        wtype="toggle",
        default=None,
        accessible={
            "lawn-replacement": (outdoor,),
            "sky-replacement": (outdoor,),
            "add-fire-to-fireplace": (indoor, outdoor),
            "add-screen-to-tv": (indoor,),
            "remove-extra-objects": (indoor, outdoor),
            "remove-minor-blemishes": (indoor, outdoor),
            "turn-on-the-light": (indoor, outdoor),
        },
        related=(area.slug,),
    )

    def tool(
        n: int,
        slug: str,
        name: str,
        widgets: tuple[WidgetDef, ...] = (),
        *,
        slots: tuple[str, ...] | None = None,
        creates_group: bool = False,
        aliases: tuple[str, ...] = (),
    ) -> ToolDef:
        return ToolDef(
            id=f"{n}",
            slug=slug,
            name=name,
            slots=slots if slots is not None else (f"{slug}-input-image",),
            widgets=widgets,
            creates_group=creates_group,
            aliases=aliases,
        )

    vs, vr, ide = "tool-virtual-staging", "tool-virtual-restaging", "tool-interior-design"
    wall, floor, ceil = "tool-wall-change", "tool-floor-change", "tool-ceiling-change"
    bs, uc, dusk = "tool-backsplash-change", "tool-under-construction", "tool-day-to-dusk"
    mask = "tool-item-removal-mask"
    return (
        tool(1, vs, "AI Virtual Staging", (space(vs), style(vs))),
        tool(2, vr, "AI Virtual Restaging", (space(vr), style(vr))),
        tool(3, "tool-item-removal", "AI Item Removal", creates_group=True),
        tool(
            4,
            mask,
            "AI Item Removal (Mask)",
            slots=(f"{mask}-input-image", f"{mask}-input-mask"),
            creates_group=True,
        ),
        tool(5, enh, "AI Image Enhancement", (area, options)),
        tool(
            6,
            ide,
            "AI Interior Designer",
            (
                space(ide),
                style(ide),
                b.widget(
                    ide,
                    "palette",
                    ["warm-neutrals", "cool-greys", "earth-tones", "monochrome", "pastels"],
                    name="Colour palette",
                    key="palette",
                    optional=True,
                ),
            ),
        ),
        ToolDef(
            id="7",
            slug=FURNITURE_SET_RESTYLE,
            name="AI Furniture Restyle",
            slots=(f"{FURNITURE_SET_RESTYLE}-input-image",),
            widgets=(space(FURNITURE_RESTYLE), style(FURNITURE_RESTYLE)),
            aliases=(FURNITURE_RESTYLE,),
        ),
        tool(
            8,
            wall,
            "AI Wall Change",
            (
                material(
                    wall,
                    [
                        "white-paint",
                        "sage-green-paint",
                        "navy-paint",
                        "exposed-brick",
                        "wood-panelling",
                        "floral-wallpaper",
                    ],
                    "Wall finish",
                ),
            ),
        ),
        tool(
            9,
            floor,
            "AI Floor Change",
            (
                material(
                    floor,
                    [
                        "oak-parquet",
                        "grey-tile",
                        "white-marble",
                        "polished-concrete",
                        "beige-carpet",
                    ],
                    "Floor material",
                ),
            ),
        ),
        tool(
            10,
            ceil,
            "AI Ceiling Change",
            (
                material(
                    ceil,
                    ["white-paint", "wood-beams", "coffered", "exposed-concrete"],
                    "Ceiling finish",
                ),
            ),
        ),
        tool(
            11,
            bs,
            "AI Backsplash Change",
            (
                space(bs, ["kitchen", "bathroom"]),
                material(
                    bs,
                    [
                        "grey-marble",
                        "subway-tile",
                        "white-marble",
                        "herringbone-tile",
                        "glass-mosaic",
                        "terracotta",
                    ],
                    "Backsplash material",
                ),
            ),
        ),
        tool(12, uc, "AI Under Construction", (space(uc), style(uc, optional=True))),
        tool(
            13,
            dusk,
            "AI Day to Dusk",
            (
                b.widget(
                    dusk,
                    "sky",
                    ["blue-hour", "golden-hour", "starry-night"],
                    name="Sky",
                    key="sky",
                    optional=True,
                ),
            ),
        ),
    )


@attrs.frozen
class Catalogue:
    """Look-ups over the tools; ``resolve`` accepts a tool's slug or any of its aliases."""

    tools: tuple[ToolDef, ...]

    def resolve(self, slug: str) -> ToolDef | None:
        for t in self.tools:
            if slug == t.slug or slug in t.aliases:
                return t
        return None

    def widget_by_id(self, widget_id: str) -> tuple[ToolDef, WidgetDef] | None:
        for t in self.tools:
            for w in t.widgets:
                if w.id == widget_id:
                    return t, w
        return None

    def item_by_legacy_id(self, legacy_id: int) -> tuple[ToolDef, WidgetDef, WidgetItemDef] | None:
        for t in self.tools:
            for w in t.widgets:
                for i in w.items:
                    if i.legacy_id == legacy_id:
                        return t, w, i
        return None


CATALOGUE: Final = Catalogue(tools=_build())
