"""Files to upload, from the source a caller gives to the streamed ``multipart/form-data`` body.

A source is a path (``str`` or ``os.PathLike``), ``bytes``, a binary file object, or an async
iterator of ``bytes``.  Before anything is sent each file is checked against the service's rules
(:func:`build_form`): JPG/JPEG, PNG or WEBP (by file name extension and by magic bytes) and at
most ``MAX_UPLOAD_BYTES`` (by ``stat`` for a path, by seek/tell for a seekable file object); a
path is measured again each time an attempt opens it, so a file that grew past the limit since
is refused with ``UploadError`` before its bytes are sent.  An
async iterator or an unseekable file cannot be measured beforehand: its bytes are counted while
they stream and the upload is aborted with ``UploadError`` the moment the limit is passed.

The transport opens a :class:`MultipartForm` once per attempt.  A file is read in chunks of
``CHUNK_SIZE`` off the event loop, into one buffer reused for the whole upload, and never held in
memory whole; only ``bytes`` (which are in memory already) are sent as they are.  Paths, bytes
and seekable file objects can be sent again, so a request carrying only those may be retried; a
request with an async iterator or an unseekable file is never retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import stat
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Sequence
from types import MappingProxyType
from typing import Any, BinaryIO, Final, TypeAlias

import aiohttp
import aiohttp.payload
import attrs
from aiohttp.abc import AbstractStreamWriter

from asyncsdk._checks import method_of, name_of
from asyncsdk._errors import UploadError, ValidationError
from asyncsdk._models import AssetRole

__all__ = [
    "ACCEPTED_EXTENSIONS",
    "CHUNK_SIZE",
    "MAX_UPLOAD_BYTES",
    "MultipartForm",
    "Upload",
    "UploadSource",
    "build_form",
    "check_roles",
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


# -- the multipart body


class _ChunkReader:
    """Reads a file in chunks of at most ``CHUNK_SIZE``, each in one worker-thread trip, into
    one reused buffer; :meth:`read` answers a ``bytes`` copy of what was read."""

    def __init__(self, file: BinaryIO, display: str, *, size: int = CHUNK_SIZE) -> None:
        self._file = file
        self._display = display
        self._buffer = memoryview(bytearray(max(1, min(CHUNK_SIZE, size))))

    async def read(self, size: int = CHUNK_SIZE, *, start: int | None = None) -> bytes:
        """Up to ``size`` bytes (seeking to ``start`` first, in the same trip, when given);
        fewer than asked means the end of the file."""
        window = self._buffer[: min(size, len(self._buffer))]
        try:
            count = await asyncio.to_thread(_fill, window, self._file, start)
        except (OSError, ValueError, TypeError) as exc:
            raise UploadError(
                f"cannot read {self._display}: {exc}", filename=self._display
            ) from exc
        return bytes(window[:count])

    def close(self) -> None:
        self._buffer.release()


def _fill(buffer: memoryview, file: BinaryIO, start: int | None) -> int:
    """Fill ``buffer`` from ``file`` (``readinto`` where the file has it); the count read."""
    if start is not None:
        file.seek(start)
    readinto = method_of(file, "readinto")
    filled = 0
    while filled < len(buffer):
        if readinto is not None:
            count = readinto(buffer[filled:])
            if not isinstance(count, int):
                raise TypeError(f"readinto() returned {type(count).__name__}, not int")
        else:
            chunk = read_chunk(file, len(buffer) - filled)
            count = len(chunk)
            buffer[filled : filled + count] = chunk
        if not count:
            break
        filled += count
    return filled


class _FilePayload(aiohttp.payload.Payload):
    """A file of known size, read in chunks off the event loop; never closes the file itself."""

    def __init__(self, file: BinaryIO, *, start: int, size: int, owner: PreparedFile) -> None:
        super().__init__(file, content_type=owner.content_type, filename=owner.filename)
        self._file = file
        self._start = start
        self._size = size
        self._owner = owner

    @property
    def autoclose(self) -> bool:
        """Nothing for aiohttp to close: the file is closed by whoever opened it."""
        return True

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        raise TypeError("a file payload is streamed and cannot be decoded as text")

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        size = self._size or 0
        remaining = size if content_length is None else min(size, content_length)
        display = self._owner.display
        reader = _ChunkReader(self._file, display, size=remaining)
        try:
            start: int | None = self._start  # the first read seeks there in the same thread trip
            while remaining > 0:
                chunk = await reader.read(remaining, start=start)
                start = None
                if not chunk:
                    raise UploadError(
                        f"{display} became shorter while it was being sent; "
                        "do not change a file during its upload",
                        filename=display,
                    )
                await writer.write(chunk)
                remaining -= len(chunk)
                del chunk
        except UploadError as exc:
            self._owner.failure = exc
            raise
        finally:
            reader.close()


@attrs.define
class PreparedFile:
    """An upload that passed the checks, ready to be put into a multipart body (once or more)."""

    display: str
    filename: str
    content_type: str
    kind: str
    source: Any
    size: int | None = None
    start: int = 0
    head: bytes = b""
    max_bytes: int = MAX_UPLOAD_BYTES
    failure: UploadError | None = None
    streamed: bool = False

    @property
    def replayable(self) -> bool:
        return self.kind in ("path", "bytes", "file")

    async def payload(self, stack: contextlib.AsyncExitStack) -> aiohttp.payload.Payload:
        """A fresh payload for one attempt; resources it opens are closed by ``stack``."""
        if self.kind == "bytes":
            # Written in chunks: a large bytes body sent in one write would stall the loop.
            return aiohttp.payload.BytesIOPayload(
                io.BytesIO(self.source), content_type=self.content_type, filename=self.filename
            )
        if self.kind == "path":
            file, size = await asyncio.to_thread(open_path, self.source, self.display)
            stack.callback(file.close)
            if size > self.max_bytes:
                raise upload_too_large(self.display, self.max_bytes)
            return _FilePayload(file, start=0, size=size, owner=self)
        if self.kind == "file":
            return _FilePayload(self.source, start=self.start, size=self.size or 0, owner=self)
        if self.streamed:
            raise UploadError(
                f"{self.display} was streamed once already; an async iterator or unseekable "
                "file can be sent only once",
                filename=self.display,
            )
        self.streamed = True
        chunks = self._counted()
        stack.push_async_callback(self.discard)
        stack.push_async_callback(chunks.aclose)
        return aiohttp.payload.AsyncIterablePayload(
            chunks, content_type=self.content_type, filename=self.filename
        )

    async def discard(self) -> None:
        """Close a caller's async iterator that will not be read (further)."""
        close = method_of(self.source, "aclose") if self.kind == "stream" else None
        if close is not None:
            await close()

    async def _counted(self) -> AsyncGenerator[bytes, None]:
        """The stream, counted: past ``max_bytes`` it stops with ``UploadError``.

        Any failure is also kept in ``failure``, because aiohttp reports a body that could not
        be written as a connection error; the transport raises the kept error instead.
        """
        sent = 0
        chunks = self._chunks()
        try:
            async for chunk in chunks:
                sent += len(chunk)
                if sent > self.max_bytes:
                    raise upload_too_large(self.display, self.max_bytes)
                yield chunk
        except UploadError as exc:
            self.failure = exc
            raise
        finally:
            await chunks.aclose()

    async def _chunks(self) -> AsyncGenerator[bytes, None]:
        if self.head:
            yield self.head
        if self.kind == "unseekable":
            reader = _ChunkReader(self.source, self.display)
            try:
                while chunk := await reader.read():
                    yield chunk
            finally:
                reader.close()
            return
        iterator: AsyncIterator[Any] = self.source
        try:
            while True:
                try:
                    chunk = await anext(iterator)
                except StopAsyncIteration:
                    return
                except Exception as exc:
                    raise UploadError(
                        f"{self.display}: the async iterator failed while streaming: {exc!r}",
                        filename=self.display,
                    ) from exc
                if chunk:
                    yield _as_bytes(chunk, self.display)
        finally:
            close = method_of(iterator, "aclose")
            if close is not None:
                await close()


