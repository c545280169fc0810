"""End to end against the sandbox emulator: the whole flow, pagination, errors and chaos."""

from __future__ import annotations

import asyncio
import io
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from PIL import Image

from asyncsdk import (
    APIConnectionError,
    APIDecodeError,
    AuthenticationError,
    Client,
    NotFoundError,
    PermissionDeniedError,
    ProcessStatus,
    RateLimitError,
    ServerError,
    ToolSlug,
    UnprocessableEntityError,
    Upload,
)
from asyncsdk.sandbox import LIMITED_API_KEY, Sandbox

STAGING_WIDGETS: list[dict[str, Any]] = [
    {
        "slug": "widget-space-tool-virtual-staging",
        "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"],
    },
    {
        "slug": "widget-style-tool-virtual-staging",
        "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
    },
]


def photo(fmt: str = "JPEG", colour: tuple[int, int, int] = (120, 140, 160)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), colour).save(buffer, fmt)
    return buffer.getvalue()


def mask_png() -> bytes:
    image = Image.new("RGB", (64, 48), (0, 0, 0))
    image.paste((0x78, 0x78, 0xCD), (10, 10, 30, 30))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture
async def sdk(sandbox: Sandbox) -> AsyncIterator[Client]:
    # strict: the sandbox answers exactly the documented shapes.
    async with sandbox.client(strict=True) as client:
        yield client


async def test_project_order_process_wait(sandbox: Sandbox, sdk: Client) -> None:
    project = await sdk.projects.create("12 Oak Street")
    order = await sdk.orders.create(photo(), project_id=project.id)
    created = await sdk.processes.create(
        order.order_id,
        ToolSlug.VIRTUAL_STAGING,
        {"tool-virtual-staging-input-image": order.assets[0].id},
        widgets=STAGING_WIDGETS,
    )
    process = await sdk.processes.wait(created.process_ids[0], timeout=30)

    assert process.status == ProcessStatus.DONE
    assert process.final_assets
    assert process.final_assets[0].src
    assert sandbox.stats.processes_created == 1
    fetched = await sdk.orders.get(order.order_id)
    assert fetched.project_id == project.id
    assert [p.id for p in fetched.processes] == [process.id]
    page = await sdk.projects.orders(project.id)
    assert [o.id for o in page.data] == [order.order_id]


async def test_run_with_a_path_and_the_enhancement_tool(
    sandbox: Sandbox, sdk: Client, tmp_path: Any
) -> None:
    path = tmp_path / "garden.png"
    path.write_bytes(photo("PNG"))

    process = await sdk.run(
        ToolSlug.IMAGE_ENHANCEMENT,
        path,
        widgets=[
            {
                "slug": "widget-area-tool-image-enhancement",
                "item_slugs": ["item-outdoor-widget-area-tool-image-enhancement"],
            },
            {
                "slug": "widget-enhancement-options-tool-image-enhancement",
                "item_slugs": [
                    "item-sky-replacement-widget-enhancement-options-tool-image-enhancement",
                    "item-lawn-replacement-widget-enhancement-options-tool-image-enhancement",
                ],
            },
        ],
        timeout=30,
    )

    assert process.status == ProcessStatus.DONE
    assert sandbox.stats.assets_uploaded == 1


async def test_mask_flow_with_a_streamed_mask(sandbox: Sandbox, sdk: Client) -> None:
    async def mask_chunks() -> AsyncIterator[bytes]:
        data = mask_png()
        for start in range(0, len(data), 100):
            yield data[start : start + 100]

    order = await sdk.orders.create(photo())
    appended = await sdk.orders.append_mask(order.order_id, Upload(mask_chunks()))
    [mask] = appended.assets
    assert mask.asset_role == "mask"
    created = await sdk.processes.create(
        order.order_id,
        ToolSlug.ITEM_REMOVAL_MASK,
        {
            "tool-item-removal-mask-input-image": order.assets[0].id,
            "tool-item-removal-mask-input-mask": mask.id,
        },
    )
    process = await sdk.processes.wait(created.process_ids[0], timeout=30)

    assert process.status == ProcessStatus.DONE


async def test_pagination_iterator_walks_every_page(sandbox: Sandbox, sdk: Client) -> None:
    made = await asyncio.gather(*(sdk.projects.create(f"{n} Elm Road") for n in range(23)))

    seen = [project.id async for project in sdk.projects.iter(limit=10, sort="asc")]

    assert sorted(seen) == sorted(p.id for p in made)
    assert len(seen) == len(set(seen))
    assert sandbox.stats.requests["GET /v3/project"] == 3
    searched = [p.address async for p in sdk.projects.iter(search="7 Elm")]
    assert sorted(searched) == ["17 Elm Road", "7 Elm Road"]


