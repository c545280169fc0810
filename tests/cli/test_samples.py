"""The bundled sample photos: small JPEGs of rooms and a house, drawn by scripts/draw_samples.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from PIL import Image, ImageChops, ImageStat

from asyncsdk import samples

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "draw_samples.py"


def test_every_sample_is_a_small_jpeg() -> None:
    for name in samples.NAMES:
        path = samples.path(name)
        assert path.stat().st_size <= 60 * 1024, name
        with Image.open(path) as image:
            assert image.format == "JPEG"
            assert image.size == (640, 427)


def test_the_committed_jpegs_are_what_the_script_draws(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True)
    for name in samples.NAMES:
        with Image.open(tmp_path / name) as drawn, Image.open(samples.path(name)) as stored:
            difference = ImageChops.difference(drawn.convert("RGB"), stored.convert("RGB"))
        # JPEG loses a little; a changed drawing differs by far more.
        assert max(ImageStat.Stat(difference).mean) < 3.0, name


def test_the_kitchen_box_is_inside_the_mask_rectangle() -> None:
    x0, y0, x1, y1 = samples.KITCHEN_BOX
    bx0, by0, bx1, by1 = samples.BOX_DRAWN
    assert x0 < bx0
    assert y0 < by0
    assert x1 > bx1
    assert y1 > by1
    with Image.open(samples.path("kitchen.jpg")) as kitchen:
        box_colour = kitchen.convert("RGB").getpixel((int(bx0) + 20, int(by1) - 10))
    assert isinstance(box_colour, tuple)
    red, green, blue = box_colour[:3]
    assert red > green > blue  # cardboard brown, not the grey floor


def test_an_unknown_sample_names_the_ones_that_exist() -> None:
    import pytest

    with pytest.raises(FileNotFoundError, match=r"kitchen\.jpg"):
        samples.path("garage.jpg")
