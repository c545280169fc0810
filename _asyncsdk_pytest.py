"""The ``asyncsdk_sandbox`` pytest plugin: fixtures that run the sandbox in-process on an
ephemeral port.

Fixtures:

- ``sandbox_config``: the :class:`~asyncsdk.sandbox.SandboxConfig` to start with (instant
  delays); override it in a ``conftest.py`` to change the defaults of a test module.
- ``sandbox``: a started :class:`~asyncsdk.sandbox.Sandbox`, stopped after the test.

pytest loads every installed plugin into every run, so this one lives outside the ``asyncsdk``
package and imports nothing of it when it loads: the SDK (aiohttp, attrs, cattrs, yarl: about half
a second) is imported by the first test that asks for one of its fixtures, never by a suite that
does not.  ``asyncsdk.sandbox.pytest_plugin`` is the same plugin under the package's name.

As in pytest-aiohttp, the async fixture is declared with ``pytest_asyncio.fixture``, so it works
under pytest-asyncio's ``strict`` mode (the default: mark the test ``@pytest.mark.asyncio``) and
``auto`` mode alike, in the loop of the test.  Installing the SDK never breaks a test suite: a
test that asks for ``sandbox`` without pytest-asyncio or Pillow fails with one line naming what
to install.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from asyncsdk.sandbox import Sandbox, SandboxConfig

__all__ = ["sandbox", "sandbox_config"]


@pytest.fixture
def sandbox_config() -> SandboxConfig:
    """Settings of the ``sandbox`` fixture: processes finish at once, nothing fails."""
    from asyncsdk.sandbox import SandboxConfig  # the SDK, imported by a test that uses it

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
