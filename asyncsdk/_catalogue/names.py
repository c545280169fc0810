"""Names in the catalogue: slugs and their spellings, widget purposes, item values, input slots.

Widget slugs read ``widget-<purpose>-<tool-slug>``; item slugs read ``item-<value>-<widget-slug>``
(spec 2.4, 2.5).  ``tool-furniture-set-restyle`` (the catalogue list) and
``tool-furniture-restyle`` (the tool's reference) are one tool (decision 6).  The catalogue API
lists no input slots, so they follow the convention ``<tool-slug>-input-image`` (spec 4.8).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final

import attrs

from asyncsdk._models import ToolSlug

__all__ = [
    "KNOWN_KEYS",
    "MULTI_SELECT_WIDGETS",
    "TOOL_ALIASES",
    "SlotLayout",
    "aliases",
    "did_you_mean",
    "input_slots",
    "item_value",
    "norm",
    "quoted",
    "reference_slug",
    "slot_suffix",
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


def input_slots(tool: str) -> SlotLayout:
    """The input slots of ``tool`` by the naming convention (the catalogue API lists none).

    The five tools spec 4.8 documents get exactly their slots; any other tool may take the single
    ``<tool>-input-image`` or the pair ``<tool>-input-image-before``/``<tool>-input-image-after``.
    The furniture restyle tool's slots use its reference spelling ``tool-furniture-restyle``.
    """
    reference = reference_slug(tool)
    documented = _DOCUMENTED_SLOTS.get(reference)
    suffix_sets = documented if documented is not None else _CONVENTION_SLOTS
    return SlotLayout(
        tool=reference,
        choices=tuple(tuple(f"{reference}-{s}" for s in suffixes) for suffixes in suffix_sets),
        documented=documented is not None,
    )


def slot_suffix(name: str, tool: str) -> str | None:
    """The slot suffix (``input-image``) that ``name`` means, or ``None``."""
    wanted = name.strip()
    for alias in aliases(tool):
        if wanted.startswith(alias + "-input-"):
            return wanted[len(alias) + 1 :]
    normalised = norm(wanted)
    if normalised.startswith("input-"):
        return normalised
    return _SHORT_SLOTS.get(normalised)
