"""A tool's input slots, which the catalogue API does not list: the naming convention
``<tool-slug>-input-image`` (spec 4.8), exact for the five tools the spec documents.

The furniture restyle tool's slots use its reference spelling ``tool-furniture-restyle``
(decision 6).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

import attrs

from asyncsdk._catalogue.snapshot import aliases, norm, reference_slug
from asyncsdk._models import ToolSlug

__all__ = ["SlotLayout", "input_slots", "slot_suffix"]

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
