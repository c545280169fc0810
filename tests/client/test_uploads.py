"""Uploads from every kind of source: streamed, checked before sending, named in errors."""

from __future__ import annotations

import asyncio
import io
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from asyncsdk import (
    MAX_UPLOAD_BYTES,
    AssetRole,
    Client,
    ConfigurationError,
    RateLimitError,
    Upload,
    UploadError,
)

from ._fake import JPEG, PNG, WEBP, FakeService, Reply, created_order_json
from .conftest import MakeClient

CREATED = Reply(status=201, json=created_order_json())
# The size the upload reads and sends in one piece (CHUNK_SIZE in asyncsdk/_uploads.py): sizes
# around it prove that no byte is lost at a chunk's edge, and any size must arrive whole.
CHUNK_SIZE = 512 * 1024


class Unseekable(io.RawIOBase):
    """A pipe-like binary stream: readable, not seekable."""

    def __init__(self, data: bytes) -> None:
        self._buffer = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = self._buffer.read(min(len(buffer), 1000))
        buffer[: len(chunk)] = chunk
        return len(chunk)


async def test_path_is_sent_with_its_name_and_type(
    fake: FakeService, client: Client, tmp_path: Path
) -> None:
    photo = tmp_path / "Living Room.JPEG"
    data = JPEG * 200  # several chunks
    photo.write_bytes(data)
    fake.script("POST", "/v3/order", CREATED)

    await client.orders.create(str(photo))
    await client.orders.create(photo)

    for seen in fake.seen:
        assert "Content-Length" in seen.headers  # a file of known size is not sent chunked
        [part] = seen.files()
        assert (part.filename, part.content_type, part.data) == (
            "Living Room.JPEG",
            "image/jpeg",
            data,
        )


