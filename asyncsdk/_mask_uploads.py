"""A mask as the upload of the mask-removal flows: drawn, converted and checked, then read.

``Client.run_mask_removal`` and ``client.orders.append_mask`` both go through :func:`ready_mask`,
so both apply the same checks (:mod:`asyncsdk._masks`) before anything is uploaded.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Sequence
from typing import Final

from asyncsdk._errors import ValidationError
from asyncsdk._masks import (
    ImageSource,
    Point,
    Rectangle,
    check_mask,
    convert_white_mask,
    mask_from_shapes,
)
from asyncsdk._models import AssetRole
from asyncsdk._uploads import Upload, UploadSource, sniff_image_type

__all__ = ["readable_photo", "ready_mask"]

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
