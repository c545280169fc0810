"""``asyncsdk process``: a folder through one tool, resumable without paying twice."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from asyncsdk import Client

# The journal's format and the widgets' digest are the command's own: private modules.
from asyncsdk.cli._state import (
    STATE_FILE,
    UPLOADED,
    PhotoKey,
    Record,
    StateFile,
    widgets_digest,
)
from asyncsdk.sandbox import Sandbox, SandboxConfig

from .conftest import run_cli

STAGING = ["tool-virtual-staging", "-w", "space=bedroom", "-w", "style=modern"]
WIRE_WIDGETS = [
    {
        "slug": "widget-space-tool-virtual-staging",
        "item_slugs": ["item-bedroom-widget-space-tool-virtual-staging"],
    },
    {
        "slug": "widget-style-tool-virtual-staging",
        "item_slugs": ["item-modern-widget-style-tool-virtual-staging"],
    },
]
DIGEST = widgets_digest(WIRE_WIDGETS)
BEDROOM = f"bedroom-empty--virtual-staging-{DIGEST}.jpg"
LIVING = f"living-room-empty--virtual-staging-{DIGEST}.jpg"
RESULTS = {BEDROOM, LIVING}


def _results(out: Path) -> set[str]:
    return {p.name for p in out.iterdir() if not p.name.startswith(".")}


def _state_lines(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / STATE_FILE).read_text().splitlines()]


async def test_second_run_skips_done_photos(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args: list[str | Path] = [
            "process",
            *STAGING,
            photos,
            "--out",
            out,
            "--base-url",
            sb.base_url,
        ]
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 2
        assert _results(out) == RESULTS
        first = capsys.readouterr().out
        assert "2 photo(s): 2 new" in first

        # The same job spelled another way: short tool name, widgets in another order and case.
        again: list[str | Path] = ["process", "virtual-staging", "-w", "style=Modern"]
        again += ["-w", "space=Bedroom", photos, "--out", out, "--base-url", sb.base_url]
        assert await run_cli(*again) == 0
        assert sb.stats.processes_created == 2  # nothing new was created, nothing uploaded
        assert sb.stats.orders_created == 2
        second = capsys.readouterr().out
        assert "2 photo(s): 2 already done" in second
        assert second.count("skipped") >= 2


async def test_resumes_waiting_on_a_created_process(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    # Processes stay pending until advance(): the first run gives up waiting.
    async with Sandbox(SandboxConfig(pending_delay=math.inf, processing_delay=math.inf)) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args: list[str | Path] = [
            "process",
            *STAGING,
            photo,
            "--out",
            out,
            "--base-url",
            sb.base_url,
        ]
        assert await run_cli(*args, "--timeout", "0.3") == 1
        assert "waiting" in capsys.readouterr().out
        # The generation slot is written down before the process is asked for.
        steps = [line.get("stage", line.get("kind")) for line in _state_lines(out)]
        assert steps == ["uploaded", "generation", "created"]
        assert sb.stats.processes_created == 1

        sb.config.processing_delay = 0
        sb.advance()  # pending -> processing -> done
        await sb.wait_idle()
        assert await run_cli(*args, "--timeout", "20") == 0
        assert sb.stats.processes_created == 1  # the same process, collected
        assert _results(out) == {BEDROOM}
        assert "1 resumed from an earlier run" in capsys.readouterr().out
        assert _state_lines(out)[-1]["stage"] == "done"


async def test_adopts_a_process_created_before_a_crash(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order is recorded but the run died before it could record the process id."""
    out = tmp_path / "out"
    photo = photos / "living-room-empty.jpg"
    async with Sandbox(SandboxConfig()) as sb:
        async with Client(api_key=sb.api_key, base_url=sb.base_url) as client:
            order = await client.orders.create(photo)
            await client.processes.create(
                order.order_id,
                "tool-virtual-staging",
                {"tool-virtual-staging-input-image": order.assets[0].id},
                WIRE_WIDGETS,
            )
        key = PhotoKey.of(photo, "tool-virtual-staging", WIRE_WIDGETS)
        service = f"{sb.base_url}/"
        StateFile(out / STATE_FILE).append(
            Record.start(key, service).step(UPLOADED, order_id=order.order_id)
        )
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args: list[str | Path] = [
            "process",
            *STAGING,
            photo,
            "--out",
            out,
            "--base-url",
            sb.base_url,
        ]
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 1
        assert _results(out) == {LIVING}


async def test_failed_photos_are_retried_only_when_asked(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    async with Sandbox(SandboxConfig(fail_tools=["tool-virtual-staging"])) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args: list[str | Path] = [
            "process",
            *STAGING,
            photo,
            "--out",
            out,
            "--base-url",
            sb.base_url,
        ]
        assert await run_cli(*args) == 1
        assert await run_cli(*args) == 1
        assert sb.stats.processes_created == 1
        sb.config.fail_tools = frozenset()
        assert await run_cli(*args, "--retry-failed") == 0
        assert sb.stats.processes_created == 2
        assert _results(out) == {BEDROOM}


def test_sandbox_flag_second_run_skips(
    photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from asyncsdk.cli import main

    out = tmp_path / "out"
    args = ["process", *STAGING, str(photos), "--out", str(out), "--sandbox"]
    assert main(args) == 0
    assert _results(out) == RESULTS
    lines = _state_lines(out)
    assert (
        sorted(str(line["stage"]) for line in lines)
        == ["created"] * 2 + ["done"] * 2 + ["uploaded"] * 2
    )
    capsys.readouterr()
    assert main(args) == 0
    assert len(_state_lines(out)) == len(lines)  # no upload, no process: nothing recorded
    assert "2 already done" in capsys.readouterr().out


async def test_an_unknown_widget_value_costs_nothing(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        code = await run_cli(
            "process", "tool-virtual-staging", photos, "-w", "space=bedrom", "-w", "style=modern",
            "--out", tmp_path / "out", "--base-url", sb.base_url,
        )  # fmt: skip
        assert code == 2
        assert sb.stats.orders_created == 0
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "did you mean 'bedroom'" in err
    assert err.count("\n") == 1