def _as_bytes(chunk: object, display: str) -> bytes:
    if isinstance(chunk, bytes):
        return chunk
    if isinstance(chunk, bytearray | memoryview):
        return bytes(chunk)
    raise UploadError(
        f"{display}: the async iterator yielded {type(chunk).__name__}; it must yield bytes",
        filename=display,
    )


async def _prime(iterator: AsyncIterator[Any], display: str) -> bytes:
    """Pull the first chunks of a stream until the magic bytes can be read."""
    head = b""
    while len(head) < SNIFF_BYTES:
        try:
            chunk = await anext(iterator)
        except StopAsyncIteration:
            break
        head += _as_bytes(chunk, display)
    return head


def _display(upload: Upload, kind: str, index: int) -> str:
    if kind == "path":
        return os.fsdecode(upload.source)  # type: ignore[arg-type]
    if upload.filename:
        return upload.filename
    name = name_of(upload.source) if kind == "file" else None
    if name is not None:
        return name
    what = {"bytes": "bytes", "file": "file object", "stream": "async iterator"}[kind]
    return f"image #{index + 1} ({what})"


async def prepare_file(
    upload: Upload, *, index: int = 0, max_bytes: int = MAX_UPLOAD_BYTES
) -> PreparedFile:
    """Check one upload against the rules before anything is sent.

    ``index`` numbers unnamed uploads in messages and default file names.
    """
    source: Any = upload.source
    kind = source_kind(source)
    if kind is None or kind == "text":
        check_source(None, None, source)
    assert kind is not None
    display = _display(upload, kind, index)
    name = upload.filename
    size: int | None
    start = 0
    if kind == "path":
        source = os.fsdecode(source)
        size, head = await asyncio.to_thread(inspect_path, source, display)
        name = name or os.path.basename(source)
    elif kind == "bytes":
        size = len(source)
        head = bytes(source[:SNIFF_BYTES])
    elif kind == "file":
        try:
            seekable, start, size, head = await asyncio.to_thread(inspect_file, source)
        except (OSError, ValueError) as exc:
            raise UploadError(f"cannot read {display}: {exc}", filename=display) from exc
        file_name = name_of(source)
        if name is None and file_name is not None:
            name = os.path.basename(file_name)
        if not seekable:
            kind = "unseekable"
            size = None
            try:
                head = await asyncio.to_thread(read_head, source)
            except (OSError, ValueError, TypeError) as exc:
                raise UploadError(f"cannot read {display}: {exc}", filename=display) from exc
    else:
        source = aiter(source)
        size = None
        head = await _prime(source, display)
        if len(head) > max_bytes:
            raise upload_too_large(display, max_bytes)
    content_type = check_image(
        display=display, filename=name, head=head, size=size, max_bytes=max_bytes
    )
    if not name:
        name = f"image-{index + 1}{EXTENSION_OF[content_type]}"
    name = "".join(" " if char in "\r\n\0" else char for char in name)
    return PreparedFile(
        display=display,
        filename=name,
        content_type=upload.content_type or content_type,
        kind=kind,
        source=source,
        size=size,
        start=start,
        head=head if kind in ("stream", "unseekable") else b"",
        max_bytes=max_bytes,
    )


