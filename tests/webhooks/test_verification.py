"""Token and Standard Webhooks verification: sans-io checks, then over HTTP."""

from __future__ import annotations

import base64
import logging

import pytest
from whtools import HOOK, JSON, OLD_TOKEN, TOKEN, encode, payload, serve

from asyncsdk import ConfigurationError
from webhooks import (
    Delivery,
    MemoryInbox,
    RedactingAccessLogger,
    Rejection,
    StandardWebhooksVerifier,
    TokenVerifier,
    WebhookReceiver,
)

NOW = 1_700_000_000
SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
NEW_SECRET = "whsec_" + base64.b64encode(b"fedcba9876543210fedcba9876543210").decode()
BODY = encode(payload())


def verifier(*secrets: str, tolerance: float = 300) -> StandardWebhooksVerifier:
    return StandardWebhooksVerifier(list(secrets), tolerance=tolerance, clock=lambda: NOW)


def signed(by: StandardWebhooksVerifier, body: bytes = BODY, at: int = NOW) -> Delivery:
    return Delivery(by.headers("msg_1", body, timestamp=at), {}, body)


def test_a_signed_delivery_passes() -> None:
    assert verifier(SECRET).verify(signed(verifier(SECRET))) is None


def test_the_signature_matches_the_standard_webhooks_reference_vector() -> None:
    # From the Standard Webhooks specification's test vectors.
    reference = StandardWebhooksVerifier(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", clock=lambda: 1614265330
    )
    body = b'{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    delivery = Delivery(
        {
            "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "webhook-timestamp": "1614265330",
            "webhook-signature": expected,
        },
        {},
        body,
    )
    assert reference.verify(delivery) is None
    assert reference.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == expected


def test_a_changed_body_or_wrong_secret_fails() -> None:
    good = signed(verifier(SECRET))
    tampered = Delivery(good.headers, {}, BODY.replace(b"done", b"fail"))
    result = verifier(SECRET).verify(tampered)
    assert result is not None
    assert result.status == 401
    assert "does not match" in result.reason
    assert verifier(NEW_SECRET).verify(good) is not None


def test_rotation_accepts_either_secret_and_either_signature() -> None:
    both = verifier(NEW_SECRET, SECRET)
    assert both.verify(signed(verifier(SECRET))) is None
    assert both.verify(signed(verifier(NEW_SECRET))) is None
    # A sender mid-rotation sends two signatures; one valid is enough.
    headers = dict(signed(verifier(NEW_SECRET)).headers)
    old_sig = verifier(SECRET).sign("msg_1", NOW, BODY)
    headers["webhook-signature"] = f"v1,bm90LWEtc2lnbmF0dXJl {old_sig}"
    assert verifier(SECRET).verify(Delivery(headers, {}, BODY)) is None


@pytest.mark.parametrize(("skew", "ok"), [(-300, True), (300, True), (-301, False), (301, False)])
def test_timestamps_are_checked_both_ways(skew: int, ok: bool) -> None:
    sender = verifier(SECRET)
    result = verifier(SECRET).verify(signed(sender, at=NOW + skew))
    assert (result is None) is ok
    if result is not None:
        assert result.code == "timestamp"
        assert ("future" if skew > 0 else "too old") in result.reason


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        ({}, "missing header"),
        ({"webhook-id": "m", "webhook-timestamp": "x", "webhook-signature": "v1,a"}, "Unix"),
        ({"webhook-id": "m", "webhook-timestamp": str(NOW), "webhook-signature": "v2,a"}, "v1"),
    ],
)
def test_malformed_signature_headers_are_named(headers: dict[str, str], words: str) -> None:
    result = verifier(SECRET).verify(Delivery(headers, {}, BODY))
    assert result is not None
    assert words in result.reason


def test_secrets_and_tokens_are_checked_and_never_shown() -> None:
    with pytest.raises(ConfigurationError, match="base64"):
        StandardWebhooksVerifier("whsec_not base64!")
    with pytest.raises(ConfigurationError, match="16 bytes"):
        StandardWebhooksVerifier("whsec_" + base64.b64encode(b"short").decode())
    with pytest.raises(ConfigurationError, match="token_urlsafe"):
        TokenVerifier("short")
    with pytest.raises(ConfigurationError, match="URL"):
        TokenVerifier("has a space and is long enough")
    assert SECRET not in repr(verifier(SECRET))
    assert TOKEN not in repr(TokenVerifier(TOKEN))


