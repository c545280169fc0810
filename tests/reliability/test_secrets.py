"""Secrets stay secret: the API key, webhook tokens, and what result URLs may do.

* The API key never shows in a log line (every logger at DEBUG, the server's access log
  included), a repr, an exception message or attribute, or a traceback rendered with the locals
  of every frame, across a workload that meets every kind of failure.
* Webhook tokens are compared with ``hmac.compare_digest`` (seen in the source and in behaviour)
  and never reach the access log.
* Result downloads fetch only http(s) URLs, and with fetch-back handlers get the result URLs from
  the API, never from the delivered body.
"""

from __future__ import annotations

import ast
import hmac
import inspect
import logging
import secrets
import socket
import sys
import textwrap
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from asyncsdk import (
    APIConnectionError,
    APIDecodeError,
    APITimeoutError,
    AuthenticationError,
    Client,
    ConfigurationError,
    GenerationLimit,
    NotFoundError,
    ProcessCompleted,
    ProcessStatus,
    RateLimitError,
    ServerError,
    UnprocessableEntityError,
    ValidationError,
)
from asyncsdk.sandbox import Sandbox, SandboxConfig
from webhooks import (
    Delivery,
    MemoryInbox,
    NoVerification,
    RedactingAccessLogger,
    StandardWebhooksVerifier,
    TokenVerifier,
    WebhookReceiver,
)

from ._shared import SLOT, STAGING_WIDGETS, TOOL, eventually, photo

KEY = "sk_live_" + secrets.token_hex(24)
BAD_KEY = "sk_live_" + secrets.token_hex(24)
ACCESS_FORMAT = '%a %t "%r" %s %b "%{Referer}i" "%{User-Agent}i"'


# --- the API key ------------------------------------------------------------------------------


def renderings(exc: BaseException) -> Iterator[str]:
    """Every way an exception is commonly shown: str, repr, attributes, tracebacks with locals."""
    yield str(exc)
    yield repr(exc)
    yield repr(vars(exc))
    yield "".join(traceback.format_exception(exc))
    yield "".join(traceback.TracebackException.from_exception(exc, capture_locals=True).format())