async def test_iter_orders_of_a_project(sandbox: Sandbox, sdk: Client) -> None:
    project = await sdk.projects.create("3 Birch Lane")
    for _ in range(4):
        await sdk.orders.create(photo(), project_id=project.id)

    orders = [o async for o in sdk.projects.iter_orders(project.id, limit=3)]

    assert len(orders) == 4
    assert {o.project_id for o in orders} == {project.id}


async def test_enveloped_answers(sandbox: Sandbox, sdk: Client) -> None:
    sandbox.config.enveloped = True

    project = await sdk.projects.create("5 Ash Court")
    assert (await sdk.projects.get(project.id)).address == "5 Ash Court"
    assert [p.id async for p in sdk.projects.iter()] == [project.id]
    assert any(t.slug == ToolSlug.DAY_TO_DUSK for t in await sdk.tools.list())


async def test_catalogue_and_widgets(sdk: Client) -> None:
    tools = await sdk.tools.list()
    widgets = await sdk.tools.widgets(ToolSlug.IMAGE_ENHANCEMENT)

    assert ToolSlug.ITEM_REMOVAL_MASK in {tool.slug for tool in tools}
    area = next(w for w in widgets if w.key == "space")
    assert not area.is_optional
    assert {i.slug for i in area.items} == {
        "item-indoor-widget-area-tool-image-enhancement",
        "item-outdoor-widget-area-tool-image-enhancement",
    }


async def test_v1_upload_and_submit(sandbox: Sandbox, sdk: Client) -> None:
    widgets = await sdk.tools.widgets(ToolSlug.VIRTUAL_STAGING)
    style = next(w for w in widgets if w.key == "style")

    upload = await sdk.v1.upload_image(photo(), "service-ai-virtual-staging")
    submitted = await sdk.v1.submit_order(
        upload.order_id,
        space_name="space-bedroom",
        selected_widgets=[{"id": style.id, "item_id": str(style.items[0].slug)}],
    )

    assert submitted.order_id == upload.order_id


async def test_errors_from_the_service(sandbox: Sandbox, sdk: Client) -> None:
    with pytest.raises(NotFoundError) as missing:
        await sdk.processes.get("no-such-process")
    assert missing.value.key.startswith("api_error_")

    order = await sdk.orders.create(photo())
    with pytest.raises(UnprocessableEntityError):
        await sdk.processes.create(
            order.order_id,
            ToolSlug.DAY_TO_DUSK,
            {"wrong-slot": order.assets[0].id},
            validate=False,  # the service's own answer is under test here
        )

    async with Client(api_key="sk_wrong", base_url=sandbox.base_url) as wrong:
        with pytest.raises(AuthenticationError):
            await wrong.projects.list()
    async with Client(api_key=LIMITED_API_KEY, base_url=sandbox.base_url) as limited:
        order = await limited.orders.create(photo())
        with pytest.raises(PermissionDeniedError):
            await limited.processes.create(
                order.order_id,
                ToolSlug.DAY_TO_DUSK,
                {"tool-day-to-dusk-input-image": order.assets[0].id},
                validate=False,
            )
    assert sandbox.stats.processes_created == 0


async def test_post_5xx_is_not_retried_and_creates_nothing(sandbox: Sandbox, sdk: Client) -> None:
    order = await sdk.orders.create(photo())
    sandbox.chaos.add(method="POST", path="/v3/process", kind="status", status=503, times=1)

    with pytest.raises(ServerError):
        await sdk.processes.create(
            order.order_id,
            ToolSlug.DAY_TO_DUSK,
            {"tool-day-to-dusk-input-image": order.assets[0].id},
        )

    assert sandbox.stats.requests["POST /v3/process"] == 1
    assert sandbox.stats.processes_created == 0


async def test_dropped_post_is_not_repeated(sandbox: Sandbox, sdk: Client) -> None:
    """The service created the process but the answer was lost: exactly one process exists."""
    order = await sdk.orders.create(photo())
    sandbox.chaos.add(method="POST", path="/v3/process", kind="drop_after", times=1)

    with pytest.raises(APIConnectionError) as info:
        await sdk.processes.create(
            order.order_id,
            ToolSlug.DAY_TO_DUSK,
            {"tool-day-to-dusk-input-image": order.assets[0].id},
        )

    assert info.value.request_sent
    assert sandbox.stats.processes_created == 1


