"""Catalogue-aware process requests: widgets by name, wrong processes caught before they cost money.

Every process costs money and the service has no idempotency key, so a request that the service
would reject (or, worse, accept and run wrongly) is best caught before it is sent.  This module
checks a process request against the tool catalogue (spec 2.4, 2.5, 4.8) and expands the short
forms people write into the wire form the service wants.  It holds protocol logic only: the
catalogue comes in through two async callables (``fetch_tools`` and ``fetch_widgets``), so nothing
here imports aiohttp.

Pieces:

* :class:`Catalogue`: a frozen snapshot of the tools and of the widgets of some tools, with lookups.
* :class:`CatalogueCache`: a per-client cache with a time to live; one fetch in flight per key,
  shared by every concurrent caller.
* :func:`plan_process`: the pure check and expansion of one request against a :class:`Catalogue`.
* :func:`prepare_process`: the entry point a client calls; fetches what :func:`plan_process` needs.

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

from __future__ import annotations

import asyncio
import difflib
import functools
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Generic, TypeAlias, TypeVar, cast

import attrs

from asyncsdk._checks import is_mapping, is_sequence
from asyncsdk._errors import (
    APIError,
    CatalogueError,
    ConfigurationError,
    InactiveError,
    InputError,
    MissingWidgetError,
    NotFoundError,
    SelectionError,
    UnknownItemError,
    UnknownToolError,
    UnknownWidgetError,
    ValidationError,
)
from asyncsdk._models import Asset, AssetRole, Tool, ToolSlug, Widget, WidgetItem

__all__ = [
    "MULTI_SELECT_WIDGETS",
    "TOOL_ALIASES",
    "Catalogue",
    "CatalogueCache",
    "PreparedProcess",
    "SlotLayout",
    "WidgetSelection",
    "WidgetsArg",
    "input_slots",
    "plan_process",
    "prepare_process",
    "prepare_process_with",
    "request_key",
]

T = TypeVar("T")

#: Groups of tool slugs that name one tool (decision 6).  The first of a group is the spelling of
#: the tool's reference, used to build input slot names and convention widget slugs.
TOOL_ALIASES: Final[tuple[tuple[str, ...], ...]] = (
    (ToolSlug.FURNITURE_RESTYLE, ToolSlug.FURNITURE_SET_RESTYLE),
)

#: Widgets the spec names multi-select although their ``type`` may not say ``toggle``.
MULTI_SELECT_WIDGETS: Final = frozenset({"widget-enhancement-options-tool-image-enhancement"})

#: Widget keys whose slug does not follow ``widget-<key>-<tool>`` (spec 2.5: the enhancement
#: tool's area widget has the key ``space``).  Used only when no catalogue is at hand.
_KNOWN_KEYS: Final[Mapping[tuple[str, str], str]] = MappingProxyType(
    {(ToolSlug.IMAGE_ENHANCEMENT, "space"): "widget-area-tool-image-enhancement"}
)

# Input slot suffixes of the tools spec 4.8 documents; other tools follow the convention.
_SINGLE: Final = ("input-image",)
_MASK_PAIR: Final = ("input-image", "input-mask")
_BEFORE_AFTER: Final = ("input-image-before", "input-image-after")
_DOCUMENTED_SLOTS: Final[Mapping[str, tuple[tuple[str, ...], ...]]] = MappingProxyType(
    {
        ToolSlug.VIRTUAL_STAGING: (_SINGLE,),
        ToolSlug.VIRTUAL_RESTAGING: (_SINGLE,),
        ToolSlug.FURNITURE_RESTYLE: (_SINGLE,),
        ToolSlug.BACKSPLASH_CHANGE: (_SINGLE,),
        ToolSlug.ITEM_REMOVAL_MASK: (_MASK_PAIR,),
    }
)
_CONVENTION_SLOTS: Final = (_SINGLE, _BEFORE_AFTER)
#: Plans and name look-ups a catalogue snapshot keeps (least recently used dropped first).
_MEMO_SIZE: Final = 256
_SHORT_SLOTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "image": "input-image",
        "photo": "input-image",
        "mask": "input-mask",
        "before": "input-image-before",
        "after": "input-image-after",
        "image-before": "input-image-before",
        "image-after": "input-image-after",
    }
)
_SLOT_SHORT_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "input-image": "image",
        "input-mask": "mask",
        "input-image-before": "before",
        "input-image-after": "after",
    }
)


# --------------------------------------------------------------------------------------- helpers

_SEPARATORS = re.compile(r"[\s_]+")
_DASHES = re.compile(r"-{2,}")


@functools.lru_cache(maxsize=4096)
def _norm(text: str) -> str:
    """``"Living Room"``, ``"living_room"`` and ``" living-room "`` all become ``"living-room"``."""
    return _DASHES.sub("-", _SEPARATORS.sub("-", text.strip().lower())).strip("-")


def _aliases(slug: str) -> tuple[str, ...]:
    """The slug followed by its other spellings (decision 6); just the slug for most tools."""
    for group in TOOL_ALIASES:
        if slug in group:
            return (slug, *(other for other in group if other != slug))
    return (slug,)


def _reference_slug(slug: str) -> str:
    """The spelling used for input slots and convention widget slugs."""
    for group in TOOL_ALIASES:
        if slug in group:
            return group[0]
    return slug


def _suffix_variants(slug: str, tool: str) -> tuple[str, ...]:
    """``slug`` with its trailing tool slug spelled every way the tool can be spelled."""
    for alias in _aliases(tool):
        if slug.endswith("-" + alias):
            base = slug[: -len(alias)]
            return tuple(base + other for other in _aliases(tool))
    return (slug,)


def _widget_purpose(widget_slug: str, tool: str) -> str | None:
    """``widget-space-tool-virtual-staging`` -> ``space``; ``None`` off the convention."""
    if not widget_slug.startswith("widget-"):
        return None
    for alias in _aliases(tool):
        if widget_slug.endswith("-" + alias):
            middle = widget_slug[len("widget-") : -len(alias) - 1]
            return middle or None
    return None


def _item_value(item_slug: str, widget_slug: str, tool: str) -> str:
    """``item-bedroom-widget-space-tool-virtual-staging`` -> ``bedroom``; else the slug itself."""
    if item_slug.startswith("item-"):
        for variant in _suffix_variants(widget_slug, tool):
            if item_slug.endswith("-" + variant):
                middle = item_slug[len("item-") : -len(variant) - 1]
                if middle:
                    return middle
    return item_slug


def _did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _quoted(values: Iterable[str]) -> str:
    return ", ".join(repr(v) for v in values)


def _freeze_widgets(
    value: Mapping[str, Iterable[Widget]],
) -> Mapping[str, tuple[Widget, ...]]:
    return MappingProxyType({slug: tuple(widgets) for slug, widgets in value.items()})


def _tuple_of_tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(value)


def _tuple_of_str(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _freeze_str_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


# --------------------------------------------------------------------------------------- values


@attrs.frozen
class WidgetSelection:
    """One entry of the ``widgets`` array of a process request: a widget and its chosen items."""

    slug: str
    item_slugs: tuple[str, ...] = attrs.field(converter=_tuple_of_str)

    def to_wire(self) -> dict[str, Any]:
        return {"slug": self.slug, "item_slugs": list(self.item_slugs)}


#: Every form ``widgets=`` accepts: ``{"space": "bedroom", "enhancement_options": ["a", "b"]}``
#: (keys by key, purpose, name or slug; values short, by name, or full slugs; ``None`` = omitted),
#: the wire list ``[{"slug": ..., "item_slugs": [...]}]``, or :class:`WidgetSelection` values.
WidgetsArg: TypeAlias = (
    Mapping[str, str | Sequence[str] | None]
    | Sequence[Mapping[str, Any]]
    | Sequence[WidgetSelection]
)


@attrs.frozen(kw_only=True)
class PreparedProcess:
    """A process request ready to send: the tool slug, the asset map and the widgets, expanded.

    ``validated`` tells whether it was checked against the fetched catalogue.
    """

    tool: str
    asset_map: Mapping[str, str] = attrs.field(converter=_freeze_str_map, hash=False)
    widgets: tuple[WidgetSelection, ...] = ()
    validated: bool = False

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
            raise InputError(f"no asset id given for the placeholder(s) {_quoted(missing)}")
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


@attrs.frozen(kw_only=True)
class SlotLayout:
    """The input slots a tool may take. ``choices`` lists the accepted sets of full slot names;
    ``documented`` is false when they come from the naming convention only."""

    tool: str
    choices: tuple[tuple[str, ...], ...]
    documented: bool

    def describe(self) -> str:
        return " or ".join(
            "{" + ", ".join(f"{_SLOT_SHORT_NAMES.get(self._suffix(s), s)!r}: ..." for s in c) + "}"
            for c in self.choices
        )

    def _suffix(self, slot: str) -> str:
        return slot[len(self.tool) + 1 :]


@functools.lru_cache(maxsize=256)
def input_slots(tool: str) -> SlotLayout:
    """The input slots of ``tool`` by the naming convention (the catalogue API lists none).

    The five tools spec 4.8 documents get exactly their slots; any other tool may take the single
    ``<tool>-input-image`` or the pair ``<tool>-input-image-before``/``<tool>-input-image-after``.
    The furniture restyle tool's slots use its reference spelling ``tool-furniture-restyle``.
    """
    reference = _reference_slug(tool)
    documented = _DOCUMENTED_SLOTS.get(reference)
    suffix_sets = documented if documented is not None else _CONVENTION_SLOTS
    return SlotLayout(
        tool=reference,
        choices=tuple(tuple(f"{reference}-{s}" for s in suffixes) for suffixes in suffix_sets),
        documented=documented is not None,
    )


# ------------------------------------------------------------------------------------- catalogue


@attrs.frozen(kw_only=True)
class Catalogue:
    """A snapshot of the tool list and of the widgets of some tools (keyed by listed tool slug)."""

    tools: tuple[Tool, ...] = attrs.field(converter=_tuple_of_tools)
    widgets: Mapping[str, tuple[Widget, ...]] = attrs.field(
        factory=dict, converter=_freeze_widgets, hash=False
    )
    # Derived from the two fields above and never changed by them (the snapshot is immutable):
    # name indexes and the plans of recent requests, kept as long as this snapshot is in use.
    _index: dict[str, Any] = attrs.field(factory=dict, init=False, eq=False, repr=False)
    _memo: OrderedDict[Hashable, Any] = attrs.field(
        factory=OrderedDict, init=False, eq=False, repr=False
    )

    def _remember(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()`` once per ``key`` among the last ``_MEMO_SIZE`` keys used (errors are
        raised every time, never kept)."""
        memo = self._memo
        try:
            value: T = memo[key]
        except KeyError:
            value = compute()
            memo[key] = value
            if len(memo) > _MEMO_SIZE:
                memo.popitem(last=False)
            return value
        memo.move_to_end(key)
        return value

    def _tool_index(self) -> tuple[dict[str, Tool], dict[str, Tool]]:
        index: tuple[dict[str, Tool], dict[str, Tool]] | None = self._index.get("tools")
        if index is None:
            by_name: dict[str, Tool] = {}
            for tool in self.tools:
                by_name.setdefault(_norm(tool.name), tool)
            index = ({tool.slug: tool for tool in self.tools}, by_name)
            self._index["tools"] = index
        return index

    # -- tools

    def find_tool(self, name: str) -> Tool | None:
        """The tool ``name`` means: its slug, an alias, the slug without ``tool-``, or its name."""
        return self._remember(("tool", name), lambda: self._find_tool(name))

    def _find_tool(self, name: str) -> Tool | None:
        by_slug, by_name = self._tool_index()
        wanted = name.strip()
        normalised = _norm(wanted)
        candidates = [wanted, normalised]
        if not normalised.startswith("tool-"):
            candidates.append("tool-" + normalised)
        for candidate in candidates:
            for spelling in _aliases(candidate):
                if spelling in by_slug:
                    return by_slug[spelling]
        return by_name.get(normalised)

    def tool(self, name: str) -> Tool:
        """The tool ``name`` means, or :class:`UnknownToolError` with a did-you-mean."""
        found = self.find_tool(name)
        if found is not None:
            return found
        slugs = [tool.slug for tool in self.tools]
        normalised = _norm(name)
        guess = _did_you_mean(name.strip(), slugs) or _did_you_mean(
            normalised if normalised.startswith("tool-") else "tool-" + normalised, slugs
        )
        hint = f"did you mean {guess!r}? The" if guess else "the"
        raise UnknownToolError(
            f"unknown tool {name!r}: {hint} catalogue has {_quoted(slugs) or 'no tools'}",
            tool=name,
            valid=slugs,
            suggestion=guess,
        )

    def active_tool(self, name: str) -> Tool:
        """Like :meth:`tool`, and :class:`InactiveError` when the tool is switched off."""
        tool = self.tool(name)
        if not tool.is_active:
            active = [t.slug for t in self.tools if t.is_active]
            raise InactiveError(
                f"tool {tool.slug!r} ({tool.name}) is not active in the catalogue and cannot run "
                f"now; pick an active tool: {_quoted(active)}",
                tool=tool.slug,
                valid=active,
            )
        return tool

    # -- widgets

    def has_widgets_of(self, tool: str) -> bool:
        return any(alias in self.widgets for alias in _aliases(tool))

    def widgets_of(self, tool: str) -> tuple[Widget, ...]:
        """The widgets of ``tool`` (any spelling); :class:`ConfigurationError` when not loaded."""
        for alias in _aliases(tool):
            if alias in self.widgets:
                return self.widgets[alias]
        raise ConfigurationError(
            f"the widgets of {tool!r} are not in this catalogue snapshot; load them first with "
            f"`await cache.catalogue({tool!r})`"
        )

    def handle(self, tool: str, widget: Widget) -> str:
        """The shortest name that picks ``widget`` among the tool's: key, purpose or slug."""
        widgets = self.widgets_of(tool) if self.has_widgets_of(tool) else (widget,)
        if widget.key and sum(1 for w in widgets if _norm(w.key) == _norm(widget.key)) == 1:
            return widget.key
        purpose = _widget_purpose(widget.slug, tool)
        if purpose and sum(1 for w in widgets if _widget_purpose(w.slug, tool) == purpose) == 1:
            return purpose
        return widget.slug

    def widget(self, tool: str, name: str) -> Widget:
        """The widget of ``tool`` that ``name`` means: full slug (any tool spelling), key, purpose
        or name, in that order; :class:`UnknownWidgetError` otherwise."""
        widgets = self.widgets_of(tool)
        wanted = name.strip()
        for w in widgets:
            if w.slug == wanted:
                return w
        purpose = _widget_purpose(wanted, tool)
        if purpose is not None:
            for w in widgets:
                if _widget_purpose(w.slug, tool) == purpose:
                    return w
        else:
            normalised = _norm(wanted)
            levels: tuple[Callable[[Widget], bool], ...] = (
                lambda w: bool(w.key) and _norm(w.key) == normalised,
                lambda w: _widget_purpose(w.slug, tool) == normalised,
                lambda w: bool(w.name) and _norm(w.name) == normalised,
            )
            for level in levels:
                matches = [w for w in widgets if level(w)]
                if len(matches) == 1:
                    return matches[0]
                if len(matches) > 1:
                    raise UnknownWidgetError(
                        f"{name!r} names several widgets of {tool!r}: "
                        f"{_quoted(w.slug for w in matches)}; use the full widget slug",
                        tool=tool,
                        widget=name,
                        valid=[w.slug for w in matches],
                    )
        handles = [self.handle(tool, w) for w in widgets]
        if not widgets:
            raise UnknownWidgetError(
                f"tool {tool!r} takes no widgets; drop {name!r} from widgets=",
                tool=tool,
                widget=name,
            )
        guess = _did_you_mean(_norm(wanted), handles) or _did_you_mean(
            wanted, [w.slug for w in widgets]
        )
        hint = f"did you mean {guess!r}? Its" if guess else "its"
        raise UnknownWidgetError(
            f"tool {tool!r} has no widget {name!r}: {hint} widgets are {_quoted(handles)}",
            tool=tool,
            widget=name,
            valid=handles,
            suggestion=guess,
        )

    def values(self, tool: str, widget: Widget, *, active_only: bool = True) -> tuple[str, ...]:
        """The short values of the widget's items (``bedroom``, ``living-room``)."""
        return tuple(
            _item_value(item.slug, widget.slug, tool)
            for item in widget.items
            if item.is_active or not active_only
        )

    def item(self, tool: str, widget: Widget, value: str) -> WidgetItem:
        """The item of ``widget`` that ``value`` means: full slug (any tool spelling), short value
        or name; :class:`UnknownItemError` with the valid values otherwise."""
        wanted = value.strip()
        for item in widget.items:
            if item.slug == wanted:
                return item
        short = _norm(wanted)
        if wanted.startswith("item-"):
            short = _item_value(wanted, widget.slug, tool)
        for item in widget.items:
            if _item_value(item.slug, widget.slug, tool) == short:
                return item
        for item in widget.items:
            if item.name and _norm(item.name) == short:
                return item
        valid = self.values(tool, widget)
        handle = self.handle(tool, widget)
        elsewhere = ""
        if self.has_widgets_of(tool):
            for other in self.widgets_of(tool):
                if other.slug != widget.slug and any(i.slug == wanted for i in other.items):
                    elsewhere = f" ({wanted!r} belongs to widget {self.handle(tool, other)!r})"
        guess = None if elsewhere else _did_you_mean(short, valid)
        hint = f"; did you mean {guess!r}? Valid" if guess else "; valid"
        raise UnknownItemError(
            f"{value!r} is not an item of widget {handle!r} ({widget.slug}){elsewhere}{hint} "
            f"values: {_quoted(valid)}",
            tool=tool,
            widget=widget.slug,
            item=value,
            valid=valid,
            suggestion=guess,
        )

    def is_multi_select(self, widget: Widget) -> bool:
        """True for ``toggle`` widgets and for those the spec names multi-select."""
        return widget.type == "toggle" or widget.slug in MULTI_SELECT_WIDGETS

    def find_item(self, tool: str, item_slug: str) -> tuple[Widget, WidgetItem] | None:
        for widget in self.widgets_of(tool):
            for item in widget.items:
                if item.slug == item_slug:
                    return widget, item
        return None


