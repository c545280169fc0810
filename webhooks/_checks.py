"""Argument checks written once for the whole package: attrs validators of seconds, and the
arguments the inboxes share (a consumer name, a count).

The messages name the argument and what it takes; a bad value raises
:class:`~asyncsdk.ConfigurationError` when the object is built.
"""

from __future__ import annotations

import math

import attrs

from asyncsdk import ConfigurationError

__all__ = ["check_consumer", "check_limit", "non_negative_seconds", "positive_seconds"]


def _finite_seconds(attribute: attrs.Attribute[float], value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigurationError(
            f"{attribute.name} must be a finite number of seconds, not {value!r}"
        )
    return float(value)


def positive_seconds(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    """An attrs validator: a finite number of seconds, more than 0."""
    if _finite_seconds(attribute, value) <= 0:
        raise ConfigurationError(f"{attribute.name} must be more than 0 seconds, not {value!r}")


def non_negative_seconds(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    """An attrs validator: a finite number of seconds, 0 or more."""
    if _finite_seconds(attribute, value) < 0:
        raise ConfigurationError(f"{attribute.name} must be 0 or more seconds, not {value!r}")


def check_consumer(consumer: object) -> str:
    """A consumer name: a non-empty ``str``."""
    if not isinstance(consumer, str) or not consumer:
        raise ConfigurationError(f"consumer must be a non-empty str, not {consumer!r}")
    return consumer


def check_limit(limit: object) -> int:
    """A count of entries: an ``int`` of 0 or more (not a ``bool``)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ConfigurationError(f"limit must be an int of 0 or more, not {limit!r}")
    return limit
