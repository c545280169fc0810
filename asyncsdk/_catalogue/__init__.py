"""Catalogue-aware process requests: widgets by name, wrong processes caught before they cost money.

Every process costs money and the service has no idempotency key, so a request that the service
would reject (or, worse, accept and run wrongly) is best caught before it is sent.  This package
checks a process request against the tool catalogue (spec 2.4, 2.5, 4.8) and expands the short
forms people write into the wire form the service wants.  It holds protocol logic only: the
catalogue comes in through two async callables (``fetch_tools`` and ``fetch_widgets``), so nothing
here imports aiohttp.

Pieces:

* ``snapshot.py``: the names: slugs and their spellings, widget purposes, item values;
  :class:`Catalogue`, a frozen snapshot of the tools and of the widgets of some tools, with the
  lookups of a name; :class:`WidgetSelection`, what a widget name resolves to.
* ``slots.py``: a tool's input slots by the naming convention.
* ``cache.py``: :class:`CatalogueCache`, a per-client cache with a time to live; one fetch in
  flight per key, shared by every concurrent caller.
* ``widgets.py``: the shapes ``widgets=`` takes (read once, by :func:`widget_entries`), and their
  planning against a snapshot.
* ``memo.py``: :class:`PlanMemo`, checked plans kept per request (the layer's one speed measure).
* ``plan.py``: :func:`plan_process`, the pure check and expansion of one request against a
  :class:`Catalogue`, and :func:`prepare_process`, which fetches what it needs.
* ``v1map.py``: V1 service and space names translated to V3 tools and items.

Conventions (spec 2.4, 2.5, 4.8; decisions 6 and 7):

* Widget slugs read ``widget-<purpose>-<tool-slug>``; item slugs read
  ``item-<value>-<widget-slug>``.  A widget is named by its ``key`` field, its purpose, its name
  or its full slug; an item by its value (``living-room``, also ``living room``/``Living Room``),
  its name, or its full slug.
* ``tool-furniture-set-restyle`` (the catalogue list) and ``tool-furniture-restyle`` (the tool's
  reference) are one tool.  The slug *sent* is the one in the fetched catalogue list; input slots
  and convention-built widget slugs use the reference spelling ``tool-furniture-restyle``.
* Input slots: the catalogue API has no list of a tool's input slots, so they follow the naming
  convention ``<tool-slug>-input-image``.  The slots of the five tools in spec 4.8 are checked
  exactly (``tool-item-removal-mask`` takes ``-input-image`` and ``-input-mask``); any other tool
  takes either the one slot ``-input-image`` or the pair ``-input-image-before``/``-after``.
* Multi-select: a widget takes several items when its ``type`` is ``toggle`` or when the spec names
  it multi-select (the enhancement options widget).  Every other widget takes one item.
* ``accessibleIn``: an item with a list there is allowed only when one of the listed items is
  selected in another widget of the same request; ``null`` (and an empty list) mean no restriction.
* A widget given with no items (``{"enhancement_options": []}``) is left out of the request; a
  required one is then reported missing.
"""

from asyncsdk._catalogue.cache import CatalogueCache
from asyncsdk._catalogue.memo import PlanMemo
from asyncsdk._catalogue.plan import (
    PreparedProcess,
    check_asset_map,
    plan_process,
    prepare_process,
)
from asyncsdk._catalogue.slots import SlotLayout, input_slots
from asyncsdk._catalogue.snapshot import (
    MULTI_SELECT_WIDGETS,
    TOOL_ALIASES,
    Catalogue,
    WidgetSelection,
)
from asyncsdk._catalogue.v1map import (
    V1_ENDPOINTS,
    V1Translation,
    translate_v1_submit,
    v1_service_to_tool,
    v1_space_to_item,
)
from asyncsdk._catalogue.widgets import WidgetsArg, widget_entries

__all__ = [
    "MULTI_SELECT_WIDGETS",
    "TOOL_ALIASES",
    "V1_ENDPOINTS",
    "Catalogue",
    "CatalogueCache",
    "PlanMemo",
    "PreparedProcess",
    "SlotLayout",
    "V1Translation",
    "WidgetSelection",
    "WidgetsArg",
    "check_asset_map",
    "input_slots",
    "plan_process",
    "prepare_process",
    "translate_v1_submit",
    "v1_service_to_tool",
    "v1_space_to_item",
    "widget_entries",
]
