"""Projects, and listings that page through them: what goes on the wire and what comes back."""

from __future__ import annotations

from typing import Any

import pytest

from asyncsdk import Client, Page, Project, ValidationError

from ._fake import API_KEY, FakeService, Reply, pagination, project_json


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
