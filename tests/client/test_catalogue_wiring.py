"""The catalogue checks wired into the client, end to end against the sandbox.

A request the checks refuse must raise locally and leave no trace on the wire (no process, and for
``run()`` no upload either); with the checks off it goes out as given and the service answers.
"""

from __future__ import annotations

import ast
import asyncio
import io
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from codeblocks import code_block
from PIL import Image

from asyncsdk import (
    V1_ENDPOINTS,
    CatalogueError,
    Client,
    ConfigurationError,
    GenerationLimit,
    InputError,
    MissingWidgetError,
    ProcessStatus,
    SelectionError,
    ServerError,
    ToolSlug,
    UnknownItemError,
    UnknownToolError,
    UnknownWidgetError,
    UnprocessableEntityError,
    V1MappingError,
    ValidationError,
    WidgetSelection,
    translate_v1_submit,
    v1_service_to_tool,
    v1_space_to_item,
)
from asyncsdk.sandbox import Sandbox

TOOLS = "GET /api/tools"
WIDGETS = "GET /v1/cathub/tools/{slug}/widgets"

STAGING_SPACE = "widget-space-tool-virtual-staging"
STAGING_STYLE = "widget-style-tool-virtual-staging"


def photo() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 24), (120, 140, 160)).save(buffer, "JPEG")
    return buffer.getvalue()


def client_for(sandbox: Sandbox, **options: Any) -> Client:
    options.setdefault("min_poll_interval", 0.01)
    # The service's generation window (10 per 600 s) shortened, as Sandbox.client does.
    options.setdefault("generation_limit", GenerationLimit(max_calls=10, period=0.01))
    return Client(
        api_key=sandbox.api_key,
        base_url=sandbox.base_url,
        app_url=sandbox.app_url,
        backoff_initial=0.001,
        backoff_max=0.005,
        strict=True,
        **options,
    )


@pytest.fixture
async def sdk(sandbox: Sandbox) -> AsyncIterator[Client]:
    async with client_for(sandbox) as client:
        yield client


def nothing_sent(sandbox: Sandbox, *, uploads: bool) -> None:
    assert sandbox.stats.requests["POST /v3/process"] == 0
    assert sandbox.stats.processes_created == 0
    if uploads:
        assert sandbox.stats.requests["POST /v3/order"] == 0
        assert sandbox.stats.orders_created == 0


# --- short names, end to end ----------------------------------------------------------------------


async def test_run_with_short_widget_names(sandbox: Sandbox, sdk: Client) -> None:
    process = await sdk.run(
        ToolSlug.VIRTUAL_STAGING,
        photo(),
        widgets={"space": "Living Room", "style": "modern"},
        timeout=30,
    )

    assert process.status == ProcessStatus.DONE
    assert sandbox.stats.processes_created == 1


async def test_prepare_shows_what_short_names_expand_to(sdk: Client) -> None:
    prepared = await sdk.processes.prepare(
        ToolSlug.VIRTUAL_STAGING, inputs="a1", widgets={"space": "bedroom", "style": "Modern"}
    )

    assert prepared.validated
    assert prepared.asset_map == {"tool-virtual-staging-input-image": "a1"}
    assert prepared.widgets_json() == [
        {"slug": STAGING_SPACE, "item_slugs": [f"item-bedroom-{STAGING_SPACE}"]},
        {"slug": STAGING_STYLE, "item_slugs": [f"item-modern-{STAGING_STYLE}"]},
    ]


async def test_create_takes_every_widget_form(sandbox: Sandbox, sdk: Client) -> None:
    order = await sdk.orders.create(photo())
    photo_id = order.assets[0].id
    forms: list[Any] = [
        {"space": "kitchen", "style": "modern"},
        {STAGING_SPACE: f"item-kitchen-{STAGING_SPACE}", STAGING_STYLE: "modern"},
        [
            {"slug": STAGING_SPACE, "item_slugs": [f"item-kitchen-{STAGING_SPACE}"]},
            {"slug": STAGING_STYLE, "item_slugs": [f"item-modern-{STAGING_STYLE}"]},
        ],
        [
            WidgetSelection(STAGING_SPACE, [f"item-kitchen-{STAGING_SPACE}"]),
            WidgetSelection(STAGING_STYLE, [f"item-modern-{STAGING_STYLE}"]),
        ],
    ]

    for widgets in forms:
        created = await sdk.processes.create(
            order.order_id, ToolSlug.VIRTUAL_STAGING, inputs=photo_id, widgets=widgets
        )
        assert len(created.process_ids) == 1

    assert sandbox.stats.processes_created == len(forms)
    assert sandbox.stats.requests[TOOLS] == 1
    assert sandbox.stats.requests[WIDGETS] == 1


