"""``asyncsdk process`` and its journal: journals written by earlier versions still read, and the
creation step it shares with keyed runs (adopting a process whose answer was lost)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from asyncsdk.sandbox import Sandbox, SandboxConfig

from .conftest import run_cli

STAGING = ["tool-virtual-staging", "-w", "space=bedroom", "-w", "style=modern"]
STATE_FILE = ".asyncsdk-process.jsonl"  # the journal in --out, named in `process --help`
# The fields of a journal line before one creation's other processes ("more_process_ids") and
# the generation slots ("kind": "generation") were recorded.
OLD_FIELDS = {
    "key",
    "photo",
    "size",
    "mtime_ns",
    "tool",
    "widgets",
    "service",
    "stage",
    "order_id",
    "process_id",
    "outputs",
    "error",
    "at",
}


def _results(out: Path) -> set[str]:
    return {p.name for p in out.iterdir() if not p.name.startswith(".")}


async def test_a_journal_in_the_first_format_is_resumed_without_paying_again(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    async with Sandbox(SandboxConfig(pending_delay=math.inf, processing_delay=math.inf)) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args = ["process", *STAGING, photo, "--out", out, "--base-url", sb.base_url]
        assert await run_cli(*args, "--timeout", "0.3") == 1
        # The journal as the first version wrote it: its fields only, no generation lines.
        journal = out / STATE_FILE
        lines = [json.loads(line) for line in journal.read_text().splitlines()]
        old = [
            {name: value for name, value in line.items() if name in OLD_FIELDS}
            for line in lines
            if "stage" in line
        ]
        assert [line["stage"] for line in old] == ["uploaded", "created"]
        journal.write_text("".join(json.dumps(line) + "\n" for line in old))

        sb.config.processing_delay = 0
        sb.advance()
        await sb.wait_idle()
        capsys.readouterr()
        assert await run_cli(*args, "--timeout", "20") == 0
        assert sb.stats.processes_created == 1  # the recorded process, collected
        assert sb.stats.orders_created == 1
    assert "1 resumed from an earlier run" in capsys.readouterr().out
    assert len(_results(out)) == 1
    assert json.loads(journal.read_text().splitlines()[-1])["stage"] == "done"


async def test_a_lost_answer_to_the_creation_is_adopted_in_the_same_run(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service created (and billed) the process, then the connection dropped: the run finds
    # it on the photo's order instead of failing the photo until the next run.
    out = tmp_path / "out"
    async with Sandbox(SandboxConfig()) as sb:
        sb.chaos.add(method="POST", path="/v3/process", kind="drop_after")
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args = ["process", *STAGING, photos / "bedroom-empty.jpg", "--out", out]
        assert await run_cli(*args, "--base-url", sb.base_url) == 0
        assert sb.stats.chaos_fired
        assert sb.stats.processes_created == 1
    assert len(_results(out)) == 1
