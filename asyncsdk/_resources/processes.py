"""Processes: one AI job each (spec 4.8, 4.9): prepared against the catalogue, created, fetched,
waited for.

Process creation goes through the catalogue layer (:mod:`asyncsdk._catalogue`) first: widgets given
by short name are expanded, and with validation on a request the service would refuse (or run
wrongly) raises a :class:`~asyncsdk.CatalogueError` before it is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from asyncsdk._catalogue import (
    CatalogueCache,
    PlanMemo,
    PreparedProcess,
    WidgetsArg,
    prepare_process,
    widget_entries,
)
from asyncsdk._checks import require_text
from asyncsdk._errors import APIConnectionError, APIDecodeError, ServerError
from asyncsdk._models import Asset, CreatedProcesses, Process
from asyncsdk._protocol.requests import Request
from asyncsdk._resources.core import Core, TimeoutArg
from asyncsdk._resources.orders import Orders
from asyncsdk._resources.waiting import ResultWaiter, Waiting

__all__ = ["Processes"]


class Processes:
    """Processes: one AI job each (spec 4.8, 4.9), and waiting for their results, as
    ``client.processes``.

    Reached through a :class:`~asyncsdk.Client`, which builds it; not made directly.
    ``orders`` and ``catalogue`` are the client's (``create`` reads an order's assets; the
    :class:`~asyncsdk.CatalogueCache` checks requests); ``validate`` the client-wide default of
    checking process requests against it (each call may override it).
    """

    def __init__(
        self, core: Core, *, orders: Orders, catalogue: CatalogueCache, validate: bool = True
    ) -> None:
        self._core = core
        self._orders = orders
        self._catalogue = catalogue
        self._validate = validate
        self._plans: PlanMemo[PreparedProcess] = PlanMemo()
        self._waiting = Waiting(self.get, core.min_poll_interval)

    async def prepare(
        self,
        tool: str,
        asset_map: Mapping[str, str] | None = None,
        widgets: WidgetsArg | None = None,
        *,
        inputs: Mapping[str, str] | str | None = None,
        order_assets: Sequence[Asset] | None = None,
        validate: bool | None = None,
    ) -> PreparedProcess:
        """Expand and check a process request without sending it (a dry run of :meth:`create`).

        ``validate`` defaults to the client's setting.  With it on, the tool list and the tool's
        widgets are read from the client's catalogue cache (fetched once per TTL) and a
        :class:`~asyncsdk.CatalogueError` names any problem; asset ids are checked against
        ``order_assets`` when given.
        """
        return await prepare_process(
            self._catalogue,
            tool=tool,
            asset_map=asset_map,
            inputs=inputs,
            widgets=widgets,
            order_assets=order_assets,
            validate=self._validate if validate is None else validate,
            memo=self._plans,
        )

    async def create(
        self,
        order_id: str,
        tool: str,
        asset_map: Mapping[str, str] | None = None,
        widgets: WidgetsArg | None = None,
        process_group_id: str | None = None,
        *,
        inputs: Mapping[str, str] | str | None = None,
        validate: bool | None = None,
        order_assets: Sequence[Asset] | None = None,
        timeout: TimeoutArg = None,
    ) -> CreatedProcesses:
        """Run ``tool`` on the order's assets; waits first for a place in the generation limit.

        Inputs: ``asset_map`` (full slot names, the wire form) or ``inputs`` (an asset id for a
        one-slot tool, or a mapping by short slot name: ``image``, ``mask``, ``before``,
        ``after``).  With neither, the order is fetched (one GET) and its photo, and for the mask
        tool its mask, fill the slots.

        ``widgets`` takes the short form ``{"space": "bedroom", "style": "modern"}`` (widgets by
        key, purpose, name or slug; items by value, name or slug), the wire list
        ``[{"slug": ..., "item_slugs": [...]}]`` or :class:`~asyncsdk.WidgetSelection` values.

        ``validate`` (default: the client's setting) checks the request against the catalogue
        first; a :class:`~asyncsdk.CatalogueError` is raised and nothing is sent when it does not
        fit.  Asset ids are checked against ``order_assets`` when given (or when the order was
        fetched because no inputs were given); otherwise the order is not fetched just for the
        check.  With ``validate=False`` short names are expanded by the slug convention and the
        rest is sent as given, so the service's own 422 comes back as
        :class:`~asyncsdk.UnprocessableEntityError`.

        The client's :class:`~asyncsdk.GenerationLimit` (on by default) makes the call wait for a
        place before the POST.  A 429 without ``Retry-After`` (the account's generation limit,
        spent elsewhere too) is never retried at once: with a limit the call waits for its next
        place (up to ``max_retries`` times); without one it raises
        :class:`~asyncsdk.RateLimitError` at once, ``retry_after`` holding the seconds to wait.
        """
        require_text(order_id, "order_id")
        if process_group_id is not None:
            require_text(process_group_id, "process_group_id")
        if asset_map is None and inputs is None and order_assets is None:
            # The arguments' shape is checked before the order is fetched.
            require_text(tool, "tool")
            widget_entries(widgets)
            order_assets = (await self._orders.get(order_id, timeout=timeout)).entry_assets
        prepared = await self.prepare(
            tool,
            asset_map,
            widgets,
            inputs=inputs,
            order_assets=order_assets,
            validate=validate,
        )
        return await self._create(order_id, prepared, process_group_id, timeout, None)

    async def create_prepared(
        self,
        order_id: str,
        prepared: PreparedProcess,
        *,
        process_group_id: str | None = None,
        timeout: TimeoutArg = None,
        reserved: float | None = None,
    ) -> CreatedProcesses:
        """Create the process a :meth:`prepare` call planned.  A 429 is handled as :meth:`create`
        says.

        It waits first for a place in the client's generation limit, unless the caller took one
        already: ``reserved``, what :meth:`GenerationLimit.acquire` returned (``Client.run``
        takes its place before the uploads, so that no upload is paid for a process that cannot
        be created yet).
        """
        return await self._create(order_id, prepared, process_group_id, timeout, reserved)

    async def create_once(
        self,
        order_id: str,
        prepared: PreparedProcess,
        *,
        sent_before: bool,
        before_sending: Callable[[], Awaitable[None]] | None = None,
        pace: Callable[[], AbstractAsyncContextManager[Any]] | None = None,
        process_group_id: str | None = None,
        timeout: TimeoutArg = None,
        reserved: float | None = None,
    ) -> CreatedProcesses:
        """The processes of the order's run, paid for once: those the order lists when the
        creation may have been sent before, else created.

        For an order made for one run alone (a keyed run's, or one photo's of ``asyncsdk
        process``).  ``sent_before``: a run stopped after it may have sent the creation but before
        it recorded the ids, so :meth:`Orders.process_ids` of the prepared tool are adopted when
        the order lists any.  Otherwise ``before_sending()`` is awaited (a journal records that
        the request may now be sent) and the request is sent, inside ``pace()`` when given (a
        pacer of the caller's own, holding its slot while the request is answered); when its
        answer is lost (a connection error or a 5xx), the order is read again and what it lists
        is adopted, and the error raised only when it lists none.  The adopted processes come
        without a ``process_group_id``.
        """
        lists = self._orders.process_ids
        if sent_before and (adopted := await lists(order_id, tool=prepared.tool)):
            return CreatedProcesses(process_ids=adopted)
        if before_sending is not None:
            await before_sending()
        try:
            async with pace() if pace is not None else nullcontext():
                created = await self._create(
                    order_id, prepared, process_group_id, timeout, reserved
                )
        except (APIConnectionError, ServerError):
            # The answer may be lost after the service created the process: look before failing.
            adopted = await lists(order_id, tool=prepared.tool)
            if not adopted:
                raise
            return CreatedProcesses(process_ids=adopted)
        if not created.process_ids:
            raise APIDecodeError(
                f"creating a {prepared.tool} process on order {order_id} returned no id"
            )
        return created

    async def _create(
        self,
        order_id: str,
        prepared: PreparedProcess,
        process_group_id: str | None,
        timeout: TimeoutArg,
        reserved: float | None,
    ) -> CreatedProcesses:
        """:meth:`create_prepared`: a place in the generation window is taken first unless one
        was (``reserved``)."""
        require_text(order_id, "order_id")
        if process_group_id is not None:
            require_text(process_group_id, "process_group_id")
        # The prepared request checked its own shape when it was made.
        body: dict[str, Any] = {
            "order_id": order_id,
            "tool": prepared.tool,
            "asset_map": dict(prepared.asset_map),
            "widgets": prepared.widgets_json(),
        }
        if process_group_id is not None:
            body["process_group_id"] = process_group_id
        url, route = self._core.fixed("v3", "process")
        request = Request(
            method="POST",
            url=url,
            route=route,
            json=body,
            generation=True,
        )
        generations = self._core.generations
        if reserved is None:
            reserved = await generations.reserve()
        decode = self._core.decoder(CreatedProcesses)
        return await generations.create(lambda: self._core.send(request, decode, timeout), reserved)

    async def get(
        self,
        process_id: str,
        *,
        width: int | None = None,
        height: int | None = None,
        timeout: TimeoutArg = None,
    ) -> Process:
        """Fetch a process; ``width``/``height`` resize the result URLs.

        The service allows one GET of a process per 5 seconds: GETs of one process id are sent
        at least the client's ``min_poll_interval`` apart, whichever call sends them, retries
        included (a retry waits its ``Retry-After``, or its backoff without one, and no less than
        the floor's time left).
        """
        require_text(process_id, "process_id")
        return await self._core.get_one(
            Process,
            "v3",
            "process",
            process_id,
            width=width,
            height=height,
            timeout=timeout,
            floor_key=process_id,
        )

    async def wait(
        self,
        process_id: str,
        *,
        timeout: float = 600.0,
        registry: ResultWaiter | None = None,
        webhook_grace: float | None = None,
        poll_interval: float | None = None,
        raise_on_failure: bool = False,
    ) -> Process:
        """Wait until the process is ``done`` or ``failed``, under one deadline of ``timeout`` s.

        With a ``registry`` the webhook event is awaited first; after ``webhook_grace`` seconds
        (default: half of ``timeout``), or at once when ``registry.healthy`` is false, the process
        is polled too, so that a webhook that never comes does not lose the result, and an event
        that comes between two polls still ends the wait at once.  Give
        ``webhook_grace=timeout`` to await the webhook alone.  Each poll waits ``poll_interval``
        after the answer to the one before (never less than the client's
        ``min_poll_interval``), so the service sees them that far apart.
        Raises ``WaitTimeoutError`` at the deadline, and ``ProcessFailedError`` for a failed
        process when ``raise_on_failure`` is true.
        """
        return await self._waiting.wait(
            process_id,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
            poll_interval=poll_interval,
            raise_on_failure=raise_on_failure,
        )
