"""Ctrl-C while the command line is still importing: one line and exit 130, as during a command.

The SIGINT is sent by an import hook the moment a module starts importing, a real signal at a
moment a user's Ctrl-C lands in: for the ``asyncsdk`` script, ``aiohttp``, which the package
itself imports; for ``python -m asyncsdk``, which imports the package before its ``__main__``
can guard anything, ``webhooks``, which only the command line imports.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]

INTERRUPT_ON_IMPORT = """
import os, signal, sys

class InterruptOnImport:
    def find_spec(self, name, path=None, target=None):
        if name == INTERRUPTED_AT:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptOnImport())
"""


@pytest.mark.parametrize(
    ("interrupted_at", "start"),
    [
        # the installed `asyncsdk` script's entry point, [project.scripts] in pyproject.toml
        (
            "aiohttp",
            "import _asyncsdk_cli, sys; sys.argv[1:] = ['tools', '--sandbox']; "
            "raise SystemExit(_asyncsdk_cli.main())",
        ),
        # python -m asyncsdk
        (
            "webhooks",
            "import runpy, sys; sys.argv[1:] = ['tools', '--sandbox']; "
            "runpy.run_module('asyncsdk', run_name='__main__', alter_sys=True)",
        ),
    ],
    ids=["script", "python-m"],
)
def test_ctrl_c_while_importing_exits_130_with_one_line(
    interrupted_at: str, start: str, tmp_path: Path
) -> None:
    hook = f"INTERRUPTED_AT = {interrupted_at!r}\n" + INTERRUPT_ON_IMPORT
    done = subprocess.run(
        [sys.executable, "-c", hook + start],
        cwd=tmp_path,
        env=subprocess_env(PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "error: interrupted\n"