async def test_rate_limit_on_post_is_retried(sandbox: Sandbox, sdk: Client) -> None:
    order = await sdk.orders.create(photo())
    sandbox.chaos.add(method="POST", path="/v3/process", kind="rate_limit", times=2)

    created = await sdk.processes.create(
        order.order_id,
        ToolSlug.DAY_TO_DUSK,
        {"tool-day-to-dusk-input-image": order.assets[0].id},
    )

    assert len(created.process_ids) == 1
    assert sandbox.stats.requests["POST /v3/process"] == 3
    assert sandbox.stats.processes_created == 1


async def test_rate_limit_beyond_retries_is_raised(sandbox: Sandbox) -> None:
    async with Client(
        api_key=sandbox.api_key, base_url=sandbox.base_url, max_retries=1, backoff_max=0.001
    ) as client:
        sandbox.chaos.add(method="GET", path="/v3/project", kind="rate_limit", times=None)
        with pytest.raises(RateLimitError, match="rate-limit exceeded"):
            await client.projects.list()
    assert sandbox.stats.requests["GET /v3/project"] == 2


async def test_wait_keeps_to_the_services_polling_limit(sandbox: Sandbox, sdk: Client) -> None:
    """With the sandbox enforcing one GET per process per interval, wait() never draws a 429."""
    sandbox.config.poll_limit = True
    sandbox.config.poll_limit_interval = 0.1
    sandbox.config.processing_delay = 0.5
    order = await sdk.orders.create(photo())
    created = await sdk.processes.create(
        order.order_id,
        ToolSlug.DAY_TO_DUSK,
        {"tool-day-to-dusk-input-image": order.assets[0].id},
    )
    async with Client(
        api_key=sandbox.api_key,
        base_url=sandbox.base_url,
        app_url=sandbox.app_url,
        min_poll_interval=0.1,
        max_retries=0,  # a 429 would surface as RateLimitError
    ) as client:
        process = await client.processes.wait(created.process_ids[0], timeout=30)
        assert process.status == "done"
        assert sandbox.stats.requests["GET /v3/process/{id}"] >= 3
        # A GET of the same process right after wait()'s last one keeps to the floor too: it
        # waits instead of drawing the service's 429.
        started = time.monotonic()
        again = await client.processes.get(created.process_ids[0])
        assert again.status == "done"
        assert time.monotonic() - started >= 0.09


async def test_get_retries_through_gateway_errors_and_drops(sandbox: Sandbox, sdk: Client) -> None:
    project = await sdk.projects.create("9 Pine Way")
    sandbox.chaos.add(method="GET", path="/v3/project/*", kind="status", status=502, times=1)
    sandbox.chaos.add(method="GET", path="/v3/project/*", kind="drop_before", times=1)
    sandbox.chaos.add(method="GET", path="/v3/project/*", kind="html", status=504, times=1)

    assert (await sdk.projects.get(project.id)).id == project.id


@pytest.mark.parametrize(
    ("kind", "status"), [("html", 200), ("truncated_json", None)], ids=["html-200", "truncated"]
)
async def test_bad_bodies_are_decode_errors(
    sandbox: Sandbox, sdk: Client, kind: str, status: int | None
) -> None:
    project = await sdk.projects.create("4 Oak Row")
    sandbox.chaos.add(method="GET", path="/v3/project/*", kind=kind, status=status, times=1)

    with pytest.raises(APIDecodeError):
        await sdk.projects.get(project.id)


async def test_wait_polls_while_the_process_is_held(sandbox: Sandbox, sdk: Client) -> None:
    sandbox.config.pending_delay = math.inf
    sandbox.config.processing_delay = math.inf
    order = await sdk.orders.create(photo())
    created = await sdk.processes.create(
        order.order_id,
        ToolSlug.DAY_TO_DUSK,
        {"tool-day-to-dusk-input-image": order.assets[0].id},
    )
    waiter = asyncio.create_task(sdk.processes.wait(created.process_ids[0], timeout=30))

    async def polled(times: int) -> None:
        # The sandbox exposes counters, not events: watch the counter.
        while sandbox.stats.requests["GET /v3/process/{id}"] < times:  # noqa: ASYNC110
            await asyncio.sleep(0.005)

    await asyncio.wait_for(polled(1), 10)
    sandbox.advance()  # pending -> processing
    await asyncio.wait_for(polled(3), 10)
    assert not waiter.done()
    sandbox.advance()  # processing -> done
    process = await asyncio.wait_for(waiter, 10)

    assert process.status == ProcessStatus.DONE
