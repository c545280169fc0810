"""Pacing against a strict fake of the service: the generation limit (10 per window, 429 without
``Retry-After`` beyond it) and the poll floor (one GET of a process per interval, retries
included).  The fake records when each request arrived and what it carried."""

from __future__ import annotations

import asyncio
import io
import itertools
import math
import time
from collections import deque

import pytest
from aiohttp import web
from PIL import Image

from asyncsdk import (
    BadRequestError,
    Client,
    ConfigurationError,
    GenerationLimit,
    RateLimitError,
    ToolSlug,
    Upload,
    ValidationError,
)
from asyncsdk.sandbox import Sandbox

from ._fake import JPEG, FakeService, Reply, Seen, created_order_json, process_json
from .conftest import MakeClient

CREATE = ("POST", "/v3/process")
SLOT = "tool-x-input-image"


def strict_generations(fake: FakeService, *, max_calls: int, period: float) -> None:
    """POST /v3/process as the service counts it: ``max_calls`` per ``period`` seconds, then 429
    with the rate-limit body and no ``Retry-After``."""
    starts: deque[float] = deque()
    ids = itertools.count(1)

    async def create(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        fake.record(request, body)
        now = time.monotonic()
        while starts and starts[0] <= now - period:
            starts.popleft()
        if len(starts) >= max_calls:
            return web.json_response({"error": "rate-limit exceeded"}, status=429)
        starts.append(now)
        return web.json_response({"process_ids": [f"pr{next(ids)}"]}, status=201)

    fake.script(*CREATE, create)


def gaps(seen: list[Seen]) -> list[float]:
    return [later.at - earlier.at for earlier, later in itertools.pairwise(seen)]


# --- the generation limit -------------------------------------------------------------------------


async def test_the_generation_limit_is_on_by_default() -> None:
    client = Client(api_key="sk_test_x", base_url="http://127.0.0.1:9")

    assert client.generation_limit is not None
    assert (client.generation_limit.max_calls, client.generation_limit.period) == (10, 600.0)
    assert (
        Client(api_key="k", base_url="http://127.0.0.1:9", generation_limit=None).generation_limit
        is None
    )
    await client.close()


def test_a_generation_limit_has_a_finite_period() -> None:
    # No pacing at all is generation_limit=None, not an endless window.
    with pytest.raises(ConfigurationError, match="period must be a finite number of seconds"):
        GenerationLimit(period=math.inf)


async def test_concurrent_runs_queue_for_a_place_before_uploading(
    fake: FakeService, make_client: MakeClient
) -> None:
    """Twelve run() calls at once: all succeed, and the eleventh and twelfth upload their photo
    only once the window has room, so no upload is paid for a process that cannot be created.

    The window is long enough that the first ten uploads fit in its first half on a busy machine
    (the suite's other processes share its cores)."""
    period = 1.5
    strict_generations(fake, max_calls=10, period=period)
    fake.script("POST", "/v3/order", Reply(status=201, json=created_order_json()))
    for n in range(1, 13):
        fake.script("GET", f"/v3/process/pr{n}", Reply(json=process_json(f"pr{n}", "done")))
    client = make_client(generation_limit=GenerationLimit(max_calls=10, period=period))

    started = time.monotonic()
    done = await asyncio.gather(
        *(client.run("tool-x", JPEG, timeout=10) for _ in range(12)), return_exceptions=True
    )

    assert [d for d in done if isinstance(d, BaseException)] == []
    posts = fake.requests(*CREATE)
    assert len(posts) == 12  # never a 429: the client waited instead
    uploads = sorted(seen.at for seen in fake.requests("POST", "/v3/order"))
    assert uploads[9] - started < period / 2
    assert uploads[10] - started >= period * 0.95  # uploaded only once a place was free


async def test_a_429_on_generation_waits_for_the_limiter_not_a_quick_retry(
    fake: FakeService, make_client: MakeClient
) -> None:
    """Another program spent the account: the refused creation is tried again one pace
    (period / max_calls) later, not after a backoff of milliseconds."""
    fake.script(
        *CREATE,
        Reply(status=429, json={"error": "rate-limit exceeded"}),
        Reply(status=201, json={"process_ids": ["pr1"]}),
    )
    client = make_client(generation_limit=GenerationLimit(max_calls=4, period=1.0))

    created = await client.processes.create("o1", "tool-x", {SLOT: "a1"})

    assert created.process_ids == ("pr1",)
    posts = fake.requests(*CREATE)
    assert len(posts) == 2
    assert posts[1].at - posts[0].at >= 0.25 * 0.95  # one pace: 1.0 s / 4
    assert posts[1].json() == posts[0].json()


async def test_a_429_on_generation_without_a_limiter_is_raised_at_once(
    fake: FakeService, make_client: MakeClient
) -> None:
    fake.script(*CREATE, Reply(status=429, json={"error": "rate-limit exceeded"}))
    client = make_client(generation_limit=None)

    with pytest.raises(RateLimitError, match=r"about 60 s.*GenerationLimit") as info:
        await client.processes.create("o1", "tool-x", {SLOT: "a1"})

    assert info.value.retry_after == 60.0
    assert len(fake.requests(*CREATE)) == 1  # never retried blindly


async def test_a_v1_submit_is_a_generation_too(fake: FakeService, make_client: MakeClient) -> None:
    fake.script("POST", "/v1/order", Reply(status=429, json={"error": "rate-limit exceeded"}))
    client = make_client(generation_limit=None)

    with pytest.raises(RateLimitError) as info:
        await client.v1.submit_order(
            "v1o", service_name="service-ai-virtual-staging", widget_ids=[3]
        )

    assert info.value.retry_after == 60.0
    assert len(fake.requests("POST", "/v1/order")) == 1  # not retried blindly either


async def test_a_429_with_retry_after_on_generation_is_still_honoured(
    fake: FakeService, make_client: MakeClient
) -> None:
    fake.script(
        *CREATE,
        Reply(status=429, json={"error": "slow down"}, headers={"Retry-After": "0.2"}),
        Reply(status=201, json={"process_ids": ["pr1"]}),
    )
    client = make_client(generation_limit=None)

    await client.processes.create("o1", "tool-x", {SLOT: "a1"})

    posts = fake.requests(*CREATE)
    assert posts[1].at - posts[0].at >= 0.19


# --- the poll floor -------------------------------------------------------------------------------


def strict_polls(fake: FakeService, process_id: str, interval: float, *first: int) -> None:
    """GET of one process as the service limits it: sooner than ``interval`` after the last one
    answers 429 (``Retry-After: 0``); ``first`` are statuses answered before the real ones."""
    last: list[float] = []
    scripted = list(first)

    async def get(request: web.Request) -> web.StreamResponse:
        fake.record(request)
        now = time.monotonic()
        too_soon = bool(last) and now - last[-1] < interval
        last.append(now)
        if too_soon:
            return web.json_response(
                {"error": "rate-limit exceeded"}, status=429, headers={"Retry-After": "0"}
            )
        if scripted:
            return web.json_response({"error": "busy"}, status=scripted.pop(0))
        return web.json_response(process_json(process_id, "done"))

    fake.script("GET", f"/v3/process/{process_id}", get)


@pytest.mark.parametrize(
    "status", [503, 429], ids=["503-retried-by-backoff", "429-with-retry-after-0"]
)
async def test_retries_of_a_process_get_keep_to_the_floor(
    fake: FakeService, make_client: MakeClient, status: int
) -> None:
    interval = 0.3
    strict_polls(fake, "pr1", interval, status)
    client = make_client(min_poll_interval=interval)

    process = await client.processes.get("pr1")

    assert process.status == "done"
    seen = fake.requests("GET", "/v3/process/pr1")
    assert len(seen) == 2  # one retry, and the service never saw one too soon
    assert all(gap >= interval * 0.95 for gap in gaps(seen))


async def test_every_code_path_shares_the_floor_of_a_process(
    fake: FakeService, make_client: MakeClient
) -> None:
    """wait() and plain get() calls of one process, at once: the GETs of that process are spread
    one interval apart, while another process is not held up by them (the interval long enough
    for "not held up" to hold on a busy machine)."""
    interval = 1.0
    strict_polls(fake, "pr1", interval)
    strict_polls(fake, "pr2", interval)
    client = make_client(min_poll_interval=interval)

    started = time.monotonic()
    await asyncio.gather(
        client.processes.wait("pr1", timeout=10),
        client.processes.get("pr1"),
        client.processes.get("pr1"),
        client.processes.get("pr2"),
    )

    first = fake.requests("GET", "/v3/process/pr1")
    assert len(first) == 3
    assert all(gap >= interval * 0.95 for gap in gaps(first))
    [other] = fake.requests("GET", "/v3/process/pr2")
    assert other.at - started < interval / 2


# --- order roles ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("images", "fix"),
    [
        ((Upload(JPEG, role="secondary_angle"),), r"exactly one primary_angle.*got none"),
        ((JPEG, Upload(JPEG, role="front_angle")), r"unknown asset role 'front_angle'.*secondary"),
        ((JPEG, JPEG), r"at most one primary_angle.*role='secondary_angle'"),
        (
            (JPEG, Upload(JPEG, role="secondary_angle"), Upload(JPEG, role="secondary_angle")),
            r"at most one secondary_angle image, got 2; put each further angle in an order of",
        ),
    ],
    ids=["no-primary", "unknown-role", "two-primaries", "two-secondaries"],
)
async def test_order_roles_are_checked_before_uploading(
    fake: FakeService, client: Client, images: tuple[Upload | bytes, ...], fix: str
) -> None:
    with pytest.raises(ValidationError, match=fix):
        await client.orders.create(*images)
    with pytest.raises(ValidationError, match=fix):
        await client.run("tool-x", *images, asset_map={SLOT: 0})
    assert fake.seen == []


