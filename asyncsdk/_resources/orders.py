"""Orders: the uploaded input images (spec 4.5 to 4.7)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Callable, Mapping
from typing import Any, BinaryIO, cast

from asyncsdk._checks import require_text
from asyncsdk._errors import ValidationError
from asyncsdk._masks import ImageSource, readable_photo, ready_mask
from asyncsdk._models import AssetRole, CreatedOrder, Order
from asyncsdk._protocol.requests import Request
from asyncsdk._protocol.responses import describe_shape, model_decoder
from asyncsdk._resources.core import Core, TimeoutArg
from asyncsdk._uploads import (
    Upload,
    UploadSource,
    build_form,
    check_roles,
    source_kind,
    to_upload,
    upload_too_large,
)

__all__ = ["Orders"]


class Orders:
    """Orders: the uploaded input images (spec 4.5 to 4.7), as ``client.orders``.

    Reached through a :class:`~asyncsdk.Client`, which builds it; not made directly.
    """

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
        ``primary_angle``.  Roles are checked before anything is sent: exactly one
        ``primary_angle``, at most one ``secondary_angle``, and no role but those and ``mask``
        (a :class:`~asyncsdk.ValidationError` names the allowed ones); so are formats and sizes.
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
        url, route = self._core.fixed("v3", "order")
        request = Request(
            method="POST",
            url=url,
            route=route,
            form=form,
        )
        return await self._core.send(
            request, model_decoder(self._core.converter, CreatedOrder), timeout
        )

    async def append_mask(
        self,
        order_id: str,
        mask: Upload | UploadSource,
        *,
        project_id: str | None = None,
        check: bool = True,
        timeout: TimeoutArg = None,
    ) -> CreatedOrder:
        """Add a mask image to an order (blue ``#7878CD`` removes, black keeps).

        ``check=True`` (default) applies the checks of
        :meth:`~asyncsdk.Client.run_mask_removal` before anything is sent:
        :func:`~asyncsdk.check_mask` (a white or empty mask raises :class:`~asyncsdk.MaskError`)
        and the file's format.  They
        need Pillow (``asyncsdk[images]``); a mask given as a file object or stream is read into
        memory for them (a mask is small).  ``check=False`` sends any source as it is.
        """
        require_text(order_id, "order_id")
        upload = to_upload(mask)
        if check:
            data = await _read_mask(upload.source, self._core.max_upload_bytes)
            upload = await asyncio.to_thread(
                ready_mask, data, None, rectangles=(), polygons=(), convert_white=False, check=True
            )
        fields = (
            [] if project_id is None else [("project_id", require_text(project_id, "project_id"))]
        )
        fields += [("asset_role", AssetRole.MASK), ("asset_type", AssetRole.MASK)]
        form = await build_form(
            fields, [("asset_file", upload)], max_bytes=self._core.max_upload_bytes
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

    async def process_ids(
        self, order_id: str, *, tool: str, timeout: TimeoutArg = None
    ) -> tuple[str, ...]:
        """The ids of the processes of ``tool`` (its slug) the order lists, in the order's order.

        What a run adopts when it may have asked for its process before without learning its id
        (a crash, a lost answer): an order made for that run alone lists only what the run
        created, so these are its own, already paid for.
        """
        require_text(tool, "tool")
        order = await self.get(order_id, timeout=timeout)
        return tuple(process.id for process in order.processes if process.tool == tool)


async def _read_mask(source: UploadSource, max_bytes: int) -> ImageSource:
    """The mask as a path or bytes, for the checks: a file object or stream is read whole."""
    photo = readable_photo(source)
    if photo is not None:
        return photo
    kind = source_kind(source)
    if kind == "file":
        file = cast(BinaryIO, source)
        data = await asyncio.to_thread(file.read, max_bytes + 1)
    elif kind == "stream":
        chunks = bytearray()
        async for chunk in cast(AsyncIterable[bytes], source):
            chunks += chunk
            if len(chunks) > max_bytes:
                break
        data = bytes(chunks)
    else:
        raise ValidationError(
            f"the mask must be a path, bytes, a binary file or an async iterator of bytes, not "
            f"{type(source).__name__}"
        )
    if not isinstance(data, bytes) or len(data) > max_bytes:
        raise upload_too_large("the mask", max_bytes)
    return data
