"""pytest fixtures that run the sandbox in-process on an ephemeral port.

Registered as the ``asyncsdk_sandbox`` pytest plugin.  Fixtures:

- ``sandbox_config``: the :class:`~asyncsdk.sandbox.SandboxConfig` to start with (instant
  delays); override it in a ``conftest.py`` to change the defaults of a test module.
- ``sandbox``: a started :class:`~asyncsdk.sandbox.Sandbox`, stopped after the test.

As in pytest-aiohttp, the async fixture is declared with ``pytest_asyncio.fixture``, so it works
under pytest-asyncio's ``strict`` mode (the default: mark the test ``@pytest.mark.asyncio``) and
``auto`` mode alike, in the loop of the test.  Loading the plugin imports the SDK's core
(aiohttp, attrs, cattrs, yarl: about 0.2 s) but no extra, so installing the SDK never breaks a
test suite: a test that asks for ``sandbox`` without pytest-asyncio or Pillow fails with one
line naming what to install.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from asyncsdk.sandbox._config import SandboxConfig

if TYPE_CHECKING:
    from asyncsdk.sandbox import Sandbox

__all__ = ["sandbox", "sandbox_config"]


@pytest.fixture
def sandbox_config() -> SandboxConfig:
    """Settings of the ``sandbox`` fixture: processes finish at once, nothing fails."""
    return SandboxConfig(pending_delay=0.0, processing_delay=0.0)


try:
    import pytest_asyncio
except ImportError:  # the plugin still loads; only a test asking for ``sandbox`` is told why not

    @pytest.fixture(name="sandbox")
    def sandbox_without_pytest_asyncio(sandbox_config: SandboxConfig) -> Sandbox:
        """A started sandbox; this one only says that pytest-asyncio is needed for it."""
        pytest.fail(
            "the sandbox fixture is async and needs pytest-asyncio: pip install pytest-asyncio",
            pytrace=False,
        )

else:

    @pytest_asyncio.fixture
    async def sandbox(sandbox_config: SandboxConfig) -> AsyncIterator[Sandbox]:
        """A running sandbox on 127.0.0.1 (port 0), stopped when the test ends."""
        from asyncsdk.sandbox import Sandbox  # needs Pillow; without it, one line names the extra

        async with Sandbox(sandbox_config) as sb:
            yield sb