async def test_create_without_inputs_reads_the_order_once(sandbox: Sandbox, sdk: Client) -> None:
    order = await sdk.orders.create(photo())

    created = await sdk.processes.create(
        order.order_id, ToolSlug.IMAGE_ENHANCEMENT, widgets={"space": "indoor"}
    )

    assert created.process_ids
    assert sandbox.stats.requests["GET /v3/order/{id}"] == 1
    # With the inputs given, the order is not fetched.
    await sdk.processes.create(
        order.order_id,
        ToolSlug.IMAGE_ENHANCEMENT,
        {"tool-image-enhancement-input-image": order.assets[0].id},
        {"space": "indoor"},
    )
    assert sandbox.stats.requests["GET /v3/order/{id}"] == 1


async def test_the_listed_slug_of_an_aliased_tool_is_sent(sandbox: Sandbox, sdk: Client) -> None:
    process = await sdk.run(
        ToolSlug.FURNITURE_RESTYLE, photo(), widgets={"space": "bedroom", "style": "modern"}
    )

    assert process.status == ProcessStatus.DONE
    assert process.tool == ToolSlug.FURNITURE_SET_RESTYLE


# --- refused locally, nothing sent ----------------------------------------------------------------

REFUSED = [
    pytest.param("tool-virtual-stagin", {"space": "bedroom"}, UnknownToolError, id="unknown-tool"),
    pytest.param(
        ToolSlug.VIRTUAL_STAGING, {"space": "bedroom"}, MissingWidgetError, id="missing-widget"
    ),
    pytest.param(
        ToolSlug.VIRTUAL_STAGING,
        {"space": "bedroom", "style": "no-such-style"},
        UnknownItemError,
        id="unknown-item",
    ),
    pytest.param(
        ToolSlug.VIRTUAL_STAGING,
        {"space": "bedroom", "style": "modern", "colour": "red"},
        UnknownWidgetError,
        id="unknown-widget",
    ),
    pytest.param(
        ToolSlug.VIRTUAL_STAGING,
        {"space": ["bedroom", "kitchen"], "style": "modern"},
        SelectionError,
        id="two-items-in-single-select",
    ),
    pytest.param(
        ToolSlug.IMAGE_ENHANCEMENT,
        {"space": "indoor", "enhancement_options": ["sky-replacement"]},
        SelectionError,
        id="outdoor-option-indoors",
    ),
]


@pytest.mark.parametrize(("tool", "widgets", "error"), REFUSED)
async def test_create_refuses_locally(
    sandbox: Sandbox, sdk: Client, tool: str, widgets: Any, error: type[CatalogueError]
) -> None:
    order = await sdk.orders.create(photo())

    with pytest.raises(error) as info:
        await sdk.processes.create(order.order_id, tool, inputs=order.assets[0].id, widgets=widgets)

    assert str(info.value)  # a message naming the fix
    nothing_sent(sandbox, uploads=False)


@pytest.mark.parametrize(("tool", "widgets", "error"), REFUSED)
async def test_run_refuses_before_uploading(
    sandbox: Sandbox, sdk: Client, tool: str, widgets: Any, error: type[CatalogueError]
) -> None:
    with pytest.raises(error):
        await sdk.run(tool, photo(), widgets=widgets)

    nothing_sent(sandbox, uploads=True)


async def test_wrong_input_slots_are_refused(sandbox: Sandbox, sdk: Client) -> None:
    order = await sdk.orders.create(photo())

    with pytest.raises(InputError, match="input slots"):
        await sdk.processes.create(
            order.order_id, ToolSlug.DAY_TO_DUSK, {"wrong-slot": order.assets[0].id}
        )
    with pytest.raises(InputError, match="input slots"):
        await sdk.run(ToolSlug.DAY_TO_DUSK, photo(), asset_map={"wrong-slot": 0})

    nothing_sent(sandbox, uploads=False)
    assert sandbox.stats.orders_created == 1  # the order made above, none by run()


async def test_asset_ids_are_checked_against_known_order_assets(
    sandbox: Sandbox, sdk: Client
) -> None:
    order = await sdk.orders.create(photo())

    with pytest.raises(InputError, match="not in the order"):
        await sdk.processes.create(
            order.order_id,
            ToolSlug.DAY_TO_DUSK,
            inputs="some-other-asset",
            order_assets=order.assets,
        )

    nothing_sent(sandbox, uploads=False)


