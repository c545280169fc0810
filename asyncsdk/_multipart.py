"""The ``multipart/form-data`` body of an upload, streamed from checked files.

:func:`build_form` checks every file (``_uploads.py`` holds the rules) and describes the body; the
transport opens a :class:`MultipartForm` once per attempt.  A file is read in chunks of
``CHUNK_SIZE`` off the event loop, into one buffer reused for the whole upload, and never held in
memory whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Any, BinaryIO

import aiohttp
import aiohttp.payload
import attrs
from aiohttp.abc import AbstractStreamWriter

from asyncsdk._checks import method_of, name_of
from asyncsdk._errors import UploadError
from asyncsdk._uploads import (
    CHUNK_SIZE,
    EXTENSION_OF,
    MAX_UPLOAD_BYTES,
    SNIFF_BYTES,
    Upload,
    check_image,
    check_source,
    inspect_file,
    inspect_path,
    open_path,
    read_chunk,
    read_head,
    source_kind,
    upload_too_large,
)

__all__ = ["MultipartForm", "PreparedFile", "build_form", "prepare_file"]


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
            head = await asyncio.to_thread(read_head, source)
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
