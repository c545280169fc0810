"""Adopting what an order lists instead of paying again: the step keyed runs and ``asyncsdk
process`` share, against the sandbox."""

from __future__ import annotations

from asyncsdk import ToolSlug, Upload
from asyncsdk.samples import path as sample
from asyncsdk.sandbox import Sandbox

STAGING = {"space": "bedroom", "style": "modern"}
ROOM = sample("bedroom-empty.jpg")


async def test_an_order_lists_for_adoption_only_the_processes_of_the_tool_asked(
    sandbox: Sandbox,
) -> None:
    async with sandbox.client() as client:
        order = await client.orders.create(Upload(ROOM))
        photo = order.assets[0].id
        staged = await client.processes.create(
            order.order_id, ToolSlug.VIRTUAL_STAGING, inputs=photo, widgets=STAGING
        )
        await client.processes.create(
            order.order_id, ToolSlug.IMAGE_ENHANCEMENT, inputs=photo, widgets={"space": "indoor"}
        )
        listed = await client.orders.process_ids(order.order_id, tool=ToolSlug.VIRTUAL_STAGING)
        none = await client.orders.process_ids(order.order_id, tool=ToolSlug.DAY_TO_DUSK)
    assert listed == staged.process_ids
    assert none == ()


async def test_a_creation_that_may_have_been_sent_adopts_what_the_order_lists(
    sandbox: Sandbox,
) -> None:
    async with sandbox.client() as client:
        order = await client.orders.create(Upload(ROOM))
        prepared = await client.processes.prepare(
            ToolSlug.VIRTUAL_STAGING, None, STAGING, order_assets=order.assets
        )
        sent: list[str] = []

        async def sending() -> None:
            sent.append(order.order_id)

        first = await client.processes.create_once(
            order.order_id, prepared, sent_before=True, before_sending=sending
        )
        again = await client.processes.create_once(
            order.order_id, prepared, sent_before=True, before_sending=sending
        )
    assert sent == [order.order_id]  # the order listed nothing the first time only
    assert again.process_ids == first.process_ids
    assert sandbox.stats.processes_created == 1


async def test_a_lost_answer_to_a_creation_adopts_the_process_it_made(sandbox: Sandbox) -> None:
    # The service created (and billed) the process, then the connection dropped.
    sandbox.chaos.add(method="POST", path="/v3/process", kind="drop_after")
    async with sandbox.client() as client:
        order = await client.orders.create(Upload(ROOM))
        prepared = await client.processes.prepare(
            ToolSlug.VIRTUAL_STAGING, None, STAGING, order_assets=order.assets
        )
        created = await client.processes.create_once(order.order_id, prepared, sent_before=False)
        listed = await client.orders.process_ids(order.order_id, tool=ToolSlug.VIRTUAL_STAGING)
    assert sandbox.stats.chaos_fired
    assert sandbox.stats.processes_created == 1
    assert created.process_ids == listed
