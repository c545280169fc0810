"""Every answer of the sandbox decodes into the SDK's models with the strict converter."""

from __future__ import annotations

from typing import Any

import aiohttp

from asyncsdk._models import (
    CreatedOrder,
    CreatedProcesses,
    Order,
    Pagination,
    Process,
    ProcessCompleted,
    Project,
    Tool,
    V1Submitted,
    V1Upload,
    Widget,
)
from asyncsdk._protocol.convert import make_converter
from asyncsdk.sandbox import Sandbox

from .conftest import Flow, gradient_jpeg, image_bytes, order_form
from .test_webhooks import Receiver


async def test_answers_fit_the_models(
    sandbox: Sandbox, api: aiohttp.ClientSession, flow: Flow
) -> None:
    conv = make_converter(strict=True)

    async def fetch(method: str, path: str, **kwargs: Any) -> Any:
        async with api.request(method, path, **kwargs) as r:
            assert r.status in (200, 201), await r.text()
            return await r.json()

    project = conv.structure(await fetch("POST", "/v3/project", json={"address": "A"}), Project)
    created = conv.structure(
        await fetch("POST", "/v3/order", data=order_form([gradient_jpeg()], project_id=project.id)),
        CreatedOrder,
    )
    form = aiohttp.FormData()
    form.add_field("asset_file", image_bytes("PNG"), filename="m.png")
    form.add_field("asset_role", "mask")
    conv.structure(
        await fetch("POST", f"/v3/order/{created.order_id}/append", data=form), CreatedOrder
    )
    tool = "tool-item-removal"
    procs = conv.structure(
        await fetch(
            "POST",
            "/v3/process",
            json={
                "order_id": created.order_id,
                "tool": tool,
                "asset_map": {f"{tool}-input-image": created.assets[0].id},
            },
        ),
        CreatedProcesses,
    )
    await sandbox.wait_idle()
    process = conv.structure(await fetch("GET", f"/v3/process/{procs.process_ids[0]}"), Process)
    assert process.final_assets[0].src
    order = conv.structure(await fetch("GET", f"/v3/order/{created.order_id}"), Order)
    assert order.processes[0].id == process.id
    listing = await fetch("GET", "/v3/project")
    conv.structure(listing["pagination"], Pagination)
    [conv.structure(p, Project) for p in listing["data"]]
    orders = await fetch("GET", f"/v3/project/{project.id}/order")
    [conv.structure(o, Order) for o in orders["data"]]
    [conv.structure(t, Tool) for t in (await fetch("GET", "/api/tools"))["data"]]
    for slug in ("tool-image-enhancement", "tool-virtual-staging", "tool-day-to-dusk"):
        widgets = await fetch("GET", f"/v1/cathub/tools/{slug}/widgets")
        [conv.structure(w, Widget) for w in widgets["data"]]
    v1 = aiohttp.FormData()
    v1.add_field("image", gradient_jpeg(), filename="r.jpg")
    v1.add_field("service_name", "service-ai-virtual-staging")
    upload = conv.structure(await fetch("POST", "/v1/order/image", data=v1), V1Upload)
    submitted = await fetch(
        "POST",
        "/v1/order",
        json={
            "order_id": upload.order_id,
            "service_name": "service-ai-virtual-staging",
            "widget_ids": [4],
        },
    )
    conv.structure(submitted, V1Submitted)


async def test_webhook_payload_fits_the_event_model(sandbox: Sandbox, flow: Flow) -> None:
    receiver = Receiver()
    await receiver.start()
    try:
        sandbox.register_webhook(receiver.url)
        pid = await flow.process()
        await sandbox.wait_idle()
    finally:
        await receiver.stop()
    [event] = receiver.events
    parsed = make_converter(strict=True).structure(event, ProcessCompleted)
    assert parsed.process_id == pid
    assert "token=" in parsed.final_assets[0].src
