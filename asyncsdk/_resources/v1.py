"""The legacy V1 endpoints (spec 4.12, 4.13) and their request body; V3 replaces them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from asyncsdk._checks import is_int, require_text
from asyncsdk._errors import ValidationError
from asyncsdk._models import V1Submitted, V1Upload
from asyncsdk._protocol.requests import Request
from asyncsdk._protocol.responses import model_decoder
from asyncsdk._resources.core import Core, TimeoutArg
from asyncsdk._uploads import Upload, UploadSource, build_form, to_upload

__all__ = ["V1"]


class V1:
    """The legacy V1 endpoints (spec 4.12, 4.13), as ``client.v1``; V3 replaces them.

    Reached through a :class:`~asyncsdk.Client`, which builds it; not made directly.
    """

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
        url, route = self._core.fixed("v1", "order", "image")
        request = Request(
            method="POST",
            url=url,
            route=route,
            form=form,
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

        It creates a process, so it waits for a place in the client's generation limit and
        handles a 429 as ``client.processes.create()`` does.
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

        # A V1 submit creates a process: it takes a place in the generation limit like one.
        request = Request(
            method="POST", url=self._core.url("v1", "order"), json=body, generation=True
        )
        generations = self._core.generations
        reserved = await generations.reserve()
        return await generations.create(lambda: self._core.send(request, decode, timeout), reserved)


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
