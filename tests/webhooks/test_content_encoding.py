"""A delivery whose ``Content-Encoding`` the receiver cannot decode: a clear 4xx, at most one log
line at DEBUG, never a traceback, whoever sends it (a valid token, a wrong one, none), on the
service's receiver and on another sender's.

Without the Brotli or zstd decoders (not installed here: the core install has neither), aiohttp's
parser refuses ``br`` and ``zstd`` with 400 before any route runs; an unknown coding, or several,
reaches the receiver, which answers 415 naming what it accepts; a gzip body that does not inflate
is 400.  A gzip body that does is accepted.
"""

from __future__ import annotations

import datetime
import gzip
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import standardwebhooks
from aiohttp.test_utils import TestClient
from whtools import JSON, TOKEN, encode, make_receiver, payload, serve

from webhooks import EventReceiver, MemoryInbox, StandardWebhooksVerifier

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

Post = Callable[[bytes, dict[str, str]], Any]


def _service_body() -> bytes:
    return encode(payload())


def _generic_headers(body: bytes) -> dict[str, str]:
    now = datetime.datetime.now(datetime.UTC)
    return {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": standardwebhooks.Webhook(SECRET).sign("msg_1", now, body.decode()),
    }


@pytest.fixture(params=["service", "other-sender"])
async def receiver_client(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[str, TestClient[Any, Any]]]:
    if request.param == "service":
        receiver: Any = make_receiver()
    else:
        receiver = EventReceiver(inbox=MemoryInbox(), verifier=StandardWebhooksVerifier(SECRET))
    async with serve(receiver) as client:
        yield request.param, client


def _body_and_headers(kind: str, who: str) -> tuple[str, bytes, dict[str, str]]:
    """The path, a body and its headers for a sender ``who``: with the valid token (or
    signature), a wrong one, or none."""
    if kind == "service":
        path = {"valid": f"/hooks/{TOKEN}", "wrong": "/hooks/not-the-token", "none": "/hooks/"}
        return path[who], _service_body(), dict(JSON)
    body = json.dumps({"type": "invoice.paid", "data": {}}).encode()
    headers = dict(JSON)
    if who == "valid":
        headers |= _generic_headers(body)
    elif who == "wrong":
        headers |= {**_generic_headers(body), "webhook-signature": "v1,bm90LXRoZS1zaWduYXR1cmU="}
    return "/hooks/", body, headers


def _no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with_traceback = [r for r in caplog.records if r.exc_info]
    assert not with_traceback, [r.getMessage() for r in with_traceback]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("who", ["valid", "wrong", "none"])
@pytest.mark.parametrize("coding", ["br", "zstd"])
async def test_a_coding_the_server_cannot_decode_is_400_in_one_debug_line(
    receiver_client: tuple[str, TestClient[Any, Any]],
    who: str,
    coding: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    kind, client = receiver_client
    path, body, headers = _body_and_headers(kind, who)
    answer = await client.post(path, data=body, headers={**headers, "Content-Encoding": coding})
    assert answer.status == 400
    assert f"Can not decode content-encoding: {'brotli' if coding == 'br' else 'zstandard'}" in (
        await answer.text()
    )
    _no_traceback(caplog)
    lines = [r.getMessage() for r in caplog.records if "before any route ran" in r.getMessage()]
    assert len(lines) == 1, lines
    assert all(r.levelno == logging.DEBUG for r in caplog.records if r.name == "webhooks")


@pytest.mark.parametrize("who", ["valid", "wrong", "none"])
@pytest.mark.parametrize("coding", ["x-custom", "gzip, br", "compress"])
async def test_a_coding_the_receiver_does_not_know_is_415_naming_what_it_accepts(
    receiver_client: tuple[str, TestClient[Any, Any]],
    who: str,
    coding: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    kind, client = receiver_client
    path, body, headers = _body_and_headers(kind, who)
    answer = await client.post(path, data=body, headers={**headers, "Content-Encoding": coding})
    if kind == "service" and who == "wrong":
        # A path token is checked first, before anything of the body is looked at.
        assert answer.status in (401, 403)
    else:
        assert answer.status == 415
        assert answer.headers["Accept-Encoding"] == "identity, gzip, deflate"
        assert (
            "send the body as is or in one of: identity, gzip, deflate"
            in (await answer.json())["error"]
        )
    _no_traceback(caplog)


async def test_a_gzip_body_that_does_not_inflate_is_400_without_a_traceback(
    receiver_client: tuple[str, TestClient[Any, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    kind, client = receiver_client
    path, _, headers = _body_and_headers(kind, "valid")
    answer = await client.post(
        path, data=b"not gzip at all", headers={**headers, "Content-Encoding": "gzip"}
    )
    assert answer.status == 400
    _no_traceback(caplog)


async def test_a_gzip_body_is_accepted(receiver_client: tuple[str, TestClient[Any, Any]]) -> None:
    kind, client = receiver_client
    path, body, headers = _body_and_headers(kind, "valid")
    if kind != "service":  # signed over the body as sent, before the coding
        headers |= _generic_headers(body)
    answer = await client.post(
        path, data=gzip.compress(body), headers={**headers, "Content-Encoding": "gzip"}
    )
    assert answer.status == 200, await answer.text()


async def test_other_records_of_the_server_still_pass(caplog: pytest.LogCaptureFixture) -> None:
    """The filter drops only the records of a body that cannot be decoded."""
    make_receiver().app  # noqa: B018  # building the app installs the filter
    logging.getLogger("aiohttp.server").error("Error handling request", exc_info=ValueError("x"))
    assert [r.getMessage() for r in caplog.records] == ["Error handling request"]
