"""The first program of docs/getting-started.md stages a photo and saves the result."""

from __future__ import annotations

from pathlib import Path

import pytest
from codeblocks import ROOT, run_block

from asyncsdk import samples
from asyncsdk.sandbox import Sandbox

PAGE = ROOT / "docs" / "getting-started.md"


async def test_the_first_photo_is_staged_and_saved(
    sandbox: Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    program = run_block(PAGE, "first-photo")
    monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
    monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
    monkeypatch.chdir(tmp_path)  # where the program saves the result
    await program["main"](str(samples.path("bedroom-empty.jpg")))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("process ")
    assert lines[0].endswith(": done")
    assert lines[1:] == ["saved staged-1.jpg"]
    assert (tmp_path / "staged-1.jpg").read_bytes().startswith(b"\xff\xd8\xff")  # a JPEG
    assert sandbox.stats.processes_created == 1
