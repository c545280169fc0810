"""The SDK's ``sandbox`` fixture, where the ``sandbox`` extra brings Pillow."""

import pytest

pytest.importorskip("PIL", reason="the sandbox fixture needs pip install 'asyncsdk[sandbox]'")

from asyncsdk.sandbox import Sandbox  # only once Pillow is known to be there


@pytest.mark.asyncio
async def test_the_sandbox_lists_the_tools(sandbox: Sandbox) -> None:
    async with sandbox.client() as client:
        tools = await client.tools.list()
    assert "tool-virtual-staging" in {tool.slug for tool in tools}
