"""Deterministic Pillow transforms standing in for the AI tools, plus resizing and thumbnails.

Every function here is synchronous and works on files (the sandbox runs them in a worker thread).
Each tool's output differs visibly from its input, the same input always gives the same output, and
the widget selections (style, material, sky...) change the colours used.  Every file is opened
through :func:`_open`, which refuses an image past ``asyncsdk.check_image_size``'s cap from its
header, with :class:`~asyncsdk.MaskError`, before a pixel is decoded; so are resize targets.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

from PIL import Image, ImageChops, ImageDraw, ImageEnhance, ImageFilter, ImageOps, ImageStat

from asyncsdk import MaskError, check_image_size

__all__ = [
    "MASK_BLUE",
    "MASK_TOLERANCE",
    "THUMBNAIL_SIZE",
    "detect_format",
    "fill_masked",
    "image_size",
    "make_icon",
    "mask_region",
    "render_tool",
    "resize_to",
]

MASK_BLUE: Final = (0x78, 0x78, 0xCD)
MASK_TOLERANCE: Final = 40
THUMBNAIL_SIZE: Final = 256

RGB = tuple[int, int, int]


def detect_format(head: bytes) -> str | None:
    """The image format named by a file's first bytes: ``"jpeg"``, ``"png"``, ``"webp"`` or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


@contextlib.contextmanager
def _open(path: Path) -> Iterator[Image.Image]:
    """``path`` opened, nothing decoded yet; :class:`MaskError` if it declares too many pixels."""
    try:
        opened = Image.open(path)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow's own limit, higher than ours (its warning is raised only under -W error).
        raise MaskError(f"the image is refused by Pillow as a decompression bomb: {exc}") from exc
    with opened:
        check_image_size(opened.size)
        yield opened


def image_size(path: Path) -> tuple[int, int]:
    """Width and height read from the header; :class:`MaskError` past the pixel cap, and
    ``OSError``/``ValueError``/``SyntaxError`` if undecodable."""
    with _open(path) as img:
        img.verify()
    with _open(path) as img:
        return img.size


def _colour(seed: str) -> RGB:
    digest = hashlib.sha256(seed.encode()).digest()
    return (digest[0], digest[1], digest[2])


def _band(img: Image.Image, top: float, bottom: float, colour: RGB, alpha: float) -> Image.Image:
    w, h = img.size
    box = (0, int(h * top), w, max(int(h * top) + 1, int(h * bottom)))
    region = img.crop(box)
    overlay = Image.new("RGB", region.size, colour)
    img.paste(Image.blend(region, overlay, alpha), box)
    return img


def _furniture(img: Image.Image, seed: str) -> Image.Image:
    """Draw a sofa, a table and a rug: flat rectangles whose colours follow the selections."""
    w, h = img.size
    draw = ImageDraw.Draw(img)
    sofa, table, rug = _colour(seed + "sofa"), _colour(seed + "table"), _colour(seed + "rug")
    draw.rectangle((int(w * 0.15), int(h * 0.78), int(w * 0.85), int(h * 0.95)), fill=rug)
    draw.rectangle((int(w * 0.10), int(h * 0.55), int(w * 0.55), int(h * 0.80)), fill=sofa)
    draw.rectangle((int(w * 0.10), int(h * 0.45), int(w * 0.55), int(h * 0.58)), fill=sofa)
    draw.rectangle((int(w * 0.62), int(h * 0.65), int(w * 0.88), int(h * 0.75)), fill=table)
    return img


def mask_region(mask: Image.Image, size: tuple[int, int]) -> Image.Image:
    """An ``L`` image at ``size``: 255 where the mask is blue #7878CD (within tolerance), else 0."""
    rgb = mask.convert("RGB").resize(size, Image.Resampling.NEAREST)
    out = Image.new("L", size, 255)
    for band, centre in zip(rgb.split(), MASK_BLUE, strict=True):
        low, high = centre - MASK_TOLERANCE, centre + MASK_TOLERANCE
        out = ImageChops.multiply(
            out, band.point(lambda v, lo=low, hi=high: 255 if lo <= v <= hi else 0)
        )
    return out


def fill_masked(img: Image.Image, region: Image.Image) -> Image.Image:
    """Fill the masked pixels (``region`` 255) with the average colour of the pixels around them."""
    if region.getbbox() is None:
        return img
    outside = ImageOps.invert(region)
    ring = ImageChops.multiply(region.filter(ImageFilter.MaxFilter(9)), outside)
    source = ring if ring.getbbox() is not None else outside
    if source.getbbox() is None:
        fill: RGB = (128, 128, 128)
    else:
        mean = ImageStat.Stat(img.convert("RGB"), mask=source).mean
        fill = (round(mean[0]), round(mean[1]), round(mean[2]))
    out = img.copy()
    out.paste(Image.new("RGB", img.size, fill), (0, 0), region)
    return out


