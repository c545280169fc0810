"""Deliveries signed by the Standard Webhooks senders in the field, the ``svix`` library (its
``svix-*`` header names) and the ``standardwebhooks`` library (``webhook-*``), over real HTTP to a
mounted receiver on each inbox backend: accepted; tampered, stale or signed with a secret the
receiver does not hold, refused with 401; a message sent again is a duplicate, handled once."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import pytest
import standardwebhooks
import svix.webhooks
from whtools import JSON, Recorder, encode, idle, payload, serve, wait_until

from asyncsdk import ConfigurationError
from webhooks import (
    Delivery,
    Inbox,
    MemoryInbox,
    PostgresInbox,
    RedisInbox,
    SQLiteInbox,
    StandardWebhooksVerifier,
    WebhookReceiver,
)

KEY: Final = b"0123456789abcdef0123456789abcdef"  # 32 bytes: base64 ends in one "="
SECRET: Final = "whsec_" + base64.b64encode(KEY).decode()
#: The same secret as some senders show it, without its base64 padding.
UNPADDED: Final = SECRET.rstrip("=")
OTHER_SECRET: Final = "whsec_" + base64.b64encode(b"fedcba9876543210fedcba9876543210").decode()

Sender = Callable[[str, str, bytes, datetime], dict[str, str]]


def svix_sender(secret: str, msg_id: str, body: bytes, at: datetime) -> dict[str, str]:
    """The headers Svix sends by default, signed by the ``svix`` library."""
    signature = svix.webhooks.Webhook(secret).sign(msg_id, at, body.decode())
    return {
        "svix-id": msg_id,
        "svix-timestamp": str(int(at.timestamp())),
        "svix-signature": signature,
    }


def standard_sender(secret: str, msg_id: str, body: bytes, at: datetime) -> dict[str, str]:
    """The Standard Webhooks headers, signed by the ``standardwebhooks`` library."""
    signature = standardwebhooks.Webhook(secret).sign(msg_id, at, body.decode())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": signature,
    }


#: Each sender signs with one spelling of the secret; the receiver holds the other one.
SENDERS: Final[dict[str, tuple[Sender, str]]] = {
    "svix": (svix_sender, SECRET),
    "standardwebhooks": (standard_sender, UNPADDED),
}


async def received_with_every_guarantee(inbox: Inbox, sender_name: str) -> None:
    sign, secret = SENDERS[sender_name]
    held = UNPADDED if secret == SECRET else SECRET
    spelling = "svix" if sender_name == "svix" else "webhook"  # the refusal names the header sent
    receiver = WebhookReceiver(
        inbox=inbox, verifier=StandardWebhooksVerifier(held), poll_interval=0.05
    )
    seen = Recorder()
    receiver.on_completed()(seen)
    body = encode(payload("p-1"))
    now = datetime.now(tz=UTC)
    async with serve(receiver) as client:

        async def post(data: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str]]:
            response = await client.post("/hooks/", data=data, headers={**JSON, **headers})
            return response.status, await response.json()

        signed = sign(secret, "msg_1", body, now)
        assert await post(body, signed) == (200, {"status": "accepted"})

        tampered = body.replace(b"p-1", b"p-2")
        status, answer = await post(tampered, signed)
        assert (status, answer["error"]) == (401, f"{spelling}-signature does not match the body")
        stale = sign(secret, "msg_2", encode(payload("p-3")), now - timedelta(seconds=301))
        status, answer = await post(encode(payload("p-3")), stale)
        assert status == 401
        assert "too old" in answer["error"]
        strange = sign(OTHER_SECRET, "msg_4", encode(payload("p-4")), now)
        status, answer = await post(encode(payload("p-4")), strange)
        assert (status, answer["error"]) == (401, f"{spelling}-signature does not match the body")

        # The sender retries msg_1, signed afresh, and a captured copy is replayed as it was.
        again = sign(secret, "msg_1", body, now + timedelta(seconds=5))
        assert await post(body, again) == (200, {"status": "duplicate"})
        assert await post(body, signed) == (200, {"status": "duplicate"})

        await wait_until(lambda: seen.ids == ["p-1"], "the handler ran")
        await idle(receiver)
    assert seen.ids == ["p-1"]
    assert receiver.metrics.accepted == 1


@pytest.fixture(params=["memory", "sqlite"])
def local_inbox(request: pytest.FixtureRequest, tmp_path: Path) -> Inbox:
    if request.param == "memory":
        return MemoryInbox()
    return SQLiteInbox(tmp_path / "hooks.sqlite3")


@pytest.mark.parametrize("sender_name", list(SENDERS))
async def test_a_sender_is_received_with_every_guarantee(
    local_inbox: Inbox, sender_name: str
) -> None:
    await received_with_every_guarantee(local_inbox, sender_name)


@pytest.mark.redis
@pytest.mark.parametrize("sender_name", list(SENDERS))
async def test_a_sender_is_received_with_every_guarantee_on_redis(
    redis_url: str, redis_prefix: str, sender_name: str
) -> None:
    await received_with_every_guarantee(RedisInbox(redis_url, prefix=redis_prefix), sender_name)


@pytest.mark.postgres
@pytest.mark.parametrize("sender_name", list(SENDERS))
async def test_a_sender_is_received_with_every_guarantee_on_postgres(
    postgres_dsn: str, postgres_schema: str, sender_name: str
) -> None:
    inbox = PostgresInbox(postgres_dsn, schema=postgres_schema)
    await received_with_every_guarantee(inbox, sender_name)


def test_the_missing_headers_are_named_in_both_spellings() -> None:
    verifier = StandardWebhooksVerifier(SECRET)
    result = verifier.verify(Delivery({"svix-id": "msg_1"}, {}, b"{}"))
    assert result is not None
    assert result.status == 401
    assert result.reason == (
        "missing header(s) webhook-timestamp (or svix-timestamp), webhook-signature "
        "(or svix-signature); sign the delivery in the Standard Webhooks form"
    )


@pytest.mark.parametrize("skew", [0, -299, -301, 301])
@pytest.mark.parametrize("secret", [SECRET, UNPADDED, OTHER_SECRET])
@pytest.mark.parametrize("body", [encode(payload("p-1")), '{"é": "ü"}'.encode()])
def test_the_verdicts_agree_with_the_svix_library(secret: str, skew: int, body: bytes) -> None:
    """Whatever the spelling of headers and secret, ours and svix's verifier agree."""
    now = datetime.now(tz=UTC)
    ours = StandardWebhooksVerifier(SECRET)
    for headers in (
        svix_sender(secret, "msg_1", body, now + timedelta(seconds=skew)),
        standard_sender(secret, "msg_1", body, now + timedelta(seconds=skew)),
    ):
        try:
            svix.webhooks.Webhook(SECRET).verify(body, headers)
        except svix.webhooks.WebhookVerificationError:
            theirs = False
        else:
            theirs = True
        assert (ours.verify(Delivery(headers, {}, body)) is None) is theirs, headers


@pytest.mark.parametrize("key", [KEY, KEY[:16], KEY[:18]])  # base64 padded with "=", "==", none
def test_a_secret_without_its_padding_signs_as_the_reference_does(key: bytes) -> None:
    bare = ("whsec_" + base64.b64encode(key).decode()).rstrip("=")
    at = datetime(2026, 11, 27, tzinfo=UTC)
    ours = StandardWebhooksVerifier(bare).sign("msg_1", int(at.timestamp()), b"{}")
    assert ours == standardwebhooks.Webhook(bare).sign("msg_1", at, "{}")
    with pytest.raises(ConfigurationError, match="base64"):
        StandardWebhooksVerifier("whsec_" + "A" * 25)  # 25 characters: no padding completes it