# --- against the sandbox --------------------------------------------------------------------------


def sandbox_photo() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 140, 160)).save(buffer, "JPEG")
    return buffer.getvalue()


async def test_concurrent_runs_against_the_sandbox_limit_never_draw_a_429(sandbox: Sandbox) -> None:
    sandbox.config.rate_limit = True
    sandbox.config.rate_limit_count = 10
    sandbox.config.rate_limit_window = 0.5
    photo = sandbox_photo()

    async with sandbox.client() as client:  # its GenerationLimit: the sandbox's 10 per 0.5 s
        started = time.monotonic()
        processes = await asyncio.gather(
            *(client.run(ToolSlug.DAY_TO_DUSK, photo, timeout=30) for _ in range(12))
        )
        elapsed = time.monotonic() - started

    assert [p.status for p in processes] == ["done"] * 12
    assert sandbox.stats.requests["POST /v3/process"] == 12  # no 429, no retry
    assert sandbox.stats.processes_created == 12
    assert elapsed >= 0.5  # the last two waited for the window


async def test_order_roles_are_checked_before_uploading_to_the_sandbox(sandbox: Sandbox) -> None:
    async with sandbox.client() as client:
        with pytest.raises(ValidationError, match="exactly one primary_angle"):
            await client.run(
                ToolSlug.DAY_TO_DUSK,
                Upload(sandbox_photo(), role="secondary_angle"),
                asset_map={"image": 0},
            )
        with pytest.raises(ValidationError, match="primary_angle, secondary_angle, mask"):
            await client.orders.create(sandbox_photo(), Upload(sandbox_photo(), role="front_angle"))

    assert sandbox.stats.orders_created == 0
    assert sandbox.stats.requests["POST /v3/order"] == 0


