"""A local emulator of the service, for tests and the demo.

::

    from asyncsdk.sandbox import Sandbox, SandboxConfig

    async with Sandbox(SandboxConfig(processing_delay=0.2)) as sb:
        sb.base_url, sb.api_key          # point a client here
        sb.chaos.add(method="POST", path="/v3/process", status=503, times=2)
        await sb.wait_idle()

Needs Pillow (the ``sandbox`` extra).  See ``docs/sandbox.md`` for settings, chaos rules and the
decisions taken where the service's specification is silent.
"""

from asyncsdk.sandbox._chaos import Chaos, ChaosKind, ChaosRule
from asyncsdk.sandbox._config import DEFAULT_API_KEY, LIMITED_API_KEY, SandboxConfig
from asyncsdk.sandbox._sandbox import Sandbox, run_forever
from asyncsdk.sandbox._stats import Delivery, Stats

__all__ = [
    "DEFAULT_API_KEY",
    "LIMITED_API_KEY",
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


async def serve(host: str, port: int, config: SandboxConfig | None = None) -> None:
    """Serve the sandbox until cancelled (alias of :func:`run_forever`)."""
    await run_forever(host, port, config)


def main(argv: list[str] | None = None) -> int:
    """``python -m asyncsdk.sandbox [--host H] [--port N] [--processing-delay S] ...``."""
    from asyncsdk.sandbox.__main__ import main as _main

    return _main(argv)
