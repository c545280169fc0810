"""Every chaos switch of the sandbox against GET and POST: the documented retry or error, and no
POST ever creates a second process or order.

What is documented (``RetryPolicy``, ``translate`` in ``_transport.py``):

* 429 is retried for every method (``Retry-After`` seconds or date, else backoff); a
  ``Retry-After`` past ``max_retry_after`` is raised at once with ``retry_after`` set.
* 502, 503 and 504 are retried for GET only; 500 is never retried.
* Network failures (dropped connection, timeout) are retried for GET; for POST only when the
  request surely never reached the server, which a dropped or timed-out request did.
* A 2xx body that is not JSON of the expected shape (truncated, an HTML page) is
  ``APIDecodeError`` and is not retried.

A POST outcome is checked against what the client *believes*: a result means the ids it holds
were created (and nothing else); a 429, or a failure with ``request_sent=False``, means nothing
was created; anything else is "unknown", and then at most one was created.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import attrs
import pytest

from asyncsdk import (
    APIConnectionError,
    APIDecodeError,
    APITimeoutError,
    AsyncSDKError,
    Client,
    RateLimitError,
    ServerError,
    Timeout,
)
from asyncsdk.sandbox import Sandbox, SandboxConfig

from ._shared import SLOT, STAGING_WIDGETS, TOOL, photo, sandbox_client

MAX_RETRIES = 3
TOTAL_TIMEOUT = 2.0  # seconds per attempt under a switch that stalls: the client gives up first
SLOW = 4.0
STALLING = frozenset({"slow", "slow_body"})
PAST_DATE = email.utils.formatdate(time.time() - 60, usegmt=True)


@attrs.frozen
class Expect:
    """The documented outcome: ``error`` (None for success) after ``attempts`` requests."""

    error: type[AsyncSDKError] | None
    attempts: int
    created: int = 0
    """For POST: how many processes/orders the sandbox holds afterwards (0 or 1)."""
    abandoned: bool = False
    """The server is still working on the request when the client gives up: stop the sandbox
    (which lets running requests finish) before counting."""


def ok(attempts: int, created: int = 1) -> Expect:
    return Expect(None, attempts, created)


def fails(
    error: type[AsyncSDKError], attempts: int = 1, created: int = 0, *, abandoned: bool = False
) -> Expect:
    return Expect(error, attempts, created, abandoned)


@attrs.frozen
class Fault:
    rule: dict[str, Any]
    get: Expect
    post: Expect


FAULTS: dict[str, Fault] = {
    "429": Fault({"kind": "rate_limit"}, ok(2), ok(2)),
    "429-retry-after-seconds": Fault({"kind": "rate_limit", "retry_after": 0.05}, ok(2), ok(2)),
    "429-retry-after-date": Fault({"kind": "rate_limit", "retry_after": PAST_DATE}, ok(2), ok(2)),
    "429-retry-after-too-long": Fault(
        {"kind": "rate_limit", "retry_after": 3600}, fails(RateLimitError), fails(RateLimitError)
    ),
    "429-every-time": Fault(
        {"kind": "rate_limit", "times": None},
        fails(RateLimitError, MAX_RETRIES + 1),
        fails(RateLimitError, MAX_RETRIES + 1),
    ),
    "500": Fault({"status": 500}, fails(ServerError), fails(ServerError)),
    "502": Fault({"status": 502}, ok(2), fails(ServerError)),
    "503": Fault({"status": 503, "retry_after": 0.01}, ok(2), fails(ServerError)),
    "504": Fault({"status": 504}, ok(2), fails(ServerError)),
    "503-every-time": Fault(
        {"status": 503, "times": None}, fails(ServerError, MAX_RETRIES + 1), fails(ServerError)
    ),
    "drop-before-processing": Fault(
        {"kind": "drop_before"}, ok(2), fails(APIConnectionError, created=0)
    ),
    "drop-after-processing": Fault(
        {"kind": "drop_after"}, ok(2), fails(APIConnectionError, created=1)
    ),
    # The sandbox reads the body after the delay, from a connection the client has closed by
    # then: nothing is created.  The client cannot know that, and says request_sent=True.
    "slow-headers": Fault(
        {"kind": "slow", "delay": SLOW}, ok(2), fails(APITimeoutError, abandoned=True)
    ),
    "slow-body": Fault(
        {"kind": "slow_body", "delay": SLOW}, ok(2), fails(APITimeoutError, created=1)
    ),
    "truncated-json": Fault(
        {"kind": "truncated_json"}, fails(APIDecodeError), fails(APIDecodeError, created=1)
    ),
    "html-502-from-proxy": Fault({"kind": "html"}, ok(2), fails(ServerError)),
    "html-200-from-proxy": Fault(
        {"kind": "html", "status": 200}, fails(APIDecodeError), fails(APIDecodeError)
    ),
}


@pytest.fixture
async def sb() -> AsyncIterator[Sandbox]:
    async with Sandbox(SandboxConfig(seed=7)) as sandbox:
        yield sandbox


@pytest.fixture
async def client(sb: Sandbox) -> AsyncIterator[Client]:
    async with sandbox_client(sb, max_retries=MAX_RETRIES) as sdk:
        yield sdk


def under(client: Client, rule: dict[str, Any]) -> Client:
    """``client`` for the request a chaos ``rule`` meets.  Where the rule stalls the answer,
    each attempt gives up after ``TOTAL_TIMEOUT`` s, before the stall (``SLOW``) ends; under any
    other, the client's own 10 s, which an upload on a busy machine can need (one took over
    1 s)."""
    if rule.get("kind") in STALLING:
        return client.with_options(timeout=Timeout(connect=5.0, total=TOTAL_TIMEOUT))
    return client


def believed(result: tuple[str, ...] | None, error: BaseException | None) -> int | None:
    """How many objects the client's caller may assume were created; None: cannot tell."""
    if error is None:
        assert result is not None
        return len(result)
    if isinstance(error, RateLimitError):
        return 0  # the service refused without doing anything
    if isinstance(error, APIConnectionError) and not error.request_sent:
        return 0
    return None


