"""Expansion of the short forms into the wire form of POST /v3/process (spec 2.5, 4.8)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from catalogue_fixture import INDOOR, OPTIONS, OUTDOOR, TOOLS, CatalogueSource

from asyncsdk import (
    Asset,
    Catalogue,
    InputError,
    PreparedProcess,
    Tool,
    ToolSlug,
    ValidationError,
    WidgetSelection,
)

# plan_process (a request planned against a catalogue snapshot, no I/O) and prepare_process
# (the same through a cache) have no public name: a client reaches them only through
# processes.prepare, and these tests drive them with in-memory catalogues.
# input_slots is the naming convention of input slots, shown to users only inside messages.
from asyncsdk._catalogue import input_slots, plan_process, prepare_process

VS = ToolSlug.VIRTUAL_STAGING
SPACE_VS = "widget-space-tool-virtual-staging"
STYLE_VS = "widget-style-tool-virtual-staging"


def staging(catalogue: Catalogue, widgets: object, **kwargs: object) -> PreparedProcess:
    return plan_process(catalogue, tool=VS, inputs="photo-1", widgets=widgets, **kwargs)  # type: ignore[arg-type]


def test_short_names_expand_to_the_wire_list(catalogue: Catalogue) -> None:
    prepared = staging(catalogue, {"space": "bedroom", "style": "modern"})
    assert prepared.widgets_json() == [
        {"slug": SPACE_VS, "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"]},
        {"slug": STYLE_VS, "item_slugs": ["item-modern-widget-style-tool-virtual-staging"]},
    ]
    assert prepared.asset_map == {"tool-virtual-staging-input-image": "photo-1"}
    assert prepared.tool == VS
    assert prepared.validated


@pytest.mark.parametrize(
    "written", ["living-room", "living room", "Living Room", "LIVING_ROOM", " living  room "]
)
def test_values_are_written_as_people_write_them(catalogue: Catalogue, written: str) -> None:
    prepared = staging(catalogue, {"space": written, "style": "modern"})
    assert prepared.widgets[0].item_slugs == ("item-living-room-widget-space-tool-virtual-staging",)


@pytest.mark.parametrize(
    "key", ["space", "Room type", SPACE_VS, "widget-space-tool-virtual-staging"]
)
def test_widget_named_by_purpose_name_or_slug(catalogue: Catalogue, key: str) -> None:
    prepared = staging(catalogue, {key: "kitchen", "style": "hampton"})
    assert prepared.widgets[0] == WidgetSelection(
        SPACE_VS, ("item-kitchen-widget-space-tool-virtual-staging",)
    )


def test_widget_key_field_wins_over_purpose(catalogue: Catalogue) -> None:
    # The enhancement tool's area widget has the key "space" (spec 2.5).
    prepared = plan_process(
        catalogue,
        tool=ToolSlug.IMAGE_ENHANCEMENT,
        inputs="photo-1",
        widgets={
            "space": "outdoor",
            "enhancement_options": ["sky-replacement", "Lawn Replacement"],
        },
    )
    assert prepared.widgets_json() == [
        {"slug": "widget-area-tool-image-enhancement", "item_slugs": [OUTDOOR]},
        {
            "slug": OPTIONS,
            "item_slugs": [
                f"item-sky-replacement-{OPTIONS}",
                f"item-lawn-replacement-{OPTIONS}",
            ],
        },
    ]


def test_area_purpose_also_names_the_area_widget(catalogue: Catalogue) -> None:
    prepared = plan_process(
        catalogue, tool=ToolSlug.IMAGE_ENHANCEMENT, inputs="photo-1", widgets={"area": "indoor"}
    )
    assert prepared.widgets[0].item_slugs == (INDOOR,)


def test_full_item_slugs_pass_through(catalogue: Catalogue) -> None:
    prepared = staging(
        catalogue,
        {
            "space": "item-dining-room-widget-space-tool-virtual-staging",
            STYLE_VS: ["item-industrial-widget-style-tool-virtual-staging"],
        },
    )
    assert prepared.widgets[0].item_slugs == ("item-dining-room-widget-space-tool-virtual-staging",)
    assert prepared.widgets[1].item_slugs == ("item-industrial-widget-style-tool-virtual-staging",)


def test_wire_list_goes_out_unchanged(catalogue: Catalogue) -> None:
    wire = [
        {"slug": STYLE_VS, "item_slugs": ["item-modern-widget-style-tool-virtual-staging"]},
        {"slug": SPACE_VS, "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"]},
    ]
    prepared = staging(catalogue, wire)
    assert prepared.widgets_json() == wire


def test_widget_selection_values_are_accepted(catalogue: Catalogue) -> None:
    selections = [
        WidgetSelection(SPACE_VS, ["item-bedroom-widget-space-tool-virtual-staging"]),
        WidgetSelection(STYLE_VS, ["modern"]),
    ]
    prepared = staging(catalogue, selections)
    assert prepared.widgets[1].item_slugs == ("item-modern-widget-style-tool-virtual-staging",)


def test_none_and_empty_selections_are_left_out(catalogue: Catalogue) -> None:
    prepared = plan_process(
        catalogue,
        tool=ToolSlug.IMAGE_ENHANCEMENT,
        inputs="photo-1",
        widgets={"space": "indoor", "enhancement_options": []},
    )
    assert [w.slug for w in prepared.widgets] == ["widget-area-tool-image-enhancement"]
    prepared = staging(catalogue, {"space": "bedroom", "style": "modern", "extra": None})
    assert len(prepared.widgets) == 2


def test_repeated_items_are_sent_once(catalogue: Catalogue) -> None:
    prepared = plan_process(
        catalogue,
        tool=ToolSlug.IMAGE_ENHANCEMENT,
        inputs="photo-1",
        widgets={
            "space": "indoor",
            "enhancement_options": ["turn-on-the-light", "turn on the light"],
        },
    )
    assert prepared.widgets[1].item_slugs == (f"item-turn-on-the-light-{OPTIONS}",)


def test_tool_named_without_prefix_or_by_name(catalogue: Catalogue) -> None:
    for name in ("virtual-staging", "Virtual Staging", "AI Virtual Staging"):
        prepared = plan_process(
            catalogue, tool=name, inputs="photo-1", widgets={"space": "bedroom", "style": "modern"}
        )
        assert prepared.tool == VS


def test_request_body_has_the_spec_shape(catalogue: Catalogue) -> None:
    prepared = staging(catalogue, {"space": "bedroom", "style": "modern"})
    assert prepared.request_body(order_id="o-1") == {
        "order_id": "o-1",
        "tool": VS,
        "asset_map": {"tool-virtual-staging-input-image": "photo-1"},
        "widgets": prepared.widgets_json(),
    }
    mask = plan_process(
        catalogue, tool=ToolSlug.ITEM_REMOVAL_MASK, inputs={"image": "photo-1", "mask": "mask-1"}
    )
    body = mask.request_body(order_id="o-1", process_group_id="g-1")
    assert "widgets" not in body
    assert body["process_group_id"] == "g-1"


# ------------------------------------------------------------------------------ furniture alias


def test_alias_sends_the_catalogue_slug(catalogue: Catalogue) -> None:
    prepared = plan_process(
        catalogue,
        tool=ToolSlug.FURNITURE_RESTYLE,
        inputs="photo-1",
        widgets={"space": "bedroom", "style": "modern"},
    )
    assert prepared.tool == ToolSlug.FURNITURE_SET_RESTYLE
    assert prepared.asset_map == {"tool-furniture-restyle-input-image": "photo-1"}
    assert prepared.widgets[0].slug == "widget-space-tool-furniture-restyle"
    assert prepared.widgets[1].item_slugs == ("item-modern-widget-style-tool-furniture-restyle",)


def test_alias_spellings_of_widget_and_slot_names_are_understood(catalogue: Catalogue) -> None:
    prepared = plan_process(
        catalogue,
        tool=ToolSlug.FURNITURE_SET_RESTYLE,
        asset_map={"tool-furniture-set-restyle-input-image": "photo-1"},
        widgets={
            "widget-space-tool-furniture-set-restyle": "item-kitchen-widget-space-"
            "tool-furniture-set-restyle",
            "style": "modern",
        },
    )
    assert prepared.asset_map == {"tool-furniture-restyle-input-image": "photo-1"}
    assert prepared.widgets[0] == WidgetSelection(
        "widget-space-tool-furniture-restyle",
        ("item-kitchen-widget-space-tool-furniture-restyle",),
    )


def test_the_fetched_list_decides_the_slug_sent(make_catalogue: Callable[..., Catalogue]) -> None:
    renamed = [
        Tool(id=t.id, name=t.name, slug=ToolSlug.FURNITURE_RESTYLE)
        if t.slug == ToolSlug.FURNITURE_SET_RESTYLE
        else t
        for t in TOOLS
    ]
    catalogue = make_catalogue(tools=renamed)
    prepared = plan_process(
        catalogue,
        tool=ToolSlug.FURNITURE_SET_RESTYLE,
        inputs="photo-1",
        widgets={"space": "bedroom", "style": "modern"},
    )
    assert prepared.tool == ToolSlug.FURNITURE_RESTYLE


@pytest.mark.parametrize("unknown_status", [404, 400])
async def test_widgets_fetched_under_the_alias_when_the_listed_slug_has_none(
    unknown_status: int,
) -> None:
    source = CatalogueSource(unknown_status=unknown_status)
    source.widgets[ToolSlug.FURNITURE_RESTYLE] = source.widgets.pop(ToolSlug.FURNITURE_SET_RESTYLE)
    prepared = await prepare_process(
        source.cache(),
        tool=ToolSlug.FURNITURE_SET_RESTYLE,
        asset_map=None,
        inputs="photo-1",
        widgets={"space": "bedroom", "style": "modern"},
    )
    assert source.widget_calls == [ToolSlug.FURNITURE_SET_RESTYLE, ToolSlug.FURNITURE_RESTYLE]
    assert prepared.tool == ToolSlug.FURNITURE_SET_RESTYLE
    assert prepared.widgets[0].slug == "widget-space-tool-furniture-restyle"


# ---------------------------------------------------------------------------------------- inputs


def test_one_image_fills_the_single_slot(catalogue: Catalogue) -> None:
    prepared = plan_process(catalogue, tool=ToolSlug.ITEM_REMOVAL, inputs="photo-1")
    assert prepared.asset_map == {"tool-item-removal-input-image": "photo-1"}


@pytest.mark.parametrize(
    "inputs",
    [
        {"image": "photo-1", "mask": "mask-1"},
        {"Image": "photo-1", "MASK": "mask-1"},
        {
            "tool-item-removal-mask-input-image": "photo-1",
            "tool-item-removal-mask-input-mask": "mask-1",
        },
    ],
)
def test_mask_tool_takes_named_inputs(catalogue: Catalogue, inputs: dict[str, str]) -> None:
    prepared = plan_process(catalogue, tool=ToolSlug.ITEM_REMOVAL_MASK, inputs=inputs)
    assert prepared.asset_map == {
        "tool-item-removal-mask-input-image": "photo-1",
        "tool-item-removal-mask-input-mask": "mask-1",
    }


def test_asset_map_is_the_wire_form_of_inputs(catalogue: Catalogue) -> None:
    wire = {"tool-item-removal-input-image": "photo-1"}
    prepared = plan_process(catalogue, tool=ToolSlug.ITEM_REMOVAL, asset_map=wire)
    assert prepared.asset_map == wire


def test_before_and_after_for_convention_tools(catalogue: Catalogue) -> None:
    prepared = plan_process(
        catalogue, tool=ToolSlug.DAY_TO_DUSK, inputs={"before": "photo-1", "after": "photo-2"}
    )
    assert prepared.asset_map == {
        "tool-day-to-dusk-input-image-before": "photo-1",
        "tool-day-to-dusk-input-image-after": "photo-2",
    }
    layout = input_slots(ToolSlug.DAY_TO_DUSK)
    assert not layout.documented
    assert input_slots(ToolSlug.ITEM_REMOVAL_MASK).documented


def test_inputs_default_to_the_orders_photo_and_mask(
    catalogue: Catalogue, order_assets: tuple[Asset, ...]
) -> None:
    staged = staging(catalogue, {"space": "bedroom", "style": "modern"})
    assert staged.asset_map == {"tool-virtual-staging-input-image": "photo-1"}
    prepared = plan_process(catalogue, tool=ToolSlug.ITEM_REMOVAL_MASK, order_assets=order_assets)
    assert prepared.asset_map == {
        "tool-item-removal-mask-input-image": "photo-1",
        "tool-item-removal-mask-input-mask": "mask-1",
    }
    no_inputs = plan_process(catalogue, tool=ToolSlug.ITEM_REMOVAL, order_assets=order_assets)
    assert no_inputs.asset_map == {"tool-item-removal-input-image": "photo-1"}


def test_no_inputs_and_no_order_names_the_fix(catalogue: Catalogue) -> None:
    with pytest.raises(InputError, match=r"no input image given .* inputs=<asset id>"):
        plan_process(catalogue, tool=ToolSlug.ITEM_REMOVAL)


# ------------------------------------------------------------------------------- validate=False


async def test_unvalidated_expands_by_convention_without_fetching() -> None:
    source = CatalogueSource()
    prepared = await prepare_process(
        source.cache(),
        tool=ToolSlug.IMAGE_ENHANCEMENT,
        asset_map=None,
        inputs="photo-1",
        widgets={"space": "Outdoor", "enhancement_options": ["sky replacement"]},
        validate=False,
    )
    assert source.tool_calls == 0
    assert source.widget_calls == []
    assert not prepared.validated
    assert prepared.widgets_json() == [
        {"slug": "widget-area-tool-image-enhancement", "item_slugs": [OUTDOOR]},
        {"slug": OPTIONS, "item_slugs": [f"item-sky-replacement-{OPTIONS}"]},
    ]


async def test_unvalidated_passes_the_rest_through() -> None:
    source = CatalogueSource()
    prepared = await prepare_process(
        source.cache(),
        tool="tool-brand-new",
        asset_map={"tool-brand-new-input-anything": "a-1"},
        inputs=None,
        widgets=[{"slug": "widget-x", "item_slugs": ["item-y"]}],
        validate=False,
    )
    assert prepared.tool == "tool-brand-new"
    assert prepared.asset_map == {"tool-brand-new-input-anything": "a-1"}
    assert prepared.widgets_json() == [{"slug": "widget-x", "item_slugs": ["item-y"]}]


async def test_unvalidated_uses_what_the_cache_already_holds() -> None:
    source = CatalogueSource()
    cache = source.cache()
    await cache.catalogue(ToolSlug.FURNITURE_SET_RESTYLE)
    calls = (source.tool_calls, list(source.widget_calls))
    prepared = await prepare_process(
        cache,
        tool=ToolSlug.FURNITURE_RESTYLE,
        asset_map=None,
        inputs="photo-1",
        widgets={"Room type": "Living Room", "style": "bogus-style"},
        validate=False,
    )
    assert (source.tool_calls, source.widget_calls) == calls
    assert prepared.tool == ToolSlug.FURNITURE_SET_RESTYLE
    assert prepared.widgets_json() == [
        {
            "slug": "widget-space-tool-furniture-restyle",
            "item_slugs": ["item-living-room-widget-space-tool-furniture-restyle"],
        },
        {
            "slug": "widget-style-tool-furniture-restyle",
            "item_slugs": ["item-bogus-style-widget-style-tool-furniture-restyle"],
        },
    ]


def test_checked_before_upload_with_placeholders(catalogue: Catalogue) -> None:
    prepared = plan_process(
        catalogue, tool=ToolSlug.ITEM_REMOVAL_MASK, inputs={"image": "0", "mask": "1"}
    )
    real = prepared.with_asset_ids({"0": "photo-1", "1": "mask-1"})
    assert real.asset_map == {
        "tool-item-removal-mask-input-image": "photo-1",
        "tool-item-removal-mask-input-mask": "mask-1",
    }
    assert real.tool == prepared.tool
    with pytest.raises(InputError, match="no asset id given for the placeholder"):
        prepared.with_asset_ids({"0": "photo-1"})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PreparedProcess(tool="", asset_map={"s": "a"}), "tool must be a non-empty"),
        (lambda: PreparedProcess(tool=VS, asset_map={}), "asset_map must map"),
        (lambda: PreparedProcess(tool=VS, asset_map={"s": ""}), r"asset_map\['s'\]"),
        (
            lambda: PreparedProcess(
                tool=VS,
                asset_map={"s": "a"},
                widgets=[{"slug": SPACE_VS}],  # type: ignore[list-item]
            ),
            "must be a WidgetSelection, not dict",
        ),
        (lambda: WidgetSelection("", ("item-x",)), "slug must be a non-empty"),
        (lambda: WidgetSelection(SPACE_VS, ("",)), "an item slug of widget"),
    ],
)
def test_a_prepared_request_made_by_hand_is_checked_when_made(
    make: Callable[[], object], message: str
) -> None:
    # create_prepared sends a PreparedProcess as it is: its shape is checked once, here.
    with pytest.raises(ValidationError, match=message):
        make()
