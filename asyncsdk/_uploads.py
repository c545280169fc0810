"""Files to upload: where they come from and the rules they keep.

A source is a path (``str`` or ``os.PathLike``), ``bytes``, a binary file object, or an async
iterator of ``bytes``.  Every source is streamed in chunks of ``CHUNK_SIZE``; only ``bytes`` (which
are in memory already) are sent as they are.  Before anything is sent each file is checked against
the service's rules: JPG/JPEG, PNG or WEBP (by file name extension and by magic bytes) and at most
``MAX_UPLOAD_BYTES`` (by ``stat`` for a path, by seek/tell for a seekable file object).  An async
iterator or an unseekable file cannot be measured beforehand: its bytes are counted while they
stream and the upload is aborted with ``UploadError`` the moment the limit is passed.

Paths, bytes and seekable file objects can be sent again, so a request carrying only those may be
retried; a request with an async iterator or an unseekable file is never retried.  The multipart
body that carries them is built in ``_multipart.py``.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import AsyncIterable, Sequence
from types import MappingProxyType
from typing import Any, BinaryIO, Final, TypeAlias

import attrs

from asyncsdk._checks import method_of
from asyncsdk._errors import UploadError, ValidationError
from asyncsdk._models import AssetRole

__all__ = [
    "ACCEPTED_EXTENSIONS",
    "CHUNK_SIZE",
    "EXTENSION_OF",
    "MAX_UPLOAD_BYTES",
    "SNIFF_BYTES",
    "Upload",
    "UploadSource",
    "check_image",
    "check_roles",
    "check_source",
    "inspect_file",
    "inspect_path",
    "open_path",
    "read_chunk",
    "read_head",
    "sniff_image_type",
    "source_kind",
    "to_upload",
    "upload_too_large",
]

#: Bytes read from a file in one trip to a worker thread, and sent in one write.  The thread
#: reads into a buffer that the event loop's thread allocated for the upload and reuses, so no
#: worker thread's allocator arena ever holds file data; each chunk is copied out once for the
#: socket.
CHUNK_SIZE: Final = 512 * 1024
#: The service's limit per file: 50 MB.
MAX_UPLOAD_BYTES: Final = 50 * 1024 * 1024
#: File name extensions the service accepts (lower case), with the content type each is sent as.
ACCEPTED_EXTENSIONS: Final = MappingProxyType(
    {
        ".jpg": "image/jpeg",
        ".jpeg": "image/jpeg",
        ".png": "image/png",
        ".webp": "image/webp",
    }
)
EXTENSION_OF: Final = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp"}
SNIFF_BYTES: Final = 12
_MB: Final = 1024 * 1024


UploadSource: TypeAlias = (
    str
    | os.PathLike[str]
    | bytes
    | bytearray
    | memoryview
    | BinaryIO
    | io.RawIOBase
    | io.BufferedIOBase
    | AsyncIterable[bytes]
)
"""What an image is uploaded from.

