"""The SDK's ``sandbox`` fixture, where the ``sandbox`` extra brings Pillow."""

import tempfile

import pytest

pytest.importorskip("PIL", reason="the sandbox fixture needs pip install 'asyncsdk[sandbox]'")

from asyncsdk import ToolSlug, samples
from asyncsdk.sandbox import Sandbox  # only once Pillow is known to be there


@pytest.mark.asyncio
async def test_the_sandbox_lists_the_tools(sandbox: Sandbox) -> None:
    async with sandbox.client() as client:
        tools = await client.tools.list()
    assert "tool-virtual-staging" in {tool.slug for tool in tools}


@pytest.mark.asyncio
async def test_a_photo_in_a_temporary_file_is_staged_into_another(sandbox: Sandbox) -> None:
    # A web framework hands over an uploaded photo as a NamedTemporaryFile, whose wrapper
    # forwards read(), seek() and write() to the real file through __getattr__.
    with (
        tempfile.NamedTemporaryFile(suffix=".jpg") as photo,
        tempfile.NamedTemporaryFile(suffix=".jpg") as staged,
    ):
        photo.write(samples.path("bedroom-empty.jpg").read_bytes())
        photo.seek(0)
        async with sandbox.client() as client:
            process = await client.run(
                ToolSlug.VIRTUAL_STAGING,
                photo,
                widgets={"space": "bedroom", "style": "modern"},
                timeout=30,
            )
            written = await client.download(process.final_assets[0], staged)
        assert written == staged.tell() > 0
