"""Argument checks written once for the whole package: numbers of seconds, counts, and the
arguments the inboxes share (a consumer name, a limit), as plain functions and as attrs
validators.

The messages name the argument and what it takes; a bad value raises
:class:`~asyncsdk.ConfigurationError` when the object is built or the method is called.
"""

from __future__ import annotations

import math
from typing import TypeGuard

import attrs

from asyncsdk import ConfigurationError

__all__ = [
    "check_consumer",
    "check_limit",
    "host_port",
    "non_negative_int",
    "non_negative_seconds",
    "positive_seconds",
    "require_count",
    "require_seconds",
    "shown_url",
    "url_scheme",
]


def _is_finite_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def require_seconds(name: str, value: object, *, zero_ok: bool) -> float:
    """A finite number of seconds (not a ``bool``): more than 0, or 0 or more with ``zero_ok``."""
    if not _is_finite_number(value):
        raise ConfigurationError(f"{name} must be a finite number of seconds, not {value!r}")
    if value < 0 or (value == 0 and not zero_ok):
        bound = "0 or more" if zero_ok else "more than 0"
        raise ConfigurationError(f"{name} must be {bound} seconds, not {value!r}")
    return float(value)


def require_count(name: str, value: object, *, minimum: int) -> int:
    """An ``int`` (not a ``bool``) of ``minimum`` or more."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{name} must be an int of {minimum} or more, not {value!r}")
    return value


def positive_seconds(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    """An attrs validator: a finite number of seconds, more than 0."""
    require_seconds(attribute.name, value, zero_ok=False)


def non_negative_seconds(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    """An attrs validator: a finite number of seconds, 0 or more."""
    require_seconds(attribute.name, value, zero_ok=True)


def non_negative_int(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    """An attrs validator: an ``int`` of 0 or more."""
    require_count(attribute.name, value, minimum=0)


def check_consumer(consumer: object) -> str:
    """A consumer name: a non-empty ``str``."""
    if not isinstance(consumer, str) or not consumer:
        raise ConfigurationError(f"consumer must be a non-empty str, not {consumer!r}")
    return consumer


def check_limit(limit: object) -> int:
    """A count of entries: an ``int`` of 0 or more (not a ``bool``)."""
    return require_count("limit", limit, minimum=0)


def url_scheme(url: str) -> str:
    """The scheme of ``url`` (what comes before ``://``), lower-case; empty without one.

    Read off the text, not parsed: a DSN naming several hosts (``h1:5432,h2:5433``) is valid
    for asyncpg, though no URL parser takes it.
    """
    scheme, separator, _ = url.partition("://")
    return scheme.lower() if separator else ""


def host_port(host: object, port: object) -> str:
    """``host:port`` as a URL writes it: an IPv6 address in brackets (``[::1]:6379``)."""
    shown = str(host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"{shown}:{port}"


def shown_url(url: object) -> str:
    """``url`` as an error message may show it: its repr, with the password before its last
    ``@`` (scheme or no scheme) written as ``***``."""
    if not isinstance(url, str):
        return repr(url)
    head, at, hosts = url.rpartition("@")
    scheme, separator, credentials = head.rpartition("://")
    user, colon, _ = credentials.partition(":")
    if not (at and colon):
        return repr(url)
    return repr(f"{scheme}{separator}{user}:***@{hosts}")
