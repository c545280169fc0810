"""The checks of a receiver's arguments, in one place: what it is given and its limits."""

from __future__ import annotations

from asyncsdk import ConfigurationError
from webhooks._checks import require_count, require_seconds
from webhooks._contract import Inbox, Verifier

__all__ = ["check_receiver_options"]


def check_receiver_options(
    *,
    inbox: object,
    verifier: object,
    counts: dict[str, object],
    seconds: dict[str, float],
    drain_timeout: float,
) -> None:
    """Raise :class:`~asyncsdk.ConfigurationError` naming the first argument that is wrong.

    ``counts`` must be positive integers and ``seconds`` positive numbers of seconds, by name.
    """
    if not isinstance(inbox, Inbox):
        raise ConfigurationError(
            "inbox must implement webhooks.Inbox; use SQLiteInbox(path) or MemoryInbox()"
        )
    if not isinstance(verifier, Verifier):
        raise ConfigurationError(
            "verifier must have verify(delivery) and path_tokens; use TokenVerifier(token), "
            "StandardWebhooksVerifier(secret) or NoVerification() with fetch-back"
        )
    for name, number in counts.items():
        require_count(name, number, minimum=1)
    for name, value in seconds.items():
        require_seconds(name, value, zero_ok=False)
    require_seconds("drain_timeout", drain_timeout, zero_ok=True)
    if seconds["read_timeout"] + seconds["put_timeout"] >= 10:
        raise ConfigurationError(
            "read_timeout + put_timeout must stay under 10 s: the service wants a 2xx "
            "within 10 seconds"
        )