async def test_malformed_widgets_fail_before_any_request(sandbox: Sandbox, sdk: Client) -> None:
    with pytest.raises(ValidationError, match="one wire entry"):
        await sdk.run(
            ToolSlug.VIRTUAL_STAGING,
            photo(),
            widgets={"slug": STAGING_SPACE, "item_slugs": [f"item-bedroom-{STAGING_SPACE}"]},
        )
    with pytest.raises(ValidationError, match="item name"):
        await sdk.processes.create("o1", ToolSlug.VIRTUAL_STAGING, inputs="a1", widgets={"x": 3})

    assert sum(sandbox.stats.requests.values()) == 0


async def test_an_unreachable_catalogue_stops_run_before_uploading(
    sandbox: Sandbox, sdk: Client
) -> None:
    sandbox.chaos.add(method="GET", path="/api/tools", status=503, times=None)

    with pytest.raises(ServerError):
        await sdk.run(ToolSlug.DAY_TO_DUSK, photo())

    nothing_sent(sandbox, uploads=True)


# --- validation off -------------------------------------------------------------------------------


async def test_validation_off_per_call_sends_as_given(sandbox: Sandbox, sdk: Client) -> None:
    order = await sdk.orders.create(photo())

    with pytest.raises(UnprocessableEntityError) as info:
        await sdk.processes.create(
            order.order_id,
            ToolSlug.VIRTUAL_STAGING,
            inputs=order.assets[0].id,
            widgets={"space": "bedroom", "style": "no-such-style"},
            validate=False,
        )

    assert info.value.key.startswith("api_error_")
    assert sandbox.stats.requests["POST /v3/process"] == 1
    assert sandbox.stats.processes_created == 0
    assert sandbox.stats.requests[TOOLS] == 0  # nothing fetched with the checks off


async def test_validation_off_for_the_client(sandbox: Sandbox) -> None:
    async with client_for(sandbox, validate=False) as client:
        with pytest.raises(UnprocessableEntityError):
            await client.run(ToolSlug.VIRTUAL_STAGING, photo(), widgets={"space": "bedroom"})
        assert sandbox.stats.orders_created == 1  # uploaded: nothing was checked first
        assert sandbox.stats.requests["POST /v3/process"] == 1

        # Short names are still expanded by the slug convention, so a right request works.
        process = await client.run(
            ToolSlug.VIRTUAL_STAGING, photo(), widgets={"space": "bedroom", "style": "modern"}
        )
        assert process.status == ProcessStatus.DONE

        # One call may turn the checks back on.
        with pytest.raises(MissingWidgetError):
            await client.run(
                ToolSlug.VIRTUAL_STAGING, photo(), widgets={"space": "bedroom"}, validate=True
            )
    assert sandbox.stats.orders_created == 2


# --- the cache ------------------------------------------------------------------------------------


async def test_a_thundering_herd_fetches_the_catalogue_once(sandbox: Sandbox, sdk: Client) -> None:
    image = photo()

    processes = await asyncio.gather(
        *(sdk.run(ToolSlug.DAY_TO_DUSK, image, timeout=60) for _ in range(200))
    )

    assert all(p.status == ProcessStatus.DONE for p in processes)
    assert len({p.id for p in processes}) == 200
    assert sandbox.stats.requests[TOOLS] == 1
    assert sandbox.stats.requests[WIDGETS] == 1
    assert sandbox.stats.processes_created == 200


async def test_invalidate_fetches_again(sandbox: Sandbox, sdk: Client) -> None:
    await sdk.processes.prepare(ToolSlug.DAY_TO_DUSK, inputs="a1")
    await sdk.processes.prepare(ToolSlug.DAY_TO_DUSK, inputs="a1")
    assert sandbox.stats.requests[TOOLS] == 1

    sdk.catalogue.invalidate()
    await sdk.processes.prepare(ToolSlug.DAY_TO_DUSK, inputs="a1")

    assert sandbox.stats.requests[TOOLS] == 2
    assert sdk.catalogue.ttl == 300.0


async def test_failed_process_is_returned_not_raised(sandbox: Sandbox, sdk: Client) -> None:
    sandbox.config.fail_tools = frozenset({ToolSlug.DAY_TO_DUSK})

    process = await sdk.run(ToolSlug.DAY_TO_DUSK, photo())

    assert process.status == ProcessStatus.FAILED
    assert process.final_assets == ()


