"""Tools: the tool catalogue (spec 4.10) and the widgets of a tool (4.11)."""

from __future__ import annotations

from asyncsdk._checks import require_text
from asyncsdk._models import Tool, Widget
from asyncsdk._protocol.requests import Request, endpoint
from asyncsdk._protocol.responses import items_decoder
from asyncsdk._resources.core import Core, TimeoutArg

__all__ = ["Tools"]


class Tools:
    """The tool catalogue (spec 4.10) and the widgets of a tool (4.11), as ``client.tools``.

    Each call asks the service; ``client.catalogue`` (a :class:`~asyncsdk.CatalogueCache`)
    keeps their answers.  Reached through a :class:`~asyncsdk.Client`; not made directly.
    """

    def __init__(self, core: Core) -> None:
        self._core = core

    async def list(self, *, timeout: TimeoutArg = None) -> tuple[Tool, ...]:
        """Every tool of the catalogue (on ``app_url``; sent without the API key)."""
        url = endpoint(self._core.app_url, "api", "tools")
        request = Request(method="GET", url=url, authenticated=False)
        return await self._core.send(request, items_decoder(self._core.converter, Tool), timeout)

    async def widgets(self, tool_slug: str, *, timeout: TimeoutArg = None) -> tuple[Widget, ...]:
        """The widgets (settings) of a tool and their items."""
        require_text(tool_slug, "tool_slug")
        url = self._core.url("v1", "cathub", "tools", tool_slug, "widgets")
        return await self._core.send(
            Request(method="GET", url=url), items_decoder(self._core.converter, Widget), timeout
        )
