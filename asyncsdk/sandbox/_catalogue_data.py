"""The sandbox's tool catalogue: every tool, its input slots, widgets and items.

Slugs follow the service's conventions: a widget slug is ``widget-<purpose>-<tool-slug>`` and an
item slug is ``item-<value>-<widget-slug>``.

Where each list comes from (``docs/sandbox.md`` has the same table for users):

- Tool slugs, names and input slots: the spec (2.4, 4.8), plus ``tool-darkness``, the two-slot
  tool the spec names, as the service's public MCP server (``AIHomeDesign/aihomedesign-mcp``,
  ``app/catalog.py``) lists it.  ``tool-sky-change``, which that server reports missing upstream,
  is left out.
- The enhancement widgets and items, with their ``accessibleIn``, keys and types: the spec (2.5).
- Room types, design styles, the widgets of every other tool, their items and which of them are
  required: the MCP server's catalogue, whose style and room values it says were checked against
  the live API.  Two of its widgets it marks required are optional here, because its own helpers
  send processes without them and rely on the service's default: the material of wall, floor and
  ceiling change, and the sky style of day to dusk.
- The furniture restyle widgets keep the ``tool-furniture-restyle`` slugs (spec 2.5, 4.8;
  decisions.md 6).

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


#: Room types (MCP server: checked against the live API).
ROOMS: Final = (
    "bedroom",
    "living-room",
    "kitchen",
    "bathroom",
    "dining-room",
    "home-office",
    "outdoor",
    "nursery",
)
#: Design styles (MCP server: checked against the live API).
STYLES: Final = (
    "prime",
    "modern",
    "farmhouse",
    "scandinavian",
    "hampton",
    "industrial",
    "traditional",
    "contemporary",
)
#: The enhancement options and the areas each is available in (spec 2.5).
ENHANCEMENT_OPTIONS: Final = {
    "lawn-replacement": ("outdoor",),
    "sky-replacement": ("outdoor",),
    "add-fire-to-fireplace": ("indoor", "outdoor"),
    "add-screen-to-tv": ("indoor",),
    "remove-extra-objects": ("indoor", "outdoor"),
    "remove-minor-blemishes": ("indoor", "outdoor"),
    "turn-on-the-light": ("indoor", "outdoor"),
}


def _build() -> tuple[ToolDef, ...]:
    b = _Builder()

    def space(tool: str, rooms: tuple[str, ...] = ROOMS) -> WidgetDef:
        return b.widget(tool, "space", list(rooms), name="Room type", key="space")

    def style(tool: str) -> WidgetDef:
        return b.widget(tool, "style", list(STYLES), name="Design style", key="style")

    def material(tool: str, values: list[str], name: str) -> WidgetDef:
        return b.widget(tool, "material", values, name=name, key="material", optional=True)

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

    enh = "tool-image-enhancement"
    area = b.widget(enh, "area", ["indoor", "outdoor"], name="Area", key="space")
    area_item = {i.value: i.slug for i in area.items}
    options = b.widget(
        enh,
        "enhancement-options",
        list(ENHANCEMENT_OPTIONS),
        name="Enhancement options",
        key="enhancement_options",
        optional=True,
        multiple=True,
        wtype="toggle",
        default=None,
        accessible={
            value: tuple(area_item[a] for a in areas)
            for value, areas in ENHANCEMENT_OPTIONS.items()
        },
        related=(area.slug,),
    )

    vs, vr, ide = "tool-virtual-staging", "tool-virtual-restaging", "tool-interior-design"
    wall, floor, ceil = "tool-wall-change", "tool-floor-change", "tool-ceiling-change"
    bs, uc, dusk = "tool-backsplash-change", "tool-under-construction", "tool-day-to-dusk"
    mask, dark = "tool-item-removal-mask", "tool-darkness"
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
                    "color",
                    ["earthy-neutrals", "warm-tones", "cool-tones", "monochrome", "pastel"],
                    name="Colour palette",
                    key="color",
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
                space(wall, ("bedroom", "living-room", "kitchen", "bathroom")),
                material(
                    wall, ["brick-wall", "white-paint", "wallpaper", "concrete"], "Wall finish"
                ),
            ),
        ),
        tool(
            9,
            floor,
            "AI Floor Change",
            (
                space(floor, ("bedroom", "living-room", "kitchen", "bathroom")),
                material(floor, ["white-marble", "hardwood", "tile", "carpet"], "Floor material"),
            ),
        ),
        tool(
            10,
            ceil,
            "AI Ceiling Change",
            (
                space(ceil, ("bedroom", "living-room", "kitchen")),
                material(ceil, ["wooden-ceiling", "white-paint", "coffered"], "Ceiling finish"),
            ),
        ),
        tool(
            11,
            bs,
            "AI Backsplash Change",
            (
                space(bs, ("kitchen", "bathroom")),
                b.widget(
                    bs,
                    "material",
                    ["grey-marble", "subway-tile", "mosaic", "white-marble"],
                    name="Backsplash material",
                    key="material",
                ),
            ),
        ),
        tool(12, uc, "AI Under Construction", (space(uc), style(uc))),
        tool(
            13,
            dusk,
            "AI Day to Dusk",
            (
                b.widget(
                    dusk,
                    "sky-style",
                    ["dusk-with-cloud", "clear-dusk", "golden-hour"],
                    name="Sky style",
                    key="sky_style",
                    optional=True,
                ),
                b.widget(
                    dusk,
                    "day-to-dusk-options",
                    ["shadow-removal", "lawn-touch-up"],
                    name="Day to dusk options",
                    key="day_to_dusk_options",
                    optional=True,
                    multiple=True,
                    wtype="toggle",
                    default=None,
                ),
            ),
        ),
        tool(
            14,
            dark,
            "AI Darkness",
            (
                b.widget(
                    dark,
                    "darkness-factor",
                    ["factor-darker", "factor-lighter"],
                    name="Darkness factor",
                    key="darkness_factor",
                ),
            ),
            slots=(f"{dark}-input-image-before", f"{dark}-input-image-after"),
        ),
    )


CATALOGUE: Final = Catalogue(tools=_build())
