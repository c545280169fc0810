"""Downloading results: to a path or a file, refused targets and URLs, nothing left on failure."""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from PIL import Image

from asyncsdk import (
    APIConnectionError,
    Client,
    NotFoundError,
    ProcessStatus,
    ResultAsset,
    ToolSlug,
    ValidationError,
)
from asyncsdk.sandbox import Sandbox
from tests.client._fake import FakeService, Reply


def photo() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 140, 160)).save(buffer, "JPEG")
    return buffer.getvalue()


@pytest.fixture
async def sdk(sandbox: Sandbox) -> AsyncIterator[Client]:
    async with sandbox.client() as client:
        yield client


async def _done_process_asset(sdk: Client) -> ResultAsset:
    process = await sdk.run(ToolSlug.DAY_TO_DUSK, photo(), timeout=30)
    assert process.status == ProcessStatus.DONE
    return process.final_assets[0]


async def test_download_streams_a_result_to_a_path_and_a_file(sdk: Client, tmp_path: Path) -> None:
    asset = await _done_process_asset(sdk)
    target = tmp_path / "dusk.jpg"
    written = await sdk.download(asset, target)
    assert written == target.stat().st_size > 0
    with Image.open(target) as image:
        assert image.size == (64, 48)
    assert os.listdir(tmp_path) == [target.name], "no partial file is left beside the result"

    buffer = io.BytesIO()
    assert await sdk.download(asset, buffer, thumbnail=True) == len(buffer.getvalue()) > 0
    Image.open(io.BytesIO(buffer.getvalue())).verify()


async def test_download_writes_into_a_temporary_file(sdk: Client) -> None:
    # NamedTemporaryFile's wrapper forwards write() through __getattr__.
    asset = await _done_process_asset(sdk)
    with tempfile.NamedTemporaryFile(suffix=".jpg") as target:
        written = await sdk.download(asset, target)
        assert written == target.tell() > 0
        target.seek(0)
        Image.open(target).verify()


async def test_download_refuses_a_target_it_cannot_write(sdk: Client) -> None:
    asset = await _done_process_asset(sdk)
    with pytest.raises(ValidationError, match="a path or a binary file object, not int"):
        await sdk.download(asset, 42)  # type: ignore[arg-type]


async def test_download_refuses_non_http_urls_before_any_request(
    sdk: Client, sandbox: Sandbox, tmp_path: Path
) -> None:
    before = sum(sandbox.stats.requests.values())
    for url in ("file:///etc/passwd", "ftp://example.org/x.jpg", "/relative/x.jpg"):
        with pytest.raises(ValidationError, match="non-http"):
            await sdk.download(url, tmp_path / "x.jpg")
    with pytest.raises(ValidationError, match="no src URL"):
        await sdk.download(ResultAsset(asset_id="a1"), tmp_path / "x.jpg")
    assert sum(sandbox.stats.requests.values()) == before
    assert not os.listdir(tmp_path)


async def test_download_errors_leave_no_file_and_never_send_the_key(tmp_path: Path) -> None:
    fake = FakeService()
    await fake.start()
    try:
        fake.script("GET", "/missing.jpg", Reply(status=404, text="gone"))
        fake.script("GET", "/dropped.jpg", Reply(action="cut", status=200))
        async with Client(api_key="sk_test_download_key", base_url=str(fake.url)) as client:
            with pytest.raises(NotFoundError) as missing:
                await client.download(str(fake.url / "missing.jpg"), tmp_path / "a.jpg")
            assert missing.value.status == 404
            with pytest.raises(APIConnectionError):
                await client.download(str(fake.url / "dropped.jpg"), tmp_path / "b.jpg")
        assert not os.listdir(tmp_path)
        for seen in fake.seen:
            assert "x-api-key" not in seen.headers
    finally:
        await fake.stop()
