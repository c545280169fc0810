"""The sandbox's run-time settings: one mutable ``attrs`` holder, read on every request, and the
check of the webhook URLs it is given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from yarl import URL

__all__ = [
    "DEFAULT_API_KEY",
    "LIMITED_API_KEY",
    "LIMITED_TOOLS",
    "SandboxConfig",
    "check_webhook_url",
    "default_api_keys",
]

DEFAULT_API_KEY = "sk_sandbox_enterprise"
LIMITED_API_KEY = "sk_sandbox_limited"
LIMITED_TOOLS = frozenset({"tool-virtual-staging", "tool-image-enhancement"})


def default_api_keys() -> dict[str, frozenset[str] | None]:
    """The two built-in keys: every tool, and a plan limited to staging and enhancement."""
    return {DEFAULT_API_KEY: None, LIMITED_API_KEY: LIMITED_TOOLS}


def check_webhook_url(url: str) -> str:
    """``url`` when the sandbox can deliver to it (http or https, a host, a port of 1 to 65535);
    else ``ValueError`` with a message that starts with the URL and says how to write it."""
    example = "http://127.0.0.1:8081/hooks/TOKEN"
    if "://" not in url:
        fixed = f"http:{url}" if url.startswith("//") else f"http://{url}"
        raise ValueError(f"{url} has no scheme: write {fixed}")
    try:
        parsed = URL(url)
    except ValueError:
        raise ValueError(
            f"{url} has no valid port: a port is 1 to 65535, as in {example}"
        ) from None
    if parsed.scheme not in {"http", "https"}:
        rest = url.split("://", 1)[1]
        raise ValueError(
            f"{url} has the scheme {parsed.scheme}: a webhook goes over http or https, as in "
            f"http://{rest}"
        )
    if not parsed.host:
        raise ValueError(f"{url} has no host: write it as {example}")
    if parsed.explicit_port == 0:
        raise ValueError(f"{url} has port 0: name the receiver's port, as in {example}")
    return url


def _check_webhook_urls(_: object, __: object, urls: tuple[str, ...]) -> None:
    for url in urls:
        try:
            check_webhook_url(url)
        except ValueError as exc:
            raise ValueError(f"webhook URL {exc}") from None


def _to_frozenset(value: Any) -> frozenset[str]:
    return frozenset(value)


def _to_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@attrs.define(kw_only=True)
class SandboxConfig:
    """Everything a test may tune; every field may be changed while the sandbox runs.

    Delays are seconds; ``math.inf`` is the emulator's "never" (``pending_delay=math.inf`` holds a
    process until ``advance()``).  These are settings of the emulator, not arguments of the
    client, whose numbers of seconds are finite.  ``api_keys`` maps a key to the tool slugs its
    plan allows (``None``: all).
    """

    # Process lifecycle
    pending_delay: float = 0.0
    processing_delay: float = 0.0
    failure_rate: float = 0.0
    fail_tools: frozenset[str] = attrs.field(factory=frozenset, converter=_to_frozenset)
    processes_per_request: int = 1
    # Wire shape
    enveloped: bool = False
    # Webhooks
    webhook_urls: tuple[str, ...] = attrs.field(
        default=(), converter=_to_tuple, validator=_check_webhook_urls
    )
    webhook_duplicates: int = 0
    webhook_duplicate_rate: float = 0.0
    webhook_out_of_order: bool = False
    webhook_max_jitter: float = 0.2
    webhook_retry_base: float = 0.05
    webhook_max_attempts: int = 5
    webhook_timeout: float = 10.0
    # Rate limit of generations (decisions.md): off by default
    rate_limit: bool = False
    rate_limit_count: int = 10
    rate_limit_window: float = 600.0
    # Polling limit (decisions.md: at most one GET of a process per 5 s): off by default
    poll_limit: bool = False
    poll_limit_interval: float = 5.0
    # Determinism: ``None`` draws fresh ids each run (a kept inbox never mistakes them for old
    # ones); an int makes ids repeat run after run.  Failure dice, chaos and jitter use ``seed``
    # or 0 when it is ``None``.
    seed: int | None = None
    # Uploads
    max_upload_bytes: int = 50 * 1024 * 1024
    max_files_per_order: int = 10
    # Keys and plans
    api_keys: dict[str, frozenset[str] | None] = attrs.field(factory=default_api_keys)
    # Host names, besides localhost and IP addresses, under which /_sandbox/ routes answer
    control_hosts: frozenset[str] = attrs.field(factory=frozenset, converter=_to_frozenset)

    def update(self, changes: Mapping[str, Any]) -> None:
        """Apply ``{field: value}`` changes (``PATCH /_sandbox/config``); unknown names fail."""
        names = {f.name: f for f in attrs.fields(SandboxConfig)}
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise ValueError(
                f"unknown sandbox setting(s) {unknown}; known settings: {sorted(names)}"
            )
        for name, value in changes.items():
            if name == "api_keys":
                if not isinstance(value, Mapping):
                    raise ValueError("api_keys must map each key to a list of tool slugs or null")
                value = {
                    str(k): (None if v is None else frozenset(str(s) for s in v))
                    for k, v in value.items()
                }
            setattr(self, name, value)
        attrs.validate(self)
