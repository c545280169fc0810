"""The client: its construction, the resources hanging off it, downloads, and closing.

Settings are resolved in ``_settings.py`` (arguments first, then the environment); the API key is
held by an object whose repr is masked.  ``run()`` and ``run_mask_removal()`` are carried out in
``_flows.py``.

Every process request is checked against the tool catalogue (``client.catalogue``, fetched on
first use and kept ``catalogue_ttl`` seconds) before it is sent; ``validate=False`` turns that off
for the client or for one call.  The one-call flows (``run()``, ``run_mask_removal()``) check
everything they can before the first upload, so a wrong request costs neither an upload nor a
paid process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Literal, Self

import aiohttp
import attrs
from yarl import URL

from asyncsdk._catalogue import CatalogueCache, WidgetsArg
from asyncsdk._checks import require_text
from asyncsdk._downloads import (
    DEFAULT_MAX_DOWNLOAD_BYTES,
    DownloadTarget,
    check_allowed_hosts,
    check_max_bytes,
    check_result_url,
    result_url,
    write_chunks,
)
from asyncsdk._errors import ConfigurationError, ValidationError
from asyncsdk._flows import Flows
from asyncsdk._journal import Journal, RunEntry, SQLiteJournal
from asyncsdk._keyed import KeyedRuns, RunSteps
from asyncsdk._limits import GenerationLimit, client_generation_limit
from asyncsdk._masks import ImageSource, Point, Rectangle
from asyncsdk._models import CreatedProcesses, Process, ResultAsset
from asyncsdk._protocol.convert import make_converter
from asyncsdk._protocol.retry import RetryPolicy
from asyncsdk._resources import V1, Core, Orders, Processes, Projects, ResultWaiter, Tools
from asyncsdk._settings import DEFAULT_TIMEOUT, ApiKey, ClientSettings, Timeout
from asyncsdk._telemetry import ClientTelemetry, client_telemetry
from asyncsdk._transport import Transport
from asyncsdk._uploads import MAX_UPLOAD_BYTES, Upload, UploadSource

__all__ = ["Client"]


def _client_journal(
    journal: Journal | str | os.PathLike[str] | None,
) -> tuple[Journal | None, bool]:
    """The client's journal, and whether the client opened it (and so closes it)."""
    if journal is None:
        return None, False
    if isinstance(journal, str | os.PathLike):
        if not str(journal).strip():
            raise ConfigurationError(
                "journal= must be the path of a file, e.g. journal='runs.sqlite3', or a journal "
                "object"
            )
        return SQLiteJournal(journal), True
    return journal, False


