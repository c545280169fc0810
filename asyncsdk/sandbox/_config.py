"""The sandbox's run-time settings: one mutable ``attrs`` holder, read on every request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "DEFAULT_API_KEY",
    "LIMITED_API_KEY",
    "LIMITED_TOOLS",
    "SandboxConfig",
    "default_api_keys",
]

DEFAULT_API_KEY = "sk_sandbox_enterprise"
LIMITED_API_KEY = "sk_sandbox_limited"
LIMITED_TOOLS = frozenset({"tool-virtual-staging", "tool-image-enhancement"})


def default_api_keys() -> dict[str, frozenset[str] | None]:
    """The two built-in keys: every tool, and a plan limited to staging and enhancement."""
    return {DEFAULT_API_KEY: None, LIMITED_API_KEY: LIMITED_TOOLS}


def _to_frozenset(value: Any) -> frozenset[str]:
    return frozenset(value)


def _to_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@attrs.define(kw_only=True)
class SandboxConfig:
    """Everything a test may tune; every field may be changed while the sandbox runs.

    Delays are seconds.  ``api_keys`` maps a key to the tool slugs its plan allows (``None``: all).
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
    webhook_urls: tuple[str, ...] = attrs.field(default=(), converter=_to_tuple)
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
    # Determinism
    seed: int = 0
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
