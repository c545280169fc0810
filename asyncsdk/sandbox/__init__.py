"""A local emulator of the service, for tests and the demo.

::

    from asyncsdk.sandbox import Sandbox, SandboxConfig

    async with Sandbox(SandboxConfig(processing_delay=0.2)) as sb:
        sb.base_url, sb.api_key          # point a client here
        sb.chaos.add(method="POST", path="/v3/process", status=503, times=2)
        await sb.wait_idle()

The emulator draws its results with Pillow (the ``sandbox`` extra).  The settings, chaos rules and
statistics need nothing more than the core install, so this package and its pytest plugin import
everywhere; :class:`Sandbox` and :func:`run_forever` are loaded on first use, and without Pillow
that use fails with one line naming the extra.  See ``docs/sandbox.md`` for settings, chaos rules
and the decisions taken where the service's specification is silent.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from asyncsdk import ConfigurationError
from asyncsdk.sandbox._chaos import Chaos, ChaosKind, ChaosRule
from asyncsdk.sandbox._config import DEFAULT_API_KEY, LIMITED_API_KEY, SandboxConfig
from asyncsdk.sandbox._stats import Attempt, Delivery, Stats

if TYPE_CHECKING:
    from asyncsdk.sandbox._facade import Sandbox, run_forever

__all__ = [
    "DEFAULT_API_KEY",
    "LIMITED_API_KEY",
    "Attempt",
    "Chaos",
    "ChaosKind",
    "ChaosRule",
    "Delivery",
    "Sandbox",
    "SandboxConfig",
    "Stats",
    "main",
    "run_forever",
    "serve",
]

#: The names that need Pillow, loaded from ``_sandbox`` when first asked for.
_NEED_PILLOW = frozenset({"Sandbox", "run_forever"})


def _require_pillow() -> None:
    """Import Pillow, or say in one line which extra brings it."""
    try:
        importlib.import_module("PIL.Image")
    except ImportError as exc:
        raise ConfigurationError(
            "the sandbox needs Pillow, which is not installed: pip install 'asyncsdk[sandbox]'"
        ) from exc


def __getattr__(name: str) -> object:
    # PEP 562: the emulator itself (and Pillow with it) is imported when one of its names is used.
    if name not in _NEED_PILLOW:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _require_pillow()
    module = importlib.import_module("asyncsdk.sandbox._facade")
    value: object = module.__dict__[name]
    return value


async def serve(
    host: str,
    port: int,
    config: SandboxConfig | None = None,
    *,
    port_file: str | os.PathLike[str] | None = None,
) -> None:
    """Serve the sandbox until cancelled (alias of :func:`run_forever`, ``port_file`` included)."""
    _require_pillow()
    from asyncsdk.sandbox._facade import run_forever

    await run_forever(host, port, config, port_file=port_file)


def main(argv: list[str] | None = None) -> int:
    """``python -m asyncsdk.sandbox [--host H] [--port N] [--processing-delay S] ...``."""
    from asyncsdk.sandbox.__main__ import main as _main

    return _main(argv)
