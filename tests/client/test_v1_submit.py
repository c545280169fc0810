"""The v1 endpoints: an upload, and a submission in either of its two shapes."""

from __future__ import annotations

from typing import Any

import pytest

from asyncsdk import Client, ValidationError

from ._fake import JPEG, FakeService, Reply


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
