"""Every endpoint: what goes on the wire and what comes back, against the scripted fake."""

from __future__ import annotations

import io
from typing import Any

import pytest
from PIL import Image, ImageDraw

from asyncsdk import (
    AssetRole,
    Client,
    CreatedOrder,
    CreatedProcesses,
    MaskError,
    Order,
    Page,
    Process,
    Project,
    Tool,
    Upload,
    ValidationError,
    Widget,
)

from ._fake import (
    API_KEY,
    JPEG,
    PNG,
    FakeService,
    Reply,
    created_order_json,
    process_json,
    project_json,
)
from .conftest import MakeClient


def pagination(page: int, total_pages: int, limit: int = 2) -> dict[str, Any]:
    return {
        "page": page,
        "limit": limit,
        "total_count": total_pages * limit,
        "total_pages": total_pages,
        "previous_page": f"?page={page - 1}&limit={limit}" if page > 1 else "",
        "next_page": f"?page={page + 1}&limit={limit}" if page < total_pages else "",
    }


async def test_create_project_posts_json_with_the_key(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/project", Reply(status=201, json=project_json("p9", "1 Elm Road")))

    project = await client.projects.create("1 Elm Road")

    assert project == Project(id="p9", address="1 Elm Road", updated_at="2025-01-31")
    [seen] = fake.seen
    assert seen.json() == {"address": "1 Elm Road"}
    assert seen.headers["x-api-key"] == API_KEY
    assert API_KEY not in str(seen.path) + str(seen.query)


async def test_enveloped_answers_decode_to_the_same_model(
    fake: FakeService, client: Client
) -> None:
    fake.script("GET", "/v3/project/p1", Reply(json={"data": project_json("p1"), "message": "ok"}))

    assert await client.projects.get("p1") == Project(
        id="p1", address="12 Oak Street", updated_at="2025-01-31"
    )


async def test_get_project_sends_width_and_height(fake: FakeService, client: Client) -> None:
    fake.script("GET", "/v3/project/p 1", Reply(json=project_json("p 1")))

    await client.projects.get("p 1", width=320, height=200)

    assert fake.seen[0].query == {"width": "320", "height": "200"}


async def test_ids_are_percent_encoded_in_paths(fake: FakeService, client: Client) -> None:
    fake.script("GET", "/v3/order/a/b?", Reply(json={"id": "a/b?"}))

    order = await client.orders.get("a/b?")

    assert order.id == "a/b?"
    assert fake.seen[0].raw_path == "/v3/order/a%2Fb%3F"


async def test_list_projects_sends_the_listing_query(fake: FakeService, client: Client) -> None:
    fake.script(
        "GET",
        "/v3/project",
        Reply(json={"data": [project_json("p1")], "pagination": pagination(1, 1)}),
    )

    page = await client.projects.list(page=1, limit=2, sort="asc", search="Oak", width=64)

    assert isinstance(page, Page)
    assert [p.id for p in page.data] == ["p1"]
    assert not page.pagination.has_next
    assert fake.seen[0].query == {
        "page": "1",
        "limit": "2",
        "sort": "asc",
        "s": "Oak",
        "width": "64",
    }


async def test_iter_follows_next_page_to_the_end(fake: FakeService, client: Client) -> None:
    fake.script(
        "GET",
        "/v3/project",
        *[
            Reply(
                json={
                    "data": [project_json(f"p{n}a"), project_json(f"p{n}b")],
                    "pagination": pagination(n, 3),
                }
            )
            for n in (1, 2, 3)
        ],
    )

    ids = [project.id async for project in client.projects.iter(limit=2, search="Oak")]

    assert ids == ["p1a", "p1b", "p2a", "p2b", "p3a", "p3b"]
    assert [seen.query["page"] for seen in fake.seen] == ["1", "2", "3"]
    assert {seen.query["s"] for seen in fake.seen} == {"Oak"}


async def test_iter_stops_when_next_page_does_not_move_forward(
    fake: FakeService, client: Client
) -> None:
    stuck = pagination(1, 5)
    stuck["next_page"] = "?page=1&limit=2"
    fake.script("GET", "/v3/project", Reply(json={"data": [project_json()], "pagination": stuck}))

    assert [p.id async for p in client.projects.iter(limit=2)] == ["p1"]
    assert len(fake.seen) == 1


async def test_orders_of_a_project_page_and_iterate(fake: FakeService, client: Client) -> None:
    order = {"id": "o1", "project_id": "p1", "entry_assets": [], "status": "idle"}
    fake.script(
        "GET",
        "/v3/project/p1/order",
        Reply(json={"data": [order], "pagination": pagination(1, 2, limit=1)}),
        Reply(json={"data": [dict(order, id="o2")], "pagination": pagination(2, 2, limit=1)}),
    )

    first = await client.projects.orders("p1", limit=1)
    assert [o.id for o in first.data] == ["o1"]
    fake.script(
        "GET",
        "/v3/project/p1/order",
        Reply(json={"data": [order], "pagination": pagination(1, 2, limit=1)}),
        Reply(json={"data": [dict(order, id="o2")], "pagination": pagination(2, 2, limit=1)}),
    )
    assert [o.id async for o in client.projects.iter_orders("p1", limit=1)] == ["o1", "o2"]


async def test_orders_of_a_project_without_pagination_is_one_page(
    fake: FakeService, client: Client
) -> None:
    fake.script("GET", "/v3/project/p1/order", Reply(json={"data": [{"id": "o1"}]}))

    page = await client.projects.orders("p1")

    assert [o.id for o in page.data] == ["o1"]
    assert not page.pagination.has_next


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"limit": 31}, "1 to 30"),
        ({"limit": 0}, "1 to 30"),
        ({"page": 0}, "page must be"),
        ({"sort": "newest"}, "asc, desc, modified"),
        ({"width": -1}, "width must be a positive int"),
    ],
)
async def test_bad_listing_arguments_fail_before_sending(
    fake: FakeService, client: Client, kwargs: dict[str, Any], fix: str
) -> None:
    with pytest.raises(ValidationError, match=fix):
        await client.projects.list(**kwargs)
    assert fake.seen == []


