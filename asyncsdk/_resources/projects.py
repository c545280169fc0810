"""Projects: one per property (spec 4.1 to 4.4)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from asyncsdk._checks import require_text
from asyncsdk._models import Order, Page, Project
from asyncsdk._protocol.paging import listing, walk
from asyncsdk._protocol.requests import Request, query
from asyncsdk._protocol.responses import model_decoder, page_decoder
from asyncsdk._resources.core import Core, TimeoutArg

__all__ = ["Projects"]


class Projects:
    """Projects: one per property (spec 4.1 to 4.4), as ``client.projects``.

    Reached through a :class:`~asyncsdk.Client`, which builds it; not made directly.
    """

    def __init__(self, core: Core) -> None:
        self._core = core

    async def create(self, address: str, *, timeout: TimeoutArg = None) -> Project:
        """Create a project for the property at ``address``."""
        require_text(address, "address")
        url, route = self._core.fixed("v3", "project")
        request = Request(
            method="POST",
            url=url,
            route=route,
            json={"address": address},
        )
        return await self._core.send(request, model_decoder(self._core.converter, Project), timeout)

    async def get(
        self,
        project_id: str,
        *,
        width: int | None = None,
        height: int | None = None,
        timeout: TimeoutArg = None,
    ) -> Project:
        """Fetch one project; ``width``/``height`` resize the cover image URL."""
        require_text(project_id, "project_id")
        return await self._core.get_one(
            Project, "v3", "project", project_id, width=width, height=height, timeout=timeout
        )

    async def list(
        self,
        *,
        page: int = 1,
        limit: int = 10,
        sort: str = "desc",
        search: str | None = None,
        width: int | None = None,
        height: int | None = None,
        timeout: TimeoutArg = None,
    ) -> Page[Project]:
        """One page of projects (``search`` filters on the address)."""
        params = listing(page=page, limit=limit, sort=sort, width=width, height=height)
        params.update(query(s=search))
        return await self._fetch(params, timeout)

    def iter(
        self,
        *,
        limit: int = 10,
        sort: str = "desc",
        search: str | None = None,
        width: int | None = None,
        height: int | None = None,
        timeout: TimeoutArg = None,
    ) -> AsyncIterator[Project]:
        """Every project, page after page: ``async for project in client.projects.iter(): ...``."""
        params = listing(page=1, limit=limit, sort=sort, width=width, height=height)
        params.update(query(s=search))
        return walk(lambda current: self._fetch(current, timeout), params)

    async def _fetch(self, params: dict[str, str], timeout: TimeoutArg) -> Page[Project]:
        decode = page_decoder(
            self._core.converter, Project, page=int(params["page"]), limit=int(params["limit"])
        )
        request = Request(method="GET", url=self._core.url("v3", "project", params=params))
        return await self._core.send(request, decode, timeout)

    async def orders(
        self,
        project_id: str,
        *,
        page: int = 1,
        limit: int = 10,
        sort: str = "desc",
        width: int | None = None,
        height: int | None = None,
        timeout: TimeoutArg = None,
    ) -> Page[Order]:
        """One page of the orders of a project, with their input assets and process results."""
        require_text(project_id, "project_id")
        params = listing(page=page, limit=limit, sort=sort, width=width, height=height)
        return await self._fetch_orders(project_id, params, timeout)

    def iter_orders(
        self,
        project_id: str,
        *,
        limit: int = 10,
        sort: str = "desc",
        width: int | None = None,
        height: int | None = None,
        timeout: TimeoutArg = None,
    ) -> AsyncIterator[Order]:
        """Every order of a project, page after page."""
        require_text(project_id, "project_id")
        params = listing(page=1, limit=limit, sort=sort, width=width, height=height)
        return walk(lambda current: self._fetch_orders(project_id, current, timeout), params)

    async def _fetch_orders(
        self, project_id: str, params: dict[str, str], timeout: TimeoutArg
    ) -> Page[Order]:
        decode = page_decoder(
            self._core.converter,
            Order,
            page=int(params["page"]),
            limit=int(params["limit"]),
            lenient=True,
        )
        url = self._core.url("v3", "project", project_id, "order", params=params)
        return await self._core.send(Request(method="GET", url=url), decode, timeout)
