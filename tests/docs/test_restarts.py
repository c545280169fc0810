"""The keyed run of docs/restarts.md creates its key once, however often it is run."""

from __future__ import annotations

from pathlib import Path

import pytest
from codeblocks import ROOT, run_block

from asyncsdk import samples
from asyncsdk.sandbox import Sandbox

PAGE = ROOT / "docs" / "restarts.md"


async def test_the_keyed_run_run_twice_prints_one_process_and_creates_one(
    sandbox: Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    program = run_block(PAGE, "keyed-run")
    monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
    monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
    monkeypatch.chdir(tmp_path)  # where the program keeps its journal
    photo = str(samples.path("kitchen.jpg"))
    await program["main"](photo)
    await program["main"](photo)  # a second run of the program: a restarted service
    first, second = capsys.readouterr().out.splitlines()
    assert first.startswith("process ")
    assert first.endswith(": done")
    assert second == first
    assert (tmp_path / "runs.sqlite3").exists()
    assert sandbox.stats.processes_created == 1
    assert sandbox.stats.orders_created == 1
