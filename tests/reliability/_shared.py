"""What the reliability tests share: a photo to upload, the staging widgets, sandbox clients."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from PIL import Image

from asyncsdk import Client, Timeout
from asyncsdk.sandbox import Sandbox

T = TypeVar("T")

TOOL: Final = "tool-virtual-staging"
SLOT: Final = f"{TOOL}-input-image"
STAGING_WIDGETS: Final[list[dict[str, Any]]] = [
    {
        "slug": "widget-space-tool-virtual-staging",
        "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"],
    },
    {
        "slug": "widget-style-tool-virtual-staging",
        "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
    },
]


def photo() -> bytes:
    """A small JPEG the sandbox accepts as a room photo."""
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 140, 160)).save(buffer, "JPEG")
    return buffer.getvalue()


def sandbox_client(sb: Sandbox, *, api_key: str | None = None, **options: Any) -> Client:
    """A client of ``sb`` with tiny backoff, so retries cost milliseconds."""
    options.setdefault("timeout", Timeout(connect=5.0, total=10.0))
    return sb.client(api_key=sb.api_key if api_key is None else api_key, **options)


async def eventually(probe: Callable[[], Awaitable[T]], what: str, limit: float = 10.0) -> T:
    """Poll ``probe`` until it returns something truthy.  ``limit`` only guards against a hang."""
    try:
        async with asyncio.timeout(limit):
            while True:
                value = await probe()
                if value:
                    return value
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"still waiting for: {what}") from None