# -------------------------------------------------------------------------------------- planning


def _widget_entries(widgets: WidgetsArg | None) -> list[tuple[str, tuple[str, ...]]]:
    """Normalise every accepted ``widgets=`` form into ``(widget name, item names)`` pairs."""
    if widgets is None:
        return []
    entries: list[tuple[str, tuple[str, ...]]] = []
    if is_mapping(widgets):
        for key, value in widgets.items():
            if not isinstance(key, str):
                raise ValidationError(f"widget names must be strings, not {key!r}")
            if value is None:
                continue
            entries.append((key, _item_names(key, value)))
        return entries
    if isinstance(widgets, str | bytes):
        raise ValidationError(
            "widgets= takes a mapping such as {'space': 'bedroom'} or a list of "
            "{'slug': ..., 'item_slugs': [...]}, not a string"
        )
    for position, entry in enumerate(widgets):
        if isinstance(entry, WidgetSelection):
            entries.append((entry.slug, entry.item_slugs))
            continue
        if not is_mapping(entry) or not isinstance(entry.get("slug"), str):
            raise ValidationError(
                f"widgets[{position}] must be {{'slug': <widget slug>, 'item_slugs': [...]}}, "
                f"got {entry!r}"
            )
        slug = entry["slug"]
        entries.append((slug, _item_names(slug, entry.get("item_slugs", ()))))
    return entries


