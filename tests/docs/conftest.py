"""The documentation site, built once for every test that reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from built_once import built_once
from codeblocks import ROOT


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built by ``mkdocs build --strict``, once for the run: any warning (a broken link
    or reference, a page missing from the navigation, a docstring that does not resolve) fails
    the build."""

    def build(out: Path) -> None:
        run = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert run.returncode == 0, run.stdout + run.stderr

    return built_once(tmp_path_factory, "site", build)
