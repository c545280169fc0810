"""Mask helpers: the blue #7878CD / black convention (spec 2.2, decision 7)."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from asyncsdk import (
    REMOVE_BLUE,
    MaskError,
    ValidationError,
    check_mask,
    convert_white_mask,
    mask_from_shapes,
)

#: Black keeps a pixel; REMOVE_BLUE (#7878CD) removes it.
KEEP_BLACK = (0, 0, 0)
SIZE = (320, 240)
BOX = (40, 30, 200, 150)  # 160 x 120 pixels


def encode(image: Image.Image, fmt: str = "PNG", **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def drawn(colour: tuple[int, int, int], size: tuple[int, int] = SIZE) -> Image.Image:
    image = Image.new("RGB", size, KEEP_BLACK)
    ImageDraw.Draw(image).rectangle((BOX[0], BOX[1], BOX[2] - 1, BOX[3] - 1), fill=colour)
    return image


def test_blue_on_black_passes_with_counts() -> None:
    report = check_mask(encode(drawn(REMOVE_BLUE)))
    assert (report.width, report.height) == SIZE
    assert report.remove_pixels == 160 * 120
    assert report.keep_pixels == SIZE[0] * SIZE[1] - 160 * 120
    assert report.stray_pixels == 0
    assert report.remove_fraction == pytest.approx(0.25)


def test_jpeg_artefacts_are_tolerated() -> None:
    jpeg = encode(drawn(REMOVE_BLUE), "JPEG", quality=80)
    report = check_mask(jpeg)
    assert report.remove_fraction == pytest.approx(0.25, abs=0.01)
    assert report.stray_fraction <= 0.02


def test_white_mask_is_refused_with_the_fix() -> None:
    with pytest.raises(MaskError, match=r"white-on-black mask.*convert_white_mask") as caught:
        check_mask(encode(drawn((255, 255, 255))))
    assert caught.value.report is not None
    assert caught.value.report.stray_pixels == 160 * 120
    assert "#FFFFFF" in str(caught.value)


def test_other_colours_are_refused() -> None:
    with pytest.raises(MaskError, match=r"neither blue #7878CD.*#FF0000.*Repaint"):
        check_mask(drawn((255, 0, 0)))


def test_a_mask_that_removes_nothing() -> None:
    with pytest.raises(MaskError, match="marks nothing to remove"):
        check_mask(Image.new("RGB", SIZE, KEEP_BLACK))


def test_size_must_match_the_photo(tmp_path: Path) -> None:
    photo = tmp_path / "photo.jpg"
    Image.new("RGB", (640, 480), (200, 180, 150)).save(photo)
    with pytest.raises(MaskError, match="the mask is 320x240 but the photo is 640x480"):
        check_mask(drawn(REMOVE_BLUE), photo)
    same = tmp_path / "same.png"
    Image.new("RGB", SIZE).save(same)
    assert check_mask(drawn(REMOVE_BLUE), same).remove_pixels == 160 * 120


def test_transparent_background_counts_as_keep() -> None:
    image = Image.new("RGBA", SIZE, (255, 255, 255, 0))
    ImageDraw.Draw(image).rectangle((0, 0, 9, 9), fill=(*REMOVE_BLUE, 255))
    assert check_mask(encode(image)).remove_pixels == 100


def test_paths_bytes_and_images_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "mask.png"
    drawn(REMOVE_BLUE).save(path)
    for source in (path, str(path), path.read_bytes(), drawn(REMOVE_BLUE)):
        assert check_mask(source).remove_pixels == 160 * 120


def test_unreadable_inputs_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(MaskError, match="does not exist"):
        check_mask(tmp_path / "missing.png")
    with pytest.raises(MaskError, match="is not a readable image"):
        check_mask(b"not an image at all")
    with pytest.raises(MaskError, match="must be a path, bytes or a PIL Image"):
        check_mask(12)  # type: ignore[arg-type]


def test_options_are_checked() -> None:
    with pytest.raises(ValidationError, match="tolerance"):
        check_mask(drawn(REMOVE_BLUE), tolerance=200)
    with pytest.raises(ValidationError, match="max_stray"):
        check_mask(drawn(REMOVE_BLUE), max_stray=2.0)


def test_convert_white_mask_gives_the_blue_convention() -> None:
    white = drawn((255, 255, 255))
    converted = convert_white_mask(encode(white, "JPEG", quality=85))
    with Image.open(io.BytesIO(converted)) as image:
        assert image.format == "PNG"
        rgb = image.convert("RGB")
    assert rgb.getpixel((100, 100)) == REMOVE_BLUE
    assert rgb.getpixel((5, 5)) == KEEP_BLACK
    report = check_mask(converted, white)
    assert report.stray_pixels == 0
    assert report.remove_pixels == pytest.approx(160 * 120, rel=0.02)


def test_convert_keeps_a_mask_already_blue() -> None:
    converted = convert_white_mask(drawn(REMOVE_BLUE))
    assert check_mask(converted).remove_pixels == 160 * 120


def test_mask_from_rectangles_and_polygons() -> None:
    png = mask_from_shapes(SIZE, rectangles=[BOX], polygons=[[(250, 10), (310, 10), (310, 70)]])
    with Image.open(io.BytesIO(png)) as image:
        assert image.format == "PNG"
        assert image.size == SIZE
        rgb = image.convert("RGB")
    assert rgb.getpixel((40, 30)) == REMOVE_BLUE
    assert rgb.getpixel((199, 149)) == REMOVE_BLUE
    assert rgb.getpixel((200, 150)) == KEEP_BLACK
    assert rgb.getpixel((305, 20)) == REMOVE_BLUE
    assert rgb.getpixel((255, 60)) == KEEP_BLACK
    report = check_mask(png)
    assert report.stray_pixels == 0
    assert report.remove_pixels > 160 * 120


def test_mask_from_shapes_takes_the_photos_size(tmp_path: Path) -> None:
    photo = tmp_path / "photo.png"
    Image.new("RGB", (64, 48)).save(photo)
    png = mask_from_shapes(photo, rectangles=[(0, 0, 10, 10)])
    assert check_mask(png, photo).remove_pixels == 100


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "no shapes given"),
        ({"rectangles": [(50, 50, 10, 60)]}, "empty or reversed"),
        ({"rectangles": [(400, 300, 500, 400)]}, "lies outside the 320x240 image"),
        ({"polygons": [[(0, 0), (10, 10)]]}, "at least three"),
        ({"polygons": [[(-50, -50), (-10, -50), (-10, -10)]]}, "outside"),
    ],
)
def test_bad_shapes_name_the_problem(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(MaskError, match=message):
        mask_from_shapes(SIZE, **kwargs)  # type: ignore[arg-type]


def test_bad_size() -> None:
    with pytest.raises(ValidationError, match=r"size must be \(width, height\)"):
        mask_from_shapes((0, 10), rectangles=[(0, 0, 1, 1)])


def test_missing_pillow_names_the_extra() -> None:
    """Run without Pillow importable (a ``None`` entry in sys.modules blocks the import)."""
    code = (
        "import sys\n"
        "sys.modules['PIL'] = None\n"
        "from asyncsdk import ConfigurationError, check_mask\n"
        "try:\n"
        "    check_mask(b'x')\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'asyncsdk[images]'" in done.stdout