async def test_create_order_sends_files_and_roles_in_order(
    fake: FakeService, client: Client
) -> None:
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json("o1", 2)))

    created = await client.orders.create(
        JPEG, Upload(PNG, role=AssetRole.SECONDARY_ANGLE, filename="side.png"), project_id="p1"
    )

    assert isinstance(created, CreatedOrder)
    assert [a.id for a in created.assets] == ["a0", "a1"]
    [seen] = fake.seen
    assert seen.fields("project_id") == ["p1"]
    assert seen.fields("asset_role") == ["primary_angle", "secondary_angle"]
    files = seen.files()
    assert [(f.filename, f.content_type, f.data) for f in files] == [
        ("image-1.jpg", "image/jpeg", JPEG),
        ("side.png", "image/png", PNG),
    ]


async def test_role_field_switches_to_asset_roles(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(role_field="asset_roles")
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json()))

    await client.orders.create(JPEG)

    assert fake.seen[0].fields("asset_roles") == ["primary_angle"]
    assert fake.seen[0].fields("asset_role") == []


@pytest.mark.parametrize(
    "images",
    [
        (JPEG, PNG),
        (Upload(JPEG, role="secondary_angle"), Upload(PNG, role="secondary_angle")),
        (),
    ],
)
async def test_wrong_roles_fail_before_sending(
    fake: FakeService, client: Client, images: tuple[Any, ...]
) -> None:
    with pytest.raises(ValidationError, match=r"at most one|at least one"):
        await client.orders.create(*images)
    assert fake.seen == []


def mask_png() -> bytes:
    """A mask that passes the mask checks: a blue rectangle (remove) on black (keep)."""
    image = Image.new("RGB", (40, 30), (0, 0, 0))
    ImageDraw.Draw(image).rectangle((5, 5, 20, 20), fill=(0x78, 0x78, 0xCD))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


