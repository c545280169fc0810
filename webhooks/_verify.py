"""Who may deliver events: pluggable, sans-io verification of a delivery.

A :class:`Verifier` looks at a :class:`Delivery` (lower-cased headers, the path parameters of the
matched route and the raw body) and returns ``None`` to accept or a :class:`Rejection` to refuse.
No aiohttp here, so each verifier is a plain function of its inputs.

The service signs nothing (decisions: "no signature, no event id, no timestamp"), so the choices are

* :class:`TokenVerifier`: a long random secret in the URL path (``/hooks/<token>``) or a header;
  the only kind of secret the service's "URL and settings" registration can carry;
* :class:`StandardWebhooksVerifier`: HMAC-SHA256 per https://www.standardwebhooks.com, for a relay
  or gateway in front of the receiver that signs what it forwards, or any Standard Webhooks
  sender (Svix's header names included);
* :class:`NoVerification`: accept anything (then use fetch-back, which confirms every event
  against the API before handlers see it, so forged deliveries change nothing).

Secrets never appear in a reason, a repr or a log line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

from asyncsdk import ConfigurationError
from webhooks._checks import require_seconds
from webhooks._contract import Delivery, Rejection
from webhooks._parse import unix_seconds

__all__ = [
    "TOKEN_PARAM",
    "NoVerification",
    "StandardWebhooksVerifier",
    "TokenVerifier",
]

TOKEN_PARAM: Final = "webhook_token"  # noqa: S105 - a route parameter name, not a secret
"""Name of the path parameter the receiver's ``/{token}`` route fills."""

_TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~-]+")
_MIN_TOKEN_LENGTH: Final = 16
_MAX_SIGNATURES: Final = 16


@attrs.frozen
class NoVerification:
    """Accept every delivery; pair it with fetch-back so that forged events change nothing."""

    @property
    def path_tokens(self) -> tuple[str, ...]:
        """None: any path is accepted."""
        return ()

    def verify(self, delivery: Delivery) -> Rejection | None:
        """``None`` to accept ``delivery``, or the :class:`Rejection` to answer it with."""
        return None


def _as_list(values: str | Sequence[str], what: str) -> tuple[str, ...]:
    items = (values,) if isinstance(values, str) else tuple(values)
    if not items:
        raise ConfigurationError(f"give at least one {what}")
    return items


@attrs.frozen(init=False, repr=False)
class TokenVerifier:
    """A shared secret token, in the URL path and/or a request header.

    ``tokens`` holds every token currently valid: pass ``[new, old]`` while rotating, then drop
    the old one once the endpoint registered at the service uses the new URL.  Compared in
    constant time with :func:`hmac.compare_digest`.

    With ``in_path=True`` register ``https://host/hooks/<token>`` at the service.  aiohttp's
    access log prints request paths: run the app with
    ``access_log_class=webhooks.RedactingAccessLogger`` so the token is logged as ``***``.
    """

    _tokens: tuple[bytes, ...]
    header: str | None
    in_path: bool
    _path_tokens: tuple[str, ...] = attrs.field(eq=False)
    """The tokens as text, for :attr:`path_tokens` (read on every delivery)."""

    def __init__(
        self,
        tokens: str | Sequence[str],
        *,
        header: str | None = "x-webhook-token",
        in_path: bool = True,
    ) -> None:
        items = _as_list(tokens, "token")
        for token in items:
            if len(token) < _MIN_TOKEN_LENGTH:
                raise ConfigurationError(
                    f"a webhook token needs at least {_MIN_TOKEN_LENGTH} characters; "
                    "generate one with secrets.token_urlsafe(32)"
                )
            if not _TOKEN_CHARS.fullmatch(token):
                raise ConfigurationError(
                    "a webhook token may hold only letters, digits and '-._~' so that it fits in "
                    "a URL; generate one with secrets.token_urlsafe(32)"
                )
        if header is None and not in_path:
            raise ConfigurationError("TokenVerifier needs in_path=True or a header name")
        self.__attrs_init__(
            tuple(t.encode() for t in items),
            header.lower() if header else None,
            in_path,
            items if in_path else (),
        )

    def __repr__(self) -> str:
        return (
            f"TokenVerifier(<{len(self._tokens)} token(s)>, header={self.header!r}, "
            f"in_path={self.in_path!r})"
        )

    @property
    def path_tokens(self) -> tuple[str, ...]:
        """The tokens a delivery may carry in its path (none with ``in_path=False``)."""
        return self._path_tokens

    def verify(self, delivery: Delivery) -> Rejection | None:
        """``None`` to accept ``delivery``, or the :class:`Rejection` to answer it with."""
        candidates: list[str] = []
        if self.in_path and TOKEN_PARAM in delivery.path_params:
            candidates.append(delivery.path_params[TOKEN_PARAM])
        if self.header is not None and self.header in delivery.headers:
            candidates.append(delivery.headers[self.header])
        if not candidates:
            where = self._where()
            return Rejection(401, "token", f"missing webhook token; send it {where}")
        matched = False
        for candidate in candidates:
            given = candidate.encode("utf-8", "surrogateescape")
            for token in self._tokens:
                # No short-circuit: every comparison runs, so timing says nothing about which.
                matched |= hmac.compare_digest(given, token)
        if not matched:
            return Rejection(401, "token", "invalid webhook token")
        return None

    def _where(self) -> str:
        places = []
        if self.in_path:
            places.append("as the last path segment")
        if self.header is not None:
            places.append(f"in the {self.header!r} header")
        return " or ".join(places)


