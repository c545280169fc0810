"""Mask images for the mask-based removal tool (``tool-item-removal-mask``), from a caller's
shapes or file to the checked upload.

The service reads a mask as blue ``#7878CD`` for "remove" and black for "keep" (spec 2.2,
decision 7; the one sentence about white on the tool's page is wrong).  A wrong mask is not
rejected by the service: the process runs, costs money and removes the wrong thing.  These helpers
catch that before the upload:

* :func:`check_mask` reads a mask and reports how much it removes, or raises :class:`MaskError`
  when its colours or its size are wrong;
* :func:`convert_white_mask` turns a white-on-black mask into the blue-on-black PNG;
* :func:`mask_from_shapes` draws a mask from rectangles and polygons;
* :func:`ready_mask` makes the upload of ``Client.run_mask_removal`` and
  ``client.orders.append_mask``, both through the same checks.

Images come as a path, bytes or a Pillow ``Image``.  Pillow is an optional dependency
(``pip install 'asyncsdk[images]'``), imported on first use.  :func:`check_image_size` holds every
image the package opens (here and in the sandbox) to 8192 x 8192 pixels, read from its header
before anything is decoded.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias

from asyncsdk._checks import is_int, require_int
from asyncsdk._errors import ConfigurationError, MaskError, ValidationError
from asyncsdk._models import AssetRole, MaskReport
from asyncsdk._uploads import Upload, UploadSource, sniff_image_type

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "KEEP_BLACK",
    "REMOVE_BLUE",
    "ImageSource",
    "check_image_size",
    "check_mask",
    "convert_white_mask",
    "mask_from_shapes",
    "readable_photo",
    "ready_mask",
]

#: The colour that marks pixels to remove (``#7878CD``).
REMOVE_BLUE: Final = (0x78, 0x78, 0xCD)
#: The colour that marks pixels to keep.
KEEP_BLACK: Final = (0, 0, 0)

#: The most pixels an image the library opens may declare (8192 x 8192), checked from the header
#: before any pixel is decoded: far above any photo the service takes, and below Pillow's own
#: decompression-bomb limit, which is left as the application set it.
MAX_IMAGE_PIXELS: Final = 8192 * 8192

#: A path, the encoded bytes of an image file, or a Pillow image.
ImageSource: TypeAlias = "str | os.PathLike[str] | bytes | Image.Image"

Point: TypeAlias = tuple[float, float]
Rectangle: TypeAlias = tuple[float, float, float, float]


def check_image_size(size: tuple[int, int], what: str = "image") -> None:
    """Raise :class:`MaskError` when ``size`` has more pixels than 8192 x 8192.

    The one check of every image this package opens (the mask helpers, the photo a mask is drawn
    for, the sandbox's uploads and resizes) and of every mask it draws: ``size`` is what the
    image's header declares, read before anything is decoded or allocated.  ``what`` names the
    image in the message.
    """
    width, height = size
    if width * height > MAX_IMAGE_PIXELS:
        raise MaskError(
            f"the {what} is {width} x {height} pixels, more than the 8192 x 8192 "
            f"({MAX_IMAGE_PIXELS} pixels) an image may have here, read from its header before "
            "decoding; scale it down, or give an image the size of the photo"
        )


def _require_pillow() -> None:
    try:
        import PIL.Image  # noqa: F401  (probe only; callers import what they use)
    except ImportError as exc:
        raise ConfigurationError(
            "the mask helpers need Pillow, which is not installed: pip install 'asyncsdk[images]'"
        ) from exc


def _describe(source: ImageSource) -> str:
    if isinstance(source, str | os.PathLike):
        return f"file {os.fspath(source)!r}"
    if isinstance(source, bytes | bytearray | memoryview):
        return f"{len(source)} bytes"
    return "image"


def _flatten(image: Image.Image) -> Image.Image:
    """RGB, with any transparency composited onto black (transparent means keep)."""
    from PIL import Image

    if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (*KEEP_BLACK, 255))
        background.alpha_composite(rgba)
        return background.convert("RGB")
    return image.convert("RGB")


@contextlib.contextmanager
def _opened(source: ImageSource, what: str) -> Iterator[Image.Image]:
    """The image opened and its size checked from the header, nothing decoded yet.

    A Pillow image is checked and given as it is (a lazily opened one is not decoded yet either).
    Pillow's errors, raised here or in the ``with`` body (a ``load()``), become :class:`MaskError`.
    """
    _require_pillow()
    from PIL import Image, UnidentifiedImageError

    described = f"{what} ({_describe(source)})"
    try:
        if isinstance(source, Image.Image):
            check_image_size(source.size, described)
            yield source
            return
        if isinstance(source, bytes | bytearray | memoryview):
            with Image.open(io.BytesIO(bytes(source))) as opened:
                check_image_size(opened.size, described)
                yield opened
            return
        if isinstance(source, str | os.PathLike):
            with Image.open(source) as opened:
                check_image_size(opened.size, described)
                yield opened
            return
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow's own limit, higher than ours (its warning is raised only under -W error).
        raise MaskError(
            f"the {described} is refused by Pillow as a decompression bomb: {exc}; "
            "give an image the size of the photo"
        ) from exc
    except FileNotFoundError as exc:
        raise MaskError(f"the {what} {_describe(source)} does not exist") from exc
    except (UnidentifiedImageError, OSError) as exc:
        raise MaskError(
            f"the {described} is not a readable image: {exc}; "
            "give a PNG or JPEG file, its bytes, or a PIL Image"
        ) from exc
    raise MaskError(f"the {what} must be a path, bytes or a PIL Image, not {type(source).__name__}")


def _load(source: ImageSource, what: str) -> Image.Image:
    """The image as RGB, read fully and detached from any file."""
    with _opened(source, what) as image:
        image.load()
        return _flatten(image)


def _size_of(source: ImageSource, what: str) -> tuple[int, int]:
    """Width and height, reading only the header of files and bytes."""
    with _opened(source, what) as image:
        return image.size


def _near(image: Image.Image, colour: tuple[int, int, int], tolerance: int) -> Image.Image:
    """An ``L`` image: 255 where every channel is within ``tolerance`` of ``colour``, else 0."""
    from PIL import ImageChops

    bands = image.split()
    selected = None
    for band, target in zip(bands, colour, strict=True):
        table = [255 if abs(value - target) <= tolerance else 0 for value in range(256)]
        hit = band.point(table)
        selected = hit if selected is None else ImageChops.multiply(selected, hit)
    assert selected is not None  # three bands always
    return selected


def _encode_png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def check_mask(
    mask: ImageSource,
    photo: ImageSource | None = None,
    *,
    tolerance: int = 40,
    max_stray: float = 0.02,
) -> MaskReport:
    """Check that ``mask`` follows the convention: blue ``#7878CD`` = remove, black = keep.

    A pixel counts as blue or black when every channel is within ``tolerance`` (0-255) of it; up
    to ``max_stray`` of the pixels (a fraction) may be neither, for JPEG artefacts and
    anti-aliased edges.  When ``photo`` is given the sizes must be equal.  Raises
    :class:`MaskError` naming the fix; returns a :class:`MaskReport` otherwise.
    """
    require_int(tolerance, "tolerance must be from 0 to 59 (per channel)", minimum=0, maximum=59)
    if not 0.0 <= max_stray < 1.0:
        raise ValidationError(f"max_stray must be a fraction from 0.0 to 1.0, not {max_stray!r}")
    image = _load(mask, "mask")
    width, height = image.size
    if photo is not None:
        photo_size = _size_of(photo, "photo")
        if photo_size != image.size:
            raise MaskError(
                f"the mask is {width}x{height} but the photo is {photo_size[0]}x{photo_size[1]}: "
                "the mask must have the photo's size; draw it on the photo's canvas or resize it "
                "with nearest-neighbour sampling (Image.resize(size, Image.NEAREST))"
            )

    blue = _near(image, REMOVE_BLUE, tolerance)
    black = _near(image, KEEP_BLACK, tolerance)
    remove = blue.histogram()[255]
    keep = black.histogram()[255]
    report = MaskReport(
        width=width,
        height=height,
        remove_pixels=remove,
        keep_pixels=keep,
        stray_pixels=width * height - remove - keep,
    )
    if report.stray_fraction > max_stray:
        raise MaskError(_stray_message(image, blue, black, report, max_stray), report=report)
    if remove == 0:
        raise MaskError(
            "the mask marks nothing to remove: it has no blue (#7878CD) pixels. Paint the areas "
            "to remove in #7878CD on black, or build the mask with mask_from_shapes()",
            report=report,
        )
    return report


def _stray_message(
    image: Image.Image,
    blue: Image.Image,
    black: Image.Image,
    report: MaskReport,
    max_stray: float,
) -> str:
    from PIL import Image, ImageChops

    valid = ImageChops.lighter(blue, black)
    # Paint every valid pixel black, so that what is left to count is the stray colours.
    strays = Image.composite(Image.new("RGB", image.size, KEEP_BLACK), image, valid)
    counted = strays.getcolors(maxcolors=report.total_pixels) or []
    ranked: list[tuple[int, tuple[int, int, int]]] = sorted(
        (
            (count, (colour[0], colour[1], colour[2]))
            for count, colour in counted
            if isinstance(colour, tuple) and colour[:3] != KEEP_BLACK
        ),
        key=lambda entry: -entry[0],
    )
    shown = ", ".join("#{:02X}{:02X}{:02X}".format(*colour) for _, colour in ranked[:3])
    message = (
        f"{report.stray_fraction:.1%} of the mask's pixels are neither blue #7878CD (remove) "
        f"nor black (keep), more than the {max_stray:.1%} allowed; most common: {shown}."
    )
    whitish = sum(count for count, colour in ranked if min(colour) >= 200)
    if whitish >= report.stray_pixels // 2:
        return (
            message + " This looks like a white-on-black mask: the service reads blue as remove, "
            "so convert it with convert_white_mask(mask)"
        )
    return message + " Repaint those areas in #7878CD (remove) or black (keep)"


def convert_white_mask(mask: ImageSource, *, threshold: int = 128) -> bytes:
    """Turn a white-on-black mask into the service's blue-on-black PNG.

    Pixels whose brightness is at least ``threshold`` (and pixels already blue) become
    ``#7878CD``; all others become black.  Transparent pixels count as black.
    """
    require_int(threshold, "threshold must be from 1 to 255", maximum=255)
    image = _load(mask, "mask")
    from PIL import Image, ImageChops  # after _load, which reports a missing Pillow

    bright = image.convert("L").point([255 if v >= threshold else 0 for v in range(256)])
    selection = ImageChops.lighter(bright, _near(image, REMOVE_BLUE, 40))
    result = Image.new("RGB", image.size, KEEP_BLACK)
    result.paste(REMOVE_BLUE, box=(0, 0, *image.size), mask=selection)
    return _encode_png(result)


def mask_from_shapes(
    size: tuple[int, int] | ImageSource,
    *,
    rectangles: Iterable[Rectangle] = (),
    polygons: Iterable[Sequence[Point]] = (),
) -> bytes:
    """Draw a blue-on-black mask PNG: the given shapes are removed, everything else is kept.

    ``size`` is ``(width, height)`` or the photo itself (its size is used).  ``rectangles`` are
    ``(x0, y0, x1, y1)`` with ``x0 < x1`` and ``y0 < y1``; ``polygons`` are lists of at least three
    ``(x, y)`` points.  Coordinates are pixels from the top-left corner.
    """
    _require_pillow()
    from PIL import Image, ImageDraw

    if isinstance(size, tuple):
        if len(size) != 2 or not all(is_int(v) and v > 0 for v in size):
            raise ValidationError(f"size must be (width, height) in positive pixels, not {size!r}")
        check_image_size(size, "mask to draw")
        width, height = size
    else:
        width, height = _size_of(size, "photo")

    rects = [tuple(rect) for rect in rectangles]
    polys = [list(poly) for poly in polygons]
    if not rects and not polys:
        raise MaskError("no shapes given: pass rectangles=[(x0, y0, x1, y1)] or polygons=[[...]]")

    def on_canvas(xs: Sequence[float], ys: Sequence[float]) -> bool:
        return max(xs) >= 0 and max(ys) >= 0 and min(xs) < width and min(ys) < height

    image = Image.new("RGB", (width, height), KEEP_BLACK)
    draw = ImageDraw.Draw(image)
    for number, rect in enumerate(rects):
        if len(rect) != 4:
            raise MaskError(f"rectangle {number} must be (x0, y0, x1, y1), not {rect!r}")
        x0, y0, x1, y1 = rect
        if not (x0 < x1 and y0 < y1):
            raise MaskError(
                f"rectangle {number} {rect!r} is empty or reversed: give (x0, y0, x1, y1) with "
                "x0 < x1 and y0 < y1"
            )
        if not on_canvas((x0, x1), (y0, y1)):
            raise MaskError(f"rectangle {number} {rect!r} lies outside the {width}x{height} image")
        # Pillow's rectangle includes both corners; (x1, y1) is exclusive here, as in a box.
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=REMOVE_BLUE)
    for number, poly in enumerate(polys):
        if len(poly) < 3 or not all(len(point) == 2 for point in poly):
            raise MaskError(
                f"polygon {number} needs at least three (x, y) points, got {len(poly)}: {poly!r}"
            )
        xs = [point[0] for point in poly]
        ys = [point[1] for point in poly]
        if not on_canvas(xs, ys):
            raise MaskError(f"polygon {number} lies outside the {width}x{height} image")
        draw.polygon([(x, y) for x, y in poly], fill=REMOVE_BLUE)
    return _encode_png(image)


# -- the mask as an upload

_MASK_EXTENSIONS: Final = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp"}


def readable_photo(source: UploadSource) -> ImageSource | None:
    """The photo as Pillow can read it without consuming an upload: a path or bytes."""
    if isinstance(source, str | os.PathLike):
        return source
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    return None


def _is_pil_image(value: object) -> bool:
    """True for a PIL image, without importing Pillow when it is not loaded already."""
    module = sys.modules.get("PIL.Image")
    return module is not None and isinstance(value, module.Image)


def ready_mask(
    mask: ImageSource | None,
    photo: ImageSource | None,
    *,
    rectangles: Sequence[Rectangle],
    polygons: Sequence[Sequence[Point]],
    convert_white: bool,
    check: bool,
) -> Upload:
    """Draw, convert and check the mask (blocking Pillow work); the upload to append.

    Used by ``Client.run_mask_removal`` and ``client.orders.append_mask``, so both apply the
    same checks.  ``photo`` (a path or bytes) is the photo the mask must match in size.
    """
    data: ImageSource
    if mask is None:
        assert photo is not None  # checked by the caller
        data = mask_from_shapes(photo, rectangles=rectangles, polygons=polygons)
    elif convert_white:
        data = convert_white_mask(mask)
    else:
        data = mask
    if check:
        check_mask(data, photo)
    if _is_pil_image(data):
        buffer = io.BytesIO()
        data.save(buffer, format="PNG")  # type: ignore[union-attr]  # a PIL image here
        data = buffer.getvalue()
    elif isinstance(data, str | os.PathLike):
        # A mask is small: read it here, so that a file the service would refuse is caught
        # before the photo is uploaded.
        try:
            with open(data, "rb") as file:
                data = file.read()
        except OSError as exc:
            raise ValidationError(
                f"cannot read the mask file {os.fsdecode(data)!r}: {exc}"
            ) from exc
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(
            f"the mask must be a path, bytes or a PIL image, not {type(data).__name__}"
        )
    content = bytes(data)
    kind = sniff_image_type(content[:12])
    if kind is None:
        raise ValidationError(
            "the mask is not a PNG, JPEG or WEBP image; save it as PNG (blue #7878CD removes, "
            "black keeps)"
        )
    return Upload(content, role=AssetRole.MASK, filename="mask" + _MASK_EXTENSIONS[kind])
