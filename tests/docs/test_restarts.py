"""The programs of docs/restarts.md: the keyed run creates its key once, however often it is run;
the same key with another photo is refused; the start-up program resumes a run left waiting."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from codeblocks import ROOT, run_block

from asyncsdk import samples
from asyncsdk.sandbox import Sandbox, SandboxConfig

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


async def test_a_key_reused_with_another_photo_is_refused_and_creates_nothing(
    sandbox: Sandbox,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The page's second program, run as the page says: after the first, in the same folder."""
    first = run_block(PAGE, "keyed-run")
    reused = run_block(PAGE, "key-reused")
    monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
    monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
    monkeypatch.chdir(tmp_path)
    await first["main"](str(samples.path("kitchen.jpg")))
    await reused["main"]()
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == ["listing-42/kitchen was run with other files and widgets"]
    assert sandbox.stats.orders_created == 1  # nothing uploaded for the refused call
    assert sandbox.stats.processes_created == 1


async def test_the_resume_program_finishes_a_run_left_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A keyed run stopped while it waits for its process (a service restarted), then the
    page's start-up program: it finishes the run without creating another process."""
    first = run_block(PAGE, "keyed-run")
    resume = run_block(PAGE, "resume")
    monkeypatch.chdir(tmp_path)
    async with Sandbox(SandboxConfig(pending_delay=0.0, processing_delay=1.0)) as sandbox:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sandbox.api_key)
        monkeypatch.setenv("ASYNCSDK_BASE_URL", sandbox.base_url)
        stopped = asyncio.create_task(first["main"](str(samples.path("kitchen.jpg"))))
        async with asyncio.timeout(10):
            while sandbox.stats.processes_created == 0:  # noqa: ASYNC110 - the sandbox's count
                await asyncio.sleep(0.01)
        stopped.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stopped
        async with asyncio.timeout(60):
            await resume["main"]()
        assert sandbox.stats.processes_created == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("listing-42/kitchen: process ")
    assert line.endswith(": done")
