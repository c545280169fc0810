"""Sample photos shipped with the package, for the demo and for trying the tools.

Drawn by ``scripts/draw_samples.py`` in the source repository, which redraws them:

* ``bedroom-empty.jpg``: an empty bedroom (virtual staging);
* ``living-room-empty.jpg``: an empty living room (virtual staging);
* ``kitchen.jpg``: a kitchen with a cardboard box on the floor (enhancement, item removal;
  :data:`KITCHEN_BOX` is where the box is);
* ``exterior.jpg``: a house front by day (day to dusk).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["BOX_DRAWN", "KITCHEN_BOX", "NAMES", "folder", "path"]

NAMES: Final = ("bedroom-empty.jpg", "living-room-empty.jpg", "kitchen.jpg", "exterior.jpg")

#: Where ``scripts/draw_samples.py`` draws the box in ``kitchen.jpg``: (x0, y0, x1, y1) in pixels.
BOX_DRAWN: Final = (262.0, 318.0, 372.0, 398.0)

#: The cardboard box in ``kitchen.jpg`` with 8 pixels of margin: a rectangle for a removal mask.
KITCHEN_BOX: Final = (
    BOX_DRAWN[0] - 8,
    BOX_DRAWN[1] - 8,
    BOX_DRAWN[2] + 8,
    BOX_DRAWN[3] + 8,
)


def folder() -> Path:
    """The folder that holds the sample photos."""
    return Path(__file__).resolve().parent


def path(name: str) -> Path:
    """The path of one sample photo; ``FileNotFoundError`` names the ones that exist."""
    if name not in NAMES:
        raise FileNotFoundError(f"no sample photo {name!r}; the samples are {', '.join(NAMES)}")
    found = folder() / name
    if not found.is_file():
        raise FileNotFoundError(
            f"the sample photo {found} is missing from the installation; reinstall the package"
        )
    return found
