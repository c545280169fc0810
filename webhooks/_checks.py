"""Argument checks written once for the whole package: attrs validators of seconds.

The messages name the argument and what it takes; a bad value raises
:class:`~asyncsdk.ConfigurationError` when the object is built.
"""

from __future__ import annotations

import math

import attrs

from asyncsdk import ConfigurationError

__all__ = ["non_negative_seconds", "positive_seconds"]


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
