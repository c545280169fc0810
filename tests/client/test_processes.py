"""Processes: the body a creation sends, arguments refused before sending, a process read back."""

from __future__ import annotations

from typing import Any

import pytest

from asyncsdk import Client, CreatedProcesses, Process, ValidationError

from ._fake import FakeService, Reply, process_json


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
