"""The shapes of the sandbox's tool catalogue: tools, input slots, widgets and items (spec 2.4,
2.5, 4.8), their wire form and the catalogue's look-ups.

No I/O.  The data itself, where each list comes from, lives in ``_catalogue_data.py``.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

__all__ = ["Catalogue", "ToolDef", "WidgetDef", "WidgetItemDef"]

_STAMP: Final = "2024-01-15T09:00:00.000Z"


@attrs.frozen
class WidgetItemDef:
    slug: str
    value: str
    name: str
    legacy_id: int
    priority: int
    is_default: bool = False
    accessible_in: tuple[str, ...] | None = None

    def wire(self, icon_base: str) -> dict[str, Any]:
        return {
            "slug": self.slug,
            "name": self.name,
            "description": f"{self.name}.",
            "prompt": f"{self.name.lower()}, photorealistic, real-estate photography",
            "priority": self.priority,
            "isActive": True,
            "isDefault": self.is_default,
            "iconSrc": f"{icon_base}/icons/{self.slug}.png",
            "accessibleIn": None if self.accessible_in is None else list(self.accessible_in),
        }


@attrs.frozen
class WidgetDef:
    id: str
    slug: str
    purpose: str
    name: str
    tool: str
    key: str
    type: str
    is_optional: bool
    multiple: bool
    priority: int
    items: tuple[WidgetItemDef, ...]
    related: tuple[str, ...] | None = None

    def item(self, slug: str) -> WidgetItemDef | None:
        return next((i for i in self.items if i.slug == slug), None)

    def wire(self, icon_base: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "slug": self.slug,
            "name": self.name,
            "description": f"{self.name} of the result.",
            "isOptional": self.is_optional,
            "isActive": True,
            "priority": self.priority,
            "type": self.type,
            "tool": self.tool,
            "items": [i.wire(icon_base) for i in self.items],
            "related": None if self.related is None else list(self.related),
            "key": self.key,
            "createdAt": _STAMP,
            "updatedAt": _STAMP,
        }


@attrs.frozen
class ToolDef:
    id: str
    slug: str
    name: str
    slots: tuple[str, ...]
    widgets: tuple[WidgetDef, ...]
    creates_group: bool = False
    aliases: tuple[str, ...] = ()

    def widget(self, slug: str) -> WidgetDef | None:
        return next((w for w in self.widgets if w.slug == slug), None)

    def slots_for(self, sent_slug: str) -> tuple[str, ...]:
        """Slot names when the tool is addressed as ``sent_slug`` (the slot prefix follows it)."""
        return tuple(s.replace(self.slug, sent_slug, 1) for s in self.slots)

    def wire(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "slug": self.slug, "isActive": True}


@attrs.frozen
class Catalogue:
    """Look-ups over the tools; ``resolve`` accepts a tool's slug or any of its aliases."""

    tools: tuple[ToolDef, ...]

    def resolve(self, slug: str) -> ToolDef | None:
        for t in self.tools:
            if slug == t.slug or slug in t.aliases:
                return t
        return None

    def widget_by_id(self, widget_id: str) -> tuple[ToolDef, WidgetDef] | None:
        for t in self.tools:
            for w in t.widgets:
                if w.id == widget_id:
                    return t, w
        return None

    def item_by_legacy_id(self, legacy_id: int) -> tuple[ToolDef, WidgetDef, WidgetItemDef] | None:
        for t in self.tools:
            for w in t.widgets:
                for i in w.items:
                    if i.legacy_id == legacy_id:
                        return t, w, i
        return None