@pytest.mark.parametrize(
    ("option", "fix"),
    [
        ({"catalogue_ttl": 0}, "catalogue_ttl"),
        ({"catalogue_ttl": "5"}, "catalogue_ttl"),
        ({"validate": "no"}, "validate"),
    ],
)
def test_bad_catalogue_options(option: dict[str, Any], fix: str) -> None:
    with pytest.raises(ConfigurationError, match=fix):
        Client(api_key="k", base_url="http://127.0.0.1:1", **option)


def test_catalogue_ttl_reaches_the_cache() -> None:
    client = Client(api_key="k", base_url="http://127.0.0.1:1", catalogue_ttl=12)

    assert client.catalogue.ttl == 12.0
    assert client.settings.catalogue_ttl == 12.0
    assert client.settings.validate is True


# --- docs/migration.md ----------------------------------------------------------------------------

MIGRATION = Path(__file__).parents[2] / "docs" / "migration.md"


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL)


def shown_results(block: str) -> dict[str, Any]:
    """``expression  # value`` lines, the value continued on the comment lines below them."""
    shown: dict[str, Any] = {}
    lines = block.splitlines()
    for number, line in enumerate(lines):
        match = re.fullmatch(r"(\S[^#]*?)\s+#\s*(.*)", line)
        if match is None or "=" in match.group(1) or "(" in match.group(1).split(".")[0]:
            continue
        text = [match.group(2)]
        for following in lines[number + 1 :]:
            continued = re.fullmatch(r"\s+#\s*(.*)", following)
            if continued is None:
                break
            text.append(continued.group(1))
        shown[match.group(1)] = ast.literal_eval(" ".join(text))
    return shown


