"""Mask helpers refuse an image that declares more pixels than any photo, before decoding it,
and leave Pillow's own limit as the application set it."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from asyncsdk import REMOVE_BLUE, MaskError, check_mask, convert_white_mask


def png_declaring(width: int, height: int) -> bytes:
    """A small PNG whose header declares ``width`` x ``height`` one-bit pixels (all black)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    rows = zlib.compress(b"\0" * ((width + 7) // 8 + 1) * 16)  # a few rows; the rest is missing
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("side", [9000, 20000])  # past the helpers' cap; past Pillow's own too
def test_a_mask_declaring_too_many_pixels_is_refused_from_its_header(side: int) -> None:
    before = Image.MAX_IMAGE_PIXELS
    with pytest.raises(MaskError, match=r"pixels|decompression bomb") as info:
        convert_white_mask(png_declaring(side, side))
    assert "give an image the size of the photo" in str(info.value)
    with pytest.raises(MaskError, match=r"pixels|decompression bomb"):
        check_mask(png_declaring(side, side))
    assert before == Image.MAX_IMAGE_PIXELS  # the application's setting is left alone


def test_a_mask_the_size_of_a_photo_is_still_read() -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (3000, 2000), REMOVE_BLUE).save(buffer, format="PNG")
    report = check_mask(buffer.getvalue())
    assert (report.width, report.height, report.remove_pixels) == (3000, 2000, 3000 * 2000)