def _dusk(img: Image.Image, seed: str) -> Image.Image:
    dark = ImageEnhance.Brightness(img).enhance(0.45)
    tint = (40, 50, 120) if "golden" not in seed else (120, 70, 30)
    dark = Image.blend(dark, Image.new("RGB", img.size, tint), 0.25)
    # Warm windows: light squares in the lower half.
    draw = ImageDraw.Draw(dark)
    w, h = img.size
    for k in range(3):
        x = int(w * (0.2 + 0.25 * k))
        draw.rectangle((x, int(h * 0.55), x + max(2, w // 14), int(h * 0.68)), fill=(255, 196, 96))
    return dark


def _enhance(img: Image.Image, seed: str) -> Image.Image:
    out = ImageOps.autocontrast(img, cutoff=1)
    out = ImageEnhance.Contrast(out).enhance(1.35)
    out = ImageEnhance.Color(out).enhance(1.3)
    out = out.filter(ImageFilter.SHARPEN)
    if "sky-replacement" in seed:
        out = _band(out, 0.0, 0.3, (110, 170, 235), 0.6)
    if "lawn-replacement" in seed:
        out = _band(out, 0.8, 1.0, (70, 150, 60), 0.6)
    return out


def _remove_centre(img: Image.Image, seed: str) -> Image.Image:
    w, h = img.size
    region = Image.new("L", img.size, 0)
    ImageDraw.Draw(region).ellipse(
        (int(w * 0.35), int(h * 0.45), int(w * 0.65), int(h * 0.85)), 255
    )
    return fill_masked(img, region)


def _under_construction(img: Image.Image, seed: str) -> Image.Image:
    out = img.filter(ImageFilter.MedianFilter(5))
    out = ImageEnhance.Brightness(out).enhance(1.15)
    out = _band(out, 0.0, 0.55, _colour(seed + "walls"), 0.35)
    return _band(out, 0.8, 1.0, _colour(seed + "floor"), 0.5)


def _darkness(img: Image.Image, seed: str) -> Image.Image:
    return ImageEnhance.Brightness(img).enhance(0.7 if "factor-darker" in seed else 1.3)


_TRANSFORMS: Final[dict[str, Callable[[Image.Image, str], Image.Image]]] = {
    "tool-virtual-staging": _furniture,
    "tool-virtual-restaging": lambda img, s: _furniture(
        ImageEnhance.Color(img).enhance(0.6), s + "re"
    ),
    "tool-furniture-set-restyle": lambda img, s: _furniture(img, s + "restyle"),
    "tool-interior-design": lambda img, s: _furniture(
        _band(img, 0.0, 0.6, _colour(s + "palette"), 0.3), s
    ),
    "tool-item-removal": _remove_centre,
    "tool-image-enhancement": _enhance,
    "tool-wall-change": lambda img, s: _band(img, 0.15, 0.6, _colour(s), 0.55),
    "tool-floor-change": lambda img, s: _band(img, 0.75, 1.0, _colour(s), 0.6),
    "tool-ceiling-change": lambda img, s: _band(img, 0.0, 0.15, _colour(s), 0.6),
    "tool-backsplash-change": lambda img, s: _band(img, 0.45, 0.6, _colour(s), 0.65),
    "tool-under-construction": _under_construction,
    "tool-day-to-dusk": _dusk,
    "tool-darkness": _darkness,
}


def render_tool(
    tool: str,
    inputs: Mapping[str, Path],
    selections: Sequence[str],
    out: Path,
) -> tuple[int, int]:
    """Run ``tool`` (a catalogue slug) on its inputs (slot -> file) and write a JPEG to ``out``.

    ``selections`` are the chosen item slugs; they seed the colours.  Returns the output size.
    """
    seed = "|".join(sorted(selections)) or tool
    image_path = next(p for slot, p in inputs.items() if not slot.endswith("-input-mask"))
    with _open(image_path) as src:
        img = src.convert("RGB")
    if tool == "tool-item-removal-mask":
        mask_path = next(p for slot, p in inputs.items() if slot.endswith("-input-mask"))
        with _open(mask_path) as mask:
            result = fill_masked(img, mask_region(mask, img.size))
    else:
        result = _TRANSFORMS[tool](img, seed)
    result.save(out, "JPEG", quality=88)
    return result.size


def resize_to(src: Path, dst: Path, width: int | None, height: int | None) -> None:
    """Write ``src`` resized to fit ``width`` x ``height`` (either may be None: keep the ratio).

    :class:`MaskError` when ``src`` or the size asked for has more pixels than the cap.
    """
    with _open(src) as img:
        w, h = img.size
        if width and height:
            size = (width, height)
        elif width:
            size = (width, max(1, round(h * width / w)))
        elif height:
            size = (max(1, round(w * height / h)), height)
        else:
            size = (w, h)
        check_image_size(size, "resized image")
        fmt = "PNG" if img.format == "PNG" else "JPEG"
        out = img.convert("RGBA" if fmt == "PNG" else "RGB").resize(size, Image.Resampling.LANCZOS)
        out.save(dst, fmt)


def make_icon(slug: str, dst: Path) -> None:
    """A 64x64 PNG icon in a colour derived from ``slug``."""
    Image.new("RGB", (64, 64), _colour(slug)).save(dst, "PNG")