async def test_migration_examples_run(
    sandbox: Sandbox, sdk: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    translate = code_block(MIGRATION, "translate")
    create = python_blocks(MIGRATION)[1]  # a fragment: run below inside a function
    namespace: dict[str, Any] = {}
    exec(compile(translate, str(MIGRATION), "exec"), namespace)  # noqa: S102 - our own docs

    expected = shown_results(translate)
    assert set(expected) == {"translation.tool", "translation.widgets_json()"}
    for expression, value in expected.items():
        assert eval(expression, namespace) == value, expression  # noqa: S307 - our own docs

    # The second example needs a client, the first example's translation and a room.jpg.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "room.jpg").write_bytes(photo())
    body = "".join(f"    {line}\n" for line in create.splitlines())
    exec(  # noqa: S102 - our own docs
        compile(
            f"async def example(client, translation):\n{body}    return created\n", "doc", "exec"
        ),
        namespace,
    )
    created = await namespace["example"](sdk, namespace["translation"])

    assert len(created.process_ids) == 1
    assert sandbox.stats.processes_created == 1
    process = await sdk.processes.wait(created.process_ids[0], timeout=30)
    assert process.status == ProcessStatus.DONE


async def test_migration_helpers_and_claims(sandbox: Sandbox, sdk: Client) -> None:
    assert v1_service_to_tool("service-ai-virtual-staging") == ToolSlug.VIRTUAL_STAGING
    assert v1_space_to_item("space-bedroom") == (STAGING_SPACE, f"item-bedroom-{STAGING_SPACE}")
    assert V1_ENDPOINTS["POST /v1/order"] == "POST /v3/process"
    with pytest.raises(V1MappingError, match="id_map"):
        translate_v1_submit({"service_name": "service-ai-virtual-staging", "widget_ids": [7]})

    # "a translated request without a style is refused before it is sent".
    translation = translate_v1_submit({"order_id": "v1-1", "space_name": "space-bedroom"})
    order = await sdk.orders.create(photo())
    with pytest.raises(MissingWidgetError, match="style"):
        await sdk.processes.create(
            order.order_id,
            translation.tool,
            inputs=order.assets[0].id,
            widgets=translation.widgets_json(),
        )
    nothing_sent(sandbox, uploads=False)

    # The "writing widgets the short way" table.
    enhancement = await sdk.processes.prepare(
        ToolSlug.IMAGE_ENHANCEMENT,
        inputs="a1",
        widgets={
            "space": "outdoor",
            "enhancement_options": ["sky-replacement", "lawn-replacement"],
        },
    )
    options = "widget-enhancement-options-tool-image-enhancement"
    assert enhancement.widgets_json()[1] == {
        "slug": options,
        "item_slugs": [f"item-sky-replacement-{options}", f"item-lawn-replacement-{options}"],
    }
    living = await sdk.processes.prepare(
        ToolSlug.VIRTUAL_STAGING, inputs="a1", widgets={"space": "Living Room", "style": "modern"}
    )
    assert living.widgets_json()[0] == {
        "slug": STAGING_SPACE,
        "item_slugs": [f"item-living-room-{STAGING_SPACE}"],
    }


# --- checked plans, kept per argument value -------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_repeated_request_is_checked_once(sandbox: Sandbox, sdk: Client) -> None:
    order = await sdk.orders.create(photo())
    photo_id = order.assets[0].id
    widgets = {"space": "kitchen", "style": "modern"}

    plans = [
        await sdk.processes.prepare(ToolSlug.VIRTUAL_STAGING, inputs=photo_id, widgets=picks)
        for picks in (widgets, dict(widgets))
    ]
    for picks in (widgets, dict(widgets)):
        await sdk.processes.create(
            order.order_id, ToolSlug.VIRTUAL_STAGING, inputs=photo_id, widgets=picks
        )

    assert plans[0] == plans[1]
    assert plans[0].widgets_json() == [
        {"slug": STAGING_SPACE, "item_slugs": [f"item-kitchen-{STAGING_SPACE}"]},
        {"slug": STAGING_STYLE, "item_slugs": [f"item-modern-{STAGING_STYLE}"]},
    ]
    assert sandbox.stats.processes_created == 2
    assert (sandbox.stats.requests[TOOLS], sandbox.stats.requests[WIDGETS]) == (1, 1)


async def test_a_changed_argument_is_checked_again(sandbox: Sandbox, sdk: Client) -> None:
    order = await sdk.orders.create(photo())
    widgets: dict[str, Any] = {"space": "kitchen", "style": "modern"}
    await sdk.processes.create(
        order.order_id, ToolSlug.VIRTUAL_STAGING, inputs=order.assets[0].id, widgets=widgets
    )

    widgets["style"] = "no-such-style"  # the same dict, changed after the first call
    with pytest.raises(UnknownItemError, match="no-such-style"):
        await sdk.processes.create(
            order.order_id, ToolSlug.VIRTUAL_STAGING, inputs=order.assets[0].id, widgets=widgets
        )
    widgets["style"] = ["modern", "scandinavian"]  # a list where the plan had one name
    with pytest.raises(SelectionError, match="takes one item"):
        await sdk.processes.create(
            order.order_id, ToolSlug.VIRTUAL_STAGING, inputs=order.assets[0].id, widgets=widgets
        )
    assert sandbox.stats.processes_created == 1


async def test_a_kept_plan_lasts_no_longer_than_the_catalogue(
    sandbox: Sandbox, sdk: Client
) -> None:
    clock = _Clock()
    sdk.catalogue.clock = clock
    picks = {"space": "bedroom", "style": "modern"}
    for _ in range(3):
        await sdk.processes.prepare(ToolSlug.VIRTUAL_STAGING, inputs="a1", widgets=picks)
    assert (sandbox.stats.requests[TOOLS], sandbox.stats.requests[WIDGETS]) == (1, 1)

    clock.now += sdk.catalogue.ttl + 1  # past the TTL: the plan is checked against a new fetch
    await sdk.processes.prepare(ToolSlug.VIRTUAL_STAGING, inputs="a1", widgets=picks)
    assert (sandbox.stats.requests[TOOLS], sandbox.stats.requests[WIDGETS]) == (2, 2)

    sdk.catalogue.invalidate()
    await sdk.processes.prepare(ToolSlug.VIRTUAL_STAGING, inputs="a1", widgets=picks)
    assert (sandbox.stats.requests[TOOLS], sandbox.stats.requests[WIDGETS]) == (3, 3)


async def test_an_unchecked_plan_follows_what_the_cache_holds(
    sandbox: Sandbox, sdk: Client
) -> None:
    picks = {"Room type": "bedroom"}  # the widget's name, which only the catalogue knows
    before = await sdk.processes.prepare(
        ToolSlug.VIRTUAL_STAGING, inputs="a1", widgets=picks, validate=False
    )
    await sdk.catalogue.catalogue(ToolSlug.VIRTUAL_STAGING)  # now the catalogue is at hand
    after = await sdk.processes.prepare(
        ToolSlug.VIRTUAL_STAGING, inputs="a1", widgets=picks, validate=False
    )

    assert not before.validated
    assert not after.validated
    assert before.widgets_json() == [
        {
            "slug": "widget-room-type-tool-virtual-staging",
            "item_slugs": ["item-bedroom-widget-room-type-tool-virtual-staging"],
        }
    ]
    assert after.widgets_json() == [
        {"slug": STAGING_SPACE, "item_slugs": [f"item-bedroom-{STAGING_SPACE}"]}
    ]
