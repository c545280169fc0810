"""The receiver's behaviour, the same under each framework adapter: the aiohttp sub-application
and the ASGI application (mounted in Starlette, served by uvicorn and by hypercorn)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import gzip
import json
import logging
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
import standardwebhooks
import uvicorn
from asgi_serving import hypercorn_serving, uvicorn_serving
from whtools import HOOK, JSON, TOKEN, Recorder, encode, make_receiver, payload, serve, wait_until

from asyncsdk import ConfigurationError, ProcessCompleted
from webhooks import (
    EventReceiver,
    MemoryInbox,
    StandardWebhooksVerifier,
    WebhookEvent,
    WebhookReceiver,
)
from webhooks.asgi import ReceiverASGI

Receiver = WebhookReceiver | EventReceiver
Serve = Callable[[Receiver], contextlib.AbstractAsyncContextManager[str]]
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@contextlib.asynccontextmanager
async def _aiohttp_serving(receiver: Receiver) -> AsyncIterator[str]:
    async with serve(receiver) as client:
        yield str(client.make_url("")).rstrip("/")


SERVINGS: dict[str, Serve] = {
    "aiohttp": _aiohttp_serving,
    "uvicorn": uvicorn_serving,
    "hypercorn": hypercorn_serving,
}


@pytest.fixture(params=list(SERVINGS))
def adapter(request: pytest.FixtureRequest) -> Serve:
    """Serves a receiver at ``/hooks/`` under one adapter and server; yields the base URL."""
    return SERVINGS[request.param]


@contextlib.asynccontextmanager
async def posting(adapter: Serve, receiver: Receiver) -> AsyncIterator[Any]:
    async with adapter(receiver) as base, aiohttp.ClientSession() as session:

        async def post(path: str, body: bytes, headers: dict[str, str] = JSON) -> tuple[int, Any]:
            async with session.post(base + path, data=body, headers=headers) as response:
                answer = await response.json() if response.status != 405 else None
                if response.status == 503:
                    assert response.headers["Retry-After"].isdigit()
                return response.status, answer

        yield post


async def test_accepted_then_duplicate_and_the_handler_runs_once(adapter: Serve) -> None:
    receiver = make_receiver()
    seen = Recorder()
    receiver.on_completed()(seen)
    async with posting(adapter, receiver) as post:
        assert await post(HOOK, encode(payload("p-1"))) == (200, {"status": "accepted"})
        assert await post(HOOK, encode(payload("p-1"))) == (200, {"status": "duplicate"})
        await wait_until(lambda: seen.ids == ["p-1"], "the handler ran")
        await asyncio.sleep(0.2)  # a second run would show by now (workers poll every 50 ms)
    assert seen.ids == ["p-1"]
    assert receiver.metrics.accepted == 1
    assert receiver.metrics.duplicate == 1


async def test_an_unknown_token_is_refused_401(adapter: Serve) -> None:
    receiver = make_receiver()
    async with posting(adapter, receiver) as post:
        status, answer = await post("/hooks/tok-wrong", encode(payload("p-1")))
    assert status == 401
    assert "error" in answer
    assert receiver.metrics.accepted == 0


async def test_a_body_over_the_cap_is_refused_413(adapter: Serve) -> None:
    receiver = make_receiver(max_body=200)
    async with posting(adapter, receiver) as post:
        status, _ = await post(HOOK, encode(payload("p-big")) + b" " * 500)
    assert status == 413
    assert receiver.metrics.rejected["too_large"] == 1


async def test_a_coding_its_server_does_not_decode_is_refused_415(adapter: Serve) -> None:
    """aiohttp's server inflates gzip before the receiver reads it; an ASGI server passes the
    body on as it came, so under ASGI only an unencoded body is taken (the 415 says so)."""
    async with posting(adapter, make_receiver()) as post:
        status, answer = await post(
            HOOK, gzip.compress(encode(payload("p-gz"))), {**JSON, "Content-Encoding": "gzip"}
        )
    if adapter is _aiohttp_serving:
        assert status == 200
    else:
        assert status == 415
        assert answer["error"].endswith("send the body as is or in one of: identity")


async def test_a_body_that_is_not_json_is_refused_400(adapter: Serve) -> None:
    receiver = make_receiver()
    async with posting(adapter, receiver) as post:
        status, answer = await post(HOOK, b"{not json")
    assert status == 400
    assert "error" in answer


async def test_a_full_inbox_answers_503_with_retry_after(adapter: Serve) -> None:
    receiver = make_receiver(queue_limit=2, workers=1)
    release = asyncio.Event()

    @receiver.on_completed()
    async def stuck(_event: ProcessCompleted) -> None:
        await release.wait()

    async with posting(adapter, receiver) as post:
        answers = [(await post(HOOK, encode(payload(f"p-{n}"))))[0] for n in range(5)]
        release.set()
    assert answers[:2] == [200, 200]
    assert 503 in answers
    assert receiver.metrics.unavailable["queue_full"] >= 1


async def test_a_path_past_the_token_is_answered_404_naming_the_url(adapter: Serve) -> None:
    receiver = make_receiver()
    async with posting(adapter, receiver) as post:
        status, answer = await post(f"/hooks/{TOKEN}/extra", encode(payload("p-1")))
    assert status == 404
    assert answer == {"error": "no webhook receiver at this URL: deliver to /hooks/<token>"}


async def test_behind_a_root_path_the_server_leaves_out_deliveries_reach_the_mount() -> None:
    # hypercorn --root-path /api: the path has no /api (a proxy took it off), root_path has it,
    # and Starlette's Mount adds /hooks to root_path.
    receiver = make_receiver()
    async with (
        hypercorn_serving(receiver, root_path="/api") as base,
        aiohttp.ClientSession() as session,
    ):
        async with session.post(base + HOOK, data=encode(payload("p-1")), headers=JSON) as sent:
            assert (sent.status, await sent.json()) == (200, {"status": "accepted"})
        async with session.post(base + HOOK + "/extra", data=b"{}", headers=JSON) as sent:
            assert sent.status == 404
            assert await sent.json() == {
                "error": "no webhook receiver at this URL: deliver to /api/hooks/<token>"
            }


async def test_over_http2_an_answer_that_closes_has_no_connection_header() -> None:
    # HTTP/2 forbids connection-specific headers (RFC 9113, 8.2.2): hypercorn's h2 refuses to
    # send such an answer at all.  No server here can be made to send this request reliably
    # (hypercorn drops the connection when a body comes for a stream already answered), so the
    # adapter is called as an ASGI server calls it, with the scope an HTTP/2 request has.
    receiver = make_receiver()
    hooks = ReceiverASGI(receiver)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async with hooks.serving():
        for version in ("1.1", "2"):
            scope = {
                "type": "http",
                "http_version": version,
                "method": "POST",
                "path": "/tok-wrong",
                "root_path": "",
                "headers": [(b"content-type", b"application/json")],
            }
            await hooks(scope, receive, send)
    starts = [message for message in sent if message["type"] == "http.response.start"]
    assert [start["status"] for start in starts] == [401, 401]
    assert [(b"connection", b"close") in start["headers"] for start in starts] == [True, False]


async def test_a_content_length_of_other_digits_than_ascii_is_not_a_length() -> None:
    # "²" (latin-1 0xB2) is a digit to str.isdigit() but not to int(); uvicorn and aiohttp
    # refuse it before the receiver sees it, a more lenient server may not (called as in the
    # test above).
    hooks = ReceiverASGI(make_receiver())
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": encode(payload("p-1")), "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"content-type", b"application/json"), (b"content-length", b"\xb2")]
    scope = {"type": "http", "method": "POST", "path": f"/{TOKEN}", "headers": headers}
    async with hooks.serving():
        await hooks(scope, receive, send)
    assert sent[0]["status"] == 200


async def test_a_websocket_to_the_mount_is_refused() -> None:
    receiver = make_receiver()
    async with hypercorn_serving(receiver) as base, aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await session.ws_connect(base + HOOK)
    assert refused.value.status == 403


def standard_headers(msg_id: str, body: bytes) -> dict[str, str]:
    """A Standard Webhooks sender's headers, signed by the standardwebhooks library."""
    now = int(time.time())
    when = datetime.datetime.fromtimestamp(now, datetime.UTC)
    signature = standardwebhooks.Webhook(SECRET).sign(msg_id, when, body.decode())
    return {
        **JSON,
        "webhook-id": msg_id,
        "webhook-timestamp": str(now),
        "webhook-signature": signature,
    }


