"""The sandbox's tool catalogue: every tool, its input slots, widgets and items.

Slugs follow the service's conventions: a widget slug is ``widget-<purpose>-<tool-slug>`` and an
item slug is ``item-<value>-<widget-slug>``.

``tool-furniture-set-restyle`` (the catalogue's slug) and ``tool-furniture-restyle`` (the slug of
the tool's own reference) are one tool: both are accepted wherever a tool slug is, the tool list
shows the set-restyle slug, and the widgets keep the reference's ``tool-furniture-restyle`` slugs.
"""

from __future__ import annotations

from typing import Final

from asyncsdk.sandbox._catalogue import Catalogue, ToolDef, WidgetDef, WidgetItemDef

__all__ = ["CATALOGUE", "FURNITURE_RESTYLE", "FURNITURE_SET_RESTYLE"]

FURNITURE_SET_RESTYLE: Final = "tool-furniture-set-restyle"
FURNITURE_RESTYLE: Final = "tool-furniture-restyle"


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


CATALOGUE: Final = Catalogue(tools=_build())
