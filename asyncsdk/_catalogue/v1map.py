"""From the legacy V1 API to V3: service names, space names and whole submit bodies (spec 9).

V1 named a tool by *service* (``service-ai-virtual-staging``), a room type by *space*
(``space-bedroom``) and settings by numeric widget and item ids.  V3 names all three by slug: the
tool slug (``tool-virtual-staging``) and widget item slugs inside the ``widgets`` array
(``item-bedroom-widget-space-tool-virtual-staging``).

What is known, and so mapped:

* services: ``service-ai-virtual-staging`` is ``tool-virtual-staging`` (spec 9); other names
  follow the same pattern (``service-ai-<x>`` -> ``tool-<x>``) and are mapped only when the result
  is a V3 tool (one of the documented slugs, or one of the catalogue given);
* spaces: ``space-<x>`` is the item ``item-<x>`` of the tool's space widget, mapped when that item
  is known: the documented ones (bedroom, kitchen, living-room for virtual staging) or, given a
  catalogue, any item of the tool's space widget;
* numeric widget and item ids: not mappable, because the V1 widget catalogue is not published.
  Pass ``id_map`` (V1 id -> V3 slug, looked up once in ``client.tools.widgets(...)``) to map them.

Anything not known raises :class:`V1MappingError` saying what to do instead.  The V1 order id does
not carry over: V3 needs the image uploaded again as a V3 order (``POST /v3/order``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import attrs

from asyncsdk._catalogue.snapshot import Catalogue, WidgetSelection
from asyncsdk._errors import CatalogueError, V1MappingError
from asyncsdk._models import ToolSlug

__all__ = [
    "V1_ENDPOINTS",
    "V1Translation",
    "translate_v1_submit",
    "v1_service_to_tool",
    "v1_space_to_item",
]

#: The V1 service names spec 9 maps by name.
_SERVICES: Final[Mapping[str, str]] = MappingProxyType(
    {"service-ai-virtual-staging": ToolSlug.VIRTUAL_STAGING}
)

#: The V3 tool slugs the spec documents (2.4).
_DOCUMENTED_TOOLS: Final = frozenset(
    value
    for name, value in vars(ToolSlug).items()
    if name.isupper() and isinstance(value, str) and value.startswith("tool-")
)

#: Space values the spec shows as V3 item slugs, per tool (2.5).
_DOCUMENTED_SPACES: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {ToolSlug.VIRTUAL_STAGING: frozenset({"bedroom", "kitchen", "living-room"})}
)

#: V1 endpoint -> V3 endpoint (spec 9.3).
V1_ENDPOINTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "POST /v1/order/image": "POST /v3/order",
        "POST /v1/order": "POST /v3/process",
        "GET /v1/order/:id": "GET /v3/order/:id",
    }
)

_SUBMIT_FIELDS: Final = frozenset(
    {"order_id", "service_name", "space_name", "selected_widgets", "widget_ids"}
)


@attrs.frozen(kw_only=True)
class V1Translation:
    """V3 process-create arguments translated from a V1 submit body.

    ``v1_order_id`` is kept for reference only: a V3 process needs a V3 order, so upload the image
    with ``POST /v3/order`` and pass its asset id as the input.
    """

    tool: str
    widgets: tuple[WidgetSelection, ...] = ()
    v1_order_id: str = ""

    def widgets_json(self) -> list[dict[str, Any]]:
        """The widgets as the service's JSON list (each :meth:`WidgetSelection.to_wire`)."""
        return [selection.to_wire() for selection in self.widgets]

    def process_arguments(self) -> dict[str, Any]:
        """``tool`` and ``widgets`` as keyword arguments of process creation."""
        return {"tool": self.tool, "widgets": self.widgets_json()}


def _norm(text: str) -> str:
    return "-".join(text.strip().lower().replace("_", " ").split())


def v1_service_to_tool(service_name: str, *, catalogue: Catalogue | None = None) -> str:
    """The V3 tool slug of a V1 service name, or :class:`V1MappingError`."""
    name = _norm(service_name)
    if name in _SERVICES:
        return _SERVICES[name]
    if name.startswith("service-ai-"):
        candidate = "tool-" + name[len("service-ai-") :]
        if catalogue is not None:
            found = catalogue.find_tool(candidate)
            if found is not None:
                return found.slug
        if candidate in _DOCUMENTED_TOOLS:
            return candidate
    known = sorted(
        {*_SERVICES, *(f"service-ai-{t.removeprefix('tool-')}" for t in _DOCUMENTED_TOOLS)}
    )
    raise V1MappingError(
        f"the V3 tool for the V1 service {service_name!r} is not known (known: {', '.join(known)};"
        " with catalogue=, any service-ai-<x> whose tool-<x> it lists). Pick the V3 tool from "
        "client.tools.list() and create the process with it: client.processes.create(order_id, "
        "tool, widgets=...)"
    )


def v1_space_to_item(
    space_name: str,
    *,
    tool: str = ToolSlug.VIRTUAL_STAGING,
    catalogue: Catalogue | None = None,
) -> tuple[str, str]:
    """``(widget slug, item slug)`` of a V1 space name for ``tool``, or :class:`V1MappingError`.

    ``space-bedroom`` -> ``("widget-space-tool-virtual-staging",
    "item-bedroom-widget-space-tool-virtual-staging")``.
    """
    value = _norm(space_name)
    if value.startswith("space-"):
        value = value[len("space-") :]
    if not value:
        raise V1MappingError(f"{space_name!r} is not a V1 space name (space-bedroom style)")
    if catalogue is not None and catalogue.find_tool(tool) is not None:
        listed = catalogue.tool(tool).slug
        if catalogue.has_widgets_of(listed):
            try:
                widget = catalogue.widget(listed, "space")
                item = catalogue.item(listed, widget, value)
            except CatalogueError as exc:
                raise V1MappingError(
                    f"the V1 space {space_name!r} has no V3 item in the catalogue: {exc}"
                ) from exc
            return widget.slug, item.slug
    widget_slug = f"widget-space-{tool}"
    if value in _DOCUMENTED_SPACES.get(tool, frozenset()):
        return widget_slug, f"item-{value}-{widget_slug}"
    raise V1MappingError(
        f"the V3 item for the V1 space {space_name!r} of {tool!r} is not known without the "
        "catalogue: pass catalogue=await client.catalogue.catalogue(tool) to check it there, or "
        "pick the item "
        f"from client.tools.widgets({tool!r}) and pass widgets={{'space': ...}} directly"
    )


