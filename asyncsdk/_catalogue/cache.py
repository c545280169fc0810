"""The catalogue of one client: fetched once per time to live and shared by every caller."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

import attrs

from asyncsdk._catalogue.snapshot import Catalogue, aliases
from asyncsdk._checks import number_field
from asyncsdk._errors import APIError, BadRequestError, NotFoundError
from asyncsdk._models import Tool, Widget

__all__ = ["CatalogueCache"]

T = TypeVar("T")


@attrs.define
class _Slot(Generic[T]):
    """One cached value and the fetch that refreshes it."""

    value: T | None = None
    fetched_at: float = 0.0
    task: asyncio.Task[T] | None = None


@attrs.define
class CatalogueCache:
    """The catalogue of one client, fetched on first use and refreshed after ``ttl`` seconds.

    ``fetch_tools`` and ``fetch_widgets`` do the I/O (a client passes ``client.tools.list`` and
    ``client.tools.widgets``).  Per key (the tool list, or one tool's widgets) at most one fetch is
    in flight: concurrent callers share it, so a thousand simultaneous requests cause one fetch.  A
    caller that is cancelled does not cancel the shared fetch.  A failed first fetch raises to every
    waiting caller and is not cached; when a refresh fails with an :class:`APIError` and
    ``stale_on_error`` is true, the previous value keeps serving.  ``clock`` is the time source
    (seconds, monotonic).
    """

    fetch_tools: Callable[[], Awaitable[Sequence[Tool]]]
    fetch_widgets: Callable[[str], Awaitable[Sequence[Widget]]]
    ttl: float = attrs.field(
        default=300.0,
        validator=number_field("ttl must be a finite number of seconds > 0", above=True),
    )
    stale_on_error: bool = True
    clock: Callable[[], float] = time.monotonic
    _tools: _Slot[tuple[Tool, ...]] = attrs.field(factory=_Slot, init=False)
    _widgets: dict[str, _Slot[tuple[Widget, ...]]] = attrs.field(factory=dict, init=False)
    _tasks: set[asyncio.Task[Any]] = attrs.field(factory=set, init=False)

    async def tools(self) -> tuple[Tool, ...]:
        """The tool list (spec 4.10)."""
        return await self._get(self._tools, self._fetch_tools)

    async def widgets(self, tool: str) -> tuple[Widget, ...]:
        """The widgets of ``tool`` (spec 4.11), asked under the slug given, then its aliases."""
        slot = self._widgets.get(tool)
        if slot is None:
            slot = self._widgets[tool] = _Slot()
        return await self._get(slot, lambda: self._fetch_widgets(tool))

    async def catalogue(self, *tools: str) -> Catalogue:
        """A snapshot with the tool list and the widgets of ``tools`` (names resolved)."""
        listed = await self.tools()
        base = Catalogue(tools=listed)
        slugs = [base.tool(name).slug for name in tools]
        fetched = await asyncio.gather(*(self.widgets(slug) for slug in slugs))
        return Catalogue(tools=listed, widgets=dict(zip(slugs, fetched, strict=True)))

    def peek(self) -> Catalogue | None:
        """What is cached now, fresh or stale, without fetching; ``None`` before the first fetch."""
        tools = self._tools.value
        if tools is None:
            return None
        widgets = {slug: s.value for slug, s in self._widgets.items() if s.value is not None}
        return Catalogue(tools=tools, widgets=widgets)

    def invalidate(self, tool: str | None = None) -> None:
        """Forget the cached catalogue (or one tool's widgets); the next use fetches again.

        A fetch already in flight finishes for its callers but its answer is not kept.
        """
        if tool is None:
            self._tools = _Slot()
            self._widgets.clear()
        else:
            for alias in aliases(tool):
                self._widgets.pop(alias, None)

    async def _fetch_tools(self) -> tuple[Tool, ...]:
        return tuple(await self.fetch_tools())

    async def _fetch_widgets(self, tool: str) -> tuple[Widget, ...]:
        not_found: NotFoundError | BadRequestError | None = None
        found_empty = False
        for spelling in aliases(tool):
            try:
                widgets = tuple(await self.fetch_widgets(spelling))
            except (NotFoundError, BadRequestError) as exc:
                # A spelling the service does not know: 400 by the spec's error table (an
                # invalid value), 404 as a path that names nothing; the other alias may work.
                not_found = not_found or exc
                continue
            if widgets:
                return widgets
            found_empty = True
        if not_found is not None and not found_empty:
            raise not_found
        return ()

    async def _get(self, slot: _Slot[T], fetch: Callable[[], Awaitable[T]]) -> T:
        if slot.value is not None and self.clock() - slot.fetched_at < self.ttl:
            return slot.value
        task = slot.task
        if task is None:
            task = asyncio.create_task(self._refresh(slot, fetch))
            slot.task = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            return await asyncio.shield(task)
        except APIError:
            if self.stale_on_error and slot.value is not None:
                return slot.value
            raise

    async def _refresh(self, slot: _Slot[T], fetch: Callable[[], Awaitable[T]]) -> T:
        try:
            value = await fetch()
        finally:
            slot.task = None
        slot.value = value
        slot.fetched_at = self.clock()
        return value
