"""The catalogue's names and their lookups: one frozen snapshot of the tools and widgets, what a
tool, widget or item name means in it, and the widget selection a name resolves to.

Widget slugs read ``widget-<purpose>-<tool-slug>``; item slugs read ``item-<value>-<widget-slug>``
(spec 2.4, 2.5).  ``tool-furniture-set-restyle`` (the catalogue list) and
``tool-furniture-restyle`` (the tool's reference) are one tool (decision 6).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from asyncsdk._checks import require_text
from asyncsdk._errors import (
    ConfigurationError,
    InactiveError,
    UnknownItemError,
    UnknownToolError,
    UnknownWidgetError,
)
from asyncsdk._models import Tool, ToolSlug, Widget, WidgetItem

__all__ = [
    "KNOWN_KEYS",
    "MULTI_SELECT_WIDGETS",
    "TOOL_ALIASES",
    "Catalogue",
    "WidgetSelection",
    "aliases",
    "did_you_mean",
    "item_value",
    "norm",
    "quoted",
    "reference_slug",
    "widget_purpose",
]

#: Groups of tool slugs that name one tool (decision 6).  The first of a group is the spelling of
#: the tool's reference, used to build input slot names and convention widget slugs.
TOOL_ALIASES: Final[tuple[tuple[str, ...], ...]] = (
    (ToolSlug.FURNITURE_RESTYLE, ToolSlug.FURNITURE_SET_RESTYLE),
)

#: Widgets the spec names multi-select although their ``type`` may not say ``toggle``.
MULTI_SELECT_WIDGETS: Final = frozenset({"widget-enhancement-options-tool-image-enhancement"})

#: Widget keys whose slug does not follow ``widget-<key>-<tool>`` (spec 2.5: the enhancement
#: tool's area widget has the key ``space``).  Used only when no catalogue is at hand.
KNOWN_KEYS: Final[Mapping[tuple[str, str], str]] = MappingProxyType(
    {(ToolSlug.IMAGE_ENHANCEMENT, "space"): "widget-area-tool-image-enhancement"}
)


_SEPARATORS = re.compile(r"[\s_]+")
_DASHES = re.compile(r"-{2,}")


def norm(text: str) -> str:
    """``"Living Room"``, ``"living_room"`` and ``" living-room "`` all become ``"living-room"``."""
    return _DASHES.sub("-", _SEPARATORS.sub("-", text.strip().lower())).strip("-")


def aliases(slug: str) -> tuple[str, ...]:
    """The slug followed by its other spellings (decision 6); just the slug for most tools."""
    for group in TOOL_ALIASES:
        if slug in group:
            return (slug, *(other for other in group if other != slug))
    return (slug,)


def reference_slug(slug: str) -> str:
    """The spelling used for input slots and convention widget slugs."""
    for group in TOOL_ALIASES:
        if slug in group:
            return group[0]
    return slug


def _suffix_variants(slug: str, tool: str) -> tuple[str, ...]:
    """``slug`` with its trailing tool slug spelled every way the tool can be spelled."""
    for alias in aliases(tool):
        if slug.endswith("-" + alias):
            base = slug[: -len(alias)]
            return tuple(base + other for other in aliases(tool))
    return (slug,)


def widget_purpose(widget_slug: str, tool: str) -> str | None:
    """``widget-space-tool-virtual-staging`` -> ``space``; ``None`` off the convention."""
    if not widget_slug.startswith("widget-"):
        return None
    for alias in aliases(tool):
        if widget_slug.endswith("-" + alias):
            middle = widget_slug[len("widget-") : -len(alias) - 1]
            return middle or None
    return None


def item_value(item_slug: str, widget_slug: str, tool: str) -> str:
    """``item-bedroom-widget-space-tool-virtual-staging`` -> ``bedroom``; else the slug itself."""
    if item_slug.startswith("item-"):
        for variant in _suffix_variants(widget_slug, tool):
            if item_slug.endswith("-" + variant):
                middle = item_slug[len("item-") : -len(variant) - 1]
                if middle:
                    return middle
    return item_slug


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def quoted(values: Iterable[str]) -> str:
    return ", ".join(repr(v) for v in values)


def _freeze_widgets(
    value: Mapping[str, Iterable[Widget]],
) -> Mapping[str, tuple[Widget, ...]]:
    return MappingProxyType({slug: tuple(widgets) for slug, widgets in value.items()})


def _tuple_of_tools(value: Iterable[Tool]) -> tuple[Tool, ...]:
    return tuple(value)


def _tuple_of_str(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class WidgetSelection:
    """One entry of the ``widgets`` array of a process request: a widget and its chosen items."""

    slug: str = attrs.field()
    item_slugs: tuple[str, ...] = attrs.field(converter=_tuple_of_str)

    @slug.validator
    def _check_slug(self, _: attrs.Attribute[str], value: str) -> None:
        require_text(value, "a WidgetSelection's slug")

    @item_slugs.validator
    def _check_items(self, _: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]) -> None:
        for item in value:
            require_text(item, f"an item slug of widget {self.slug!r}")

    def to_wire(self) -> dict[str, Any]:
        """The selection as the service's JSON: ``{"slug": ..., "item_slugs": [...]}``."""
        return {"slug": self.slug, "item_slugs": list(self.item_slugs)}