async def test_append_mask_sends_mask_role_and_type(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v3/order/o1/append", Reply(status=201, json=created_order_json("o1")))
    mask = mask_png()

    created = await client.orders.append_mask("o1", mask, project_id="p1")

    assert created.order_id == "o1"
    [seen] = fake.seen
    assert seen.fields("asset_role") == ["mask"]
    assert seen.fields("asset_type") == ["mask"]
    assert seen.fields("project_id") == ["p1"]
    assert [f.data for f in seen.files()] == [mask]


async def test_append_mask_checks_the_mask_before_sending(
    fake: FakeService, client: Client
) -> None:
    white = Image.new("RGB", (40, 30), (255, 255, 255))
    buffer = io.BytesIO()
    white.save(buffer, "PNG")

    with pytest.raises(MaskError, match="white-on-black"):
        await client.orders.append_mask("o1", buffer.getvalue())
    with pytest.raises(MaskError, match="not a readable image"):
        await client.orders.append_mask("o1", PNG)
    with pytest.raises(MaskError, match="white-on-black"):
        await client.orders.append_mask("o1", io.BytesIO(buffer.getvalue()))  # a file, read whole
    assert fake.seen == []  # nothing was uploaded


async def test_append_mask_accepts_an_order_or_no_body(fake: FakeService, client: Client) -> None:
    order = {"id": "o1", "entry_assets": [{"id": "m1", "asset_role": "mask"}]}
    fake.script("POST", "/v3/order/o1/append", Reply(json=order), Reply(status=204))

    assert (await client.orders.append_mask("o1", PNG, check=False)).assets[0].id == "m1"
    assert (await client.orders.append_mask("o1", PNG, check=False)) == CreatedOrder(order_id="o1")


async def test_get_order(fake: FakeService, client: Client) -> None:
    fake.script(
        "GET",
        "/v3/order/o1",
        Reply(
            json={
                "id": "o1",
                "project_id": "p1",
                "entry_assets": [
                    {
                        "id": "a1",
                        "asset_type": "image",
                        "asset_role": "primary_angle",
                        "src": "https://cdn.example/a1.jpg",
                        "thumbnail_src": "https://cdn.example/a1_t.jpg",
                    }
                ],
                "status": "active",
                "created_at": "2025-01-31T10:00:00Z",
                "updated_at": "2025-01-31T10:00:00Z",
                "processes": [
                    {"id": "pr1", "tool": "tool-day-to-dusk", "status": "done", "final_assets": []}
                ],
            }
        ),
    )

    order = await client.orders.get("o1", width=100)

    assert isinstance(order, Order)
    assert order.status == "active"
    assert order.processes[0].tool == "tool-day-to-dusk"
    assert fake.seen[0].query == {"width": "100"}


async def test_create_process_body(fake: FakeService, client: Client) -> None:
    fake.script(
        "POST",
        "/v3/process",
        Reply(status=201, json={"process_ids": ["pr1", "pr2"], "process_group_id": "g1"}),
    )

    created = await client.processes.create(
        "o1",
        "tool-virtual-staging",
        {"tool-virtual-staging-input-image": "a1"},
        widgets=[
            {
                "slug": "widget-space-tool-virtual-staging",
                "item_slugs": ("item-bedroom-widget-space-tool-virtual-staging",),
            }
        ],
        process_group_id="g0",
    )

    assert created == CreatedProcesses(process_ids=("pr1", "pr2"), process_group_id="g1")
    assert fake.seen[0].json() == {
        "order_id": "o1",
        "tool": "tool-virtual-staging",
        "asset_map": {"tool-virtual-staging-input-image": "a1"},
        "widgets": [
            {
                "slug": "widget-space-tool-virtual-staging",
                "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"],
            }
        ],
        "process_group_id": "g0",
    }