@pytest.fixture
async def logged_sandbox() -> AsyncIterator[tuple[Sandbox, str]]:
    """The sandbox app served with aiohttp's access log on, knowing only ``KEY``."""
    sb = Sandbox(SandboxConfig(api_keys={KEY: None}))
    runner = web.AppRunner(
        sb.app,
        access_log=logging.getLogger("aiohttp.access"),
        access_log_format=ACCESS_FORMAT,
        handle_signals=False,
        shutdown_timeout=1.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield sb, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_api_key_never_appears_in_logs_reprs_errors_or_tracebacks(
    logged_sandbox: tuple[Sandbox, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger: asyncsdk, aiohttp.*, webhooks, asyncio
    sb, base_url = logged_sandbox
    shown: list[str] = []
    errors: list[BaseException] = []

    def client(api_key: str = KEY, url: str = base_url, **options: Any) -> Client:
        options.setdefault("backoff_initial", 0.001)
        options.setdefault("backoff_max", 0.005)
        options.setdefault("min_poll_interval", 0.01)
        # The service's generation window (10 per 600 s) shortened, as Sandbox.client does.
        options.setdefault("generation_limit", GenerationLimit(max_calls=10, period=0.01))
        sdk = Client(api_key=api_key, base_url=url, **options)
        shown.extend([repr(sdk), str(sdk), repr(sdk.settings), repr(sdk._transport)])
        return sdk

    async def expect(error: type[BaseException], call: Awaitable[Any]) -> None:
        with pytest.raises(error) as info:
            await call
        errors.append(info.value)

    async with client() as sdk, client(BAD_KEY) as intruder:
        # The happy path, every object returned shown.
        project = await sdk.projects.create("12 Oak Street")
        order = await sdk.orders.create(photo(), project_id=project.id)
        created = await sdk.processes.create(
            order.order_id, TOOL, {SLOT: order.assets[0].id}, STAGING_WIDGETS
        )
        process = await sdk.processes.wait(created.process_ids[0], timeout=30)
        assert process.status == ProcessStatus.DONE
        results: list[object] = [
            project,
            order,
            created,
            process,
            await sdk.processes.get(process.id),
            await sdk.orders.get(order.order_id),
            await sdk.projects.list(),
            await sdk.tools.list(),
            await sdk.tools.widgets(TOOL),
        ]
        shown.extend(repr(result) for result in results)

        # Every kind of failure.
        await expect(AuthenticationError, intruder.projects.list())
        await expect(NotFoundError, sdk.processes.get("no-such-process"))
        other = await sdk.orders.create(photo())
        await expect(  # an asset of another order: only the service can tell
            UnprocessableEntityError,
            sdk.processes.create(order.order_id, TOOL, {SLOT: other.assets[0].id}, STAGING_WIDGETS),
        )
        for rule, error in (
            ({"kind": "rate_limit"}, RateLimitError),
            ({"status": 500}, ServerError),
            ({"status": 503}, ServerError),
            ({"kind": "html"}, ServerError),
            ({"kind": "drop_before"}, APIConnectionError),
            ({"kind": "drop_after"}, APIConnectionError),
            ({"kind": "truncated_json"}, APIDecodeError),
            ({"kind": "slow_body", "delay": 0.4}, APITimeoutError),
            ({"kind": "slow", "delay": 0.4}, APITimeoutError),
        ):
            sb.chaos.add(method="GET", path="/v3/process/{id}", times=None, **rule)
            await expect(error, sdk.processes.get(process.id, timeout=0.15))
            sb.chaos.add(method="POST", path="/v3/process", times=None, **rule)
            await expect(
                error,
                sdk.processes.create(
                    order.order_id,
                    TOOL,
                    {SLOT: order.assets[0].id},
                    STAGING_WIDGETS,
                    timeout=0.15,
                ),
            )
            sb.chaos.clear()
    async with client(url=f"http://127.0.0.1:{closed_port()}", max_retries=1) as nowhere:
        await expect(APIConnectionError, nowhere.projects.list())
    await expect(ConfigurationError, sdk.projects.list())  # closed
    with pytest.raises(ConfigurationError) as spaced:
        Client(api_key=f"{KEY}\u00e9", base_url=base_url, max_retries=2)  # not ASCII
    errors.append(spaced.value)
    with pytest.raises(ConfigurationError) as bad_option:
        Client(api_key=KEY, base_url=base_url, max_retries=-1)
    errors.append(bad_option.value)
    # A key pasted into the URL is refused without being repeated (the frames of this call hold
    # the URL as an argument, so only the message and the plain traceback are checked).
    with pytest.raises(ConfigurationError) as in_url:
        Client(api_key=KEY, base_url=f"https://user:{KEY}@api.example")
    shown.extend([str(in_url.value), repr(in_url.value), *traceback.format_exception(in_url.value)])

    for exc in errors:
        shown.extend(renderings(exc))
    logged = [caplog.text]
    for record in caplog.records:
        logged.append(record.getMessage())
        logged.append(repr(record.args))
        if record.exc_info and record.exc_info[1] is not None:
            # Logged by either side; the sandbox's own frames hold its key table, so the logged
            # tracebacks are rendered as a log handler does, without locals.
            logged.append("".join(traceback.format_exception(record.exc_info[1])))

    access = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert len(access) > 40  # the access log was on and saw the workload
    assert any("retrying" in r.getMessage() for r in caplog.records)  # retries were logged
    assert_absent([KEY, BAD_KEY], shown + logged)


def assert_absent(secrets_: list[str], texts: list[str]) -> None:
    """Fail naming where a secret showed (with the secret itself masked in the message)."""
    for text in texts:
        for secret in secrets_:
            at = text.find(secret)
            if at >= 0:
                context = text[max(0, at - 1500) : at + 200].replace(secret, "<SECRET>")
                raise AssertionError(f"a secret appears in:\n{context}")


# --- webhook tokens ----------------------------------------------------------------------------

TOKEN = "hook-" + secrets.token_urlsafe(32)
OLD_TOKEN = "old-" + secrets.token_urlsafe(32)


def delivery(path_token: str | None = None, header_token: str | None = None) -> Delivery:
    return Delivery(
        headers={} if header_token is None else {"x-webhook-token": header_token},
        path_params={} if path_token is None else {"webhook_token": path_token},
        body=b"{}",
    )


def test_token_comparison_is_hmac_compare_digest_in_the_source() -> None:
    for verify in (TokenVerifier.verify, StandardWebhooksVerifier.verify):
        tree = ast.parse(textwrap.dedent(inspect.getsource(verify)))
        calls = [ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)]
        assert "hmac.compare_digest" in calls
        # No secret is ever compared with == or != (those stop at the first differing byte).
        equality = [
            ast.unparse(node)
            for node in ast.walk(tree)
            if isinstance(node, ast.Compare)
            and any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops)
        ]
        assert equality == []


class CompareDigestCalls:
    """Counts calls of ``hmac.compare_digest`` (a C function) with a profiler: no patching."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> CompareDigestCalls:
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *_: object) -> None:
        sys.setprofile(None)

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and arg is hmac.compare_digest:
            self.count += 1


@pytest.mark.parametrize(
    ("given", "accepted"),
    [
        (TOKEN, True),
        (OLD_TOKEN, True),  # still valid while rotating
        ("x" * len(TOKEN), False),  # wrong, same length
        (TOKEN[:-1] + ("A" if TOKEN[-1] != "A" else "B"), False),  # wrong in the last byte only
        (TOKEN[:8], False),  # a prefix
        (TOKEN + "x", False),  # longer
        ("", False),
        ("é" * 10, False),  # not ASCII
    ],
    # Named, not by their random tokens: every test process (pytest-xdist's too) collects the same.
    ids=["token", "old-token", "same-length", "last-byte", "prefix", "longer", "empty", "ascii"],
)
def test_tokens_are_compared_in_constant_time(given: str, accepted: bool) -> None:
    verifier = TokenVerifier([TOKEN, OLD_TOKEN])
    for where in (delivery(path_token=given), delivery(header_token=given)):
        with CompareDigestCalls() as calls:
            verdict = verifier.verify(where)
        assert (verdict is None) == accepted
        if verdict is not None:
            assert verdict.status == 401
            assert TOKEN not in verdict.reason
            assert OLD_TOKEN not in verdict.reason
        # Every live token is compared, whatever the length or the match: no early exit.
        assert calls.count == 2
    assert TOKEN not in repr(verifier)
    assert OLD_TOKEN not in repr(verifier)


async def test_webhook_token_stays_out_of_the_access_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = WebhookReceiver(
        inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), poll_interval=0.05
    )
    seen: list[str] = []

    @receiver.on_completed()
    async def record(event: ProcessCompleted) -> None:
        seen.append(event.process_id)

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    runner = web.AppRunner(
        app,
        access_log_class=RedactingAccessLogger,
        access_log=logging.getLogger("aiohttp.access"),
        access_log_format=ACCESS_FORMAT,
        handle_signals=False,
    )
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}/hooks"
    event = {
        "event": "process.completed",
        "process_id": "proc-1",
        "order_id": "order-1",
        "tool": TOOL,
        "status": "done",
        "final_assets": [],
    }
    near_miss = TOKEN[:-2] + "zz"
    try:
        async with aiohttp.ClientSession() as http:
            for method, url, headers, expected in (
                ("POST", f"{base}/{TOKEN}", {}, 200),
                ("POST", f"{base}/{TOKEN}?retry=1", {}, 200),
                ("POST", f"{base}/{near_miss}", {}, 401),  # a near miss is as secret
                ("POST", f"{base}/", {"x-webhook-token": TOKEN}, 200),
                ("POST", f"{base}/", {"x-webhook-token": near_miss}, 401),
                ("GET", f"{base}/{TOKEN}", {}, 405),  # someone opens the hook URL
                ("POST", f"{base}/{TOKEN}/", {}, 404),  # registered with a stray slash
                ("POST", f"{base}/{TOKEN}%2Fx", {}, 401),
            ):
                async with http.request(method, url, json=event, headers=headers) as response:
                    assert response.status == expected
                    answer = await response.text()
                    assert TOKEN not in answer
                    assert near_miss not in answer
        await eventually(_returns(lambda: seen), "the handler to run")
    finally:
        await runner.cleanup()

    access = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert len(access) == 8
    assert sum("/hooks/*** " in line or "/hooks/***?" in line for line in access) == 6
    for logged in caplog.records:
        assert TOKEN not in logged.getMessage()
        assert near_miss not in logged.getMessage()
    assert TOKEN not in caplog.text
    assert near_miss not in caplog.text


def _returns(value: Callable[[], Any]) -> Callable[[], Awaitable[Any]]:
    async def probe() -> Any:
        return value()

    return probe


# --- downloads and result URLs -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://files.example/x.jpg",
        "data:image/jpeg;base64,/9j/4AAQ",
        "javascript:alert(1)",
        "gopher://files.example:70/x",
        "//files.example/x.jpg",
        "/etc/passwd",
        "x.jpg",
    ],
)
async def test_download_refuses_non_http_urls(tmp_path: Path, url: str) -> None:
    # The command line downloads its results with Client.download too.
    async with Client(api_key="k", base_url="http://127.0.0.1:9") as client:
        with pytest.raises(ValidationError, match="non-http"):
            await client.download(url, tmp_path / "result.jpg")
    assert list(tmp_path.iterdir()) == []  # noqa: ASYNC240 - a tmp folder listing


async def test_download_does_not_follow_a_redirect_off_http(tmp_path: Path) -> None:
    async def redirect(_: web.Request) -> web.Response:
        raise web.HTTPFound("file:///etc/passwd")

    app = web.Application()
    app.router.add_get("/x.jpg", redirect)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        async with Client(api_key="k", base_url="http://127.0.0.1:9") as client:
            with pytest.raises(ValidationError, match=r"non-http\(s\) URL \(file\)"):
                await client.download(
                    f"http://127.0.0.1:{runner.addresses[0][1]}/x.jpg", tmp_path / "result.jpg"
                )
    finally:
        await runner.cleanup()
    assert sorted(tmp_path.iterdir()) == []  # noqa: ASYNC240 - a tmp folder listing


async def test_fetch_back_hands_handlers_the_api_urls_not_the_payload() -> None:
    async with (
        Sandbox(SandboxConfig(api_keys={KEY: None})) as sb,
        Client(api_key=KEY, base_url=sb.base_url, min_poll_interval=0.01) as sdk,
    ):
        order = await sdk.orders.create(photo())
        created = await sdk.processes.create(
            order.order_id, TOOL, {SLOT: order.assets[0].id}, STAGING_WIDGETS
        )
        real = await sdk.processes.wait(created.process_ids[0], timeout=30)
        assert real.status == ProcessStatus.DONE
        receiver = WebhookReceiver(
            inbox=MemoryInbox(), verifier=NoVerification(), client=sdk, poll_interval=0.05
        )
        handled: list[ProcessCompleted] = []

        @receiver.on_completed()
        async def record(event: ProcessCompleted) -> None:
            handled.append(event)

        app = web.Application()
        receiver.setup(app, prefix="/hooks/")
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        hook = f"http://127.0.0.1:{runner.addresses[0][1]}/hooks/"
        evil = "http://evil.example/x.jpg"
        forged = {
            "event": "process.completed",
            "process_id": real.id,
            "order_id": order.order_id,
            "tool": TOOL,
            "status": "done",
            "final_assets": [
                {
                    "asset_id": real.final_assets[0].asset_id,
                    "asset_type": "image",
                    "temp_src": evil,
                    "temp_thumbnail_src": evil,
                }
            ],
        }
        unknown = {**forged, "process_id": "0" * 24}
        try:
            async with aiohttp.ClientSession() as http:
                for body in (forged, unknown):
                    async with http.post(hook, json=body) as response:
                        assert response.status == 200
            await eventually(_returns(lambda: handled), "the handler to run")
            await eventually(
                _returns(lambda: receiver.metrics.forged), "the unknown id to be dropped"
            )
        finally:
            await runner.cleanup()

    assert len(handled) == 1  # the unknown process id reached no handler
    (event,) = handled
    assert event.process_id == real.id
    assert [a.src for a in event.final_assets] == [a.src for a in real.final_assets]
    assert [a.thumbnail_src for a in event.final_assets] == [
        a.thumbnail_src for a in real.final_assets
    ]
    assert all(a.src.startswith(sb.base_url) for a in event.final_assets)
    assert evil not in repr(event)