async def outcome(
    call: Callable[[], Awaitable[tuple[str, ...]]],
) -> tuple[tuple[str, ...] | None, AsyncSDKError | None]:
    try:
        return await call(), None
    except AsyncSDKError as exc:
        return None, exc


def check_error(error: AsyncSDKError | None, expect: Expect) -> None:
    if expect.error is None:
        assert error is None, f"expected success, got {error!r}"
        return
    assert isinstance(error, expect.error), f"expected {expect.error.__name__}, got {error!r}"
    assert str(error)
    if isinstance(error, APIConnectionError):
        # Dropped or timed out after sending: the client must say it may have reached the server.
        assert error.request_sent


@pytest.mark.parametrize("name", list(FAULTS))
async def test_get_process(sb: Sandbox, client: Client, name: str) -> None:
    fault = FAULTS[name]
    order = await client.orders.create(photo())
    created = await client.processes.create(
        order.order_id, TOOL, {SLOT: order.assets[0].id}, STAGING_WIDGETS
    )
    (process_id,) = created.process_ids
    route = "GET /v3/process/{id}"
    before = sb.stats.requests[route]
    sb.chaos.add(method="GET", path="/v3/process/{id}", **fault.rule)

    result, error = await outcome(
        lambda: _ids_of(under(client, fault.rule).processes.get(process_id)),
    )

    check_error(error, fault.get)
    if error is None:
        assert result == (process_id,)
    if isinstance(error, RateLimitError) and "retry_after" in fault.rule:
        assert error.retry_after == fault.rule["retry_after"]
    assert sb.stats.requests[route] - before == fault.get.attempts
    assert sb.stats.processes_created == 1  # reads create nothing


async def _ids_of(call: Awaitable[Any]) -> tuple[str, ...]:
    value = await call
    return (value.id,)