def _item_names(widget: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if (is_sequence(value) or isinstance(value, frozenset | set)) and not isinstance(value, bytes):
        names = tuple(value)
        if all(isinstance(name, str) for name in names):
            return names
    raise ValidationError(
        f"the value of widget {widget!r} must be an item name or a list of item names, "
        f"got {value!r}"
    )


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


def _slot_suffix(name: str, tool: str) -> str | None:
    """The slot suffix (``input-image``) that ``name`` means, or ``None``."""
    wanted = name.strip()
    for alias in _aliases(tool):
        if wanted.startswith(alias + "-input-"):
            return wanted[len(alias) + 1 :]
    normalised = _norm(wanted)
    if normalised.startswith("input-"):
        return normalised
    return _SHORT_SLOTS.get(normalised)


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
                f"the order has {len(masks)} masks ({_quoted(m.id for m in masks)}): pass "
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
            suffix = _slot_suffix(name, tool)
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
                got = _quoted(list(given))
                raise InputError(
                    f"{tool!r} takes the input slots {layout.describe()} "
                    f"(full names {_quoted(valid)}); got {got}",
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


def _plan_widgets_checked(
    catalogue: Catalogue, tool: str, entries: list[tuple[str, tuple[str, ...]]]
) -> tuple[WidgetSelection, ...]:
    chosen: dict[str, tuple[Widget, list[WidgetItem]]] = {}
    for name, item_names in entries:
        widget = catalogue.widget(tool, name)
        handle = catalogue.handle(tool, widget)
        if widget.slug in chosen:
            raise SelectionError(
                f"widget {handle!r} ({widget.slug}) is given twice in widgets=; give it once",
                tool=tool,
                widget=widget.slug,
            )
        if not widget.is_active:
            raise InactiveError(
                f"widget {handle!r} ({widget.slug}) of {tool!r} is not active; drop it from "
                "widgets=",
                tool=tool,
                widget=widget.slug,
            )
        items: list[WidgetItem] = []
        for item_name in item_names:
            item = catalogue.item(tool, widget, item_name)
            if not item.is_active:
                valid = catalogue.values(tool, widget)
                raise InactiveError(
                    f"item {_item_value(item.slug, widget.slug, tool)!r} of widget {handle!r} "
                    f"is not active; pick one of {_quoted(valid)}",
                    tool=tool,
                    widget=widget.slug,
                    item=item.slug,
                    valid=valid,
                )
            if item not in items:
                items.append(item)
        if len(items) > 1 and not catalogue.is_multi_select(widget):
            shown = _quoted(_item_value(i.slug, widget.slug, tool) for i in items)
            raise SelectionError(
                f"widget {handle!r} ({widget.slug}) takes one item, got {len(items)}: {shown}; "
                "keep one",
                tool=tool,
                widget=widget.slug,
                valid=catalogue.values(tool, widget),
            )
        chosen[widget.slug] = (widget, items)

    for widget in catalogue.widgets_of(tool):
        if not widget.is_active or widget.is_optional:
            continue
        if chosen.get(widget.slug, (widget, []))[1]:
            continue
        handle = catalogue.handle(tool, widget)
        valid = catalogue.values(tool, widget)
        default = next(
            (
                _item_value(i.slug, widget.slug, tool)
                for i in widget.items
                if i.is_default and i.is_active
            ),
            None,
        )
        default_hint = f" (the default is {default!r})" if default else ""
        raise MissingWidgetError(
            f"{tool!r} needs the widget {handle!r} ({widget.slug}): add "
            f"widgets={{{handle!r}: <one of {_quoted(valid)}>}}{default_hint}",
            tool=tool,
            widget=widget.slug,
            valid=valid,
        )

    selected = {item.slug for _, items in chosen.values() for item in items}
    for widget, items in chosen.values():
        for item in items:
            if not item.accessible_in or selected & set(item.accessible_in):
                continue
            raise _not_accessible(catalogue, tool, widget, item, chosen)

    return tuple(
        WidgetSelection(widget.slug, tuple(item.slug for item in items))
        for widget, items in chosen.values()
        if items
    )


def _not_accessible(
    catalogue: Catalogue,
    tool: str,
    widget: Widget,
    item: WidgetItem,
    chosen: Mapping[str, tuple[Widget, list[WidgetItem]]],
) -> SelectionError:
    value = _item_value(item.slug, widget.slug, tool)
    handle = catalogue.handle(tool, widget)
    needs: dict[str, list[str]] = {}
    for slug in item.accessible_in or ():
        found = catalogue.find_item(tool, slug)
        if found is None:
            needs.setdefault("", []).append(slug)
            continue
        other, other_item = found
        needs.setdefault(other.slug, []).append(_item_value(other_item.slug, other.slug, tool))
    parts: list[str] = []
    for other_slug, values in needs.items():
        if not other_slug:
            parts.append(f"one of {_quoted(values)} is selected")
            continue
        other_widget = next(w for w in catalogue.widgets_of(tool) if w.slug == other_slug)
        other_handle = catalogue.handle(tool, other_widget)
        now = chosen.get(other_slug)
        picked = (
            f"you selected {_quoted(_item_value(i.slug, other_slug, tool) for i in now[1])}"
            if now and now[1]
            else "nothing is selected there"
        )
        parts.append(f"{other_handle!r} is {' or '.join(repr(v) for v in values)} ({picked})")
    fix_widget, fix_values = next(iter(needs.items()))
    if fix_widget:
        fix_handle = catalogue.handle(
            tool, next(w for w in catalogue.widgets_of(tool) if w.slug == fix_widget)
        )
        fix = f"set widgets={{{fix_handle!r}: {fix_values[0]!r}, ...}} or drop {value!r}"
    else:
        fix = f"drop {value!r}"
    return SelectionError(
        f"item {value!r} of widget {handle!r} is available only when {' or '.join(parts)}: {fix}",
        tool=tool,
        widget=widget.slug,
        item=item.slug,
        valid=list(item.accessible_in or ()),
    )


def _plan_widgets_unchecked(
    catalogue: Catalogue | None, tool: str, entries: list[tuple[str, tuple[str, ...]]]
) -> tuple[WidgetSelection, ...]:
    """Expand short forms by the catalogue when it is at hand, else by the slug convention."""
    known = catalogue is not None and catalogue.has_widgets_of(tool)
    reference = _reference_slug(tool)
    result: list[WidgetSelection] = []
    for name, item_names in entries:
        widget: Widget | None = None
        if catalogue is not None and known:
            try:
                widget = catalogue.widget(tool, name)
            except CatalogueError:
                widget = None
        if widget is not None:
            widget_slug = widget.slug
        elif name.strip().startswith("widget-"):
            widget_slug = name.strip()
        else:
            key = _norm(name)
            widget_slug = _KNOWN_KEYS.get((reference, key), f"widget-{key}-{reference}")
        items: list[str] = []
        for item_name in item_names:
            slug: str | None = None
            if catalogue is not None and widget is not None:
                try:
                    slug = catalogue.item(tool, widget, item_name).slug
                except CatalogueError:
                    slug = None
            if slug is None:
                wanted = item_name.strip()
                slug = (
                    wanted if wanted.startswith("item-") else f"item-{_norm(wanted)}-{widget_slug}"
                )
            if slug not in items:
                items.append(slug)
        if items:
            result.append(WidgetSelection(widget_slug, tuple(items)))
    return tuple(result)


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
    if not isinstance(tool, str) or not tool.strip():
        raise ValidationError(
            f"tool= must be a tool slug such as 'tool-virtual-staging', not {tool!r}"
        )
    entries = _widget_entries(widgets)
    if validate:
        if catalogue is None:
            raise ConfigurationError("validate=True needs a catalogue; pass validate=False to skip")
        listed = catalogue.active_tool(tool)
        slug = listed.slug
        asset_ids = _plan_inputs(slug, asset_map, inputs, order_assets, check=True)
        key = ("checked", slug, tuple(entries))
        selections = catalogue._remember(
            key, lambda: _plan_widgets_checked(catalogue, slug, entries)
        )
        return PreparedProcess(tool=slug, asset_map=asset_ids, widgets=selections, validated=True)
    found = catalogue.find_tool(tool) if catalogue is not None else None
    slug = found.slug if found is not None else tool.strip()
    asset_ids = _plan_inputs(slug, asset_map, inputs, order_assets, check=False)
    if catalogue is None:
        selections = _plan_by_convention(slug, tuple(entries))
    else:
        selections = catalogue._remember(
            ("unchecked", slug, tuple(entries)),
            lambda: _plan_widgets_unchecked(catalogue, slug, entries),
        )
    return PreparedProcess(tool=slug, asset_map=asset_ids, widgets=selections, validated=False)


def _plain_strings(values: Iterable[object]) -> tuple[str, ...] | None:
    """``values`` as a tuple when every one is exactly a ``str``, else ``None``."""
    result = tuple(values)
    for value in result:
        if type(value) is not str:
            return None
    return cast("tuple[str, ...]", result)


def _plain_widgets_key(widgets: object) -> Hashable | None:
    if widgets is None:
        return None, ()
    kind = type(widgets)
    if kind is dict:
        assert isinstance(widgets, dict)
        entries: list[object] = []
        for name, value in widgets.items():
            if type(name) is not str:
                return None
            if value is None or type(value) is str:
                entries.append((name, value))
                continue
            if type(value) not in (list, tuple):
                return None
            items = _plain_strings(value)
            if items is None:
                return None
            entries.append((name, items))
        return "short", tuple(entries)
    if kind is not list and kind is not tuple:
        return None
    assert isinstance(widgets, list | tuple)
    wire: list[object] = []
    for entry in widgets:
        if type(entry) is not dict or len(entry) != 2:
            return None
        slug = entry.get("slug")
        items_given = entry.get("item_slugs")
        if type(slug) is not str or not isinstance(items_given, list | tuple):
            return None
        items = _plain_strings(items_given)
        if items is None:
            return None
        wire.append((slug, items))
    return "wire", tuple(wire)


def request_key(
    tool: object, asset_map: object, inputs: object, widgets: object
) -> Hashable | None:
    """A key equal for two requests exactly when their arguments are equal, for the plain shapes
    people write (``str`` values in ``dict``, ``list`` and ``tuple``); ``None`` for anything else.

    Two requests with equal keys plan to the same result (or the same error), so a plan can be
    kept per key; arguments without a key are always planned afresh.
    """
    if type(tool) is not str:
        return None
    parts: list[Hashable] = [tool]
    for given in (asset_map, inputs):
        if given is None or type(given) is str:
            parts.append(given)
            continue
        if type(given) is not dict:
            return None
        assert isinstance(given, dict)
        keys, values = _plain_strings(given), _plain_strings(given.values())
        if keys is None or values is None:
            return None
        parts.append((keys, values))
    widgets_key = _plain_widgets_key(widgets)
    if widgets_key is None:
        return None
    parts.append(widgets_key)
    return tuple(parts)


@functools.lru_cache(maxsize=_MEMO_SIZE)
def _plan_by_convention(
    tool: str, entries: tuple[tuple[str, tuple[str, ...]], ...]
) -> tuple[WidgetSelection, ...]:
    """:func:`_plan_widgets_unchecked` without a catalogue (pure, so kept per arguments)."""
    return _plan_widgets_unchecked(None, tool, list(entries))


# ----------------------------------------------------------------------------------------- cache


@attrs.define
class _Slot(Generic[T]):
    """One cached value and the fetch that refreshes it."""

    value: T | None = None
    fetched_at: float = 0.0
    task: asyncio.Task[T] | None = None


@attrs.define
class CatalogueCache:
    """The catalogue of one client, fetched on first use and refreshed after ``ttl`` seconds.

    ``fetch_tools`` and ``fetch_widgets`` do the I/O (a client passes ``client.tools.list`` and
    ``client.tools.widgets``).  Per key (the tool list, or one tool's widgets) at most one fetch is
    in flight: concurrent callers share it, so a thousand simultaneous requests cause one fetch.  A
    caller that is cancelled does not cancel the shared fetch.  A failed first fetch raises to every
    waiting caller and is not cached; when a refresh fails with an :class:`APIError` and
    ``stale_on_error`` is true, the previous value keeps serving.  ``clock`` is the time source
    (seconds, monotonic).
    """

    fetch_tools: Callable[[], Awaitable[Sequence[Tool]]]
    fetch_widgets: Callable[[str], Awaitable[Sequence[Widget]]]
    ttl: float = 300.0
    stale_on_error: bool = True
    clock: Callable[[], float] = time.monotonic
    _tools: _Slot[tuple[Tool, ...]] = attrs.field(factory=_Slot, init=False)
    _widgets: dict[str, _Slot[tuple[Widget, ...]]] = attrs.field(factory=dict, init=False)
    _tasks: set[asyncio.Task[Any]] = attrs.field(factory=set, init=False)
    # The snapshots handed out last, reused while the fetched values they hold are current, so
    # their indexes and remembered plans live as long as one fetch of the catalogue.
    _snapshots: dict[str | None, Catalogue] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        if not self.ttl > 0:
            raise ConfigurationError(f"ttl must be a positive number of seconds, not {self.ttl!r}")

    async def tools(self) -> tuple[Tool, ...]:
        """The tool list (spec 4.10)."""
        return await self._get(self._tools, self._fetch_tools)

    async def widgets(self, tool: str) -> tuple[Widget, ...]:
        """The widgets of ``tool`` (spec 4.11), asked under the slug given, then its aliases."""
        slot = self._widgets.get(tool)
        if slot is None:
            slot = self._widgets[tool] = _Slot()
        return await self._get(slot, lambda: self._fetch_widgets(tool))

    async def catalogue(self, *tools: str) -> Catalogue:
        """A snapshot with the tool list and the widgets of ``tools`` (names resolved)."""
        listed = await self.tools()
        base = Catalogue(tools=listed)
        slugs = [base.tool(name).slug for name in tools]
        fetched = await asyncio.gather(*(self.widgets(slug) for slug in slugs))
        return Catalogue(tools=listed, widgets=dict(zip(slugs, fetched, strict=True)))

    def peek(self) -> Catalogue | None:
        """What is cached now, fresh or stale, without fetching; ``None`` before the first fetch."""
        tools = self._tools.value
        if tools is None:
            return None
        widgets = {slug: s.value for slug, s in self._widgets.items() if s.value is not None}
        known = self._snapshots.get("")
        if (
            known is not None
            and known.tools is tools
            and len(known.widgets) == len(widgets)
            and all(known.widgets.get(slug) is value for slug, value in widgets.items())
        ):
            return known
        snapshot = self._snapshots[""] = Catalogue(tools=tools, widgets=widgets)
        return snapshot

    def _snapshot(
        self,
        tools: tuple[Tool, ...],
        slug: str | None = None,
        widgets: tuple[Widget, ...] | None = None,
    ) -> Catalogue:
        """The tool list, with the widgets of ``slug`` when given: the same object while the
        fetched values are the same."""
        known = self._snapshots.get(slug)
        if (
            known is not None
            and known.tools is tools
            and (slug is None or known.widgets.get(slug) is widgets)
        ):
            return known
        mapping = {} if slug is None or widgets is None else {slug: widgets}
        snapshot = self._snapshots[slug] = Catalogue(tools=tools, widgets=mapping)
        return snapshot

    def serves(self, snapshot: Catalogue | None, tool: str | None) -> bool:
        """Whether a plan made against ``snapshot`` still holds, without fetching.

        ``tool`` (the listed slug) for a plan checked against the catalogue: the tool list and
        that tool's widgets are still the fetched values in ``snapshot`` and within their TTL.
        ``None`` for an unchecked plan: ``snapshot`` is still what :meth:`peek` answers.
        """
        if tool is None:
            return self.peek() is snapshot
        if snapshot is None:
            return False
        now = self.clock()
        tools, widgets = self._tools, self._widgets.get(tool)
        return (
            widgets is not None
            and tools.value is snapshot.tools
            and widgets.value is snapshot.widgets.get(tool)
            and now - tools.fetched_at < self.ttl
            and now - widgets.fetched_at < self.ttl
        )

    def invalidate(self, tool: str | None = None) -> None:
        """Forget the cached catalogue (or one tool's widgets); the next use fetches again.

        A fetch already in flight finishes for its callers but its answer is not kept.
        """
        self._snapshots.clear()
        if tool is None:
            self._tools = _Slot()
            self._widgets.clear()
        else:
            for alias in _aliases(tool):
                self._widgets.pop(alias, None)

    async def _fetch_tools(self) -> tuple[Tool, ...]:
        return tuple(await self.fetch_tools())

    async def _fetch_widgets(self, tool: str) -> tuple[Widget, ...]:
        not_found: NotFoundError | None = None
        found_empty = False
        for spelling in _aliases(tool):
            try:
                widgets = tuple(await self.fetch_widgets(spelling))
            except NotFoundError as exc:
                not_found = not_found or exc
                continue
            if widgets:
                return widgets
            found_empty = True
        if not_found is not None and not found_empty:
            raise not_found
        return ()

    async def _get(self, slot: _Slot[T], fetch: Callable[[], Awaitable[T]]) -> T:
        if slot.value is not None and self.clock() - slot.fetched_at < self.ttl:
            return slot.value
        task = slot.task
        if task is None:
            task = asyncio.create_task(self._refresh(slot, fetch))
            slot.task = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            return await asyncio.shield(task)
        except APIError:
            if self.stale_on_error and slot.value is not None:
                return slot.value
            raise

    async def _refresh(self, slot: _Slot[T], fetch: Callable[[], Awaitable[T]]) -> T:
        try:
            value = await fetch()
        finally:
            slot.task = None
        slot.value = value
        slot.fetched_at = self.clock()
        return value


# ----------------------------------------------------------------------------------- entry point


async def prepare_process(
    cache: CatalogueCache,
    *,
    tool: str,
    asset_map: Mapping[str, str] | None,
    inputs: Mapping[str, str] | str | None,
    widgets: WidgetsArg | None,
    order_assets: Sequence[Asset] | None = None,
    validate: bool = True,
) -> PreparedProcess:
    """Expand and check a process request before it is sent (spec 4.8).

    ``inputs`` is an asset id (single-slot tools), or a mapping by short slot name (``image``,
    ``mask``, ``before``, ``after``) or full slot name; ``asset_map`` is the wire mapping by full
    slot name (give one of the two; with neither, the order's photo, and its mask for the mask
    tool, are used when ``order_assets`` is known).  ``widgets`` takes any :data:`WidgetsArg` form.

    With ``validate=True`` the tool list and the tool's widgets are fetched through ``cache`` (once
    per TTL, shared by concurrent callers) and a :class:`CatalogueError` explains any problem.  With
    ``validate=False`` nothing is fetched: short forms are expanded by whatever the cache already
    holds, else by the slug convention, and everything else is passed through.
    """
    prepared, _ = await prepare_process_with(
        cache,
        tool=tool,
        asset_map=asset_map,
        inputs=inputs,
        widgets=widgets,
        order_assets=order_assets,
        validate=validate,
    )
    return prepared


async def prepare_process_with(
    cache: CatalogueCache,
    *,
    tool: str,
    asset_map: Mapping[str, str] | None,
    inputs: Mapping[str, str] | str | None,
    widgets: WidgetsArg | None,
    order_assets: Sequence[Asset] | None,
    validate: bool,
) -> tuple[PreparedProcess, Catalogue | None]:
    """:func:`prepare_process`, and the snapshot the request was planned against (for
    :meth:`CatalogueCache.serves`)."""
    snapshot: Catalogue | None
    if validate:
        tools = await cache.tools()
        tool = cache._snapshot(tools).active_tool(tool).slug
        snapshot = cache._snapshot(tools, tool, await cache.widgets(tool))
    else:
        snapshot = cache.peek()
    prepared = plan_process(
        snapshot,
        tool=tool,
        asset_map=asset_map,
        inputs=inputs,
        widgets=widgets,
        order_assets=order_assets,
        validate=validate,
    )
    return prepared, snapshot
