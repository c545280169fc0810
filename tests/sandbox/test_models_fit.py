"""Every answer of the sandbox decodes into the SDK's models with a strict client (one that
refuses unknown fields, as for recorded answers of the live API)."""

from __future__ import annotations

import attrs

from asyncsdk import ProcessCompleted, ResultAsset, Upload, structure
from asyncsdk.sandbox import Sandbox

from .conftest import Flow, gradient_jpeg, image_bytes
from .test_webhooks import Receiver


async def test_answers_fit_the_models(sandbox: Sandbox) -> None:
    async with sandbox.client(strict=True) as client:
        project = await client.projects.create("A")
        created = await client.orders.create(gradient_jpeg(), project_id=project.id)
        await client.orders.append_mask(
            created.order_id, Upload(image_bytes("PNG"), filename="m.png")
        )
        tool = "tool-item-removal"
        procs = await client.processes.create(
            created.order_id, tool, {f"{tool}-input-image": created.assets[0].id}
        )
        await sandbox.wait_idle()
        process = await client.processes.get(procs.process_ids[0])
        assert process.final_assets[0].src
        order = await client.orders.get(created.order_id)
        assert order.processes[0].id == process.id
        projects = await client.projects.list()
        assert project.id in [p.id for p in projects.data]
        orders = await client.projects.orders(project.id)
        assert [o.id for o in orders.data] == [created.order_id]
        assert await client.tools.list()
        for slug in ("tool-image-enhancement", "tool-virtual-staging", "tool-day-to-dusk"):
            assert await client.tools.widgets(slug)
        upload = await client.v1.upload_image(gradient_jpeg(), "service-ai-virtual-staging")
        # Decoding is the check: the strict client raises APIDecodeError on a field it does not
        # know.  The legacy submit's answer may be empty (the spec shows no body).
        await client.v1.submit_order(
            upload.order_id, service_name="service-ai-virtual-staging", widget_ids=[4]
        )


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
    parsed = structure(event, ProcessCompleted)
    assert parsed.process_id == pid
    assert "token=" in parsed.final_assets[0].src
    # Every field of the payload has its place in the model (the webhook spells src temp_src).
    assert set(event) <= {field.name for field in attrs.fields(ProcessCompleted)}
    webhook_spelling = {"temp_src", "temp_thumbnail_src"}
    for asset in event["final_assets"]:
        assert set(asset) <= {field.name for field in attrs.fields(ResultAsset)} | webhook_spelling
