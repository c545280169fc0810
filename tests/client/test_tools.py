"""The tool catalogue's endpoints: the tools listed and a tool's widgets."""

from __future__ import annotations

from asyncsdk import Client, Tool, Widget

from ._fake import API_KEY, FakeService, Reply
from .conftest import MakeClient


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