async def test_an_event_receiver_stores_once_and_refuses_a_bad_signature(adapter: Serve) -> None:
    receiver = EventReceiver(
        inbox=MemoryInbox(), verifier=StandardWebhooksVerifier(SECRET), poll_interval=0.05
    )
    seen: list[WebhookEvent] = []

    @receiver.on("invoice.paid")
    async def paid(event: WebhookEvent) -> None:
        seen.append(event)

    body = json.dumps({"type": "invoice.paid", "data": {"invoice": "in_1"}}).encode()
    async with posting(adapter, receiver) as post:
        headers = standard_headers("msg_1", body)
        assert await post("/hooks/", body, headers) == (200, {"status": "accepted"})
        assert await post("/hooks/", body, headers) == (200, {"status": "duplicate"})
        tampered = body.replace(b"in_1", b"in_2")
        assert (await post("/hooks/", tampered, headers))[0] == 401
        await wait_until(lambda: len(seen) == 1, "the handler ran")
    assert [event.id for event in seen] == ["msg_1"]


def test_the_asgi_adapter_imports_without_starlette_or_fastapi() -> None:
    # None in sys.modules makes any import of those packages fail.
    code = (
        "import sys; sys.modules['starlette'] = sys.modules['fastapi'] = None;"
        " sys.modules['uvicorn'] = None; import webhooks.asgi"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_served_alone_the_asgi_lifespan_starts_and_drains_the_receiver() -> None:
    receiver = make_receiver()
    seen = Recorder()
    receiver.on_completed()(seen)
    server = uvicorn.Server(
        uvicorn.Config(ReceiverASGI(receiver), host="127.0.0.1", port=0, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: server.started or serving.done(), "uvicorn started")
        assert receiver.running
        port = server.servers[0].sockets[0].getsockname()[1]
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"http://127.0.0.1:{port}/{TOKEN}", data=encode(payload("p-1")), headers=JSON
            ) as response,
        ):
            assert await response.json() == {"status": "accepted"}
        await wait_until(lambda: seen.ids == ["p-1"], "the handler ran")
    finally:
        server.should_exit = True
        await serving
    assert not receiver.running