def _lookup_id(kind: str, v1_id: object, id_map: Mapping[str, str], tool: str) -> str:
    if isinstance(v1_id, str) and v1_id.startswith(("widget-", "item-")):
        return v1_id  # already a V3 slug
    if isinstance(v1_id, bool) or not isinstance(v1_id, int | str):
        raise V1MappingError(f"V1 {kind} id must be a number or a string, not {v1_id!r}")
    mapped = id_map.get(str(v1_id))
    if mapped is not None:
        return mapped
    raise V1MappingError(
        f"V1 {kind} id {v1_id!r} cannot be mapped to a V3 slug: V3 names widgets and items by "
        "slug, and the V1 catalogue of numeric ids is not available to this SDK. Look the "
        f"{kind} up in client.tools.widgets({tool!r}) and pass id_map={{{v1_id!r}: '<V3 slug>'}}, "
        "or give the V3 widgets directly"
    )


def _widget_of_item(item_slug: str, tool: str, catalogue: Catalogue | None) -> str:
    if catalogue is not None and catalogue.has_widgets_of(tool):
        found = catalogue.find_item(tool, item_slug)
        if found is not None:
            return found[0].slug
    marker = item_slug.find("-widget-")
    if item_slug.startswith("item-") and marker > 0:
        return item_slug[marker + 1 :]
    raise V1MappingError(
        f"cannot tell which widget the item {item_slug!r} belongs to: map the V1 id to a full V3 "
        "item slug (item-<value>-widget-<purpose>-<tool>) or pass the catalogue"
    )


def translate_v1_submit(
    body: Mapping[str, Any],
    *,
    id_map: Mapping[str | int, str] | None = None,
    catalogue: Catalogue | None = None,
) -> V1Translation:
    """Translate a V1 ``POST /v1/order`` body into V3 process arguments (spec 4.12, decision 8).

    Both documented shapes are read: ``{order_id, space_name, selected_widgets: [{id, item_id}]}``
    (the virtual staging service) and ``{order_id, service_name, widget_ids: [int, ...]}``.
    ``id_map`` maps V1 widget/item ids to V3 slugs; ids that already are V3 slugs pass through.
    ``widget_ids`` entries are read as item ids (each must map to a full V3 item slug).
    """
    if not isinstance(body, Mapping):
        raise V1MappingError(f"a V1 submit body is a JSON object, not {type(body).__name__}")
    unknown = sorted(set(body) - _SUBMIT_FIELDS)
    if unknown:
        raise V1MappingError(
            f"the V1 submit body has fields with no known V3 counterpart: {unknown}; "
            f"the known fields are {sorted(_SUBMIT_FIELDS)}. Drop them or set them in V3 yourself"
        )
    ids = {str(key): value for key, value in (id_map or {}).items()}
    service = body.get("service_name") or "service-ai-virtual-staging"
    if not isinstance(service, str):
        raise V1MappingError(f"service_name must be a string, not {service!r}")
    tool = v1_service_to_tool(service, catalogue=catalogue)
    widget_tool = (
        catalogue.tool(tool).slug
        if catalogue is not None and catalogue.find_tool(tool) is not None
        else tool
    )

    chosen: dict[str, list[str]] = {}

    def add(widget_slug: str, item_slug: str) -> None:
        items = chosen.setdefault(widget_slug, [])
        if item_slug not in items:
            items.append(item_slug)

    space = body.get("space_name")
    if space is not None:
        if not isinstance(space, str):
            raise V1MappingError(f"space_name must be a string, not {space!r}")
        add(*v1_space_to_item(space, tool=tool, catalogue=catalogue))

    selected = body.get("selected_widgets") or ()
    if not isinstance(selected, Sequence) or isinstance(selected, str):
        raise V1MappingError(
            f"selected_widgets must be a list of {{id, item_id}}, not {selected!r}"
        )
    for entry in selected:
        if not isinstance(entry, Mapping) or "id" not in entry or "item_id" not in entry:
            raise V1MappingError(
                f"each selected_widgets entry must be {{'id': ..., 'item_id': ...}}, not {entry!r}"
            )
        add(
            _lookup_id("widget", entry["id"], ids, tool),
            _lookup_id("item", entry["item_id"], ids, tool),
        )

    widget_ids = body.get("widget_ids") or ()
    if not isinstance(widget_ids, Sequence) or isinstance(widget_ids, str):
        raise V1MappingError(f"widget_ids must be a list of ids, not {widget_ids!r}")
    for v1_id in widget_ids:
        item_slug = _lookup_id("item", v1_id, ids, tool)
        add(_widget_of_item(item_slug, widget_tool, catalogue), item_slug)

    order_id = body.get("order_id", "")
    return V1Translation(
        tool=tool,
        widgets=tuple(WidgetSelection(slug, tuple(items)) for slug, items in chosen.items()),
        v1_order_id=order_id if isinstance(order_id, str) else str(order_id),
    )
