"""V1 names and submit bodies translated to V3 (spec 4.12, 9; decision 8)."""

from __future__ import annotations

import re

import pytest

from asyncsdk import (
    V1_ENDPOINTS,
    Catalogue,
    ToolSlug,
    V1MappingError,
    translate_v1_submit,
    v1_service_to_tool,
    v1_space_to_item,
)

VS = ToolSlug.VIRTUAL_STAGING
SPACE = "widget-space-tool-virtual-staging"
STYLE = "widget-style-tool-virtual-staging"


def test_service_names() -> None:
    assert v1_service_to_tool("service-ai-virtual-staging") == VS
    assert v1_service_to_tool(" Service-AI-Virtual-Staging ") == VS
    # Other names follow the same pattern where it lands on a V3 tool.
    assert v1_service_to_tool("service-ai-day-to-dusk") == ToolSlug.DAY_TO_DUSK


def test_unknown_service_says_what_to_do() -> None:
    with pytest.raises(V1MappingError) as caught:
        v1_service_to_tool("service-ai-teleport")
    message = str(caught.value)
    assert "is not known" in message
    # Every name that maps is listed, and the fix is a call that exists.
    for name in ("service-ai-virtual-staging", "service-ai-day-to-dusk"):
        assert name in message
        assert v1_service_to_tool(name)
    assert "client.processes.create(order_id, tool, widgets=...)" in message


def test_service_pattern_checked_against_the_catalogue(catalogue: Catalogue) -> None:
    assert v1_service_to_tool("service-ai-furniture-restyle", catalogue=catalogue) == (
        ToolSlug.FURNITURE_SET_RESTYLE
    )


def test_documented_space_names() -> None:
    assert v1_space_to_item("space-bedroom") == (
        SPACE,
        "item-bedroom-widget-space-tool-virtual-staging",
    )
    assert v1_space_to_item("space-living-room")[1] == (
        "item-living-room-widget-space-tool-virtual-staging"
    )


def test_unknown_space_without_catalogue_says_what_to_do() -> None:
    with pytest.raises(V1MappingError, match=r"not known without the catalogue: pass catalogue="):
        v1_space_to_item("space-dining-room")


def test_space_names_checked_in_the_catalogue(catalogue: Catalogue) -> None:
    assert v1_space_to_item("space-dining-room", catalogue=catalogue)[1] == (
        "item-dining-room-widget-space-tool-virtual-staging"
    )
    with pytest.raises(V1MappingError, match=r"has no V3 item in the catalogue.*did you mean"):
        v1_space_to_item("space-bathrom", catalogue=catalogue)


def test_submit_with_space_and_numeric_widgets_needs_an_id_map() -> None:
    body = {
        "order_id": "v1-order",
        "space_name": "space-bedroom",
        "selected_widgets": [{"id": "12", "item_id": "1203"}],
    }
    with pytest.raises(V1MappingError) as caught:
        translate_v1_submit(body)
    message = str(caught.value)
    assert "V1 widget id '12' cannot be mapped" in message
    assert "V1 catalogue of numeric ids is not available" in message
    assert "id_map=" in message


def test_submit_with_selected_widgets(catalogue: Catalogue) -> None:
    body = {
        "order_id": "v1-order",
        "space_name": "space-bedroom",
        "selected_widgets": [{"id": "12", "item_id": 1203}],
    }
    translated = translate_v1_submit(
        body, id_map={"12": STYLE, 1203: "item-modern-widget-style-tool-virtual-staging"}
    )
    assert translated.tool == VS
    assert translated.v1_order_id == "v1-order"
    assert translated.process_arguments() == {
        "tool": VS,
        "widgets": [
            {"slug": SPACE, "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"]},
            {"slug": STYLE, "item_slugs": ["item-modern-widget-style-tool-virtual-staging"]},
        ],
    }
    # The result names widgets and items the catalogue has, and every widget the tool requires.
    for selection in translated.widgets:
        widget = catalogue.widget(VS, selection.slug)
        items = [catalogue.item(VS, widget, item).slug for item in selection.item_slugs]
        assert items == list(selection.item_slugs)
    required = {w.slug for w in catalogue.widgets_of(VS) if w.is_active and not w.is_optional}
    assert required <= {selection.slug for selection in translated.widgets}


def test_submit_with_service_name_and_widget_ids(catalogue: Catalogue) -> None:
    body = {
        "order_id": "v1-order",
        "service_name": "service-ai-virtual-staging",
        "widget_ids": [7, 8],
    }
    translated = translate_v1_submit(
        body,
        id_map={
            7: "item-kitchen-widget-space-tool-virtual-staging",
            8: "item-hampton-widget-style-tool-virtual-staging",
        },
        catalogue=catalogue,
    )
    assert [(w.slug, w.item_slugs) for w in translated.widgets] == [
        (SPACE, ("item-kitchen-widget-space-tool-virtual-staging",)),
        (STYLE, ("item-hampton-widget-style-tool-virtual-staging",)),
    ]


def test_v3_slugs_inside_a_v1_body_pass_through() -> None:
    body = {
        "service_name": "service-ai-virtual-staging",
        "widget_ids": ["item-modern-widget-style-tool-virtual-staging"],
        "selected_widgets": [
            {"id": SPACE, "item_id": "item-kitchen-widget-space-tool-virtual-staging"}
        ],
    }
    translated = translate_v1_submit(body)
    assert {w.slug for w in translated.widgets} == {SPACE, STYLE}


def test_unknown_fields_are_named() -> None:
    with pytest.raises(V1MappingError, match=r"no known V3 counterpart: \['callback_url'\]"):
        translate_v1_submit({"space_name": "space-bedroom", "callback_url": "https://x"})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"selected_widgets": "12"}, "selected_widgets must be a list"),
        ({"selected_widgets": [{"id": "1"}]}, "must be {'id': ..., 'item_id': ...}"),
        ({"widget_ids": [True]}, "must be a number or a string"),
        ({"space_name": 3}, "space_name must be a string"),
    ],
)
def test_malformed_bodies(body: dict[str, object], message: str) -> None:
    with pytest.raises(V1MappingError, match=re.escape(message)):
        translate_v1_submit(body)


def test_endpoint_table() -> None:
    assert V1_ENDPOINTS["POST /v1/order"] == "POST /v3/process"
    assert V1_ENDPOINTS["POST /v1/order/image"] == "POST /v3/order"