async def test_uvicorn_s_access_log_shows_the_token_as_stars() -> None:
    receiver = make_receiver()
    hooks = ReceiverASGI(receiver)
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    access = logging.getLogger("uvicorn.access")
    keep, redacting = Keep(), hooks.access_log_filter()
    access.addFilter(redacting)
    access.addHandler(keep)
    try:
        async with posting(lambda r: _standalone(hooks), receiver) as post:
            assert (await post(f"/{TOKEN}", encode(payload("p-1"))))[0] == 200
    finally:
        access.removeHandler(keep)
        access.removeFilter(redacting)
    assert any("POST /*** " in line for line in lines), lines
    assert not any(TOKEN in line for line in lines)


@contextlib.asynccontextmanager
async def _standalone(hooks: ReceiverASGI) -> AsyncIterator[str]:
    """``hooks`` served alone by uvicorn, its access log on; yields the base URL."""
    # log_config=None: uvicorn leaves the test's handler on its access logger.
    config = uvicorn.Config(hooks, host="127.0.0.1", port=0, log_level="info", log_config=None)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: server.started or serving.done(), "uvicorn started")
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await serving


def test_the_aiohttp_only_routes_are_refused_under_asgi() -> None:
    with pytest.raises(ConfigurationError, match="serve /metrics and the probes"):
        ReceiverASGI(make_receiver(health_routes=True))