@pytest.mark.parametrize(
    ("asset_map", "widgets", "fix"),
    [
        ({}, None, "asset_map must map"),
        ({"slot": ""}, None, "asset_map"),
        ({"slot": "a1"}, [{"slug": "w", "item_slugs": "item-x"}], "list of item slugs"),
        ({"slot": "a1"}, [{"slug": "w", "items": ["i"]}], "unknown keys"),
        ({"slot": "a1"}, {"slug": "w", "item_slugs": ["i"]}, "sequence of"),
    ],
)
async def test_bad_process_arguments_fail_before_sending(
    fake: FakeService, client: Client, asset_map: Any, widgets: Any, fix: str
) -> None:
    with pytest.raises(ValidationError, match=fix):
        await client.processes.create("o1", "tool-x", asset_map, widgets)
    assert fake.seen == []


async def test_repeated_and_changed_requests_send_their_own_values(
    fake: FakeService, client: Client
) -> None:
    space = "widget-space-tool-virtual-staging"
    bedroom, kitchen = (f"item-{room}-{space}" for room in ("bedroom", "kitchen"))
    fake.script(
        "POST",
        "/v3/process",
        *(Reply(status=201, json={"process_ids": [f"pr{n}"]}) for n in range(3)),
    )
    asset_map = {"tool-virtual-staging-input-image": "a1"}
    widgets: list[dict[str, Any]] = [{"slug": space, "item_slugs": [bedroom]}]

    await client.processes.create("o1", "tool-virtual-staging", asset_map, widgets)
    await client.processes.create("o2", "tool-virtual-staging", asset_map, widgets, "g1")
    asset_map["tool-virtual-staging-input-image"] = "a2"  # the same objects, changed
    widgets[0]["item_slugs"].append(kitchen)
    await client.processes.create("o1", "tool-virtual-staging", asset_map, widgets)

    def body(order: str, asset: str, items: list[str], **extra: str) -> dict[str, Any]:
        return {
            "order_id": order,
            "tool": "tool-virtual-staging",
            "asset_map": {"tool-virtual-staging-input-image": asset},
            "widgets": [{"slug": space, "item_slugs": items}],
            **extra,
        }

    assert [seen.json() for seen in fake.requests("POST", "/v3/process")] == [
        body("o1", "a1", [bedroom]),
        body("o2", "a1", [bedroom], process_group_id="g1"),
        body("o1", "a2", [bedroom, kitchen]),
    ]


async def test_bad_arguments_fail_after_good_ones_of_the_same_shape(
    fake: FakeService, client: Client
) -> None:
    fake.script("POST", "/v3/process", Reply(status=201, json={"process_ids": ["pr1"]}))
    await client.processes.create(
        "o1", "tool-x", {"slot": "a1"}, [{"slug": "w", "item_slugs": ["i"]}]
    )

    for asset_map, widgets, fix in [
        ({"slot": " "}, [{"slug": "w", "item_slugs": ["i"]}], "asset_map"),
        ({"slot": "a1"}, [{"slug": "w", "item_slugs": [""]}], "list of item slugs"),
        ({"slot": "a1"}, [{"slug": "", "item_slugs": ["i"]}], "non-empty string"),
        ({"slot": 1}, [{"slug": "w", "item_slugs": ["i"]}], "asset_map"),
    ]:
        with pytest.raises(ValidationError, match=fix):
            await client.processes.create("o1", "tool-x", asset_map, widgets)
    with pytest.raises(ValidationError, match="order_id"):
        await client.processes.create(
            " ", "tool-x", {"slot": "a1"}, [{"slug": "w", "item_slugs": ["i"]}]
        )
    assert len(fake.seen) == 1


async def test_get_process_reads_both_url_spellings(fake: FakeService, client: Client) -> None:
    body = process_json("pr1", "done")
    body["final_assets"] = [{"asset_id": "r1", "temp_src": "u1", "temp_thumbnail_src": "t1"}]
    fake.script("GET", "/v3/process/pr1", Reply(json=body))

    process = await client.processes.get("pr1", height=50)

    assert isinstance(process, Process)
    assert process.final_assets[0].src == "u1"
    assert process.final_assets[0].thumbnail_src == "t1"
    assert fake.seen[0].query == {"height": "50"}


