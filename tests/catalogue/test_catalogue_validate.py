"""Every rule checked before a process is sent, and the fix each message names."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
from catalogue_fixture import ENH, OPTIONS, OUTDOOR, TOOLS, WIDGETS, CatalogueSource

from asyncsdk import (
    Asset,
    Catalogue,
    CatalogueError,
    InactiveError,
    InputError,
    MissingWidgetError,
    SelectionError,
    ToolSlug,
    UnknownItemError,
    UnknownToolError,
    UnknownWidgetError,
    ValidationError,
)

# plan_process (a request planned against a catalogue snapshot, no I/O) and prepare_process
# (the same through a cache) have no public name: a client reaches them only through
# processes.prepare, and these tests drive them with in-memory catalogues.
from asyncsdk._catalogue import plan_process, prepare_process

VS = ToolSlug.VIRTUAL_STAGING


def test_errors_are_validation_errors() -> None:
    assert issubclass(CatalogueError, ValidationError)
    for cls in (
        UnknownToolError,
        InactiveError,
        UnknownWidgetError,
        MissingWidgetError,
        UnknownItemError,
        SelectionError,
        InputError,
    ):
        assert issubclass(cls, CatalogueError)


# ------------------------------------------------------------------------------------------ tools


def test_unknown_tool_suggests_the_closest(catalogue: Catalogue) -> None:
    with pytest.raises(UnknownToolError) as caught:
        plan_process(catalogue, tool="tool-virtual-stagin", inputs="photo-1")
    err = caught.value
    assert "did you mean 'tool-virtual-staging'?" in str(err)
    assert err.suggestion == VS
    assert "tool-day-to-dusk" in err.valid


def test_unknown_tool_without_a_close_match_lists_the_tools(catalogue: Catalogue) -> None:
    with pytest.raises(UnknownToolError, match="did you mean 'tool-virtual-staging'"):
        plan_process(catalogue, tool="virtual-stageing", inputs="photo-1")
    with pytest.raises(UnknownToolError) as caught:
        plan_process(catalogue, tool="xyzzy", inputs="photo-1")
    assert "did you mean" not in str(caught.value)
    assert "'tool-floor-change'" in str(caught.value)


def test_inactive_tool(make_catalogue: Callable[..., Catalogue]) -> None:
    tools = [attrs.evolve(t, is_active=t.slug != ToolSlug.DAY_TO_DUSK) for t in TOOLS]
    with pytest.raises(InactiveError, match=r"'tool-day-to-dusk' \(AI Day to Dusk\) is not active"):
        plan_process(make_catalogue(tools=tools), tool=ToolSlug.DAY_TO_DUSK, inputs="photo-1")


async def test_inactive_tool_stops_before_its_widgets_are_fetched() -> None:
    source = CatalogueSource(tools=tuple(attrs.evolve(t, is_active=t.slug != VS) for t in TOOLS))
    with pytest.raises(InactiveError, match="pick an active tool"):
        await prepare_process(
            source.cache(), tool=VS, asset_map=None, inputs="photo-1", widgets=None
        )
    assert source.widget_calls == []


# ---------------------------------------------------------------------------------------- widgets


def test_unknown_widget_suggests_and_lists(catalogue: Catalogue) -> None:
    with pytest.raises(UnknownWidgetError) as caught:
        plan_process(catalogue, tool=VS, inputs="photo-1", widgets={"stlye": "modern"})
    message = str(caught.value)
    assert "has no widget 'stlye'" in message
    assert "did you mean 'style'?" in message
    assert "'space', 'style'" in message


def test_widgets_for_a_tool_without_widgets(catalogue: Catalogue) -> None:
    with pytest.raises(UnknownWidgetError, match="takes no widgets; drop 'style'"):
        plan_process(
            catalogue,
            tool=ToolSlug.ITEM_REMOVAL_MASK,
            inputs={"image": "photo-1", "mask": "mask-1"},
            widgets={"style": "modern"},
        )


def test_inactive_widget(catalogue: Catalogue) -> None:
    with pytest.raises(InactiveError, match=r"widget 'lighting' .* is not active; drop it"):
        plan_process(
            catalogue,
            tool=ToolSlug.INTERIOR_DESIGN,
            inputs="photo-1",
            widgets={"space": "bedroom", "style": "modern", "lighting": "warm"},
        )


def test_missing_required_widget_names_it_and_its_values(catalogue: Catalogue) -> None:
    with pytest.raises(MissingWidgetError) as caught:
        plan_process(catalogue, tool=VS, inputs="photo-1", widgets={"space": "bedroom"})
    message = str(caught.value)
    assert "needs the widget 'style' (widget-style-tool-virtual-staging)" in message
    assert "'modern', 'scandinavian', 'industrial', 'hampton'" in message
    assert "art-deco" not in message  # inactive items are not offered
    assert "the default is 'modern'" in message
    assert caught.value.widget == "widget-style-tool-virtual-staging"


def test_required_widget_given_empty_is_missing(catalogue: Catalogue) -> None:
    with pytest.raises(MissingWidgetError, match="'space'"):
        plan_process(catalogue, tool=VS, inputs="photo-1", widgets={"space": [], "style": "modern"})


def test_optional_widget_may_be_left_out(catalogue: Catalogue) -> None:
    prepared = plan_process(catalogue, tool=ENH, inputs="photo-1", widgets={"space": "indoor"})
    assert len(prepared.widgets) == 1


def test_same_widget_twice(catalogue: Catalogue) -> None:
    with pytest.raises(SelectionError, match="given twice"):
        plan_process(
            catalogue,
            tool=VS,
            inputs="photo-1",
            widgets={
                "space": "bedroom",
                "widget-space-tool-virtual-staging": "kitchen",
                "style": "modern",
            },
        )


def test_ambiguous_widget_name(make_catalogue: Callable[..., Catalogue]) -> None:
    space, style = WIDGETS[VS]
    catalogue = make_catalogue(widgets={VS: (space, attrs.evolve(style, key="space"))})
    with pytest.raises(
        UnknownWidgetError, match=r"names several widgets .* use the full widget slug"
    ):
        plan_process(catalogue, tool=VS, inputs="photo-1", widgets={"space": "bedroom"})


# ------------------------------------------------------------------------------------------ items


def test_several_items_in_a_single_select_widget(catalogue: Catalogue) -> None:
    with pytest.raises(SelectionError) as caught:
        plan_process(
            catalogue,
            tool=VS,
            inputs="photo-1",
            widgets={"space": ["bedroom", "kitchen"], "style": "modern"},
        )
    assert "takes one item, got 2: 'bedroom', 'kitchen'; keep one" in str(caught.value)


def test_toggle_widgets_are_multi_select(make_catalogue: Callable[..., Catalogue]) -> None:
    area, options = WIDGETS[ENH]
    # The spec names the options widget multi-select even when its type says otherwise...
    renamed = make_catalogue(widgets={ENH: (area, attrs.evolve(options, type="tile"))})
    picks = {"space": "outdoor", "enhancement_options": ["sky-replacement", "lawn-replacement"]}
    assert (
        len(plan_process(renamed, tool=ENH, inputs="p", widgets=picks).widgets[1].item_slugs) == 2
    )
    # ...and any toggle widget is multi-select, while a tile widget is not.
    space, style = WIDGETS[VS]
    toggled = make_catalogue(widgets={VS: (attrs.evolve(space, type="toggle"), style)})
    both = {"space": ["bedroom", "kitchen"], "style": "modern"}
    assert len(plan_process(toggled, tool=VS, inputs="p", widgets=both).widgets[0].item_slugs) == 2


def test_item_not_of_its_widget_suggests_and_lists(catalogue: Catalogue) -> None:
    with pytest.raises(UnknownItemError) as caught:
        plan_process(
            catalogue, tool=VS, inputs="photo-1", widgets={"space": "bedrom", "style": "modern"}
        )
    message = str(caught.value)
    assert "'bedrom' is not an item of widget 'space'" in message
    assert "did you mean 'bedroom'?" in message
    assert "Valid values: 'bedroom', 'kitchen', 'living-room', 'dining-room', 'bathroom'" in message
    assert caught.value.suggestion == "bedroom"


def test_item_of_another_widget_says_where_it_belongs(catalogue: Catalogue) -> None:
    with pytest.raises(UnknownItemError, match="belongs to widget 'style'"):
        plan_process(
            catalogue,
            tool=VS,
            inputs="photo-1",
            widgets=[
                {
                    "slug": "widget-space-tool-virtual-staging",
                    "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
                },
                {"slug": "widget-style-tool-virtual-staging", "item_slugs": ["modern"]},
            ],
        )


def test_item_of_another_tool_is_refused(catalogue: Catalogue) -> None:
    with pytest.raises(UnknownItemError, match="is not an item of widget 'space'"):
        plan_process(
            catalogue,
            tool=VS,
            inputs="photo-1",
            widgets={
                "space": "item-bedroom-widget-space-tool-virtual-restaging",
                "style": "modern",
            },
        )


def test_inactive_item(catalogue: Catalogue) -> None:
    with pytest.raises(InactiveError, match=r"item 'garage' of widget 'space' is not active"):
        plan_process(
            catalogue, tool=VS, inputs="photo-1", widgets={"space": "garage", "style": "modern"}
        )


# ----------------------------------------------------------------------------------- accessibleIn


def test_outdoor_option_with_indoor_area_says_which_area_it_needs(catalogue: Catalogue) -> None:
    with pytest.raises(SelectionError) as caught:
        plan_process(
            catalogue,
            tool=ENH,
            inputs="photo-1",
            widgets={"space": "indoor", "enhancement_options": ["sky-replacement"]},
        )
    message = str(caught.value)
    assert "'sky-replacement' of widget 'enhancement_options' is available only when" in message
    assert "'space' is 'outdoor' (you selected 'indoor')" in message
    assert "set widgets={'space': 'outdoor', ...} or drop 'sky-replacement'" in message
    assert caught.value.valid == (OUTDOOR,)


def test_indoor_option_with_outdoor_area(catalogue: Catalogue) -> None:
    with pytest.raises(SelectionError, match="'space' is 'indoor'"):
        plan_process(
            catalogue,
            tool=ENH,
            inputs="photo-1",
            widgets={"space": "outdoor", "enhancement_options": ["add screen to tv"]},
        )


def test_options_available_in_both_areas_pass(catalogue: Catalogue) -> None:
    for area in ("indoor", "outdoor"):
        prepared = plan_process(
            catalogue,
            tool=ENH,
            inputs="photo-1",
            widgets={"space": area, "enhancement_options": ["add-fire-to-fireplace"]},
        )
        assert prepared.widgets[1].item_slugs == (f"item-add-fire-to-fireplace-{OPTIONS}",)


def test_accessible_in_with_nothing_selected_there(
    make_catalogue: Callable[..., Catalogue],
) -> None:
    area, options = WIDGETS[ENH]
    catalogue = make_catalogue(widgets={ENH: (attrs.evolve(area, is_optional=True), options)})
    with pytest.raises(SelectionError, match=r"'space' is 'outdoor' \(nothing is selected there\)"):
        plan_process(
            catalogue,
            tool=ENH,
            inputs="photo-1",
            widgets={"enhancement_options": ["lawn-replacement"]},
        )


# ----------------------------------------------------------------------------------------- inputs


def test_asset_not_in_the_order(catalogue: Catalogue, order_assets: tuple[Asset, ...]) -> None:
    with pytest.raises(InputError) as caught:
        plan_process(
            catalogue,
            tool=ToolSlug.ITEM_REMOVAL,
            inputs="photo-9",
            order_assets=order_assets,
        )
    message = str(caught.value)
    assert "asset 'photo-9'" in message
    assert "is not in the order" in message
    assert "photo-1 (primary_angle), photo-2 (secondary_angle), mask-1 (mask)" in message


def test_wrong_slot_names_list_the_right_ones(catalogue: Catalogue) -> None:
    with pytest.raises(InputError) as caught:
        plan_process(
            catalogue,
            tool=ToolSlug.ITEM_REMOVAL_MASK,
            inputs={"photo": "photo-1", "mask_image": "mask-1"},
        )
    message = str(caught.value)
    assert "{'image': ..., 'mask': ...}" in message
    assert "'tool-item-removal-mask-input-image', 'tool-item-removal-mask-input-mask'" in message
    assert "got 'photo', 'mask_image'" in message


def test_slot_of_another_tool(catalogue: Catalogue) -> None:
    with pytest.raises(InputError, match="'tool-virtual-staging-input-image'"):
        plan_process(
            catalogue,
            tool=VS,
            asset_map={"tool-virtual-restaging-input-image": "photo-1"},
            widgets={"space": "bedroom", "style": "modern"},
        )


def test_documented_single_slot_tool_refuses_before_after(catalogue: Catalogue) -> None:
    with pytest.raises(InputError, match=r"takes the input slots \{'image': ...\}"):
        plan_process(
            catalogue,
            tool=VS,
            inputs={"before": "photo-1", "after": "photo-2"},
            widgets={"space": "bedroom", "style": "modern"},
        )


def test_one_id_for_a_two_slot_tool(catalogue: Catalogue) -> None:
    with pytest.raises(InputError, match=r"takes several input images: pass inputs=\{'image'"):
        plan_process(catalogue, tool=ToolSlug.ITEM_REMOVAL_MASK, inputs="photo-1")


def test_missing_mask_slot(catalogue: Catalogue) -> None:
    with pytest.raises(InputError, match="got 'image'"):
        plan_process(catalogue, tool=ToolSlug.ITEM_REMOVAL_MASK, inputs={"image": "photo-1"})


def test_asset_map_and_inputs_together(catalogue: Catalogue) -> None:
    with pytest.raises(InputError, match=r"either asset_map= .* or inputs="):
        plan_process(
            catalogue,
            tool=ToolSlug.ITEM_REMOVAL,
            asset_map={"tool-item-removal-input-image": "photo-1"},
            inputs="photo-1",
        )


def test_photo_in_the_mask_slot(catalogue: Catalogue, order_assets: tuple[Asset, ...]) -> None:
    with pytest.raises(InputError, match="is the order's secondary_angle photo, not a mask"):
        plan_process(
            catalogue,
            tool=ToolSlug.ITEM_REMOVAL_MASK,
            inputs={"image": "photo-1", "mask": "photo-2"},
            order_assets=order_assets,
        )


def test_mask_in_the_image_slot(catalogue: Catalogue, order_assets: tuple[Asset, ...]) -> None:
    with pytest.raises(InputError, match="is a mask; pass the photo's id"):
        plan_process(
            catalogue, tool=ToolSlug.ITEM_REMOVAL, inputs="mask-1", order_assets=order_assets
        )


def test_same_asset_in_two_slots(catalogue: Catalogue) -> None:
    with pytest.raises(InputError, match="same asset goes into several input slots"):
        plan_process(
            catalogue, tool=ToolSlug.DAY_TO_DUSK, inputs={"before": "photo-1", "after": "photo-1"}
        )


def test_mask_tool_default_without_a_mask(catalogue: Catalogue) -> None:
    with pytest.raises(InputError, match="needs a mask, and the order has none"):
        plan_process(
            catalogue,
            tool=ToolSlug.ITEM_REMOVAL_MASK,
            order_assets=[Asset(id="photo-1")],
        )


def test_bad_widget_forms_are_refused(catalogue: Catalogue) -> None:
    with pytest.raises(ValidationError, match="not a string"):
        plan_process(catalogue, tool=VS, inputs="p", widgets="space=bedroom")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"widgets\[0\] must be"):
        plan_process(catalogue, tool=VS, inputs="p", widgets=[{"items": ["x"]}])
    with pytest.raises(ValidationError, match="must be an item name or a list"):
        plan_process(catalogue, tool=VS, inputs="p", widgets={"space": 3})  # type: ignore[dict-item]


async def test_a_refused_request_names_its_fix_and_the_fixed_one_is_complete() -> None:
    """What a caller sees: the error names the missing widget, its values and its default; the
    request written as the message says is accepted, with both widgets in its body."""
    cache = CatalogueSource().cache()

    with pytest.raises(MissingWidgetError) as refused:
        await prepare_process(
            cache, tool=VS, asset_map=None, inputs="photo-1", widgets={"space": "bedroom"}
        )
    error = refused.value
    assert (error.tool, error.widget) == (VS, "widget-style-tool-virtual-staging")
    assert error.valid == ("modern", "scandinavian", "industrial", "hampton")
    assert "add widgets={'style': <one of 'modern'" in str(error)
    assert "(the default is 'modern')" in str(error)

    fixed = await prepare_process(
        cache,
        tool=VS,
        asset_map=None,
        inputs="photo-1",
        widgets={"space": "bedroom", "style": error.valid[0]},
    )
    assert fixed.validated
    assert fixed.request_body(order_id="o-1") == {
        "order_id": "o-1",
        "tool": VS,
        "asset_map": {f"{VS}-input-image": "photo-1"},
        "widgets": [
            {
                "slug": "widget-space-tool-virtual-staging",
                "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"],
            },
            {
                "slug": "widget-style-tool-virtual-staging",
                "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
            },
        ],
    }
