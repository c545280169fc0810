"""pytest fixtures that run the sandbox in-process on an ephemeral port.

Registered as the ``asyncsdk_sandbox`` pytest plugin.  Fixtures:

- ``sandbox_config``: the :class:`~asyncsdk.sandbox.SandboxConfig` to start with (instant
  delays); override it in a ``conftest.py`` to change the defaults of a test module.
- ``sandbox``: a started :class:`~asyncsdk.sandbox.Sandbox`, stopped after the test.  Async, so it
  is defined only when pytest-asyncio is installed.

Nothing heavy is imported until a fixture is used, so the plugin loads cleanly everywhere.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from asyncsdk.sandbox import Sandbox, SandboxConfig

__all__ = ["sandbox_config"]


@pytest.fixture
def sandbox_config() -> SandboxConfig:
    """Settings of the ``sandbox`` fixture: processes finish at once, nothing fails."""
    from asyncsdk.sandbox._config import SandboxConfig

    return SandboxConfig(pending_delay=0.0, processing_delay=0.0)


try:
    import pytest_asyncio

    HAVE_PYTEST_ASYNCIO = True
except ImportError:  # pragma: no cover - exercised only without pytest-asyncio
    HAVE_PYTEST_ASYNCIO = False

if HAVE_PYTEST_ASYNCIO:
    __all__ += ["sandbox"]

    @pytest_asyncio.fixture
    async def sandbox(sandbox_config: SandboxConfig) -> AsyncIterator[Sandbox]:
        """A running sandbox on 127.0.0.1 (port 0), stopped when the test ends."""
        from asyncsdk.sandbox._sandbox import Sandbox

        async with Sandbox(sandbox_config) as sb:
            yield sb