async def test_tools_list_goes_to_app_url_without_the_key(
    fake: FakeService, make_client: MakeClient
) -> None:
    client = make_client(app_url=str(fake.url / "catalogue"))
    fake.script(
        "GET",
        "/catalogue/api/tools",
        Reply(
            json={
                "data": [
                    {
                        "id": "t1",
                        "name": "AI Day to Dusk",
                        "slug": "tool-day-to-dusk",
                        "isActive": True,
                    }
                ]
            }
        ),
    )

    tools = await client.tools.list()

    assert tools == (Tool(id="t1", name="AI Day to Dusk", slug="tool-day-to-dusk"),)
    assert "x-api-key" not in fake.seen[0].headers


async def test_tool_widgets(fake: FakeService, client: Client) -> None:
    widget = {
        "id": "w1",
        "slug": "widget-area-tool-image-enhancement",
        "name": "Area",
        "isOptional": False,
        "type": "tile",
        "key": "space",
        "items": [
            {
                "slug": "item-indoor-widget-area-tool-image-enhancement",
                "isDefault": True,
                "accessibleIn": None,
            }
        ],
        "related": None,
    }
    fake.script(
        "GET",
        "/v1/cathub/tools/tool-image-enhancement/widgets",
        Reply(json={"data": [widget], "message": ""}),
    )

    [got] = await client.tools.widgets("tool-image-enhancement")

    assert isinstance(got, Widget)
    assert not got.is_optional
    assert got.items[0].is_default
    assert fake.seen[0].headers["x-api-key"] == API_KEY


async def test_v1_upload_and_both_submit_shapes(fake: FakeService, client: Client) -> None:
    fake.script("POST", "/v1/order/image", Reply(json={"order_id": "v1o"}))
    fake.script("POST", "/v1/order", Reply(json={"order_id": "v1o", "status": "queued"}))

    upload = await client.v1.upload_image(JPEG, "service-ai-virtual-staging")
    assert upload.order_id == "v1o"
    assert fake.seen[0].fields("service_name") == ["service-ai-virtual-staging"]
    assert [f.data for f in fake.seen[0].files("image")] == [JPEG]

    submitted = await client.v1.submit_order(
        "v1o", space_name="space-bedroom", selected_widgets=[{"id": "5", "item_id": "9"}]
    )
    assert submitted.status == "queued"
    await client.v1.submit_order("v1o", service_name="service-ai-virtual-staging", widget_ids=[3])
    assert [seen.json() for seen in fake.requests("POST", "/v1/order")] == [
        {
            "order_id": "v1o",
            "space_name": "space-bedroom",
            "selected_widgets": [{"id": "5", "item_id": "9"}],
        },
        {"order_id": "v1o", "service_name": "service-ai-virtual-staging", "widget_ids": [3]},
    ]


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({}, "nothing to submit"),
        ({"space_name": "s", "widget_ids": [1]}, "cannot be mixed"),
        ({"space_name": "s"}, "go together"),
        ({"service_name": "x", "widget_ids": ["1"]}, "list of ints"),
        ({"space_name": "s", "selected_widgets": [{"id": "1"}]}, "item_id"),
    ],
)
async def test_v1_submit_rejects_mixed_or_missing_shapes(
    fake: FakeService, client: Client, kwargs: dict[str, Any], fix: str
) -> None:
    with pytest.raises(ValidationError, match=fix):
        await client.v1.submit_order("v1o", **kwargs)
    assert fake.seen == []


async def test_empty_ids_fail_before_sending(fake: FakeService, client: Client) -> None:
    for call in (
        client.projects.get(""),
        client.orders.get(" "),
        client.processes.get(""),
        client.processes.wait(""),
        client.tools.widgets(""),
    ):
        with pytest.raises(ValidationError, match="non-empty string"):
            await call
    assert fake.seen == []
