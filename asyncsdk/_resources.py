"""The endpoints of the service, grouped as ``client.projects``, ``.orders``, ``.processes``,
``.tools`` and ``.v1``.

A resource method checks its arguments (``ValidationError`` before anything is sent), builds a
:class:`~asyncsdk._protocol.requests.Request`, and hands it with a decoder to the one transport.
Decoders turn the JSON value (envelope already removed) into models with the client's converter.

Process creation goes through the catalogue layer (:mod:`asyncsdk._catalogue`) first: widgets given
by short name are expanded, and with validation on a request the service would refuse (or run
wrongly) raises a :class:`~asyncsdk._catalogue.CatalogueError` before it is sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Hashable,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar
from urllib.parse import quote

import attrs
import cattrs
from yarl import URL

from asyncsdk._catalogue import (
    Catalogue,
    CatalogueCache,
    PreparedProcess,
    WidgetsArg,
    WidgetSelection,
    prepare_process_with,
    request_key,
)
from asyncsdk._checks import is_int, is_mapping, is_sequence, require_number, require_text
from asyncsdk._errors import (
    AsyncSDKError,
    ProcessFailedError,
    ValidationError,
    WaitTimeoutError,
)
from asyncsdk._limits import GenerationLimit
from asyncsdk._models import (
    Asset,
    AssetRole,
    CreatedOrder,
    CreatedProcesses,
    Order,
    Page,
    Process,
    ProcessCompleted,
    ProcessStatus,
    Project,
    Tool,
    V1Submitted,
    V1Upload,
    Widget,
)
from asyncsdk._multipart import build_form
from asyncsdk._protocol.paging import dimensions, listing, walk
from asyncsdk._protocol.requests import Request, endpoint, query
from asyncsdk._protocol.responses import (
    describe_shape,
    items_decoder,
    model_decoder,
    page_decoder,
)
from asyncsdk._settings import Timeout
from asyncsdk._transport import Transport
from asyncsdk._uploads import MAX_UPLOAD_BYTES, Upload, UploadSource, check_roles, to_upload
from asyncsdk._waiter import ResultWaiter

__all__ = [
    "V1",
    "Core",
    "Orders",
    "Processes",
    "Projects",
    "Tools",
    "check_widgets",
    "check_widgets_arg",
]

T = TypeVar("T")

_log = logging.getLogger("asyncsdk")

TimeoutArg = Timeout | float | None


@attrs.frozen(kw_only=True)
class Core:
    """What every resource shares: the transport, the converter and the settings they need."""

    transport: Transport
    converter: cattrs.Converter
    base_url: URL
    app_url: URL
    role_field: str
    min_poll_interval: float
    generation_limit: GenerationLimit | None = None
    max_upload_bytes: int = MAX_UPLOAD_BYTES
    _fixed_urls: dict[tuple[str, ...], URL] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )
    _decoders: dict[type[Any], Callable[[Any], Any]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    def url(self, *segments: str, params: Mapping[str, str] | None = None) -> URL:
        url = endpoint(self.base_url, *segments)
        return url.with_query(params) if params else url

    def fixed_url(self, *segments: str) -> URL:
        """:meth:`url` of a constant endpoint (no ids in it), built once."""
        url = self._fixed_urls.get(segments)
        if url is None:
            url = self._fixed_urls[segments] = endpoint(self.base_url, *segments)
        return url

    def send(
        self, request: Request, decode: Callable[[Any], T], timeout: TimeoutArg = None
    ) -> Coroutine[Any, Any, T]:
        """The transport's coroutine for ``request`` (returned, not awaited here, so a call
        costs no extra coroutine)."""
        return self.transport.request(request, decode, timeout=timeout)

    def get_one(
        self,
        cls: type[T],
        *segments: str,
        width: int | None,
        height: int | None,
        timeout: TimeoutArg,
    ) -> Coroutine[Any, Any, T]:
        """GET one resource, with the spec's optional ``width``/``height`` resize parameters.

        ``segments``: the constant path (built once), then the resource's id, quoted per call.
        """
        *collection, item_id = segments
        prefix = self.fixed_url(*collection)
        url = prefix.with_path(f"{prefix.raw_path}/{quote(item_id, safe='')}", encoded=True)
        if width is not None or height is not None:
            url = url.with_query(dimensions(width, height))
        return self.send(Request(method="GET", url=url), self.decoder(cls), timeout)

    def decoder(self, cls: type[T]) -> Callable[[Any], T]:
        """The decoder of one JSON object into ``cls``, built once per class."""
        decode = self._decoders.get(cls)
        if decode is None:
            decode = self._decoders[cls] = model_decoder(self.converter, cls)
        return decode


# --- resources ------------------------------------------------------------------------------------


class Projects:
    """Projects: one per property (spec 4.1 to 4.4)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def create(self, address: str, *, timeout: TimeoutArg = None) -> Project:
        """Create a project for the property at ``address``."""
        require_text(address, "address")
        request = Request(
            method="POST", url=self._core.fixed_url("v3", "project"), json={"address": address}
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


class Orders:
    """Orders: the uploaded input images (spec 4.5 to 4.7)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def create(
        self,
        *images: Upload | UploadSource,
        project_id: str | None = None,
        timeout: TimeoutArg = None,
    ) -> CreatedOrder:
        """Upload images as a new order.

        Each image is an :class:`Upload` (source and role) or a bare source, which counts as the
        ``primary_angle``.  At most one primary and one secondary angle are allowed; formats and
        sizes are checked before anything is sent.
        """
        uploads = [to_upload(image) for image in images]
        check_roles(uploads)
        fields = (
            [] if project_id is None else [("project_id", require_text(project_id, "project_id"))]
        )
        fields += [(self._core.role_field, upload.role) for upload in uploads]
        form = await build_form(
            fields,
            [("asset_file", upload) for upload in uploads],
            max_bytes=self._core.max_upload_bytes,
        )
        request = Request(method="POST", url=self._core.fixed_url("v3", "order"), form=form)
        return await self._core.send(
            request, model_decoder(self._core.converter, CreatedOrder), timeout
        )

    async def append_mask(
        self,
        order_id: str,
        mask: Upload | UploadSource,
        *,
        project_id: str | None = None,
        timeout: TimeoutArg = None,
    ) -> CreatedOrder:
        """Add a mask image to an order (blue ``#7878CD`` removes, black keeps)."""
        require_text(order_id, "order_id")
        fields = (
            [] if project_id is None else [("project_id", require_text(project_id, "project_id"))]
        )
        fields += [("asset_role", AssetRole.MASK), ("asset_type", AssetRole.MASK)]
        form = await build_form(
            fields, [("asset_file", to_upload(mask))], max_bytes=self._core.max_upload_bytes
        )
        url = self._core.url("v3", "order", order_id, "append")
        request = Request(method="POST", url=url, form=form)
        return await self._core.send(request, self._appended(order_id), timeout)

    def _appended(self, order_id: str) -> Callable[[Any], CreatedOrder]:
        """The spec shows no answer to appending: accept the creation shape, an order, or none."""
        converter = self._core.converter

        def decode(value: Any) -> CreatedOrder:
            if value is None:
                return CreatedOrder(order_id=order_id)
            if isinstance(value, Mapping) and "order_id" in value:
                return converter.structure(value, CreatedOrder)
            if isinstance(value, Mapping) and "id" in value:
                order = converter.structure(value, Order)
                return CreatedOrder(order_id=order.id, assets=order.entry_assets)
            raise TypeError(
                f"expected an order or {{order_id, assets}}, got {describe_shape(value)}"
            )

        return decode

    async def get(
        self,
        order_id: str,
        *,
        width: int | None = None,
        height: int | None = None,
        timeout: TimeoutArg = None,
    ) -> Order:
        """Fetch an order with its assets and processes."""
        require_text(order_id, "order_id")
        return await self._core.get_one(
            Order, "v3", "order", order_id, width=width, height=height, timeout=timeout
        )


def _check_wire_entry(index: int, widget: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(widget) - {"slug", "item_slugs"}
    if unknown:
        raise ValidationError(
            f"widgets[{index}] has unknown keys {sorted(unknown)}; use 'slug' and 'item_slugs'"
        )
    slug = widget.get("slug")
    items = widget.get("item_slugs")
    if not isinstance(slug, str) or not slug:
        raise ValidationError(f"widgets[{index}]['slug'] must be a non-empty string")
    if (
        isinstance(items, str)
        or not is_sequence(items)
        or not all(isinstance(item, str) and item for item in items)
    ):
        raise ValidationError(
            f"widgets[{index}]['item_slugs'] must be a list of item slugs, e.g. "
            f"['item-...-{slug}'], not {items!r}"
        )
    return {"slug": slug, "item_slugs": list(items)}


def check_widgets(widgets: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Widget selections as the wire wants them: ``[{"slug": str, "item_slugs": [str, ...]}]``."""
    if widgets is None:
        return None
    if isinstance(widgets, Mapping | str) or not isinstance(widgets, Sequence):
        raise ValidationError(
            "widgets must be a sequence of {'slug': ..., 'item_slugs': [...]} mappings"
        )
    body: list[dict[str, Any]] = []
    for index, widget in enumerate(widgets):
        if not isinstance(widget, Mapping):
            raise ValidationError(
                f"widgets[{index}] must be a mapping {{'slug': ..., 'item_slugs': [...]}}, "
                f"not {type(widget).__name__}"
            )
        body.append(_check_wire_entry(index, widget))
    return body


_WIDGETS_FORMS = (
    "a mapping of widget names to items such as {'space': 'bedroom', 'style': 'modern'}, "
    "or a sequence of {'slug': ..., 'item_slugs': [...]} mappings"
)


def check_widgets_arg(widgets: WidgetsArg | None) -> None:
    """Check the shape of any accepted ``widgets=`` form before the catalogue is consulted.

    * the short mapping ``{"space": "bedroom", "enhancement_options": ["a", "b"]}`` (a value is an
      item name, a list of them, or ``None`` for "leave out");
    * the wire list ``[{"slug": ..., "item_slugs": [...]}]``, strictly in that shape;
    * a sequence of :class:`~asyncsdk.WidgetSelection`.
    """
    if widgets is None:
        return
    if isinstance(widgets, str | bytes) or not (is_mapping(widgets) or is_sequence(widgets)):
        raise ValidationError(f"widgets must be {_WIDGETS_FORMS}, not {type(widgets).__name__}")
    if is_mapping(widgets):
        if "slug" in widgets and set(widgets) <= {"slug", "item_slugs"}:
            raise ValidationError(
                f"widgets must be {_WIDGETS_FORMS}; {dict(widgets)!r} is one wire entry: "
                "put it in a list"
            )
        for name, value in widgets.items():
            if not isinstance(name, str) or not name.strip():
                raise ValidationError(f"widget names must be non-empty strings, not {name!r}")
            if value is None or (isinstance(value, str) and value.strip()):
                continue
            if (
                isinstance(value, str | bytes)
                or not isinstance(value, Sequence | set | frozenset)
                or not all(isinstance(item, str) and item.strip() for item in value)
            ):
                raise ValidationError(
                    f"widgets[{name!r}] must be an item name or a list of item names, not {value!r}"
                )
        return
    for index, entry in enumerate(widgets):
        if isinstance(entry, WidgetSelection):
            continue
        if not is_mapping(entry):
            raise ValidationError(
                f"widgets[{index}] must be a mapping {{'slug': ..., 'item_slugs': [...]}}, "
                f"not {type(entry).__name__}"
            )
        _check_wire_entry(index, entry)


def _wire_widgets(selections: Sequence[WidgetSelection]) -> list[dict[str, Any]]:
    """The ``widgets`` array of planned selections, checked as :func:`check_widgets` checks it
    (with its messages) without building each entry twice."""
    body: list[dict[str, Any]] = []
    for index, selection in enumerate(selections):
        slug, items = selection.slug, selection.item_slugs
        entry = {"slug": slug, "item_slugs": list(items)}
        if (
            not isinstance(slug, str)
            or not slug
            or not all(isinstance(item, str) and item for item in items)
        ):
            entry = _check_wire_entry(index, entry)  # raises the message of check_widgets
        body.append(entry)
    return body


def _check_asset_map(tool: str, asset_map: Mapping[str, str]) -> None:
    if not is_mapping(asset_map) or not asset_map:
        raise ValidationError(
            f"asset_map must map the tool's input slots to asset ids, e.g. "
            f"{{'{tool}-input-image': '<asset id>'}}, not {asset_map!r}"
        )
    for slot, asset_id in asset_map.items():
        require_text(slot, "an asset_map slot name")
        require_text(asset_id, f"asset_map[{slot!r}]")


def _process_from_event(event: ProcessCompleted) -> Process:
    return Process(
        id=event.process_id, tool=event.tool, status=event.status, final_assets=event.final_assets
    )


@attrs.frozen
class _WireProcess:
    """The checked wire parts of a process request body.  Shared by every request sent from one
    plan, so nothing may change them: they are only read, by the JSON encoder."""

    tool: str
    asset_map: dict[str, str]
    widgets: list[dict[str, Any]]

    @classmethod
    def of(cls, prepared: PreparedProcess) -> _WireProcess:
        tool = require_text(prepared.tool, "tool")
        _check_asset_map(tool, prepared.asset_map)
        return cls(tool, dict(prepared.asset_map), _wire_widgets(prepared.widgets))


@attrs.define(slots=True)
class _Plan:
    """A checked request, the catalogue snapshot it was checked against, and its wire parts once
    it has been sent."""

    prepared: PreparedProcess
    snapshot: Catalogue | None
    wire: _WireProcess | None = None


#: Checked requests a client keeps (least recently used dropped first).
_PLANS_KEPT = 256


@attrs.define
class _WaitState:
    last_status: str | None = None


class Processes:
    """Processes: one AI job each (spec 4.8, 4.9), and waiting for their results.

    ``catalogue`` is the client's :class:`~asyncsdk.CatalogueCache`; ``validate`` the client-wide
    default of checking process requests against it (each call may override it).
    """

    def __init__(
        self, core: Core, *, catalogue: CatalogueCache | None = None, validate: bool = True
    ) -> None:
        self._core = core
        self._orders = Orders(core)
        if catalogue is None:
            tools = Tools(core)
            catalogue = CatalogueCache(tools.list, tools.widgets)
        self._catalogue = catalogue
        self._validate = validate
        self._plans: OrderedDict[Hashable, _Plan] = OrderedDict()

    async def _plan(
        self,
        tool: str,
        asset_map: Mapping[str, str] | None,
        widgets: WidgetsArg | None,
        inputs: Mapping[str, str] | str | None,
        order_assets: Sequence[Asset] | None,
        validate: bool | None,
    ) -> _Plan:
        """The checked plan of a request, kept per argument values (see :func:`request_key`)
        while the catalogue it was checked against is current, so a repeated request is not
        checked again."""
        validate = self._validate if validate is None else validate
        key = None
        if order_assets is None:
            key = request_key(tool, asset_map, inputs, widgets)
        if key is not None:
            key = (key, validate)
            plan = self._plans.get(key)
            if plan is not None and self._catalogue.serves(
                plan.snapshot, plan.prepared.tool if validate else None
            ):
                self._plans.move_to_end(key)
                return plan
        require_text(tool, "tool")
        if asset_map is not None:
            _check_asset_map(tool, asset_map)
        check_widgets_arg(widgets)
        prepared, snapshot = await prepare_process_with(
            self._catalogue,
            tool=tool,
            asset_map=asset_map,
            inputs=inputs,
            widgets=widgets,
            order_assets=order_assets,
            validate=validate,
        )
        plan = _Plan(prepared, snapshot)
        if key is not None:
            self._plans[key] = plan
            if len(self._plans) > _PLANS_KEPT:
                self._plans.popitem(last=False)
        return plan

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
        plan = await self._plan(tool, asset_map, widgets, inputs, order_assets, validate)
        return plan.prepared

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
        """Run ``tool`` on the order's assets; waits first if a generation limit is set.

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
        """
        require_text(order_id, "order_id")
        if process_group_id is not None:
            require_text(process_group_id, "process_group_id")
        if asset_map is None and inputs is None and order_assets is None:
            require_text(tool, "tool")
            check_widgets_arg(widgets)
            order_assets = (await self._orders.get(order_id, timeout=timeout)).entry_assets
        plan = await self._plan(tool, asset_map, widgets, inputs, order_assets, validate)
        if plan.wire is None:
            plan.wire = _WireProcess.of(plan.prepared)
        return await self._post(order_id, plan.wire, process_group_id, timeout)

    async def _send(
        self,
        order_id: str,
        prepared: PreparedProcess,
        process_group_id: str | None,
        timeout: TimeoutArg,
    ) -> CreatedProcesses:
        """Send a prepared request (checked for shape here, as it may come from anywhere)."""
        require_text(order_id, "order_id")
        if process_group_id is not None:
            require_text(process_group_id, "process_group_id")
        return await self._post(order_id, _WireProcess.of(prepared), process_group_id, timeout)

    async def _post(
        self,
        order_id: str,
        wire: _WireProcess,
        process_group_id: str | None,
        timeout: TimeoutArg,
    ) -> CreatedProcesses:
        """The one path of ``POST /v3/process``; the ids are checked by the callers."""
        body: dict[str, Any] = {
            "order_id": order_id,
            "tool": wire.tool,
            "asset_map": wire.asset_map,
            "widgets": wire.widgets,
        }
        if process_group_id is not None:
            body["process_group_id"] = process_group_id
        if self._core.generation_limit is not None:
            await self._core.generation_limit.acquire()
        request = Request(method="POST", url=self._core.fixed_url("v3", "process"), json=body)
        return await self._core.send(request, self._core.decoder(CreatedProcesses), timeout)

    async def get(
        self,
        process_id: str,
        *,
        width: int | None = None,
        height: int | None = None,
        timeout: TimeoutArg = None,
    ) -> Process:
        """Fetch a process; ``width``/``height`` resize the result URLs."""
        require_text(process_id, "process_id")
        return await self._core.get_one(
            Process, "v3", "process", process_id, width=width, height=height, timeout=timeout
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
        (default: the whole deadline), or at once when ``registry.healthy`` is false, the process is
        polled instead.  Each poll waits ``poll_interval`` after the answer to the one before (never
        less than the client's ``min_poll_interval``), so the service sees them that far apart.
        Raises ``WaitTimeoutError`` at the deadline, and ``ProcessFailedError`` for a failed
        process when ``raise_on_failure`` is true.
        """
        require_text(process_id, "process_id")
        for name, value in (("timeout", timeout), ("webhook_grace", webhook_grace)):
            if value is not None:
                require_number(value, f"{name} must be a number of seconds >= 0")
        interval = self._core.min_poll_interval
        if poll_interval is not None:
            interval = max(interval, poll_interval)
        state = _WaitState()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            async with asyncio.timeout_at(deadline) as scope:
                process = await self._until_finished(
                    process_id, registry, webhook_grace, interval, state
                )
        except TimeoutError as exc:
            if not scope.expired():
                raise
            raise WaitTimeoutError(
                f"process {process_id} did not finish within {timeout:g} s "
                f"(last status: {state.last_status or 'unknown'}); it may still finish: wait "
                "again with a longer timeout",
                process_id=process_id,
                last_status=state.last_status,
            ) from exc
        if raise_on_failure and process.status == ProcessStatus.FAILED:
            raise ProcessFailedError(
                f"process {process_id} ({process.tool}) failed", process=process
            )
        return process

    async def _until_finished(
        self,
        process_id: str,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
        interval: float,
        state: _WaitState,
    ) -> Process:
        if registry is not None:
            event = await self._from_registry(process_id, registry, webhook_grace, interval)
            if event is not None:
                state.last_status = event.status
                return _process_from_event(event)
        while True:
            process = await self.get(process_id)
            state.last_status = process.status
            if process.is_finished:
                return process
            # Counted from the answer, not the request: the service then sees the GETs at least
            # ``interval`` apart whatever the network did to either of them.
            await asyncio.sleep(interval)

    async def _from_registry(
        self,
        process_id: str,
        registry: ResultWaiter,
        webhook_grace: float | None,
        interval: float,
    ) -> ProcessCompleted | None:
        """The webhook event, or ``None`` once it is time to poll instead.

        The registry is asked in slices of ``interval`` so that a receiver going down while we
        wait is noticed (``healthy`` turns false) and polling takes over.
        """
        loop = asyncio.get_running_loop()
        grace_end = None if webhook_grace is None else loop.time() + webhook_grace
        while registry.healthy:
            remaining = interval if grace_end is None else min(interval, grace_end - loop.time())
            if remaining <= 0:
                return None
            try:
                return await registry.wait(process_id, timeout=remaining)
            except TimeoutError:
                continue
            except AsyncSDKError as exc:
                _log.warning(
                    "webhook registry failed while waiting for %s (%s); polling", process_id, exc
                )
                return None
        return None


class Tools:
    """The tool catalogue (spec 4.10) and the widgets of a tool (4.11)."""

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


class V1:
    """The legacy V1 endpoints (spec 4.12, 4.13); V3 replaces them."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def upload_image(
        self, image: Upload | UploadSource, service_name: str, *, timeout: TimeoutArg = None
    ) -> V1Upload:
        """Upload one image for a V1 service (``service-ai-virtual-staging`` style name)."""
        require_text(service_name, "service_name")
        form = await build_form(
            [("service_name", service_name)],
            [("image", to_upload(image))],
            max_bytes=self._core.max_upload_bytes,
        )
        request = Request(
            method="POST", url=self._core.fixed_url("v1", "order", "image"), form=form
        )
        return await self._core.send(
            request, model_decoder(self._core.converter, V1Upload), timeout
        )

    async def submit_order(
        self,
        order_id: str,
        *,
        space_name: str | None = None,
        selected_widgets: Sequence[Mapping[str, str]] | None = None,
        service_name: str | None = None,
        widget_ids: Sequence[int] | None = None,
        timeout: TimeoutArg = None,
    ) -> V1Submitted:
        """Submit a V1 order in one of its two documented shapes:

        * ``space_name`` + ``selected_widgets`` (``[{"id": ..., "item_id": ...}]``), or
        * ``service_name`` + ``widget_ids`` (integers), as on the migration page.
        """
        body = _v1_submit_body(
            order_id,
            space_name=space_name,
            selected_widgets=selected_widgets,
            service_name=service_name,
            widget_ids=widget_ids,
        )
        converter = self._core.converter

        def decode(value: Any) -> V1Submitted:
            if value is None:
                return V1Submitted(order_id=order_id)
            return model_decoder(converter, V1Submitted)(value)

        request = Request(method="POST", url=self._core.url("v1", "order"), json=body)
        return await self._core.send(request, decode, timeout)


def _v1_submit_body(
    order_id: str,
    *,
    space_name: str | None,
    selected_widgets: Sequence[Mapping[str, str]] | None,
    service_name: str | None,
    widget_ids: Sequence[int] | None,
) -> dict[str, Any]:
    require_text(order_id, "order_id")
    staging = space_name is not None or selected_widgets is not None
    migration = service_name is not None or widget_ids is not None
    shapes = "give either space_name and selected_widgets, or service_name and widget_ids"
    if staging and migration:
        raise ValidationError(f"the two V1 body shapes cannot be mixed: {shapes}")
    if not staging and not migration:
        raise ValidationError(f"nothing to submit: {shapes}")
    if staging:
        if space_name is None or selected_widgets is None:
            raise ValidationError(
                "space_name and selected_widgets go together (the style widget is mandatory)"
            )
        require_text(space_name, "space_name")
        if isinstance(selected_widgets, Mapping | str) or not isinstance(
            selected_widgets, Sequence
        ):
            raise ValidationError("selected_widgets must be a list of {'id': ..., 'item_id': ...}")
        widgets: list[dict[str, str]] = []
        for index, widget in enumerate(selected_widgets):
            if (
                not isinstance(widget, Mapping)
                or set(widget) != {"id", "item_id"}
                or not all(isinstance(widget[key], str) and widget[key] for key in widget)
            ):
                raise ValidationError(
                    f"selected_widgets[{index}] must be {{'id': <widget id>, 'item_id': <item id>}}"
                    f", not {widget!r}"
                )
            widgets.append({"id": widget["id"], "item_id": widget["item_id"]})
        return {"order_id": order_id, "space_name": space_name, "selected_widgets": widgets}
    if service_name is None or widget_ids is None:
        raise ValidationError("service_name and widget_ids go together")
    require_text(service_name, "service_name")
    if (
        isinstance(widget_ids, str)
        or not isinstance(widget_ids, Sequence)
        or not all(is_int(i) for i in widget_ids)
    ):
        raise ValidationError(f"widget_ids must be a list of ints, not {widget_ids!r}")
    return {"order_id": order_id, "service_name": service_name, "widget_ids": list(widget_ids)}
