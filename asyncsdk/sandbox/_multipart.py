"""Multipart uploads of the sandbox: files streamed to disk chunk by chunk, fields kept as text.

Each file part is checked while it arrives (size cap, magic bytes, pixel cap read from the header,
decodable image); a request that fails leaves no file behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

import attrs
from aiohttp import BodyPartReader, web

from asyncsdk import MaskError
from asyncsdk.sandbox import _images
from asyncsdk.sandbox._http import runtime_of
from asyncsdk.sandbox._live import Runtime
from asyncsdk.sandbox._records import SandboxError, StoredFile

__all__ = ["Upload", "discard_on_error", "read_multipart"]

CHUNK: Final = 64 * 1024
MAX_FIELD_BYTES: Final = 64 * 1024


@attrs.define
class Upload:
    """The parts of one multipart request: text fields by name and stored files in order."""

    fields: dict[str, list[str]] = attrs.Factory(dict)
    files: list[tuple[str, StoredFile]] = attrs.Factory(list)

    def field(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[-1] if values else None


async def receive_file(rt: Runtime, part: BodyPartReader) -> StoredFile:
    """Stream one file part to disk, checking its size cap and its magic bytes."""
    store = rt.store
    name = part.filename or "upload"
    limit = rt.config.max_upload_bytes
    file_id = store.new_id()
    size = 0
    head = b""
    try:
        with store.open_spool(file_id) as sink:
            while chunk := await part.read_chunk(CHUNK):
                size += len(chunk)
                if size > limit:
                    raise SandboxError(
                        413,
                        "api_error_file_too_large",
                        f"file {name!r} is larger than the upload limit of {limit} bytes "
                        f"({limit / 1024 / 1024:g} MB); send a smaller image",
                    )
                if len(head) < 16:
                    head += chunk[: 16 - len(head)]
                sink.write(chunk)
        if size == 0:
            raise SandboxError(400, "api_error_empty_file", f"file {name!r} is empty")
        fmt = _images.detect_format(head)
        if fmt is None:
            raise SandboxError(
                400,
                "api_error_invalid_file_format",
                f"file {name!r} is not a JPG, PNG or WEBP image; convert it to one of those",
            )
        try:
            width, height = await rt.in_thread(_images.image_size, store.spool_path(file_id))
        except MaskError as exc:
            raise SandboxError(400, "api_error_image_too_large", f"file {name!r}: {exc}") from None
        except (OSError, ValueError, SyntaxError):
            raise SandboxError(
                400,
                "api_error_invalid_file_format",
                f"file {name!r} looks like {fmt.upper()} but cannot be decoded",
            ) from None
    except BaseException:
        store.discard_spool(file_id)
        raise
    return store.keep(file_id, fmt, width, height, name)


def discard(rt: Runtime, files: list[tuple[str, StoredFile]]) -> None:
    store = rt.store
    for _, stored in files:
        store.files.pop(stored.id, None)
        store.path(stored).unlink(missing_ok=True)


async def read_multipart(request: web.Request, file_fields: frozenset[str]) -> Upload:
    rt = runtime_of(request)
    if not request.content_type.startswith("multipart/"):
        raise SandboxError(
            400,
            "api_error_invalid_content_type",
            f"send multipart/form-data, not {request.content_type or 'no content type'}",
        )
    upload = Upload()
    try:
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                raise SandboxError(
                    400, "api_error_invalid_body", "nested multipart is not accepted"
                )
            name = part.name or ""
            if part.filename is not None:
                if name not in file_fields:
                    raise SandboxError(
                        400,
                        "api_error_invalid_field",
                        f"unexpected file field {name!r}; send files as "
                        f"{' or '.join(sorted(file_fields))}",
                    )
                upload.files.append((name, await receive_file(rt, part)))
            else:
                raw = await part.read(decode=True)
                if len(raw) > MAX_FIELD_BYTES:
                    raise SandboxError(
                        400, "api_error_invalid_field", f"field {name!r} is too long"
                    )
                upload.fields.setdefault(name, []).append(raw.decode("utf-8", "replace"))
    except BaseException:
        discard(rt, upload.files)
        raise
    return upload


@contextlib.contextmanager
def discard_on_error(rt: Runtime, upload: Upload) -> Iterator[None]:
    try:
        yield
    except BaseException:
        discard(rt, upload.files)
        raise