def test_token_rotation_sans_io() -> None:
    check = TokenVerifier([TOKEN, OLD_TOKEN], header="x-token", in_path=False)
    assert check.verify(Delivery({"x-token": OLD_TOKEN}, {}, b"")) is None
    # Path tokens are not looked at when in_path is off.
    result = check.verify(Delivery({}, {"webhook_token": TOKEN}, b""))
    assert result is not None
    assert "x-token" in result.reason


async def test_standard_webhooks_over_http() -> None:
    receiver = WebhookReceiver(inbox=MemoryInbox(), verifier=StandardWebhooksVerifier(SECRET))
    sender = StandardWebhooksVerifier(SECRET)
    async with serve(receiver) as client:
        headers = {**JSON, **sender.headers("msg_1", BODY)}
        response = await client.post("/hooks/", data=BODY, headers=headers)
        assert response.status == 200
        forged = await client.post("/hooks/", data=BODY.replace(b"done", b"fail"), headers=headers)
        assert forged.status == 401
        assert "does not match" in (await forged.json())["error"]
        unsigned = await client.post("/hooks/", data=BODY, headers=JSON)
        assert unsigned.status == 401
    assert receiver.metrics.accepted == 1


async def test_the_redacting_access_logger_hides_the_path_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver = WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN))
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async with serve(
        receiver, server_options={"access_log_class": RedactingAccessLogger}
    ) as client:
        response = await client.post(HOOK, data=BODY, headers=JSON)
        assert response.status == 200
        await client.get("/")
    lines = [r.getMessage() for r in caplog.records if r.name == "aiohttp.access"]
    assert any("POST /hooks/*** " in line for line in lines)
    assert any("GET / " in line for line in lines)
    assert not any(TOKEN in line for line in lines)


class _Recording:
    """A verifier of its own, as a user writes one: a token in the path, every call noted."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    @property
    def path_tokens(self) -> tuple[str, ...]:
        return (TOKEN,)

    def verify(self, delivery: Delivery) -> Rejection | None:
        self.bodies.append(delivery.body)
        if delivery.path_params.get("webhook_token") != TOKEN:
            return Rejection(401, "token", "invalid webhook token")
        return None


async def test_a_listed_token_is_verified_once_with_the_body_an_unknown_one_before_it() -> None:
    recording = _Recording()
    receiver = WebhookReceiver(inbox=MemoryInbox(), verifier=recording)
    async with serve(receiver) as client:
        good = await client.post(HOOK, data=BODY, headers=JSON)
        assert good.status == 200
        assert recording.bodies == [BODY]
        recording.bodies.clear()
        wrong = await client.post("/hooks/" + OLD_TOKEN, data=BODY, headers=JSON)
        assert wrong.status == 401
        assert recording.bodies == [b""]  # refused with the body unread


async def test_token_in_path_or_header_with_rotation() -> None:
    receiver = WebhookReceiver(
        inbox=MemoryInbox(), verifier=TokenVerifier([TOKEN, OLD_TOKEN], header="x-hook-token")
    )
    async with serve(receiver) as client:
        body = encode(payload())
        assert (await client.post(HOOK, data=body, headers=JSON)).status == 200
        old = await client.post(f"/hooks/{OLD_TOKEN}", data=encode(payload("p-2")), headers=JSON)
        assert old.status == 200
        header = await client.post(
            "/hooks/", data=encode(payload("p-3")), headers={**JSON, "X-Hook-Token": TOKEN}
        )
        assert header.status == 200
        wrong = await client.post("/hooks/" + "w" * 40, data=body, headers=JSON)
        assert wrong.status == 401
        assert (await wrong.json()) == {"error": "invalid webhook token"}
        missing = await client.post("/hooks/", data=body, headers=JSON)
        assert missing.status == 401
        assert "x-hook-token" in (await missing.json())["error"]
        assert TOKEN not in await missing.text()
    assert receiver.metrics.accepted == 3
    assert receiver.metrics.rejected["token"] == 2