@attrs.frozen(kw_only=True)
class Catalogue:
    """A snapshot of the tool list and of the widgets of some tools (keyed by listed tool slug)."""

    tools: tuple[Tool, ...] = attrs.field(converter=_tuple_of_tools)
    widgets: Mapping[str, tuple[Widget, ...]] = attrs.field(
        factory=dict, converter=_freeze_widgets, hash=False
    )

    # -- tools

    def find_tool(self, name: str) -> Tool | None:
        """The tool ``name`` means: its slug, an alias, the slug without ``tool-``, or its name."""
        wanted = name.strip()
        for tool in self.tools:
            if tool.slug == wanted:
                return tool
        by_slug = {tool.slug: tool for tool in self.tools}
        normalised = norm(wanted)
        candidates = [wanted, normalised]
        if not normalised.startswith("tool-"):
            candidates.append("tool-" + normalised)
        for candidate in candidates:
            for spelling in aliases(candidate):
                if spelling in by_slug:
                    return by_slug[spelling]
        return next((tool for tool in self.tools if norm(tool.name) == normalised), None)

    def tool(self, name: str) -> Tool:
        """The tool ``name`` means, or :class:`UnknownToolError` with a did-you-mean."""
        found = self.find_tool(name)
        if found is not None:
            return found
        slugs = [tool.slug for tool in self.tools]
        normalised = norm(name)
        guess = did_you_mean(name.strip(), slugs) or did_you_mean(
            normalised if normalised.startswith("tool-") else "tool-" + normalised, slugs
        )
        hint = f"did you mean {guess!r}? The" if guess else "the"
        raise UnknownToolError(
            f"unknown tool {name!r}: {hint} catalogue has {quoted(slugs) or 'no tools'}",
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
                f"now; pick an active tool: {quoted(active)}",
                tool=tool.slug,
                valid=active,
            )
        return tool

    # -- widgets

    def has_widgets_of(self, tool: str) -> bool:
        """Whether the widgets of ``tool`` (any spelling) are loaded in this snapshot."""
        return any(alias in self.widgets for alias in aliases(tool))

    def widgets_of(self, tool: str) -> tuple[Widget, ...]:
        """The widgets of ``tool`` (any spelling); :class:`ConfigurationError` when not loaded."""
        for alias in aliases(tool):
            if alias in self.widgets:
                return self.widgets[alias]
        raise ConfigurationError(
            f"the widgets of {tool!r} are not in this catalogue snapshot; load them first with "
            f"`await cache.catalogue({tool!r})`"
        )

    def handle(self, tool: str, widget: Widget) -> str:
        """The shortest name that picks ``widget`` among the tool's: key, purpose or slug."""
        widgets = self.widgets_of(tool) if self.has_widgets_of(tool) else (widget,)
        if widget.key and sum(1 for w in widgets if norm(w.key) == norm(widget.key)) == 1:
            return widget.key
        purpose = widget_purpose(widget.slug, tool)
        if purpose and sum(1 for w in widgets if widget_purpose(w.slug, tool) == purpose) == 1:
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
        purpose = widget_purpose(wanted, tool)
        if purpose is not None:
            for w in widgets:
                if widget_purpose(w.slug, tool) == purpose:
                    return w
        else:
            normalised = norm(wanted)
            levels: tuple[Callable[[Widget], bool], ...] = (
                lambda w: bool(w.key) and norm(w.key) == normalised,
                lambda w: widget_purpose(w.slug, tool) == normalised,
                lambda w: bool(w.name) and norm(w.name) == normalised,
            )
            for level in levels:
                matches = [w for w in widgets if level(w)]
                if len(matches) == 1:
                    return matches[0]
                if len(matches) > 1:
                    raise UnknownWidgetError(
                        f"{name!r} names several widgets of {tool!r}: "
                        f"{quoted(w.slug for w in matches)}; use the full widget slug",
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
        guess = did_you_mean(norm(wanted), handles) or did_you_mean(
            wanted, [w.slug for w in widgets]
        )
        hint = f"did you mean {guess!r}? Its" if guess else "its"
        raise UnknownWidgetError(
            f"tool {tool!r} has no widget {name!r}: {hint} widgets are {quoted(handles)}",
            tool=tool,
            widget=name,
            valid=handles,
            suggestion=guess,
        )

    def values(self, tool: str, widget: Widget, *, active_only: bool = True) -> tuple[str, ...]:
        """The short values of the widget's items (``bedroom``, ``living-room``)."""
        return tuple(
            item_value(item.slug, widget.slug, tool)
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
        short = norm(wanted)
        if wanted.startswith("item-"):
            short = item_value(wanted, widget.slug, tool)
        for item in widget.items:
            if item_value(item.slug, widget.slug, tool) == short:
                return item
        for item in widget.items:
            if item.name and norm(item.name) == short:
                return item
        valid = self.values(tool, widget)
        handle = self.handle(tool, widget)
        elsewhere = ""
        if self.has_widgets_of(tool):
            for other in self.widgets_of(tool):
                if other.slug != widget.slug and any(i.slug == wanted for i in other.items):
                    elsewhere = f" ({wanted!r} belongs to widget {self.handle(tool, other)!r})"
        guess = None if elsewhere else did_you_mean(short, valid)
        hint = f"; did you mean {guess!r}? Valid" if guess else "; valid"
        raise UnknownItemError(
            f"{value!r} is not an item of widget {handle!r} ({widget.slug}){elsewhere}{hint} "
            f"values: {quoted(valid)}",
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
        """The widget of ``tool`` holding ``item_slug``, and that item; ``None`` if none has it."""
        for widget in self.widgets_of(tool):
            for item in widget.items:
                if item.slug == item_slug:
                    return widget, item
        return None
