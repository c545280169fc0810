"""The ``asyncsdk_sandbox`` pytest plugin under the package's name, for a project that names it
(``pytest_plugins = ["asyncsdk.sandbox.pytest_plugin"]``): the fixtures ``sandbox`` and
``sandbox_config``.

The plugin pytest loads from the package's entry point is ``_asyncsdk_pytest``, outside the
package, so that loading it imports none of the SDK; see that module for the fixtures.
"""

from __future__ import annotations

from _asyncsdk_pytest import sandbox, sandbox_config

__all__ = ["sandbox", "sandbox_config"]
