"""A receiver's options are declared once (``webhooks.ReceiverOptions``): each receiver takes
them, with their defaults, and a wrong one is an error naming the receiver and the fix."""

from __future__ import annotations

from typing import Any, get_type_hints

import pytest

from asyncsdk import ConfigurationError
from webhooks import (
    EventReceiver,
    MemoryInbox,
    ReceiverOptions,
    StandardWebhooksVerifier,
    TokenVerifier,
    WebhookReceiver,
)

TOKEN = "options-" + "t0k3n" * 4
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.mark.parametrize(
    ("make", "owner"),
    [
        (
            lambda **o: WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), **o),
            "WebhookReceiver",
        ),
        (
            lambda **o: EventReceiver(
                inbox=MemoryInbox(), verifier=StandardWebhooksVerifier(SECRET), **o
            ),
            "EventReceiver",
        ),
    ],
)
def test_a_misspelt_option_names_the_receiver_and_the_option_meant(make: Any, owner: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        make(workrs=4)
    assert str(raised.value) == (
        f"{owner} takes no option workrs=; did you mean workers=?"
        " (its options: webhooks.ReceiverOptions)"
    )
    with pytest.raises(
        ConfigurationError, match=f"^{owner} takes no option colour=.*ReceiverOptions"
    ):
        make(colour="blue")


def test_every_declared_option_is_taken_with_its_default_unless_given() -> None:
    declared = get_type_hints(ReceiverOptions)
    assert {"workers", "queue_limit", "telemetry", "client"} <= set(declared)
    receiver = WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN))
    assert (receiver.queue_limit, receiver.max_body, receiver.drain_timeout) == (
        10_000,
        256 * 1024,
        10.0,
    )
    given = WebhookReceiver(
        inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), queue_limit=7, drain_timeout=0.5
    )
    assert (given.queue_limit, given.drain_timeout) == (7, 0.5)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"workers": 0}, "workers"),
        ({"put_timeout": -1}, "put_timeout"),
        ({"read_timeout": 6.0, "put_timeout": 4.0}, "must stay under 10 s"),
        ({"fetch_timeout": 0}, "fetch_timeout"),
    ],
)
def test_a_wrong_value_is_named(options: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        WebhookReceiver(inbox=MemoryInbox(), verifier=TokenVerifier(TOKEN), **options)


def test_the_one_call_constructors_take_the_same_options() -> None:
    with pytest.raises(ConfigurationError, match="WebhookReceiver takes no option quue_limit="):
        WebhookReceiver.from_redis(verifier=TokenVerifier(TOKEN), quue_limit=5)  # type: ignore[call-arg]
