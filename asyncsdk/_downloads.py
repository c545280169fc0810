"""Result files: which URLs may be fetched, and writing a stream of chunks to a path or a file.

Result URLs are opaque and may name another host than the API, so a download never carries the
API key and only ``http``/``https`` URLs are fetched.  A file written to a path appears only when
complete: it is written under a temporary name beside the target and renamed at the end.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable
from pathlib import Path
from typing import BinaryIO

from yarl import URL

from asyncsdk._errors import ValidationError

__all__ = ["DOWNLOAD_CHUNK", "DownloadTarget", "check_result_url", "write_chunks"]

#: Bytes read from the network per chunk while streaming a result to disk.
DOWNLOAD_CHUNK = 256 * 1024

DownloadTarget = str | os.PathLike[str] | BinaryIO


def check_result_url(url: str | URL) -> URL:
    """The URL to fetch, or a ``ValidationError`` for anything but an absolute http(s) URL."""
    try:
        parsed = url if isinstance(url, URL) else URL(url)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"unreadable result URL {str(url)[:80]!r}: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        shown = parsed.scheme or "no scheme"
        raise ValidationError(
            f"refusing to download from a non-http(s) URL ({shown}); only http:// and https:// "
            "result URLs are fetched"
        )
    return parsed


async def write_chunks(chunks: AsyncIterable[bytes], target: DownloadTarget) -> int:
    """Write ``chunks`` to ``target`` (a path, or a binary file opened for writing).

    Returns the number of bytes written.  For a path, a failure part-way leaves no file behind.
    """
    if isinstance(target, str | os.PathLike):
        path = Path(target)
        partial = path.with_name(f".{path.name}.part")
        try:
            with partial.open("wb") as file:
                written = await _copy(chunks, file)
            partial.replace(path)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return written
    if not hasattr(target, "write"):
        raise ValidationError(
            f"download target must be a path or a binary file object, not {type(target).__name__}"
        )
    return await _copy(chunks, target)


async def _copy(chunks: AsyncIterable[bytes], file: BinaryIO) -> int:
    written = 0
    async for chunk in chunks:
        file.write(chunk)
        written += len(chunk)
    return written