async def test_bytes_sniffed_as_webp(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/order", CREATED)

    await client.orders.create(WEBP)

    [part] = fake.seen[0].files()
    assert (part.filename, part.content_type) == ("image-1.webp", "image/webp")


async def test_file_object_is_read_from_its_position_and_left_open(
    fake: FakeService, client: Client, tmp_path: Path
) -> None:
    photo = tmp_path / "shot.png"
    photo.write_bytes(b"prefix" + PNG)
    fake.script("POST", "/v3/order", Reply(status=429), CREATED)

    with photo.open("rb") as file:
        file.seek(6)
        await client.orders.create(file)  # retried once: the file is read twice
        assert not file.closed
        assert file.tell() in (6, len(b"prefix" + PNG))

    assert [[p.data for p in seen.files()] for seen in fake.seen] == [[PNG], [PNG]]
    assert fake.seen[0].files()[0].filename == "shot.png"


async def test_bytesio_with_explicit_name_and_type(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/order", CREATED)

    await client.orders.create(
        Upload(io.BytesIO(JPEG), filename="kitchen.jpg", content_type="image/pjpeg")
    )

    [part] = fake.seen[0].files()
    assert (part.filename, part.content_type, part.data) == ("kitchen.jpg", "image/pjpeg", JPEG)


async def test_unseekable_file_is_streamed_once(fake: FakeService, client: Client) -> None:
    data = JPEG * 100
    fake.script("POST", "/v3/order", CREATED)
    with Unseekable(data) as pipe:
        await client.orders.create(pipe)
    assert fake.seen[0].files()[0].data == data

    fake.script("POST", "/v3/order", Reply(status=429), CREATED)
    with Unseekable(data) as pipe, pytest.raises(RateLimitError):
        await client.orders.create(pipe)
    assert len(fake.seen) == 2  # not retried: the pipe cannot be read again


class ReadOnly(io.RawIOBase):
    """A seekable binary file object without ``readinto``, whose reads come back short."""

    def __init__(self, data: bytes) -> None:
        self._buffer = io.BytesIO(data)
        self.seek = self._buffer.seek  # type: ignore[method-assign]
        self.tell = self._buffer.tell  # type: ignore[method-assign]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._buffer.read(min(size, 70_001) if size >= 0 else size)

    readinto = None  # type: ignore[assignment]


@pytest.mark.parametrize("extra", [0, 1, CHUNK_SIZE - 1, 2 * CHUNK_SIZE + 7])
async def test_files_over_several_chunks_arrive_whole(
    fake: FakeService, client: Client, tmp_path: Path, extra: int
) -> None:
    data = JPEG + bytes(range(256)) * ((2 * CHUNK_SIZE + extra) // 256) + b"x" * (extra % 256)
    photo = tmp_path / "big.jpg"
    photo.write_bytes(data)
    fake.script("POST", "/v3/order", *(CREATED for _ in range(3)))

    await client.orders.create(photo)
    await client.orders.create(ReadOnly(data))
    with Unseekable(data) as pipe:
        await client.orders.create(pipe)

    assert [seen.files()[0].data == data for seen in fake.seen] == [True, True, True]


async def test_async_iterator_is_streamed(fake: FakeService, client: Client) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield JPEG[:5]  # shorter than the magic bytes: the client gathers more before sniffing
        yield JPEG[5:100]
        yield b""
        yield JPEG[100:]

    fake.script("POST", "/v3/order", CREATED)

    await client.orders.create(chunks())

    assert fake.seen[0].headers["Transfer-Encoding"] == "chunked"
    [part] = fake.seen[0].files()
    assert (part.filename, part.content_type, part.data) == ("image-1.jpg", "image/jpeg", JPEG)


async def test_async_iterator_chunks_are_sent_as_produced(
    fake: FakeService, client: Client
) -> None:
    """The second chunk is produced only after the server has received the first one: a client
    that gathered the whole body before sending would wait here forever (and fail)."""
    marker = b"<<first chunk>>"
    first_arrived = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        received = b""
        async for data in request.content.iter_any():
            received += data
            if marker in received:
                first_arrived.set()
        fake.record(request, received)
        return web.json_response(created_order_json(), status=201)

    async def chunks() -> AsyncIterator[bytes]:
        yield JPEG[:16] + marker
        await asyncio.wait_for(first_arrived.wait(), timeout=5)
        yield b"<<second chunk>>"

    fake.script("POST", "/v3/order", handler)

    await client.orders.create(chunks())

    body = fake.seen[0].body
    assert body.index(marker) < body.index(b"<<second chunk>>")


async def test_too_large_path_is_refused_before_sending(
    fake: FakeService, client: Client, tmp_path: Path
) -> None:
    big = tmp_path / "huge.jpg"
    with big.open("wb") as file:
        file.write(JPEG)
        file.truncate(MAX_UPLOAD_BYTES + 1)  # sparse: no disk space used

    with pytest.raises(UploadError, match=r"huge\.jpg.*at most 50 MB") as info:
        await client.orders.create(big)
    with big.open("rb") as file, pytest.raises(UploadError, match="at most 50 MB"):
        await client.orders.create(file)

    assert info.value.filename == str(big)
    assert fake.seen == []


async def test_too_large_stream_is_aborted_while_streaming(
    fake: FakeService, client: Client
) -> None:
    megabyte = JPEG + bytes(1024 * 1024 - len(JPEG))
    produced = 0

    async def handler(request: web.Request) -> web.StreamResponse:
        async for _ in request.content.iter_any():
            pass
        return web.json_response(created_order_json(), status=201)

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal produced
        for _ in range(60):
            produced += 1
            yield megabyte

    fake.script("POST", "/v3/order", handler)

    with pytest.raises(UploadError, match=r"image #1 \(async iterator\).*larger than 50 MB"):
        await client.orders.create(chunks())

    assert produced == 51  # stopped at the first chunk past the limit
    fake.script("POST", "/v3/order", CREATED)
    assert (await client.orders.create(JPEG)).order_id == "o1"  # the client is still usable


async def test_failing_async_iterator_surfaces_as_upload_error(
    fake: FakeService, client: Client
) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        async for _ in request.content.iter_any():
            pass
        return web.json_response(created_order_json(), status=201)

    async def chunks() -> AsyncIterator[bytes]:
        yield JPEG
        raise OSError("disk went away")

    fake.script("POST", "/v3/order", handler)

    with pytest.raises(UploadError, match="disk went away"):
        await client.orders.create(chunks())


class Chunks:
    """An async iterator of a user's own class: no ``aclose``, unlike an async generator."""

    def __init__(self, *chunks: bytes) -> None:
        self._chunks = list(chunks)

    def __aiter__(self) -> Chunks:
        return self

    async def __anext__(self) -> bytes:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.pop(0)


async def test_async_iterator_without_aclose_is_streamed(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/order", CREATED)

    await client.orders.create(Chunks(JPEG[:100], JPEG[100:]))

    assert fake.seen[0].files()[0].data == JPEG


async def test_async_generator_is_closed_when_its_upload_is_refused(client: Client) -> None:
    closed: list[bool] = []

    async def chunks() -> AsyncIterator[bytes]:
        try:
            yield JPEG
            yield JPEG
        finally:
            closed.append(True)

    with pytest.raises(UploadError, match=r"image #2 \(bytes\) is not a JPG"):
        await client.orders.create(chunks(), Upload(b"nope" * 10, role="mask"))

    assert closed == [True]  # its finally ran: nothing of the caller's is left open


async def test_async_generator_is_closed_when_no_attempt_sends_it(client: Client) -> None:
    closed: list[bool] = []

    async def chunks() -> AsyncIterator[bytes]:
        try:
            yield JPEG
        finally:
            closed.append(True)

    await client.close()
    with pytest.raises(ConfigurationError, match="client is closed"):
        await client.orders.create(chunks())

    assert closed == [True]  # checked, never sent, and closed all the same


class NamedFile(io.BytesIO):
    """A file object with a path-like ``name``, as ``open()`` gives."""

    name = "/photos/Front Door.png"


async def test_file_object_is_sent_with_its_name(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/order", CREATED)

    await client.orders.create(NamedFile(PNG))

    assert fake.seen[0].files()[0].filename == "Front Door.png"


class Forwarding:
    """A file object that forwards every method to the file it wraps through ``__getattr__``,
    as ``tempfile.NamedTemporaryFile`` and web frameworks' uploaded files do."""

    def __init__(self, file: io.BufferedIOBase) -> None:
        self.file = file
        self.asked: set[str] = set()

    def __getattr__(self, name: str) -> object:
        self.asked.add(name)
        return getattr(self.file, name)


async def test_file_objects_that_forward_their_methods_are_sent(
    fake: FakeService, client: Client
) -> None:
    fake.script("POST", "/v3/order", CREATED)
    data = JPEG + bytes(3 * CHUNK_SIZE)  # read in several pieces
    with tempfile.NamedTemporaryFile(suffix=".jpg") as spooled:
        spooled.write(data)
        spooled.seek(0)
        await client.orders.create(spooled)
        named = Path(spooled.name).name
    forwarding = Forwarding(NamedFile(PNG))
    await client.orders.create(forwarding)

    first, second = (seen.files()[0] for seen in fake.seen)
    assert (first.filename, first.data) == (named, data)
    assert (second.filename, second.data) == ("Front Door.png", PNG)
    assert "readinto" in forwarding.asked  # read in place, not through read()


@pytest.mark.parametrize(
    ("name", "data", "fix"),
    [
        ("plan.gif", b"GIF89a" + bytes(50), r"plan\.gif: '\.gif' files are not accepted"),
        ("notes.jpg", b"just some text, not an image", r"notes\.jpg is not a JPG, PNG or WEBP"),
        ("empty.png", b"", r"empty\.png is empty"),
    ],
)
async def test_format_errors_name_the_file(
    fake: FakeService, client: Client, tmp_path: Path, name: str, data: bytes, fix: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)

    with pytest.raises(UploadError, match=fix) as info:
        await client.orders.create(JPEG, Upload(path, role="mask"))

    assert info.value.filename == str(path)
    assert fake.seen == []  # the first, valid file was not sent either


async def test_unnamed_sources_are_numbered_in_errors(fake: FakeService, client: Client) -> None:
    async def text() -> AsyncIterator[bytes]:
        yield b"%PDF-1.7 not an image"

    with pytest.raises(UploadError, match=r"image #2 \(bytes\) is not a JPG"):
        await client.orders.create(JPEG, Upload(b"nope" * 10, role="secondary_angle"))
    with pytest.raises(UploadError, match=r"image #1 \(async iterator\) is not a JPG"):
        await client.v1.upload_image(text(), "service-ai-virtual-staging")
    assert fake.seen == []


async def test_missing_path(client: Client, tmp_path: Path) -> None:
    with pytest.raises(UploadError, match=r"gone\.jpg: no such file"):
        await client.orders.create(tmp_path / "gone.jpg")


class ReadIsNoMethod:
    read = 5


class TextPipe:
    """A pipe-like object opened in text mode by mistake: unseekable, ``read`` answers ``str``."""

    name = "pipe.jpg"

    def read(self, size: int = -1) -> str:
        return "\xff\xd8\xff"

    def seekable(self) -> bool:
        return False


class FailingPipe(TextPipe):
    def read(self, size: int = -1) -> str:
        raise OSError(5, "Input/output error")


@pytest.mark.parametrize(
    ("source", "reason"), [(TextPipe(), "read\\(\\) returned str"), (FailingPipe(), "Input/output")]
)
async def test_an_unreadable_unseekable_file_is_an_upload_error(
    fake: FakeService, client: Client, source: object, reason: str
) -> None:
    with pytest.raises(UploadError, match=f"cannot read pipe.jpg: .*{reason}"):
        await client.orders.create(source)  # type: ignore[arg-type]
    assert fake.seen == []


def test_bad_sources_are_refused_at_once() -> None:
    with pytest.raises(UploadError, match="binary mode"):
        Upload(io.StringIO("text"))  # type: ignore[arg-type]
    with pytest.raises(UploadError, match="not int"):
        Upload(42)  # type: ignore[arg-type]
    with pytest.raises(UploadError, match=r"a binary file object .*not ReadIsNoMethod"):
        Upload(ReadIsNoMethod())  # type: ignore[arg-type]
    assert "bytes" in repr(Upload(JPEG))  # the repr does not dump the whole file
    assert len(repr(Upload(JPEG * 1000))) < 200


async def test_max_upload_bytes_sets_the_per_file_limit(
    fake: FakeService, make_client: MakeClient
) -> None:
    fake.script("POST", "/v3/order", CREATED)
    small = make_client(max_upload_bytes=1000)
    with pytest.raises(UploadError, match=r"image #1 \(bytes\).*at most .*\(1000 bytes\) per file"):
        await small.orders.create(JPEG + bytes(2000))
    assert fake.seen == []

    roomy = make_client(max_upload_bytes=MAX_UPLOAD_BYTES * 2)
    big = JPEG + bytes(MAX_UPLOAD_BYTES + 10 - len(JPEG))
    assert (await roomy.orders.create(big)).order_id == "o1"
    assert len(fake.seen) == 1


@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_max_upload_bytes_must_be_a_positive_whole_number(value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_upload_bytes"):
        Client(api_key="sk_test_x", base_url="http://127.0.0.1:9", max_upload_bytes=value)  # type: ignore[arg-type]


def grow_past_the_limit(path: Path) -> None:
    with path.open("r+b") as file:
        file.truncate(MAX_UPLOAD_BYTES + 1)  # sparse: no disk space used


async def test_a_path_that_grew_past_the_limit_after_its_check_is_not_sent(
    fake: FakeService, client: Client, tmp_path: Path
) -> None:
    photo = tmp_path / "growing.jpg"
    photo.write_bytes(JPEG)

    async def second_photo() -> AsyncIterator[bytes]:
        # Its first bytes are read when the order is prepared, after the path's size was
        # checked and before anything is sent: the path grows in between.
        grow_past_the_limit(photo)
        yield JPEG

    fake.script("POST", "/v3/order", CREATED)

    with pytest.raises(UploadError, match=r"growing\.jpg is larger than 50 MB") as info:
        await client.orders.create(
            photo, Upload(second_photo(), role=AssetRole.SECONDARY_ANGLE, filename="b.jpg")
        )

    assert "the upload was aborted" in str(info.value)
    assert info.value.filename == str(photo)
    assert fake.seen == []


async def test_a_path_that_grew_past_the_limit_before_a_retry_is_not_sent_again(
    fake: FakeService, client: Client, tmp_path: Path
) -> None:
    photo = tmp_path / "growing.jpg"
    photo.write_bytes(JPEG)

    async def busy_while_it_grows(request: web.Request) -> web.StreamResponse:
        fake.record(request, await request.read())
        grow_past_the_limit(photo)
        return web.json_response({"error": "slow down"}, status=429)

    fake.script("POST", "/v3/order", busy_while_it_grows, CREATED)

    with pytest.raises(UploadError, match=r"growing\.jpg is larger than 50 MB"):
        await client.orders.create(photo)

    [first] = fake.seen  # the retry never reached the service
    assert JPEG in first.body
    assert len(first.body) < 2 * len(JPEG)  # the photo as it was checked
