"""The client: settings, the resources hanging off it, and ``run()``.

Settings come from arguments, else from the environment (``ASYNCSDK_API_KEY``,
``ASYNCSDK_BASE_URL``, ``ASYNCSDK_APP_URL``).  The API key is held by an object whose repr is
masked; it goes into the ``x-api-key`` header and nowhere else (not into URLs, logs, reprs or
errors).

Every process request is checked against the tool catalogue (``client.catalogue``, fetched on
first use and kept ``catalogue_ttl`` seconds) before it is sent; ``validate=False`` turns that off
for the client or for one call.  The one-call flows (``run()``, ``run_mask_removal()``) check
everything they can before the first upload, so a wrong request costs neither an upload nor a
paid process.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Final, Self

import aiohttp
from yarl import URL

from asyncsdk._catalogue import CatalogueCache, PreparedProcess, WidgetsArg
from asyncsdk._checks import require_text
from asyncsdk._downloads import DownloadTarget, check_result_url, write_chunks
from asyncsdk._errors import APIDecodeError, ConfigurationError, NotFoundError, ValidationError
from asyncsdk._limits import GenerationLimit
from asyncsdk._masks import (
    ImageSource,
    Point,
    Rectangle,
    check_mask,
    convert_white_mask,
    mask_from_shapes,
)
from asyncsdk._models import Asset, AssetRole, CreatedProcesses, Process, ResultAsset, ToolSlug
from asyncsdk._protocol.convert import make_converter
from asyncsdk._protocol.retry import RetryPolicy
from asyncsdk._resources import V1, Core, Orders, Processes, Projects, Tools, check_widgets_arg
from asyncsdk._settings import DEFAULT_TIMEOUT, ApiKey, ClientSettings, Timeout
from asyncsdk._transport import Transport
from asyncsdk._uploads import (
    MAX_UPLOAD_BYTES,
    Upload,
    UploadSource,
    check_roles,
    sniff_image_type,
    to_upload,
)
from asyncsdk._waiter import ResultWaiter

__all__ = ["Client"]


class Client:
    """The asyncio client of the service.

    ::

        async with Client() as client:          # key and address from the environment
            project = await client.projects.create("12 Oak Street")
            process = await client.run(ToolSlug.VIRTUAL_STAGING, "room.jpg", widgets=[...])

    ``session``: an ``aiohttp.ClientSession`` of your own, used as it is and never closed by the
    client.  Without one the client creates its own inside the running loop and closes it on
    ``close()`` / leaving ``async with``.  After that every call raises ``ConfigurationError``.

    ``timeout`` applies to each HTTP attempt (a number sets ``total`` only); every method also takes
    ``timeout=`` for one call.  Retries: see :class:`~asyncsdk.RetryPolicy`; ``max_retries`` and the
    backoff arguments tune it.  ``max_in_flight`` caps concurrent requests (extra calls queue).
    ``generation_limit`` paces process creation on the client side.  ``role_field`` picks the form
    field of upload roles (``asset_role`` repeated, or ``asset_roles``).  ``strict`` makes decoding
    reject unknown fields (for tests against recorded answers).

    ``validate`` (default on) checks every process request against the tool catalogue before it
    is sent; each call may override it with ``validate=``.  ``client.catalogue`` is the
    :class:`~asyncsdk.CatalogueCache` it uses: fetched on first use, shared by concurrent calls,
    refreshed after ``catalogue_ttl`` seconds (``client.catalogue.invalidate()`` forgets it).

    ``max_upload_bytes`` is the size limit per uploaded file (default ``MAX_UPLOAD_BYTES``, the
    service's 50 MB), checked before anything is sent and while a stream is read; raise it only
    for a deployment of the service that accepts larger files.
    """

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
        generation_limit: GenerationLimit | None = None,
        role_field: str = "asset_role",
        min_poll_interval: float = 5.0,
        strict: bool = False,
        backoff_initial: float = 0.5,
        backoff_max: float = 8.0,
        max_retry_after: float = 60.0,
        validate: bool = True,
        catalogue_ttl: float = 300.0,
        max_upload_bytes: int = MAX_UPLOAD_BYTES,
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
        if generation_limit is not None and not isinstance(generation_limit, GenerationLimit):
            raise ConfigurationError(
                "generation_limit must be a GenerationLimit(max_calls=..., period=...)"
            )
        self._transport = Transport(
            api_key=self.settings.api_key,
            session=session,
            timeout=self.settings.timeout,
            retry=self.settings.retry,
            max_in_flight=self.settings.max_in_flight,
        )
        core = Core(
            transport=self._transport,
            converter=make_converter(strict=self.settings.strict),
            base_url=self.settings.base_url,
            app_url=self.settings.app_url,
            role_field=self.settings.role_field,
            min_poll_interval=self.settings.min_poll_interval,
            generation_limit=generation_limit,
            max_upload_bytes=self.settings.max_upload_bytes,
        )
        self.projects = Projects(core)
        self.orders = Orders(core)
        self.tools = Tools(core)
        self.catalogue = CatalogueCache(
            self.tools.list, self.tools.widgets, ttl=self.settings.catalogue_ttl
        )
        self.processes = Processes(core, catalogue=self.catalogue, validate=self.settings.validate)
        self.v1 = V1(core)

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
        return self._transport.closed

    async def close(self) -> None:
        """Close the client's own session (never one passed in).  Safe to call twice."""
        await self._transport.close()

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
    ) -> int:
        """Stream a result image to ``target`` (a path, or a binary file opened for writing).

        ``asset`` is a ``ResultAsset`` (its ``src``, or ``thumbnail_src`` with ``thumbnail=True``)
        or a URL.  Only http(s) URLs are fetched and the API key is never sent with them; the body
        goes to disk chunk by chunk, and a path appears only once the file is complete.  Returns
        the number of bytes written.  Not retried: call again on ``APIConnectionError``.
        """
        if isinstance(asset, ResultAsset):
            url = asset.thumbnail_src if thumbnail else asset.src
            if not url:
                which = "thumbnail_src" if thumbnail else "src"
                raise ValidationError(f"result asset {asset.asset_id!r} has no {which} URL")
        else:
            url = asset
        checked = check_result_url(url)
        limits = self.settings.timeout.with_total(timeout)
        return await self._transport.download(
            checked, lambda chunks: write_chunks(chunks, target), timeout=limits
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
    ) -> Process:
        """Upload ``images`` as an order, run ``tool`` on them and wait for the result.

        A single image fills the tool's one slot ``<tool>-input-image``.  Tools with several slots
        need ``asset_map``; its keys are slot names (full, or short: ``image``, ``before``,
        ``after``) and its values indexes into ``images`` (or existing asset ids).  ``widgets``
        takes any form :meth:`Processes.create` takes, e.g. ``{"space": "bedroom", "style":
        "modern"}``.

        The request is checked against the catalogue (unless ``validate=False``) before anything
        is uploaded, so a wrong tool, widget or item costs neither an upload nor a process.
        ``timeout`` bounds the wait for the result.  A failed process is returned with status
        ``failed``; it is not raised.  When one request creates several processes, the first is
        the one waited for.
        """
        require_text(tool, "tool")
        if not images:
            raise ValidationError("run() needs at least one image")
        if asset_map is None and tool.strip() == ToolSlug.ITEM_REMOVAL_MASK:
            raise ValidationError(
                f"{tool} needs a photo and a mask appended to its order: use "
                "client.run_mask_removal(image, mask=...) instead"
            )
        if asset_map is None and len(images) != 1:
            raise ValidationError(
                f"{tool} was given {len(images)} images: pass asset_map to say which image fills "
                f"which input slot, e.g. {{'{tool}-input-image': 0}}"
            )
        uploads = [to_upload(image) for image in images]
        check_roles(uploads)
        # Placeholder asset ids (the image indexes) let the request be checked before uploading.
        placeholders = {str(index) for index in range(len(uploads))}
        inputs: Mapping[str, str] | str
        given_ids: set[str] = set()
        if asset_map is None:
            inputs = "0"
        else:
            if not isinstance(asset_map, Mapping) or not asset_map:
                raise ValidationError(
                    f"asset_map must map input slots to indexes into images, e.g. "
                    f"{{'{tool}-input-image': 0}}, not {asset_map!r}"
                )
            slots: dict[str, str] = {}
            for slot, target in asset_map.items():
                if isinstance(target, bool) or not isinstance(target, int | str):
                    raise ValidationError(
                        f"asset_map[{slot!r}] must be an index into images or an asset id"
                    )
                if isinstance(target, int):
                    if not 0 <= target < len(images):
                        raise ValidationError(
                            f"asset_map[{slot!r}] = {target} is not an index of the "
                            f"{len(images)} images"
                        )
                    slots[slot] = str(target)
                    continue
                require_text(target, f"asset_map[{slot!r}]")
                if target in placeholders:
                    raise ValidationError(
                        f"asset_map[{slot!r}] = {target!r} reads as an image index: give the "
                        f"index as the int {int(target)}"
                    )
                given_ids.add(target)
                slots[slot] = target
            inputs = slots
        check_widgets_arg(widgets)
        # Existing asset ids are not in the new order, so the order check is left to the service.
        stand_ins = tuple(
            Asset(id=str(index), asset_role=upload.role) for index, upload in enumerate(uploads)
        )
        prepared = await self.processes.prepare(
            tool,
            widgets=widgets,
            inputs=inputs,
            order_assets=None if given_ids else stand_ins,
            validate=validate,
        )
        order = await self.orders.create(*uploads, project_id=project_id)
        if len(order.assets) < len(uploads):
            raise APIDecodeError(
                f"order {order.order_id} lists {len(order.assets)} assets for "
                f"{len(uploads)} uploaded images"
            )
        ids = {str(index): order.assets[index].id for index in range(len(uploads))}
        ids.update((asset_id, asset_id) for asset_id in given_ids)
        return await self._create_and_wait(
            order.order_id,
            prepared.with_asset_ids(ids),
            None,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )

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
    ) -> Process:
        """Remove the items a mask marks from a photo, in one call (``tool-item-removal-mask``).

        ::

            process = await client.run_mask_removal("room.jpg", mask="mask.png")
            process = await client.run_mask_removal("room.jpg", rectangles=[(40, 60, 200, 310)])

        Steps: the mask is made ready and checked, the request is checked against the catalogue,
        ``image`` is uploaded as a new order (``project_id``: the project to put it in), the mask
        is appended to that order, the process is created with both input slots
        (``tool-item-removal-mask-input-image`` and ``-input-mask``) and waited for.  Nothing is
        uploaded when a check fails.

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

        ``timeout`` bounds the wait.  A failed process is returned with status ``failed``.
        """
        upload = to_upload(image)
        check_roles([upload])
        shapes = list(rectangles), [list(poly) for poly in polygons]
        if mask is not None and (shapes[0] or shapes[1]):
            raise ValidationError(
                "give the mask either as mask=... or as rectangles=/polygons=, not both"
            )
        if mask is None and not (shapes[0] or shapes[1]):
            raise ValidationError(
                "no mask given: pass mask=<path, bytes or PIL image> (blue #7878CD removes, "
                "black keeps) or rectangles=[(x0, y0, x1, y1)] / polygons=[[(x, y), ...]]"
            )
        photo = _readable_photo(upload.source)
        if mask is None and photo is None:
            raise ValidationError(
                "rectangles=/polygons= need the photo's size, which cannot be read from a file "
                "object or stream: pass the photo as a path or bytes, or draw the mask yourself "
                "with mask_from_shapes((width, height), rectangles=...) and pass mask="
            )
        mask_upload = await asyncio.to_thread(
            _ready_mask,
            mask,
            photo,
            rectangles=shapes[0],
            polygons=shapes[1],
            convert_white=convert_white,
            check=check,
        )
        tool = ToolSlug.ITEM_REMOVAL_MASK
        prepared = await self.processes.prepare(
            tool,
            inputs={"image": "0", "mask": "1"},
            order_assets=(
                Asset(id="0", asset_role=upload.role),
                Asset(id="1", asset_role=AssetRole.MASK, asset_type=AssetRole.MASK),
            ),
            validate=validate,
        )
        group_id = await self._removal_group(after_auto_removal)
        order = await self.orders.create(upload, project_id=project_id)
        if not order.assets:
            raise APIDecodeError(f"order {order.order_id} lists no asset for the uploaded photo")
        appended = await self.orders.append_mask(order.order_id, mask_upload, project_id=project_id)
        mask_id = await self._mask_id(order.order_id, order.assets[0].id, appended.assets)
        return await self._create_and_wait(
            order.order_id,
            prepared.with_asset_ids({"0": order.assets[0].id, "1": mask_id}),
            group_id,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )

    async def _removal_group(self, after: str | CreatedProcesses | Process | None) -> str | None:
        """The ``process_group_id`` of a preceding automatic removal, or ``None``."""
        if after is None:
            return None
        if isinstance(after, CreatedProcesses | Process):
            if not after.process_group_id:
                raise ValidationError(
                    f"after_auto_removal={after!r} carries no process_group_id: pass the group "
                    "id the service returned when the automatic removal was created"
                )
            return after.process_group_id
        require_text(after, "after_auto_removal")
        try:
            process = await self.processes.get(after)
        except NotFoundError:
            return after  # not a process id: the group id itself, checked by the service
        if process.tool not in (ToolSlug.ITEM_REMOVAL, ToolSlug.ITEM_REMOVAL_MASK):
            raise ValidationError(
                f"after_auto_removal={after!r} is a {process.tool} process; give the process "
                f"or group id of a {ToolSlug.ITEM_REMOVAL} run"
            )
        if not process.process_group_id:
            raise ValidationError(
                f"process {after} carries no process_group_id: pass the group id the service "
                "returned when it was created (CreatedProcesses.process_group_id)"
            )
        return process.process_group_id

    async def _mask_id(self, order_id: str, photo_id: str, appended: Sequence[Asset]) -> str:
        """The id of the mask just appended: from the append answer, else from the order."""
        masks = [a for a in appended if a.asset_role == AssetRole.MASK and a.id != photo_id]
        if not masks and len(appended) == 1 and appended[0].id != photo_id:
            masks = list(appended)
        if not masks:
            entries = (await self.orders.get(order_id)).entry_assets
            masks = [a for a in entries if a.asset_role == AssetRole.MASK]
        if not masks:
            raise APIDecodeError(f"the mask appended to order {order_id} is not in the order")
        return masks[-1].id

    async def _create_and_wait(
        self,
        order_id: str,
        prepared: PreparedProcess,
        process_group_id: str | None,
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> Process:
        created = await self.processes._send(order_id, prepared, process_group_id, None)
        if not created.process_ids:
            raise APIDecodeError(
                f"creating a {prepared.tool} process on order {order_id} returned no id"
            )
        return await self.processes.wait(
            created.process_ids[0],
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )


_MASK_EXTENSIONS: Final = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp"}


def _readable_photo(source: UploadSource) -> ImageSource | None:
    """The photo as Pillow can read it without consuming an upload: a path or bytes."""
    if isinstance(source, str | os.PathLike):
        return source
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    return None


def _is_pil_image(value: object) -> bool:
    """True for a PIL image, without importing Pillow when it is not loaded already."""
    module = sys.modules.get("PIL.Image")
    return module is not None and isinstance(value, module.Image)


def _ready_mask(
    mask: ImageSource | None,
    photo: ImageSource | None,
    *,
    rectangles: Sequence[Rectangle],
    polygons: Sequence[Sequence[Point]],
    convert_white: bool,
    check: bool,
) -> Upload:
    """Draw, convert and check the mask (blocking Pillow work); the upload to append."""
    data: ImageSource
    if mask is None:
        assert photo is not None  # checked by the caller
        data = mask_from_shapes(photo, rectangles=rectangles, polygons=polygons)
    elif convert_white:
        data = convert_white_mask(mask)
    else:
        data = mask
    if check:
        check_mask(data, photo)
    if _is_pil_image(data):
        buffer = io.BytesIO()
        data.save(buffer, format="PNG")  # type: ignore[union-attr]  # a PIL image here
        data = buffer.getvalue()
    elif isinstance(data, str | os.PathLike):
        # A mask is small: read it here, so that a file the service would refuse is caught
        # before the photo is uploaded.
        try:
            with open(data, "rb") as file:
                data = file.read()
        except OSError as exc:
            raise ValidationError(
                f"cannot read the mask file {os.fsdecode(data)!r}: {exc}"
            ) from exc
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ValidationError(
            f"the mask must be a path, bytes or a PIL image, not {type(data).__name__}"
        )
    content = bytes(data)
    kind = sniff_image_type(content[:12])
    if kind is None:
        raise ValidationError(
            "the mask is not a PNG, JPEG or WEBP image; save it as PNG (blue #7878CD removes, "
            "black keeps)"
        )
    return Upload(content, role=AssetRole.MASK, filename="mask" + _MASK_EXTENSIONS[kind])
