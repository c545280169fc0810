"""The ``widgets=`` argument: the shapes it takes, and its planning into widget selections.

:func:`widget_entries` checks the shape of any accepted form before the catalogue is consulted;
:func:`plan_widgets_checked` plans it against a catalogue snapshot, enforcing single- and
multi-select widgets, required widgets and ``accessibleIn`` conditions (spec 2.5);
:func:`plan_widgets_unchecked` only expands short names, by the catalogue when it is at hand,
else by the slug convention.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from asyncsdk._catalogue.snapshot import (
    KNOWN_KEYS,
    Catalogue,
    WidgetSelection,
    item_value,
    norm,
    quoted,
    reference_slug,
)
from asyncsdk._errors import (
    CatalogueError,
    InactiveError,
    MissingWidgetError,
    SelectionError,
    ValidationError,
)
from asyncsdk._models import Widget, WidgetItem

__all__ = [
    "Entry",
    "WidgetsArg",
    "plan_widgets_checked",
    "plan_widgets_unchecked",
    "widget_entries",
]


#: Every form ``widgets=`` accepts: ``{"space": "bedroom", "enhancement_options": ["a", "b"]}``
#: (keys by key, purpose, name or slug; values short, by name, or full slugs; ``None`` = omitted),
#: the wire list ``[{"slug": ..., "item_slugs": [...]}]``, or :class:`WidgetSelection` values.
WidgetsArg: TypeAlias = (
    Mapping[str, str | Sequence[str] | None]
    | Sequence[Mapping[str, Any]]
    | Sequence[WidgetSelection]
)

#: A widget as the caller named it, and the names of its items.
Entry: TypeAlias = tuple[str, tuple[str, ...]]

_WIDGETS_FORMS = (
    "a mapping of widget names to items such as {'space': 'bedroom', 'style': 'modern'}, "
    "or a sequence of {'slug': ..., 'item_slugs': [...]} mappings"
)


def widget_entries(widgets: WidgetsArg | None) -> list[Entry]:
    """The one reading of ``widgets=``: its shape checked, before the catalogue is consulted, and
    each widget given as ``(widget name, item names)``.

    * the short mapping ``{"space": "bedroom", "enhancement_options": ["a", "b"]}`` (a value is an
      item name, a list of them, or ``None`` for "leave out");
    * the wire list ``[{"slug": ..., "item_slugs": [...]}]``, strictly in that shape;
    * a sequence of :class:`~asyncsdk.WidgetSelection`.
    """
    if widgets is None:
        return []
    if isinstance(widgets, str | bytes) or not isinstance(widgets, Mapping | Sequence):
        shown = "a string" if isinstance(widgets, str | bytes) else type(widgets).__name__
        raise ValidationError(f"widgets must be {_WIDGETS_FORMS}, not {shown}")
    entries: list[Entry] = []
    if isinstance(widgets, Mapping):
        if "slug" in widgets and set(widgets) <= {"slug", "item_slugs"}:
            raise ValidationError(
                f"widgets must be {_WIDGETS_FORMS}; {dict(widgets)!r} is one wire entry: "
                "put it in a list"
            )
        for name, value in widgets.items():
            if not isinstance(name, str) or not name.strip():
                raise ValidationError(f"widget names must be non-empty strings, not {name!r}")
            if value is not None:
                entries.append((name, _item_names(name, value)))
        return entries
    for index, entry in enumerate(widgets):
        if isinstance(entry, WidgetSelection):
            entries.append((entry.slug, entry.item_slugs))
        elif isinstance(entry, Mapping):
            entries.append(_wire_entry(index, entry))
        else:
            raise ValidationError(
                f"widgets[{index}] must be a mapping {{'slug': ..., 'item_slugs': [...]}}, "
                f"not {type(entry).__name__}"
            )
    return entries


def _item_names(widget: str, value: object) -> tuple[str, ...]:
    """The items given for one widget of the short mapping: a name, or a list or set of names."""
    if isinstance(value, str):
        names: tuple[object, ...] = (value,)
    elif isinstance(value, bytes) or not isinstance(value, Sequence | set | frozenset):
        names = (value,)
    else:
        names = tuple(value)
    if not all(isinstance(name, str) and name.strip() for name in names):
        raise ValidationError(
            f"widgets[{widget!r}] must be an item name or a list of item names, not {value!r}"
        )
    return names  # type: ignore[return-value]  # all strings, checked above


def _wire_entry(index: int, widget: Mapping[str, Any]) -> Entry:
    """One entry of the wire list, ``{"slug": str, "item_slugs": [str, ...]}`` and nothing else."""
    if "slug" not in widget:
        raise ValidationError(
            f"widgets[{index}] must be {{'slug': <widget slug>, 'item_slugs': [...]}}, "
            f"got {dict(widget)!r}"
        )
    unknown = set(widget) - {"slug", "item_slugs"}
    if unknown:
        raise ValidationError(
            f"widgets[{index}] has unknown keys {sorted(unknown)}; use 'slug' and 'item_slugs'"
        )
    slug = widget["slug"]
    items = widget.get("item_slugs")
    if not isinstance(slug, str) or not slug:
        raise ValidationError(f"widgets[{index}]['slug'] must be a non-empty string")
    if (
        isinstance(items, str)
        or not isinstance(items, Sequence)
        or not all(isinstance(item, str) and item for item in items)
    ):
        raise ValidationError(
            f"widgets[{index}]['item_slugs'] must be a list of item slugs, e.g. "
            f"['item-...-{slug}'], not {items!r}"
        )
    return slug, tuple(items)


def plan_widgets_checked(
    catalogue: Catalogue, tool: str, entries: list[Entry]
) -> tuple[WidgetSelection, ...]:
    chosen: dict[str, tuple[Widget, list[WidgetItem]]] = {}
    for name, item_names in entries:
        widget = catalogue.widget(tool, name)
        if widget.slug in chosen:
            handle = catalogue.handle(tool, widget)
            raise SelectionError(
                f"widget {handle!r} ({widget.slug}) is given twice in widgets=; give it once",
                tool=tool,
                widget=widget.slug,
            )
        if not widget.is_active:
            handle = catalogue.handle(tool, widget)
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
                handle = catalogue.handle(tool, widget)
                raise InactiveError(
                    f"item {item_value(item.slug, widget.slug, tool)!r} of widget {handle!r} "
                    f"is not active; pick one of {quoted(valid)}",
                    tool=tool,
                    widget=widget.slug,
                    item=item.slug,
                    valid=valid,
                )
            if item not in items:
                items.append(item)
        if len(items) > 1 and not catalogue.is_multi_select(widget):
            handle = catalogue.handle(tool, widget)
            shown = quoted(item_value(i.slug, widget.slug, tool) for i in items)
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
                item_value(i.slug, widget.slug, tool)
                for i in widget.items
                if i.is_default and i.is_active
            ),
            None,
        )
        default_hint = f" (the default is {default!r})" if default else ""
        raise MissingWidgetError(
            f"{tool!r} needs the widget {handle!r} ({widget.slug}): add "
            f"widgets={{{handle!r}: <one of {quoted(valid)}>}}{default_hint}",
            tool=tool,
            widget=widget.slug,
            valid=valid,
            handle=handle,
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
    value = item_value(item.slug, widget.slug, tool)
    handle = catalogue.handle(tool, widget)
    needs: dict[str, list[str]] = {}
    for slug in item.accessible_in or ():
        found = catalogue.find_item(tool, slug)
        if found is None:
            needs.setdefault("", []).append(slug)
            continue
        other, other_item = found
        needs.setdefault(other.slug, []).append(item_value(other_item.slug, other.slug, tool))
    parts: list[str] = []
    for other_slug, values in needs.items():
        if not other_slug:
            parts.append(f"one of {quoted(values)} is selected")
            continue
        other_widget = next(w for w in catalogue.widgets_of(tool) if w.slug == other_slug)
        other_handle = catalogue.handle(tool, other_widget)
        now = chosen.get(other_slug)
        picked = (
            f"you selected {quoted(item_value(i.slug, other_slug, tool) for i in now[1])}"
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


def plan_widgets_unchecked(
    catalogue: Catalogue | None, tool: str, entries: list[Entry]
) -> tuple[WidgetSelection, ...]:
    """Expand short forms by the catalogue when it is at hand, else by the slug convention."""
    known = catalogue is not None and catalogue.has_widgets_of(tool)
    reference = reference_slug(tool)
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
            key = norm(name)
            widget_slug = KNOWN_KEYS.get((reference, key), f"widget-{key}-{reference}")
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
                    wanted if wanted.startswith("item-") else f"item-{norm(wanted)}-{widget_slug}"
                )
            if slug not in items:
                items.append(slug)
        if items:
            result.append(WidgetSelection(widget_slug, tuple(items)))
    return tuple(result)