def _decode_secret(secret: str | bytes) -> bytes:
    if isinstance(secret, bytes):
        key = secret
    else:
        text = secret.removeprefix("whsec_")
        # Senders show a secret with or without its base64 padding: restore it, as the
        # standardwebhooks library does, so that either spelling gives the same key.
        padded = text + "=" * (-len(text) % 4)
        try:
            key = base64.b64decode(padded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ConfigurationError(
                "a Standard Webhooks secret is 'whsec_' followed by base64; "
                "copy it exactly as the sender shows it"
            ) from exc
    if len(key) < 16:
        raise ConfigurationError("a Standard Webhooks secret needs at least 16 bytes of key")
    return key


#: The three signature headers: the Standard Webhooks names, and Svix's names for the same.
_SIGNATURE_HEADERS: Final = (
    ("webhook-id", "svix-id"),
    ("webhook-timestamp", "svix-timestamp"),
    ("webhook-signature", "svix-signature"),
)


def _signature_headers(headers: Mapping[str, str]) -> list[str]:
    """The message id, timestamp and signature of a delivery (``""`` where missing).

    Each is read from its ``webhook-*`` header, else from its ``svix-*`` one: Svix sends those
    unless an account renames them, and the svix library reads both spellings too (it reads
    ``svix-*`` first, which only a delivery carrying both, different, could tell apart).
    """
    return [headers.get(standard) or headers.get(svix, "") for standard, svix in _SIGNATURE_HEADERS]


def _missing(values: Sequence[str]) -> Rejection:
    names = [
        f"{standard} (or {svix})"
        for (standard, svix), value in zip(_SIGNATURE_HEADERS, values, strict=True)
        if not value
    ]
    return Rejection(
        401,
        "signature",
        f"missing header(s) {', '.join(names)}; sign the delivery in the Standard Webhooks form",
    )


@attrs.frozen(init=False, repr=False)
class StandardWebhooksVerifier:
    """HMAC-SHA256 signatures in the Standard Webhooks form.

    Headers ``webhook-id``, ``webhook-timestamp`` (Unix seconds) and ``webhook-signature`` (space
    separated ``v1,<base64>`` entries), or Svix's ``svix-id``, ``svix-timestamp`` and
    ``svix-signature`` (each ``webhook-*`` header is read first); the signed content is
    ``{id}.{timestamp}.{body}``.  ``secrets`` are ``whsec_<base64>`` strings, padded or not, or
    raw key bytes; pass several while rotating.  A timestamp more than ``tolerance`` seconds away
    from ``clock()``, in either direction, is refused so that a captured delivery cannot be
    replayed later.
    """

    _keys: tuple[bytes, ...]
    tolerance: float
    clock: Callable[[], float]

    def __init__(
        self,
        secrets: str | bytes | Sequence[str | bytes],
        *,
        tolerance: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        items: tuple[str | bytes, ...] = (
            (secrets,) if isinstance(secrets, str | bytes) else tuple(secrets)
        )
        if not items:
            raise ConfigurationError("give at least one secret")
        tolerance = require_seconds("tolerance", tolerance, zero_ok=False)
        self.__attrs_init__(tuple(_decode_secret(s) for s in items), float(tolerance), clock)

    def __repr__(self) -> str:
        return (
            f"StandardWebhooksVerifier(<{len(self._keys)} secret(s)>, tolerance={self.tolerance!r})"
        )

    def sign(self, msg_id: str, timestamp: int, body: bytes) -> str:
        """The ``webhook-signature`` value for a delivery, made with the first secret."""
        return "v1," + _signature(self._keys[0], msg_id, timestamp, body)

    def headers(self, msg_id: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
        """All three headers for a delivery (for senders, relays and tests)."""
        ts = int(self.clock()) if timestamp is None else timestamp
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": self.sign(msg_id, ts, body),
        }

    @property
    def path_tokens(self) -> tuple[str, ...]:
        """None: the secret travels in the signature headers, never in the path."""
        return ()

    def verify(self, delivery: Delivery) -> Rejection | None:
        """``None`` to accept ``delivery``, or the :class:`Rejection` to answer it with."""
        values = _signature_headers(delivery.headers)
        msg_id, raw_ts, signature = values
        if not (msg_id and raw_ts and signature):
            return _missing(values)
        # The messages below name the header as the sender spelled it.
        stamped = (
            "webhook-timestamp" if delivery.headers.get("webhook-timestamp") else "svix-timestamp"
        )
        signed = (
            "webhook-signature" if delivery.headers.get("webhook-signature") else "svix-signature"
        )
        timestamp = unix_seconds(raw_ts)
        if timestamp is None:
            return Rejection(401, "timestamp", f"{stamped} must be Unix time in seconds")
        skew = self.clock() - timestamp
        if skew > self.tolerance:
            return Rejection(401, "timestamp", f"{stamped} is too old; resend it signed now")
        if -skew > self.tolerance:
            return Rejection(
                401, "timestamp", f"{stamped} is in the future; check the sender's clock"
            )
        offered = [
            part.partition(",")[2]
            for part in signature.split()[:_MAX_SIGNATURES]
            if part.startswith("v1,")
        ]
        if not offered:
            return Rejection(401, "signature", f"{signed} holds no 'v1,<base64>' entry")
        matched = False
        for key in self._keys:
            expected = _signature(key, msg_id, timestamp, delivery.body).encode()
            for candidate in offered:
                matched |= hmac.compare_digest(
                    candidate.encode("utf-8", "surrogateescape"), expected
                )
        if not matched:
            return Rejection(401, "signature", f"{signed} does not match the body")
        return None


def _signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    # A header byte that is not UTF-8 reaches here as a surrogate escape: sign the byte itself.
    signed = f"{msg_id}.{timestamp}.".encode("utf-8", "surrogateescape") + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
