"""What an attacker on the network, or another user of the host, can no longer do to a receiver."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from whtools import HOOK, JSON, TOKEN, encode, payload, serve

from asyncsdk import ProcessCompleted
from webhooks import (
    MemoryInbox,
    PostgresBackend,
    PostgresInbox,
    PostgresRegistry,
    RedisBackend,
    RedisInbox,
    RedisRegistry,
    SQLiteInbox,
    StandardWebhooksVerifier,
    TokenVerifier,
    WebhookReceiver,
)

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.usefixtures("umask_022")
async def test_the_sqlite_inbox_and_its_wal_files_are_readable_by_their_owner_only(
    tmp_path: Path,
) -> None:
    db = tmp_path / "inbox" / "hooks.db"
    inbox = SQLiteInbox(db)
    try:
        event = ProcessCompleted(
            event="process.completed", process_id="p-1", order_id="o-1", tool="t", status="done"
        )
        assert await inbox.put(event, b'{"temp_src": "https://cdn.example/a.jpg?sig=secret"}')
        files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
        modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in files}
    finally:
        await inbox.close()
    assert modes == {f.name: 0o600 for f in files}


async def test_a_signed_timestamp_in_non_ascii_digits_is_refused() -> None:
    verifier = StandardWebhooksVerifier(SECRET)
    body = encode(payload())
    now = int(time.time())
    headers = verifier.headers("msg-1", body, timestamp=now)
    # The same number in Arabic-Indic digits: int() reads it, a Unix timestamp it is not.
    headers["webhook-timestamp"] = str(now).translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    receiver = WebhookReceiver(inbox=MemoryInbox(), verifier=verifier)
    async with serve(receiver) as client:
        refused = await client.post("/hooks/", data=body, headers={**JSON, **headers})
        assert refused.status == 401
        assert "Unix time" in (await refused.json())["error"]
        headers["webhook-timestamp"] = str(now)
        accepted = await client.post("/hooks/", data=body, headers={**JSON, **headers})
        assert accepted.status == 200


def test_no_store_repr_shows_the_password_of_its_url() -> None:
    secret = "s3cret-" + "pw" * 8
    stores = [
        RedisInbox(f"redis://app:{secret}@127.0.0.1:6390/0"),
        RedisRegistry(f"redis://app:{secret}@127.0.0.1:6390/0"),
        RedisBackend(f"redis://app:{secret}@127.0.0.1:6390/0", prefix="p:"),
        PostgresInbox(f"postgresql://app:{secret}@127.0.0.1:5499/db"),
        PostgresRegistry(f"postgresql://app:{secret}@127.0.0.1:5499/db"),
        PostgresBackend(f"postgresql://app:{secret}@127.0.0.1:5499/db"),
    ]
    for store in stores:
        shown = repr(store)
        assert secret not in shown, shown
        assert "127.0.0.1" in shown  # where it points is still told


def test_store_reprs_write_an_ipv6_host_in_brackets() -> None:
    redis, postgres = "redis://[::1]:6390/0", "postgresql://app@[::1]:5499/db"
    shown = {
        "[::1]:6390/0": [
            RedisInbox(redis),
            RedisRegistry(redis),
            RedisBackend(redis, prefix="p:"),
        ],
        "[::1]:5499/db": [
            PostgresInbox(postgres),
            PostgresRegistry(postgres),
            PostgresBackend(postgres),
        ],
    }
    for where, stores in shown.items():
        for store in stores:
            assert where in repr(store), repr(store)


async def raw_status(port: int, head: bytes, body: bytes = b"") -> int:
    """The status of one request written byte for byte (a client library would refuse to send
    a header value that is not UTF-8)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        length = b"Content-Length: %d\r\n" % len(body)
        writer.write(head + b"Host: x\r\nConnection: close\r\n" + length + b"\r\n" + body)
        await writer.drain()
        status_line = await reader.readline()
    finally:
        writer.close()
        await writer.wait_closed()
    return int(status_line.split()[1])


async def test_header_bytes_that_are_not_utf8_are_refused_not_answered_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = WebhookReceiver(
        inbox=MemoryInbox(),
        verifier=StandardWebhooksVerifier(SECRET),
        metrics_route=True,
        metrics_token="m" * 20,
    )
    body = encode(payload())
    async with serve(receiver) as client:
        port = client.port
        assert port is not None
        delivery = (
            b"POST /hooks/ HTTP/1.1\r\nContent-Type: application/json\r\n"
            b"webhook-id: msg_\xff\r\nwebhook-timestamp: %d\r\n"
            b"webhook-signature: v1,AAAA\r\n" % int(time.time())
        )
        assert await raw_status(port, delivery, body) == 401
        for credentials in (b"Bearer \xff\xfe", b"Bearer caf\xe9"):
            scrape = b"GET /hooks/metrics HTTP/1.1\r\nAuthorization: " + credentials + b"\r\n"
            assert await raw_status(port, scrape) == 401
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info is not None]
    assert tracebacks == []


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        (f"/hooks/not-{TOKEN}", 401, "invalid webhook token"),
        ("/hooks/x", 401, "invalid webhook token"),
        (HOOK, 400, "could not read the body: RequestPayloadError"),
    ],
)
async def test_a_bad_gzip_body_is_refused_without_a_logged_traceback(
    path: str, status: int, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A wrong token is refused before the body is read; a right one, with a body that does not
    inflate, gets 400; neither leaves an unhandled-exception traceback in the log."""
    caplog.set_level(logging.DEBUG)
    receiver = WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN))
    async with serve(receiver) as client:
        answer = await client.post(
            path,
            data=b"\x1f\x8b\x08\x00 this is not gzip at all" * 10,
            headers={**JSON, "Content-Encoding": "gzip"},
        )
        assert answer.status == status
        assert (await answer.json())["error"] == error
        good = await client.post(HOOK, data=encode(payload()), headers=JSON)
        assert good.status == 200
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info is not None]
    assert tracebacks == []
    assert receiver.metrics.accepted == 1