@attrs.define
class MultipartForm:
    """A ``multipart/form-data`` body: text fields first, then the files, in order."""

    fields: list[tuple[str, str]]
    files: list[tuple[str, PreparedFile]]

    @property
    def replayable(self) -> bool:
        """True when every file can be read again, so the request may be retried."""
        return all(file.replayable for _, file in self.files)

    @property
    def failure(self) -> UploadError | None:
        """The rule a file broke while streaming (too large, shrank), if any."""
        return next((file.failure for _, file in self.files if file.failure), None)

    async def close_unsent(self) -> None:
        """Close the callers' async iterators that no attempt streamed (one that did was closed
        when its attempt ended)."""
        for _, file in self.files:
            if not file.streamed:
                await file.discard()

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[aiohttp.MultipartWriter]:
        """A fresh multipart writer for one attempt; files it opened are closed on exit."""
        async with contextlib.AsyncExitStack() as stack:
            writer = aiohttp.MultipartWriter("form-data")
            for name, value in self.fields:
                part = writer.append(value)
                part.set_content_disposition("form-data", name=name)
            for name, file in self.files:
                payload = await file.payload(stack)
                part = writer.append_payload(payload)
                # Raw UTF-8 file names, as browsers send them (percent-encoding would reach the
                # service as part of the name).
                part.set_content_disposition(
                    "form-data", quote_fields=False, name=name, filename=file.filename
                )
            yield writer


async def build_form(
    fields: Iterable[tuple[str, str]],
    files: Iterable[tuple[str, Upload]],
    *,
    max_bytes: int = MAX_UPLOAD_BYTES,
) -> MultipartForm:
    """Check every file, then describe the body; nothing is read beyond the magic bytes yet."""
    prepared: list[tuple[str, PreparedFile]] = []
    try:
        for index, (name, upload) in enumerate(files):
            prepared.append((name, await prepare_file(upload, index=index, max_bytes=max_bytes)))
    except BaseException:
        for _, file in prepared:
            await file.discard()
        raise
    return MultipartForm(fields=list(fields), files=prepared)