class Client:
    """The asyncio client of the service.

    ::

        async with Client() as client:          # key and address from the environment
            project = await client.projects.create("12 Oak Street")
            process = await client.run(ToolSlug.VIRTUAL_STAGING, "room.jpg", widgets=[...])

    ``session``: an ``aiohttp.ClientSession`` of your own, used as it is and never closed by the
    client.  Without one the client creates its own inside the running loop and closes it on
    ``close()`` / leaving ``async with``.  After that every call raises ``ConfigurationError``.

    ``timeout=`` has one meaning everywhere: the seconds the SDK waits for the service to answer
    what the call asks, without counting time queued in the client (for an in-flight slot or a
    place in the generation window).  For a request that is each HTTP attempt: here and in
    :meth:`with_options`, the default of every request (a number sets ``Timeout.total``, a
    :class:`~asyncsdk.Timeout` also bounds connecting); each request method takes ``timeout=`` for
    one call.  For :meth:`run`, :meth:`run_mask_removal` and :meth:`~asyncsdk.Processes.wait`, what
    is asked is the finished process: ``timeout=`` bounds that wait (default 600 s) and raises
    :class:`~asyncsdk.WaitTimeoutError`.  Retries: see :class:`~asyncsdk.RetryPolicy`;
    ``max_retries`` and the backoff arguments tune it.  ``max_in_flight`` caps concurrent requests
    (extra calls queue).  ``role_field`` picks the form field of upload roles (``asset_role``
    repeated, or ``asset_roles``).  ``strict`` makes decoding reject unknown fields (for tests
    against recorded answers).

    ``generation_limit`` paces process creation: by default a :class:`~asyncsdk.GenerationLimit`
    of the client's own (10 per 600 s, the service's limit), so concurrent :meth:`run` calls queue
    for a place, taken before their uploads, instead of failing with
    :class:`~asyncsdk.RateLimitError`.  Pass one ``GenerationLimit`` to several clients of one
    account to share it; ``generation_limit=None`` turns pacing off (then a 429 of the generation
    limit raises ``RateLimitError`` at once, with ``retry_after``).

    The client belongs to one event loop: create it inside the coroutine that uses it (one client
    per ``asyncio.run()``) and use it with ``async with``.  :meth:`with_options` gives a copy with
    other timeouts or retries that shares the session, the limits and the catalogue.

    ``validate`` (default on) checks every process request against the tool catalogue before it
    is sent; each call may override it with ``validate=``.  ``client.catalogue`` is the
    :class:`~asyncsdk.CatalogueCache` it uses: fetched on first use, shared by concurrent calls,
    refreshed after ``catalogue_ttl`` seconds (``client.catalogue.invalidate()`` forgets it).

    ``max_upload_bytes`` is the size limit per uploaded file (default ``MAX_UPLOAD_BYTES``, the
    service's 50 MB), checked before anything is sent, again when a path is sent (a file that
    grew since, before the first attempt or a retry, is not sent) and while a stream is read;
    raise it only for a deployment of the service that accepts larger files.

    ``telemetry``: a :class:`~asyncsdk.ClientTelemetry` for Prometheus metrics and OpenTelemetry
    spans of every request (none by default).

    ``journal``: where keyed runs (``run(..., key=...)``) record their steps, so that a key is
    created at most once across crashes and restarts: a path (``journal="runs.sqlite3"``, an
    :class:`~asyncsdk.SQLiteJournal` the client opens and closes) or a journal object of your own
    (a :class:`~asyncsdk.PostgresJournal` or :class:`~asyncsdk.RedisJournal` shared by several
    nodes), never closed by the client.
    ``client.journal`` is it (``None`` without one); see :meth:`resume`.
    """

    settings: ClientSettings
    """The settings in force: arguments first, then the environment, then the defaults."""
    generation_limit: GenerationLimit | None
    """The pace of process creation (``None``: no pacing); see ``generation_limit`` above."""
    projects: Projects
    """Projects, one per property: :class:`~asyncsdk.Projects`."""
    orders: Orders
    """Orders, the uploaded photos: :class:`~asyncsdk.Orders`."""
    processes: Processes
    """Processes, created, fetched and waited for: :class:`~asyncsdk.Processes`."""
    tools: Tools
    """The tools and their widgets, asked of the service: :class:`~asyncsdk.Tools`."""
    catalogue: CatalogueCache
    """The tools and widgets, kept ``catalogue_ttl`` s: :class:`~asyncsdk.CatalogueCache`."""
    v1: V1
    """The legacy V1 endpoints: :class:`~asyncsdk.V1`."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | URL | None = None,
        app_url: str | URL | None = None,
        session: aiohttp.ClientSession | None = None,
        timeout: Timeout | float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        max_in_flight: int = 64,
        generation_limit: GenerationLimit | Literal["default"] | None = "default",
        role_field: str = "asset_role",
        min_poll_interval: float = 5.0,
        strict: bool = False,
        backoff_initial: float = 0.5,
        backoff_max: float = 8.0,
        max_retry_after: float = 60.0,
        validate: bool = True,
        catalogue_ttl: float = 300.0,
        max_upload_bytes: int = MAX_UPLOAD_BYTES,
        telemetry: ClientTelemetry | None = None,
        journal: Journal | str | os.PathLike[str] | None = None,
    ) -> None:
        # Mask the key before anything can raise: a traceback rendered with the locals of each
        # frame (capture_locals, error trackers) would otherwise show it, and os.environ too.
        masked = ApiKey(api_key) if isinstance(api_key, str) else api_key
        del api_key  # from here on only the masked holder has it
        try:
            retry = RetryPolicy(
                max_retries=max_retries,
                backoff_initial=backoff_initial,
                backoff_max=backoff_max,
                max_retry_after=max_retry_after,
            )
            self.settings = ClientSettings.resolve(
                api_key=masked,
                base_url=base_url,
                app_url=app_url,
                timeout=timeout,
                retry=retry,
                max_in_flight=max_in_flight,
                role_field=role_field,
                min_poll_interval=min_poll_interval,
                strict=strict,
                validate=validate,
                catalogue_ttl=catalogue_ttl,
                max_upload_bytes=max_upload_bytes,
            )
        except ConfigurationError as exc:
            raise exc.with_traceback(None) from None  # the frames of resolve() hold the key
        if session is not None and not isinstance(session, aiohttp.ClientSession):
            raise ConfigurationError(
                f"session must be an aiohttp.ClientSession, not {type(session).__name__}"
            )
        generation_limit = client_generation_limit(generation_limit)
        self._transport = Transport(
            telemetry=client_telemetry(telemetry),
            api_key=self.settings.api_key,
            session=session,
            timeout=self.settings.timeout,
            retry=self.settings.retry,
            max_in_flight=self.settings.max_in_flight,
            min_poll_interval=self.settings.min_poll_interval,
        )
        self.generation_limit = generation_limit
        self.journal, self._own_journal = _client_journal(journal)
        self._assemble(self.settings, None)

    def _assemble(self, settings: ClientSettings, catalogue: CatalogueCache | None) -> None:
        """The resources over the transport, with ``settings``' timeout and retries."""
        core = Core(
            transport=self._transport,
            converter=make_converter(strict=settings.strict),
            base_url=settings.base_url,
            app_url=settings.app_url,
            role_field=settings.role_field,
            min_poll_interval=settings.min_poll_interval,
            generation_limit=self.generation_limit,
            max_upload_bytes=settings.max_upload_bytes,
            timeout=settings.timeout,
            retry=settings.retry,
        )
        self.settings = settings
        self.projects = Projects(core)
        self.orders = Orders(core)
        self.tools = Tools(core)
        self.catalogue = catalogue or CatalogueCache(
            self.tools.list, self.tools.widgets, ttl=settings.catalogue_ttl
        )
        self.processes = Processes(
            core, orders=self.orders, catalogue=self.catalogue, validate=settings.validate
        )
        self.v1 = V1(core)
        self._converter = core.converter
        keyed = None
        if self.journal is not None:
            keyed = KeyedRuns(self.journal, self.processes, core.converter)
        self._flows = Flows(self.processes, self.orders, core.generations, keyed)

    def with_options(
        self, *, timeout: Timeout | float | None = None, max_retries: int | None = None
    ) -> Client:
        """A lightweight copy of this client with another ``timeout`` and/or ``max_retries``.

        ::

            order = await client.with_options(timeout=5, max_retries=0).orders.get(order_id)

        The copy shares this client's session, in-flight limit, poll floor, generation limit and
        catalogue, so making one costs no connection; closing either closes both (close the
        client you created).  ``timeout`` means what it means for ``Client`` (each attempt; a
        number sets ``total``); options left out keep this client's values.
        """
        settings = self.settings
        if timeout is not None:
            settings = attrs.evolve(settings, timeout=settings.timeout.with_total(timeout))
        if max_retries is not None:
            retry = attrs.evolve(settings.retry, max_retries=max_retries)
            settings = attrs.evolve(settings, retry=retry)
        copy = Client.__new__(Client)
        copy._transport = self._transport
        copy.generation_limit = self.generation_limit
        copy.journal, copy._own_journal = self.journal, self._own_journal
        copy._assemble(settings, self.catalogue)
        return copy

    def __repr__(self) -> str:
        if "_transport" not in vars(self):
            # __init__ raised (a bad setting): tracebacks rendered with their locals repr it.
            return "<Client (not configured)>"
        state = "closed" if self._transport.closed else "open"
        return (
            f"<Client base_url={str(self.settings.base_url)!r} "
            f"app_url={str(self.settings.app_url)!r} api_key=<hidden> {state}>"
        )

    @property
    def closed(self) -> bool:
        """Whether the client is closed: every call then raises ``ConfigurationError``."""
        return self._transport.closed

    async def close(self) -> None:
        """Close the client's own session (never one passed in), and the journal it opened from
        a path (never a journal object passed in).  Safe to call twice."""
        await self._transport.close()
        if self._own_journal and self.journal is not None:
            await self.journal.close()

    def __enter__(self) -> None:
        raise ConfigurationError(
            "Client is asynchronous: use `async with asyncsdk.Client() as client:` inside a "
            "coroutine (run it with asyncio.run(main()))"
        )

    def __exit__(self, *exc_info: object) -> None:
        """Never reached: :meth:`__enter__` raises."""

    async def __aenter__(self) -> Self:
        if self._transport.closed:
            raise ConfigurationError("client is closed; create a new Client")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def download(
        self,
        asset: ResultAsset | str,
        target: DownloadTarget,
        *,
        thumbnail: bool = False,
        timeout: Timeout | float | None = None,
        max_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES,
        allowed_hosts: Collection[str] | None = None,
    ) -> int:
        """Stream a result image to ``target`` (a path, or a binary file opened for writing).

        ``asset`` is a ``ResultAsset`` (its ``src``, or ``thumbnail_src`` with ``thumbnail=True``)
        or a URL.  Only http(s) URLs are fetched and the API key is never sent with them; the body
        goes to disk chunk by chunk, and a path appears only once the file is complete.  Returns
        the number of bytes written.  Not retried: call again on ``APIConnectionError``.

        ``max_bytes`` (100 MiB by default, far above the service's largest image): a larger
        ``Content-Length`` is refused before reading, and the stream is cut once it passes the
        limit, with ``ResultTooLargeError``; a path target is then removed (a file object keeps
        what was written).  ``allowed_hosts``: host names the result and every redirect must be
        on (``".example.com"`` allows its subdomains), refused with ``ValidationError`` otherwise;
        set it when result URLs may come from someone other than the API (a webhook body
        without fetch-back) so that they cannot point the download at a private address.
        """
        hosts = check_allowed_hosts(allowed_hosts)
        checked = check_result_url(result_url(asset, thumbnail=thumbnail), hosts)
        limits = self.settings.timeout.with_total(timeout)
        return await self._transport.download(
            checked,
            lambda chunks: write_chunks(chunks, target),
            timeout=limits,
            max_bytes=check_max_bytes(max_bytes),
            check_url=lambda hop: check_result_url(hop, hosts),
        )

    async def run(
        self,
        tool: str,
        *images: Upload | UploadSource,
        asset_map: Mapping[str, str | int] | None = None,
        widgets: WidgetsArg | None = None,
        project_id: str | None = None,
        timeout: float = 600.0,
        registry: ResultWaiter | None = None,
        webhook_grace: float | None = None,
        validate: bool | None = None,
        key: str | None = None,
    ) -> Process:
        """Upload ``images`` as an order, run ``tool`` on them and wait for the result.

        A single image fills the tool's one slot ``<tool>-input-image``.  Tools with several slots
        need ``asset_map``; its keys are slot names (full, or short: ``image``, ``before``,
        ``after``) and its values indexes into ``images`` (or existing asset ids).  ``widgets``
        takes any form :meth:`~asyncsdk.Processes.create` takes, e.g. ``{"space": "bedroom",
        "style": "modern"}``.

        The request is checked against the catalogue (unless ``validate=False``) before anything
        is uploaded, so a wrong tool, widget or item costs neither an upload nor a process.  Then
        the call waits for a place in the client's generation limit (concurrent calls queue, in
        arrival order) and only then uploads.  ``timeout``, ``registry`` and ``webhook_grace``
        are passed to :meth:`~asyncsdk.Processes.wait`, which says what each does (the queue is
        not counted in ``timeout``).  A failed process is
        returned with status ``failed``; it is not raised.  When one request creates several
        processes, the first is the one waited for.

        ``key`` (with the client's ``journal``): the run's idempotency key, e.g.
        ``"listing-42/kitchen"``.  A key is created at most once, ever: called again (in this
        process, after a restart, on another node sharing the journal) it returns the recorded
        process, waits for the run another caller carries on, or carries on a run left behind
        from its last recorded step (the guide "Surviving restarts").  The same key with other
        arguments raises :class:`~asyncsdk.KeyReusedError`.  The images must then be paths or
        bytes (their digest is recorded).
        """
        with self._transport.telemetry.run(tool) as span:
            process = await self._flows.run(
                tool,
                images,
                asset_map=asset_map,
                widgets=widgets,
                project_id=project_id,
                timeout=timeout,
                registry=registry,
                webhook_grace=webhook_grace,
                validate=validate,
                key=key,
            )
            span.completed(process.id, process.status)
        return process

    async def run_mask_removal(
        self,
        image: Upload | UploadSource,
        mask: ImageSource | None = None,
        *,
        rectangles: Iterable[Rectangle] = (),
        polygons: Iterable[Sequence[Point]] = (),
        project_id: str | None = None,
        after_auto_removal: str | CreatedProcesses | Process | None = None,
        convert_white: bool = False,
        check: bool = True,
        validate: bool | None = None,
        timeout: float = 600.0,
        registry: ResultWaiter | None = None,
        webhook_grace: float | None = None,
        key: str | None = None,
    ) -> Process:
        """Remove the items a mask marks from a photo, in one call (``tool-item-removal-mask``).

        ::

            process = await client.run_mask_removal("room.jpg", mask="mask.png")
            process = await client.run_mask_removal("room.jpg", rectangles=[(40, 60, 200, 310)])

        Steps: the mask is made ready and checked, the request is checked against the catalogue,
        ``image`` is uploaded as a new order (``project_id``: the project to put it in), the mask
        is appended to that order, the process is created with both input slots
        (``tool-item-removal-mask-input-image`` and ``-input-mask``) and waited for.  Nothing is
        uploaded when a check fails, nor before the call holds a place in the client's
        generation limit.

        The mask: ``mask=`` a path, the bytes of a PNG/JPEG file, or a PIL image, painted blue
        ``#7878CD`` where items are to be removed and black elsewhere, at the photo's size.  Or
        ``rectangles=[(x0, y0, x1, y1), ...]`` and/or ``polygons=[[(x, y), ...], ...]`` in pixels
        of the photo, drawn into a mask of the photo's size (the photo must then be a path or
        bytes, read with Pillow).  ``convert_white=True`` first turns a white-on-black mask into
        the blue one.  ``check=True`` (default) runs :func:`~asyncsdk.check_mask` on it, with the
        photo when the photo is a path or bytes (sizes must match): a white mask or one of the
        wrong size raises :class:`~asyncsdk.MaskError` instead of running a paid process that
        removes the wrong thing.  The mask helpers need Pillow (``asyncsdk[images]``).

        ``after_auto_removal`` links this process to a preceding automatic removal
        (``tool-item-removal``), sent as ``process_group_id``.  Give the ``CreatedProcesses`` or
        ``Process`` of that run, its process id (fetched once to read its group), or its group id
        (an id that is not a process is taken as the group id and checked by the service).

        ``timeout``, ``registry`` and ``webhook_grace`` are passed to
        :meth:`~asyncsdk.Processes.wait`, which says what each does.  A failed process is
        returned with status ``failed``.
        ``key``: the run's idempotency key, as for :meth:`run` (the photo and the mask are both
        recorded by digest).
        """
        return await self._flows.run_mask_removal(
            image,
            mask,
            rectangles=rectangles,
            polygons=polygons,
            project_id=project_id,
            after_auto_removal=after_auto_removal,
            convert_white=convert_white,
            check=check,
            validate=validate,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
            key=key,
        )

    async def run_steps(
        self,
        key: str,
        arguments: str,
        steps: RunSteps,
        *,
        journal: Journal | None = None,
        timeout: float = 600.0,
        registry: ResultWaiter | None = None,
        webhook_grace: float | None = None,
    ) -> str:
        """A journalled run whose upload and result are the caller's own (``steps``), with the
        step logic of a keyed run: what its ``finished`` step recorded.

        ``arguments``: what the run is asked, as a JSON object (its SHA-256 is compared as for
        :meth:`run`: other arguments for the key raise :class:`~asyncsdk.KeyReusedError`, which
        names the fields that differ).
        ``journal``: where the steps are recorded (default: the client's).  The key is created
        at most once as for :meth:`run`: a finished run returns what ``steps.finish`` recorded,
        a run left at ``creating`` adopts what its order lists.  ``asyncsdk process`` runs each
        photo this way, on a journal of its own (its file in ``--out``).  ``timeout``: how long
        the processes are waited for once created (the upload and ``steps.pace`` are not
        counted), and how long a run another caller carries is waited for; ``registry`` and
        ``webhook_grace`` are those of :meth:`run`.
        """
        require_text(key, "key")
        try:
            is_object = isinstance(json.loads(arguments), dict)
        except (TypeError, ValueError):
            is_object = False
        if not is_object:
            raise ValidationError(
                f"run_steps(arguments={arguments!r}) takes what the run is asked as a JSON "
                'object, e.g. json.dumps({"photo": "room.jpg", "tool": "tool-virtual-staging"})'
            )
        journal = journal if journal is not None else self.journal
        if journal is None:
            raise ConfigurationError(
                f"run_steps(key={key!r}) needs a journal to record the run in: pass journal=, "
                "or create the client with Client(journal='runs.sqlite3')"
            )
        keyed = KeyedRuns(journal, self.processes, self._converter)
        return await keyed.run_steps(
            key,
            arguments,
            steps,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )

    async def resume(
        self,
        run: RunEntry | str,
        *,
        timeout: float = 600.0,
        registry: ResultWaiter | None = None,
        webhook_grace: float | None = None,
    ) -> Process:
        """Carry on a keyed run a stopped process left unfinished, from its last recorded step,
        and return its process.  ``run``: an entry of ``client.journal.unfinished()`` or its key.

        ::

            for run in await client.journal.unfinished():
                if run.resumable:
                    process = await client.resume(run)

        The photos are not needed: a run is resumable once they were uploaded.  A run still at
        ``intent`` paid for nothing; :class:`~asyncsdk.ConfigurationError` says to call
        :meth:`run` again with its key and its photos.  A run another caller is carrying on is
        waited for.  ``timeout``, ``registry`` and ``webhook_grace`` are those of :meth:`run`.
        """
        keyed = self._flows.keyed
        if keyed is None:
            raise ConfigurationError(
                "resume() needs the journal the runs were recorded in: create the client with "
                "Client(journal='runs.sqlite3') (or the PostgresJournal they share)"
            )
        return await keyed.resume(
            run, timeout=timeout, registry=registry, webhook_grace=webhook_grace
        )