- a path (``str`` or ``os.PathLike``), opened and closed by the SDK;
- the bytes themselves;
- a binary file object: anything with a callable ``read`` (``open(path, "rb")``,
  ``io.BytesIO``, ``tempfile.NamedTemporaryFile``, a web framework's uploaded file), read from
  its current position (in place where it has ``readinto``), named after its ``name`` where it
  has one, and never closed by the SDK;
- an async iterator of bytes, streamed once, and closed with its ``aclose`` where it has one
  when the upload is done with it (an async generator's ``finally`` runs).
"""


def sniff_image_type(head: bytes) -> str | None:
    """The content type told by the first bytes of a file, or ``None`` when not JPEG/PNG/WEBP."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG"):
        return "image/png"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def source_kind(source: object) -> str | None:
    if isinstance(source, str | os.PathLike):
        return "path"
    if isinstance(source, bytes | bytearray | memoryview):
        return "bytes"
    if isinstance(source, io.TextIOBase):
        return "text"
    if isinstance(source, io.IOBase):
        return "file"
    if isinstance(source, AsyncIterable):
        return "stream"
    if method_of(source, "read") is not None:
        return "file"
    return None


def check_source(_: object, __: object, value: Any) -> None:
    kind = source_kind(value)
    if kind == "text":
        raise UploadError(
            "an upload source file object must be opened in binary mode: open(path, 'rb')"
        )
    if kind is None:
        raise UploadError(
            "an upload source must be a path, bytes, a binary file object or an async iterator "
            f"of bytes, not {type(value).__name__}"
        )
    if kind == "path" and not os.fspath(value):
        raise UploadError("an upload path must not be empty")


def _source_repr(source: Any) -> str:
    if isinstance(source, bytes | bytearray | memoryview):
        return f"<{len(source)} bytes>"
    if isinstance(source, str | os.PathLike):
        return repr(os.fsdecode(source))
    return f"<{type(source).__name__}>"


@attrs.frozen(eq=False)
class Upload:
    """One image to upload and the role it plays in the order.

    ``filename`` is what the service is told (default: the path's or file object's name, else
    ``image-<n>.<ext>``); ``content_type`` overrides the type sniffed from the file's first bytes.
    """

    source: UploadSource = attrs.field(repr=_source_repr, validator=check_source)
    role: str = AssetRole.PRIMARY_ANGLE
    filename: str | None = None
    content_type: str | None = None


def to_upload(item: Upload | UploadSource) -> Upload:
    """A bare source becomes an ``Upload`` with the default role ``primary_angle``."""
    return item if isinstance(item, Upload) else Upload(item)


#: The roles an image of a new order may have (spec 2.2).
ORDER_ROLES: Final = (AssetRole.PRIMARY_ANGLE, AssetRole.SECONDARY_ANGLE, AssetRole.MASK)


def check_roles(uploads: Sequence[Upload]) -> None:
    """The roles of a new order's images (spec 2.2, 4.5), checked before anything is uploaded.

    Known roles only (``primary_angle``, ``secondary_angle``, ``mask``), exactly one
    ``primary_angle`` and at most one ``secondary_angle``.
    """
    if not uploads:
        raise ValidationError("an order needs at least one image to upload")
    allowed = ", ".join(ORDER_ROLES)
    for upload in uploads:
        if not isinstance(upload.role, str) or upload.role not in ORDER_ROLES:
            raise ValidationError(
                f"unknown asset role {upload.role!r}: an order's images take the roles {allowed}"
            )
    for role in (AssetRole.PRIMARY_ANGLE, AssetRole.SECONDARY_ANGLE):
        count = sum(1 for upload in uploads if upload.role == role)
        if count > 1:
            advice = (
                "a bare source counts as primary_angle, so give the other angle as "
                "Upload(source, role='secondary_angle')"
                if role == AssetRole.PRIMARY_ANGLE
                else "put each further angle in an order of its own"
            )
            raise ValidationError(f"an order takes at most one {role} image, got {count}; {advice}")
    if not any(upload.role == AssetRole.PRIMARY_ANGLE for upload in uploads):
        raise ValidationError(
            "an order needs exactly one primary_angle image (the main photo), got none: give "
            "the main photo as a bare source or Upload(source, role='primary_angle')"
        )


def check_image(
    *, display: str, filename: str | None, head: bytes, size: int | None, max_bytes: int
) -> str:
    """Check one file against the service's rules; return its sniffed content type."""
    if size is not None and size > max_bytes:
        raise UploadError(
            f"{display} is {size / _MB:.1f} MB ({size} bytes); the service accepts at most "
            f"{max_bytes / _MB:g} MB ({max_bytes} bytes) per file: downscale or recompress it",
            filename=display,
        )
    if size == 0 or not head:
        raise UploadError(f"{display} is empty; upload a JPG, PNG or WEBP image", filename=display)
    extension = os.path.splitext(filename)[1].lower() if filename else ""
    if extension and extension not in ACCEPTED_EXTENSIONS:
        raise UploadError(
            f"{display}: {extension!r} files are not accepted; the service takes JPG/JPEG, PNG "
            "or WEBP images: convert the file (or fix its name if it is one of these)",
            filename=display,
        )
    sniffed = sniff_image_type(head)
    if sniffed is None:
        raise UploadError(
            f"{display} is not a JPG, PNG or WEBP image (its first bytes "
            f"{head[:SNIFF_BYTES].hex(' ')} match none of them); convert it before uploading",
            filename=display,
        )
    return sniffed


def upload_too_large(display: str, max_bytes: int) -> UploadError:
    return UploadError(
        f"{display} is larger than {max_bytes / _MB:g} MB ({max_bytes} bytes), the service's "
        "limit per file; the upload was aborted: downscale or recompress it",
        filename=display,
    )


def inspect_path(path: str, display: str) -> tuple[int, bytes]:
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise UploadError(f"{display} is not a regular file", filename=display)
        with open(path, "rb") as file:
            head = file.read(SNIFF_BYTES)
    except FileNotFoundError as exc:
        raise UploadError(f"{display}: no such file", filename=display) from exc
    except OSError as exc:
        raise UploadError(
            f"cannot read {display}: {exc.strerror or exc}", filename=display
        ) from exc
    return info.st_size, head


def open_path(path: str, display: str) -> tuple[BinaryIO, int]:
    try:
        file = open(path, "rb")  # noqa: SIM115 - closed by the form's exit stack after the request
    except OSError as exc:
        raise UploadError(
            f"cannot read {display}: {exc.strerror or exc}", filename=display
        ) from exc
    try:
        size = os.fstat(file.fileno()).st_size
    except OSError as exc:
        file.close()
        raise UploadError(
            f"cannot read {display}: {exc.strerror or exc}", filename=display
        ) from exc
    return file, size


def inspect_file(file: BinaryIO) -> tuple[bool, int, int, bytes]:
    """(seekable, start, size, head) of a file object, leaving its position where it was."""
    try:
        seekable = bool(file.seekable())
    except (AttributeError, OSError, ValueError):
        seekable = False
    if not seekable:
        return False, 0, 0, b""
    start = file.tell()
    end = file.seek(0, io.SEEK_END)
    file.seek(start)
    head = file.read(SNIFF_BYTES)
    file.seek(start)
    return True, start, end - start, bytes(head)


def read_head(file: BinaryIO) -> bytes:
    head = b""
    while len(head) < SNIFF_BYTES:
        chunk = read_chunk(file, SNIFF_BYTES - len(head))
        if not chunk:
            break
        head += chunk
    return head


def read_chunk(file: BinaryIO, size: int) -> bytes:
    chunk = file.read(size)
    if not isinstance(chunk, bytes | bytearray | memoryview):
        raise TypeError(f"read() returned {type(chunk).__name__}, not bytes")
    return bytes(chunk)
