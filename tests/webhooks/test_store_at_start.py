"""A store that cannot be reached when the receiver starts: one ERROR line naming the store and
the fix, and every delivery answered 503 (the sender retries, nothing is lost) meanwhile."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import pytest
from whtools import HOOK, JSON, TOKEN, encode, payload, serve

from webhooks import Inbox, PostgresInbox, RedisInbox, TokenVerifier, WebhookReceiver


def closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("inbox", "named"),
    [
        pytest.param(
            lambda port: RedisInbox(f"redis://127.0.0.1:{port}/0"),
            "RedisInbox('127.0.0.1:{port}/0'",
            marks=pytest.mark.redis,
            id="redis",
        ),
        pytest.param(
            lambda port: PostgresInbox(f"postgresql://postgres@127.0.0.1:{port}/test"),
            "PostgresInbox('127.0.0.1:{port}/test'",
            marks=pytest.mark.postgres,
            id="postgres",
        ),
    ],
)
async def test_an_unreachable_store_at_start_is_one_error_line_and_503s(
    inbox: Callable[[int], Inbox], named: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = closed_port()
    receiver = WebhookReceiver(inbox=inbox(port), verifier=TokenVerifier(TOKEN))
    caplog.set_level(logging.WARNING, logger="webhooks")
    async with serve(receiver) as client:
        for _ in range(2):
            response = await client.post(HOOK, data=encode(payload("p-1")), headers=JSON)
            assert response.status == 503
            assert response.headers["Retry-After"]
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    [line] = errors
    assert named.format(port=port) in line
    assert "cannot be reached at start" in line
    assert "answered 503" in line
    assert "start the store, or fix the address the inbox was given" in line