async def test_a_run_whose_upload_fails_gives_its_place_back(
    fake: FakeService, make_client: MakeClient
) -> None:
    """The place was taken for a creation that was never sent: neither the next run nor one
    already waiting waits for it (before, it stayed counted for the whole window)."""
    upload_failing = asyncio.Event()
    uploads = itertools.count()

    async def order(request: web.Request) -> web.StreamResponse:
        await request.read()
        fake.record(request)
        if next(uploads) == 0:
            await upload_failing.wait()
            return web.json_response({"error": "the image could not be decoded"}, status=400)
        return web.json_response(created_order_json(), status=201)

    fake.script("POST", "/v3/order", order, order, order)
    fake.script(*CREATE, Reply(status=201, json={"process_ids": ["pr1"]}))
    fake.script("GET", "/v3/process/pr1", Reply(json=process_json("pr1", "done")))
    limit = GenerationLimit(max_calls=1, period=600.0)
    client = make_client(generation_limit=limit)

    failing = asyncio.create_task(client.run("tool-x", JPEG, timeout=10))
    await asyncio.sleep(0.2)  # the first run holds the only place, uploading
    waiting = asyncio.create_task(client.run("tool-x", JPEG, timeout=10))
    await asyncio.sleep(0.2)
    assert len(fake.requests("POST", "/v3/order")) == 1  # the second waits for a place
    upload_failing.set()

    with pytest.raises(BadRequestError):
        await failing
    done = await asyncio.wait_for(waiting, 10)  # not after the 600 s window
    assert done.status == "done"
    assert len(fake.requests(*CREATE)) == 1
    assert limit.wait_time() > 500  # the place of the one process created stays counted


async def test_a_creation_given_the_place_its_caller_took_does_not_wait_for_another(
    fake: FakeService, make_client: MakeClient
) -> None:
    fake.script(*CREATE, Reply(status=201, json={"process_ids": ["pr1"]}))
    limit = GenerationLimit(max_calls=1, period=600.0)
    client = make_client(generation_limit=limit)
    prepared = await client.processes.prepare("tool-x", inputs={SLOT: "a1"})

    counted = await limit.acquire()  # the only place: taken before, as run() does for its uploads
    created = await asyncio.wait_for(
        client.processes.create_prepared("o1", prepared, reserved=counted), 10
    )

    assert created.process_ids == ("pr1",)
    assert 500 < limit.wait_time() <= 600  # one place counted, from the creation's answer


def test_one_limit_serves_clients_of_one_event_loop_after_another() -> None:
    """A limit shared by several clients may outlive an event loop (one asyncio.run per job)."""
    limit = GenerationLimit(max_calls=1, period=0.05)

    async def two_places() -> None:
        await limit.acquire()
        await limit.acquire()  # waits for the first to leave the window

    asyncio.run(two_places())
    asyncio.run(two_places())