@pytest.mark.parametrize("name", list(FAULTS))
async def test_create_process(sb: Sandbox, client: Client, name: str) -> None:
    fault = FAULTS[name]
    order = await client.orders.create(photo())
    route = "POST /v3/process"
    sb.chaos.add(method="POST", path="/v3/process", **fault.rule)

    async def create() -> tuple[str, ...]:
        answer = await under(client, fault.rule).processes.create(
            order.order_id, TOOL, {SLOT: order.assets[0].id}, STAGING_WIDGETS
        )
        return answer.process_ids

    result, error = await outcome(create)

    check_error(error, fault.post)
    assert sb.stats.requests[route] == fault.post.attempts
    if fault.post.abandoned:
        await sb.stop()  # lets the request the client gave up on finish first
        assert sb.stats.processes_created == fault.post.created
        assert believed(result, error) is None
        return
    sb.chaos.clear()
    held = [p.id for p in (await client.orders.get(order.order_id)).processes]
    assert len(held) == sb.stats.processes_created == fault.post.created <= 1
    assert_belief(result, error, held)
    if isinstance(error, APIDecodeError) and fault.post.created:
        assert error.status == 201  # the caller can tell the POST succeeded on the server


@pytest.mark.parametrize("name", list(FAULTS))
async def test_create_order(sb: Sandbox, client: Client, name: str) -> None:
    fault = FAULTS[name]
    route = "POST /v3/order"
    sb.chaos.add(method="POST", path="/v3/order", **fault.rule)

    async def create() -> tuple[str, ...]:
        return ((await under(client, fault.rule).orders.create(photo())).order_id,)

    result, error = await outcome(create)

    check_error(error, fault.post)
    assert sb.stats.requests[route] == fault.post.attempts
    if fault.post.abandoned:
        await sb.stop()  # lets the request the client gave up on finish first
        assert sb.stats.orders_created == fault.post.created
        assert believed(result, error) is None
        return
    sb.chaos.clear()
    listing = await client.projects.list(limit=30)
    default = next(p for p in listing.data if p.default) if listing.data else None
    held: list[str] = []
    if default is not None:
        orders = await client.projects.orders(default.id, limit=30)
        held = [o.id for o in orders.data]
    assert len(held) == sb.stats.orders_created == fault.post.created <= 1
    assert_belief(result, error, held)


def assert_belief(
    result: tuple[str, ...] | None, error: AsyncSDKError | None, held: list[str]
) -> None:
    belief = believed(result, error)
    if belief is None:
        assert len(held) <= 1
    else:
        assert len(held) == belief
    if result is not None:
        assert list(result) == held


async def test_random_faults_never_duplicate_a_process(sb: Sandbox, client: Client) -> None:
    """Thirty creations under a mix of every fast switch: per order at most one process, and
    exactly the ones the client reported."""
    orders = [await client.orders.create(photo()) for _ in range(30)]
    for rule in (
        {"kind": "rate_limit"},
        {"status": 500},
        {"status": 502},
        {"status": 503},
        {"kind": "drop_before"},
        {"kind": "drop_after"},
        {"kind": "truncated_json"},
        {"kind": "html"},
        {"kind": "slow_body", "delay": SLOW},
    ):
        sb.chaos.add(method="POST", path="/v3/process", times=None, probability=0.08, **rule)

    creating = under(client, {"kind": "slow_body"})  # the mix stalls some answers
    outcomes = []
    for order in orders:

        async def create(order_id: str = order.order_id, asset: str = order.assets[0].id) -> Any:
            answer = await creating.processes.create(order_id, TOOL, {SLOT: asset}, STAGING_WIDGETS)
            return answer.process_ids

        outcomes.append(await outcome(create))
    sb.chaos.clear()

    assert sum(sb.stats.chaos_fired.values()) > 0  # the mix did fire
    total = 0
    for order, (result, error) in zip(orders, outcomes, strict=True):
        held = [p.id for p in (await client.orders.get(order.order_id)).processes]
        assert_belief(result, error, held)
        total += len(held)
    assert total == sb.stats.processes_created
    assert sum(result is not None for result, _ in outcomes) > 0
