"""Result files: which URLs may be fetched, and writing a stream of chunks to a path or a file.

Result URLs are opaque and may name another host than the API, so a download never carries the
API key and only ``http``/``https`` URLs are fetched; ``allowed_hosts`` narrows that to named
hosts, for the first URL and every redirect.  A download stops at ``max_bytes``.  A file written
to a path appears only when complete: it is written under a temporary name beside the target and
renamed at the end, and removed on any failure.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator, Collection
from pathlib import Path
from typing import BinaryIO, Final

from yarl import URL

from asyncsdk._checks import method_of
from asyncsdk._errors import ResultTooLargeError, ValidationError
from asyncsdk._models import ResultAsset

__all__ = [
    "DEFAULT_MAX_DOWNLOAD_BYTES",
    "DOWNLOAD_CHUNK",
    "DownloadTarget",
    "capped",
    "check_allowed_hosts",
    "check_max_bytes",
    "check_result_url",
    "result_too_large",
    "result_url",
    "write_chunks",
]

#: Bytes read from the network per chunk while streaming a result to disk.
DOWNLOAD_CHUNK = 256 * 1024

#: The default ``max_bytes`` of a download: far above the service's largest result image (a
#: few megabytes), low enough that a host streaming without end cannot fill a disk.
DEFAULT_MAX_DOWNLOAD_BYTES: Final = 100 * 1024 * 1024

DownloadTarget = str | os.PathLike[str] | BinaryIO


def result_url(asset: ResultAsset | str, *, thumbnail: bool = False) -> str:
    """The URL to download: a ``ResultAsset``'s ``src`` (``thumbnail_src`` with ``thumbnail``),
    or ``asset`` itself when it is a URL already."""
    if not isinstance(asset, ResultAsset):
        return asset
    url = asset.thumbnail_src if thumbnail else asset.src
    if not url:
        which = "thumbnail_src" if thumbnail else "src"
        raise ValidationError(f"result asset {asset.asset_id!r} has no {which} URL")
    return url


def check_max_bytes(max_bytes: int) -> int:
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValidationError(
            f"max_bytes must be a positive number of bytes, e.g. {DEFAULT_MAX_DOWNLOAD_BYTES}, "
            f"not {max_bytes!r}"
        )
    return max_bytes


def check_allowed_hosts(allowed_hosts: Collection[str] | None) -> frozenset[str] | None:
    """``allowed_hosts`` as lower-case names, or ``None`` (any host)."""
    if allowed_hosts is None:
        return None
    names = [allowed_hosts] if isinstance(allowed_hosts, str) else list(allowed_hosts)
    if not names or not all(isinstance(name, str) and name.strip(".") for name in names):
        raise ValidationError(
            "allowed_hosts must be a list of host names, e.g. ['cdn.example.com', "
            "'.storage.example.com'] (a leading dot allows every subdomain)"
        )
    return frozenset(name.lower() for name in names)


def _host_allowed(host: str, allowed: frozenset[str]) -> bool:
    host = host.lower().rstrip(".")
    return any(host == name or (name.startswith(".") and host.endswith(name)) for name in allowed)


def check_result_url(url: str | URL, allowed_hosts: frozenset[str] | None = None) -> URL:
    """The URL to fetch, or a ``ValidationError`` for anything but an absolute http(s) URL (on
    one of ``allowed_hosts`` when given)."""
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
    if allowed_hosts is not None and not _host_allowed(parsed.host, allowed_hosts):
        raise ValidationError(
            f"refusing to download from {parsed.host!r}: not in allowed_hosts; add the result "
            "host there if it is yours"
        )
    return parsed


def result_too_large(max_bytes: int, url: str) -> ResultTooLargeError:
    return ResultTooLargeError(
        f"the result at {url} is larger than max_bytes ({max_bytes} bytes); the download "
        "stopped (a path target was removed). "
        "Pass a larger max_bytes if the file is expected to be this big",
        max_bytes=max_bytes,
        method="GET",
        url=url,
    )


async def capped(chunks: AsyncIterable[bytes], max_bytes: int, url: str) -> AsyncIterator[bytes]:
    """``chunks``, ending in :class:`ResultTooLargeError` once they pass ``max_bytes`` in all."""
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise result_too_large(max_bytes, url)
        yield chunk


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
    if method_of(target, "write") is None:
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
