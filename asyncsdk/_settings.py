"""What a client is configured with: the API key, the service's addresses, time limits, retries.

Settings come from arguments, else from the environment (``ASYNCSDK_API_KEY``,
``ASYNCSDK_BASE_URL``, ``ASYNCSDK_APP_URL``).  The API key is held by an object whose repr is
masked; it goes into the ``x-api-key`` header and nowhere else (not into URLs, logs, reprs or
errors).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

import attrs
from yarl import URL

from asyncsdk._checks import is_number, number_field, require_int, require_number
from asyncsdk._errors import ConfigurationError
from asyncsdk._protocol.retry import RetryPolicy
from asyncsdk._uploads import MAX_UPLOAD_BYTES

__all__ = [
    "DEFAULT_TIMEOUT",
    "ENV_API_KEY",
    "ENV_APP_URL",
    "ENV_BASE_URL",
    "ROLE_FIELDS",
    "ApiKey",
    "ClientSettings",
    "Timeout",
]


class ApiKey:
    """Holds the API key; its repr and str never show it.  ``reveal()`` is for the header only.

    ``source`` says where the key came from (``api_key=`` or ``ASYNCSDK_API_KEY``), for the
    message of a key the service refuses.
    """

    __slots__ = ("_value", "source")

    def __init__(self, value: str, *, source: str = "api_key=") -> None:
        self._value = value
        self.source = source

    def reveal(self) -> str:
        return self._value

    def refused(self) -> str:
        """What to say when the service refuses this key: its first characters (a third of it
        at most, never all), where it came from, and where to give another."""
        shown = self._value[: min(6, len(self._value) // 3)]
        return (
            f"the API key {shown + '...'!r} (from {self.source}) was refused: give the key shown "
            f"in the dashboard's API section as api_key= or in {ENV_API_KEY}"
        )

    def __repr__(self) -> str:
        return "ApiKey('<hidden>')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiKey) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


_seconds_or_none = number_field(
    "Timeout.{name} must be a finite number of seconds > 0, or None for no limit",
    above=True,
    optional=True,
)


@attrs.frozen(kw_only=True)
class Timeout:
    """Time limits of one HTTP attempt, in seconds (``None`` means no limit).

    ``connect`` bounds opening the TCP connection; ``total`` bounds the whole attempt once it holds
    one of the client's in-flight slots (sending the body and reading the answer included).  Time
    spent waiting for a slot never counts against either.
    """

    connect: float | None = attrs.field(default=10.0, validator=_seconds_or_none)
    total: float | None = attrs.field(default=60.0, validator=_seconds_or_none)

    def with_total(self, total: float | Timeout | None) -> Timeout:
        """This timeout with a per-call override: a number replaces ``total`` only."""
        if total is None:
            return self
        if isinstance(total, Timeout):
            return total
        return attrs.evolve(self, total=total)


ENV_API_KEY: Final = "ASYNCSDK_API_KEY"
ENV_BASE_URL: Final = "ASYNCSDK_BASE_URL"
ENV_APP_URL: Final = "ASYNCSDK_APP_URL"

DEFAULT_TIMEOUT: Final = Timeout()
ROLE_FIELDS: Final = ("asset_role", "asset_roles")


def _service_url(value: str | URL, what: str, env: str) -> URL:
    try:
        url = URL(value)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what} is not a valid URL: {exc}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(
            f"{what} must be an absolute http(s) URL such as https://api.example.com "
            f"(argument or {env}), not {str(value)!r}"
        )
    if url.user is not None or url.password is not None:
        raise ConfigurationError(
            f"{what} must not carry credentials; pass the API key as api_key or in {ENV_API_KEY}"
        )
    if url.query_string or url.fragment:
        raise ConfigurationError(f"{what} must not have a query string or fragment")
    return url.with_path(url.path.rstrip("/") or "/")


@attrs.frozen(kw_only=True)
class ClientSettings:
    """Everything a client was configured with, resolved and checked (the key stays masked)."""

    api_key: ApiKey
    base_url: URL
    app_url: URL
    timeout: Timeout
    retry: RetryPolicy
    max_in_flight: int
    role_field: str
    min_poll_interval: float
    strict: bool
    validate: bool = True
    catalogue_ttl: float = 300.0
    max_upload_bytes: int = MAX_UPLOAD_BYTES

    @classmethod
    def resolve(
        cls,
        *,
        api_key: str | ApiKey | None = None,
        base_url: str | URL | None = None,
        app_url: str | URL | None = None,
        timeout: Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_in_flight: int = 64,
        role_field: str = "asset_role",
        min_poll_interval: float = 5.0,
        strict: bool = False,
        validate: bool = True,
        catalogue_ttl: float = 300.0,
        max_upload_bytes: int = MAX_UPLOAD_BYTES,
        environ: Mapping[str, str] | None = None,
    ) -> ClientSettings:
        """Arguments first, then the environment; ``ConfigurationError`` names what is missing."""
        env = os.environ if environ is None else environ
        if isinstance(api_key, ApiKey):
            api_key = api_key.reveal()
        source = "api_key=" if api_key is not None else ENV_API_KEY
        key = api_key if api_key is not None else env.get(ENV_API_KEY, "")
        if not isinstance(key, str) or not key.strip():
            raise ConfigurationError(
                f"no API key: pass api_key=... to Client or set the {ENV_API_KEY} environment "
                "variable"
            )
        key = key.strip()
        if not key.isascii() or any(char.isspace() or not char.isprintable() for char in key):
            raise ConfigurationError(
                "the API key contains whitespace, control or non-ASCII characters; copy it "
                "again from the dashboard's API section"
            )
        base = base_url if base_url is not None else env.get(ENV_BASE_URL, "")
        if not base:
            raise ConfigurationError(
                f"no service address: pass base_url=... to Client or set the {ENV_BASE_URL} "
                "environment variable"
            )
        resolved_base = _service_url(base, "base_url", ENV_BASE_URL)
        app = app_url if app_url is not None else env.get(ENV_APP_URL, "")
        resolved_app = _service_url(app, "app_url", ENV_APP_URL) if app else resolved_base
        if is_number(timeout):
            timeout = DEFAULT_TIMEOUT.with_total(timeout)
        if not isinstance(timeout, Timeout):
            raise ConfigurationError(
                f"timeout must be a Timeout or a number of seconds, not {timeout!r}"
            )
        require_int(max_in_flight, "max_in_flight must be an int >= 1", error=ConfigurationError)
        if role_field not in ROLE_FIELDS:
            raise ConfigurationError(
                f"role_field must be 'asset_role' or 'asset_roles', not {role_field!r}"
            )
        require_number(
            min_poll_interval,
            "min_poll_interval must be a finite number of seconds > 0",
            above=True,
            error=ConfigurationError,
        )
        if not isinstance(validate, bool):
            raise ConfigurationError(f"validate must be True or False, not {validate!r}")
        require_number(
            catalogue_ttl,
            "catalogue_ttl must be a finite number of seconds > 0",
            above=True,
            error=ConfigurationError,
        )
        require_int(
            max_upload_bytes,
            "max_upload_bytes must be a positive int (bytes per file; the service accepts "
            f"{MAX_UPLOAD_BYTES} by default)",
            error=ConfigurationError,
        )
        return cls(
            api_key=ApiKey(key, source=source),
            base_url=resolved_base,
            app_url=resolved_app,
            timeout=timeout,
            retry=retry or RetryPolicy(),
            max_in_flight=max_in_flight,
            role_field=role_field,
            min_poll_interval=float(min_poll_interval),
            strict=strict,
            validate=validate,
            catalogue_ttl=float(catalogue_ttl),
            max_upload_bytes=max_upload_bytes,
        )
