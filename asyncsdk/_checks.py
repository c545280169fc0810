"""Argument checks of the client, written once for every layer.

Each check answers the value it accepted or raises with a message that names the argument and the
value given.  ``error`` is the exception to raise: :class:`~asyncsdk.ValidationError` for the
arguments of one call, :class:`~asyncsdk.ConfigurationError` for settings.  ``bool`` is never a
number here, although Python counts it as an ``int``.  A number (of seconds, mostly) is finite:
infinity and NaN never pass, and where an argument means "no limit" it takes ``None`` instead
(``Timeout(total=None)``), the rule of :mod:`webhooks`' checks too.  The ``*_field`` functions wrap
the numeric checks as attrs validators; their ``what`` may name the field as ``{name}``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, TypeGuard

import attrs

from asyncsdk._errors import AsyncSDKError, ConfigurationError, ValidationError

__all__ = [
    "int_field",
    "is_finite_number",
    "is_int",
    "is_mapping",
    "is_number",
    "is_sequence",
    "method_of",
    "name_of",
    "number_field",
    "require_int",
    "require_number",
    "require_text",
]

_Error: TypeAlias = Callable[[str], AsyncSDKError]
_Validator: TypeAlias = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    return isinstance(value, Mapping)


def is_sequence(value: object) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence)


def is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """An ``int`` or ``float`` that is not a ``bool``, infinity nor NaN."""
    if not is_number(value):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int too large for a float
        return False


def method_of(value: object, name: str) -> Callable[..., Any] | None:
    """``value.<name>`` when it is callable, else ``None``: what a caller's file object offers.

    The lookup is the one the call itself makes, so an object that forwards its methods through
    ``__getattr__`` (``tempfile.NamedTemporaryFile``, a web framework's uploaded file, a proxy)
    is answered as it will be used.  ``isinstance`` against a runtime-checkable protocol is not:
    from Python 3.12 it never calls ``__getattr__``.
    """
    try:
        method = getattr(value, name)
    except AttributeError:
        return None
    return method if callable(method) else None


def name_of(value: object) -> str | None:
    """A file object's ``name`` when it is a non-empty string (its path), else ``None``."""
    try:
        name = value.name  # type: ignore[attr-defined]
    except AttributeError:
        return None
    return name if isinstance(name, str) and name else None


def require_text(value: object, what: str) -> str:
    """``value`` when it is a non-empty string, else a ``ValidationError`` naming ``what``."""
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{what} must be a non-empty string, not {value!r}")
    return value


def require_int(
    value: object,
    what: str,
    *,
    minimum: int = 1,
    maximum: int | None = None,
    error: _Error = ValidationError,
) -> int:
    """``value`` when it is an int from ``minimum`` to ``maximum``, else ``error``."""
    if not is_int(value) or value < minimum or (maximum is not None and value > maximum):
        raise error(f"{what}, not {value!r}")
    return value


def require_number(
    value: object,
    what: str,
    *,
    minimum: float = 0.0,
    above: bool = False,
    error: _Error = ValidationError,
) -> float:
    """``value`` when it is a finite number ``>= minimum`` (``> minimum`` with ``above``), else
    ``error(what, not ...)``; infinity and NaN never pass."""
    if not is_finite_number(value) or not (value > minimum if above else value >= minimum):
        raise error(f"{what}, not {value!r}")
    return value


def int_field(what: str, *, minimum: int = 1) -> _Validator:
    """:func:`require_int` as an attrs validator raising ``ConfigurationError``."""

    def check(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        require_int(
            value, what.format(name=attribute.name), minimum=minimum, error=ConfigurationError
        )

    return check


def number_field(
    what: str, *, minimum: float = 0.0, above: bool = False, optional: bool = False
) -> _Validator:
    """:func:`require_number` as an attrs validator raising ``ConfigurationError``; ``None``
    passes when ``optional``."""

    def check(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if optional and value is None:
            return
        require_number(
            value,
            what.format(name=attribute.name),
            minimum=minimum,
            above=above,
            error=ConfigurationError,
        )

    return check
