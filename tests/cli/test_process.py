"""``asyncsdk process``: a folder through one tool, resumable without paying twice."""

from __future__ import annotations

import asyncio
import json
import math
import re
import signal
import sys
from pathlib import Path

import pytest

from asyncsdk.sandbox import Sandbox, SandboxConfig

from .conftest import FAST_POLLS, run_cli, subprocess_env

STAGING = ["tool-virtual-staging", "-w", "space=bedroom", "-w", "style=modern"]
STATE_FILE = ".asyncsdk-process.jsonl"  # the journal in --out, named in `process --help`
# PHOTO--TOOL-DIGEST.jpg, the digest naming the widgets' settings.
RESULT = re.compile(r"(bedroom-empty|living-room-empty)--virtual-staging-[0-9a-f]{8}\.jpg")


def _named_by_photo(names: set[str]) -> dict[str, str]:
    """Result names by photo, each checked to be a staging result of that photo."""
    found = {}
    for name in names:
        match = RESULT.fullmatch(name)
        assert match, name
        found[match.group(1)] = name
    assert len(found) == len(names)
    return found


def _results(out: Path) -> set[str]:
    return {p.name for p in out.iterdir() if not p.name.startswith(".")}


def stage_args(sb: Sandbox, photos: Path, out: Path) -> list[str | Path]:
    """``asyncsdk process`` staging ``photos`` into ``out`` against ``sb``."""
    return ["process", *STAGING, photos, "--out", out, "--base-url", sb.base_url, *FAST_POLLS]


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
        args = stage_args(sb, photos, out)
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 2
        assert set(_named_by_photo(_results(out))) == {"bedroom-empty", "living-room-empty"}
        first = capsys.readouterr().out
        assert "2 photo(s): 2 new" in first

        # The same job spelled another way: short tool name, widgets in another order and case.
        again: list[str | Path] = ["process", "virtual-staging", "-w", "style=Modern"]
        again += [
            "-w",
            "space=Bedroom",
            photos,
            "--out",
            out,
            "--base-url",
            sb.base_url,
            *FAST_POLLS,
        ]
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
        args = stage_args(sb, photo, out)
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
        assert set(_named_by_photo(_results(out))) == {"bedroom-empty"}
        assert "1 resumed from an earlier run" in capsys.readouterr().out
        assert _state_lines(out)[-1]["stage"] == "done"


async def test_adopts_a_process_created_before_a_crash(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order is recorded but the run died before it could record the process id."""
    out = tmp_path / "out"
    photo = photos / "living-room-empty.jpg"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args = stage_args(sb, photo, out)
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 1
        # As if the run had died after its first step: the journal knows the order, not the
        # process the service created on it, and nothing was downloaded.
        journal = out / STATE_FILE
        lines = journal.read_text().splitlines()
        assert json.loads(lines[0])["stage"] == "uploaded"
        journal.write_text(lines[0] + "\n")
        [result] = _results(out)
        (out / result).unlink()

        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 1  # the process found on the order, not a new one
        assert _results(out) == {result}


async def test_failed_photos_are_retried_only_when_asked(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    async with Sandbox(SandboxConfig(fail_tools=["tool-virtual-staging"])) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args = stage_args(sb, photo, out)
        assert await run_cli(*args) == 1
        assert await run_cli(*args) == 1
        assert sb.stats.processes_created == 1
        sb.config.fail_tools = frozenset()
        assert await run_cli(*args, "--retry-failed") == 0
        assert sb.stats.processes_created == 2
        assert set(_named_by_photo(_results(out))) == {"bedroom-empty"}


def test_sandbox_flag_second_run_skips(
    photos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from asyncsdk.cli import main

    out = tmp_path / "out"
    args = ["process", *STAGING, str(photos), "--out", str(out), "--sandbox"]
    assert main(args) == 0
    assert set(_named_by_photo(_results(out))) == {"bedroom-empty", "living-room-empty"}
    lines = _state_lines(out)
    assert (
        sorted(str(line["stage"]) for line in lines)
        == ["created"] * 2 + ["done"] * 2 + ["uploaded"] * 2
    )
    capsys.readouterr()
    assert main(args) == 0
    assert len(_state_lines(out)) == len(lines)  # no upload, no process: nothing recorded
    assert "2 already done" in capsys.readouterr().out


async def refused_staging(
    photos: Path, out: Path, monkeypatch: pytest.MonkeyPatch, *widgets: str
) -> None:
    """Stage ``photos`` with ``widgets`` (``-w`` values) against a fresh sandbox: the command
    must stop with a usage error before anything is uploaded."""
    options = [arg for widget in widgets for arg in ("-w", widget)]
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        code = await run_cli(
            "process", "tool-virtual-staging", photos, *options,
            "--out", out, "--base-url", sb.base_url, *FAST_POLLS,
        )  # fmt: skip
        assert code == 2
        assert sb.stats.orders_created == 0


async def test_an_unknown_widget_value_costs_nothing(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await refused_staging(photos, tmp_path / "out", monkeypatch, "space=bedrom", "style=modern")
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "did you mean 'bedroom'" in err
    assert err.count("\n") == 1


async def test_a_missing_widget_is_named_as_the_command_line_takes_it(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    await refused_staging(photos, tmp_path / "out", monkeypatch, "space=bedroom")
    err = capsys.readouterr().err
    assert err.startswith("error: 'tool-virtual-staging' needs the widget 'style': add -w style=")
    assert "modern" in err
    assert "asyncsdk widgets tool-virtual-staging" in err
    assert "widgets={" not in err


async def test_a_changed_photo_or_other_widgets_make_a_new_job(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        where = ["--out", out, "--base-url", sb.base_url, *FAST_POLLS]
        assert await run_cli("process", *STAGING, photo, *where) == 0
        assert sb.stats.processes_created == 1
        # Other settings: a new process, and a result of another name beside the first.
        other = ["tool-virtual-staging", "-w", "space=bedroom", "-w", "style=scandinavian"]
        assert await run_cli("process", *other, photo, *where) == 0
        assert sb.stats.processes_created == 2
        names = _results(out)
        assert len(names) == 2
        assert all(RESULT.fullmatch(name) for name in names)
        # The same settings again, on a photo that changed since: a new process too.
        with photo.open("ab") as file:
            file.write(b"\0")
        assert await run_cli("process", *STAGING, photo, *where) == 0
        assert sb.stats.processes_created == 3


async def test_a_process_created_on_another_service_is_not_paid_for_again(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    never = SandboxConfig(pending_delay=math.inf, processing_delay=math.inf)
    async with Sandbox(never) as first:
        monkeypatch.setenv("ASYNCSDK_API_KEY", first.api_key)
        args = ["process", *STAGING, photo, "--out", out, "--timeout", "0.3"]
        assert await run_cli(*args, "--base-url", first.base_url, *FAST_POLLS) == 1
        assert first.stats.processes_created == 1
    async with Sandbox(SandboxConfig()) as second:
        capsys.readouterr()
        assert await run_cli(*args, "--base-url", second.base_url, *FAST_POLLS) == 1
        assert second.stats.orders_created == 0
        assert second.stats.processes_created == 0
    printed = capsys.readouterr().out
    assert "refused" in printed
    assert f"was created on {first.base_url}" in printed


async def test_a_broken_journal_line_is_skipped_with_a_warning(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args = stage_args(sb, photo, out)
        assert await run_cli(*args) == 0
        with (out / STATE_FILE).open("a") as file:
            file.write('{"key": "cut short by a cra')  # a crash in the middle of a write
        capsys.readouterr()
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 1  # the lines before it still count
    captured = capsys.readouterr()
    assert "1 already done" in captured.out
    assert "warning: 1 unreadable line(s)" in captured.err


async def test_the_line_after_a_cut_one_starts_a_line_of_its_own(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Written onto the cut line, the next photo's first step read as one unreadable line with
    # it: had the run stopped there, the next one would have uploaded and paid again.
    out = tmp_path / "out"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        where = ["--out", out, "--base-url", sb.base_url, *FAST_POLLS]
        assert await run_cli("process", *STAGING, photos / "bedroom-empty.jpg", *where) == 0
        with (out / STATE_FILE).open("a") as file:
            file.write('{"key": "cut short by a cra')
        assert await run_cli("process", *STAGING, photos / "living-room-empty.jpg", *where) == 0
    lines = (out / STATE_FILE).read_text().splitlines()
    assert lines.count('{"key": "cut short by a cra') == 1  # alone on its line
    readable = [json.loads(line) for line in lines if not line.startswith('{"key": "cut')]
    assert {"bedroom-empty.jpg", "living-room-empty.jpg"} <= {
        Path(str(line.get("photo", ""))).name for line in readable
    }


async def test_the_poll_interval_is_the_floor_between_two_polls_of_a_process(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a sandbox, which has no polling limit, a run need not wait the service's 5 s
    between polls: the option sets the floor the client keeps."""
    photo = photos / "bedroom-empty.jpg"
    async with Sandbox(SandboxConfig(processing_delay=0.6)) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        where = ["--out", tmp_path / "out", "--base-url", sb.base_url, "--poll-interval", "0.1"]
        assert await run_cli("process", *STAGING, photo, *where) == 0
        polls = sb.stats.requests["GET /v3/process/{id}"]
    assert polls >= 3  # at least 0.1 s apart while it processed for 0.6 s; 5 s apart by default


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf"])
async def test_a_poll_interval_that_is_not_seconds_above_0_is_refused(
    value: str, photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_cli("process", *STAGING, photos, f"--poll-interval={value}") == 2
    err = capsys.readouterr().err
    assert (
        f"argument --poll-interval: takes a number of seconds above 0, e.g. 0.5, not {value!r}"
        in err
    )


async def test_widget_options_on_the_command_line(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    photo = photos / "bedroom-empty.jpg"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        where = ["--out", tmp_path / "out", "--base-url", sb.base_url, *FAST_POLLS, "--dry-run"]
        enhance = ["tool-image-enhancement", "-w", "space=indoor"]
        options = "enhancement_options"
        # A multi-select widget: its name repeated, or its values separated by commas.
        repeated = ["-w", f"{options}=turn-on-the-light", "-w", f"{options}=remove-minor-blemishes"]
        commas = ["-w", f"{options}=turn-on-the-light,remove-minor-blemishes"]
        assert await run_cli("process", *enhance, *repeated, photo, *where) == 0
        first = capsys.readouterr().out
        assert await run_cli("process", *enhance, *commas, photo, *where) == 0
        assert capsys.readouterr().out == first  # the same job, the same result name
        assert await run_cli("process", *enhance, "-w", "style=", photo, *where) == 2
        assert sb.stats.orders_created == 0
    assert "--widget takes NAME=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["deleted", "emptied"])
async def test_a_lost_result_is_downloaded_again_from_the_same_process(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    # Emptied: what a power loss can leave of a file whose name was on disk before its bytes.
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args = stage_args(sb, photo, out)
        assert await run_cli(*args) == 0
        [result] = _results(out)
        if damage == "deleted":
            (out / result).unlink()
        else:
            (out / result).write_bytes(b"")
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 1
    assert _results(out) == {result}  # downloaded again under its own name
    assert (out / result).stat().st_size > 0


async def _process_in_a_child(sb: Sandbox, *args: str | Path) -> asyncio.subprocess.Process:
    """``asyncsdk process ARGS`` against ``sb`` in a child process, once it waits on the process
    it created (the sandbox given never finishes one)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asyncsdk",
        "process",
        *map(str, args),
        "--base-url",
        sb.base_url,
        env=subprocess_env(ASYNCSDK_API_KEY=sb.api_key),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    for _ in range(1200):  # 60 s at most
        if sb.stats.processes_created:
            return child
        await asyncio.sleep(0.05)
    child.kill()
    await child.communicate()
    raise AssertionError("the child run created no process")


@pytest.mark.skipif(sys.platform == "win32", reason="no SIGTERM handler nor advisory lock")
async def test_sigterm_stops_a_batch_as_ctrl_c_does(photos: Path, tmp_path: Path) -> None:
    # A container stop or a job scheduler sends SIGTERM: before, the process died at once, with
    # no word and a partial download left behind.
    out = tmp_path / "out"
    never = SandboxConfig(pending_delay=math.inf, processing_delay=math.inf)
    async with Sandbox(never) as sb:
        child = await _process_in_a_child(sb, *STAGING, photos / "bedroom-empty.jpg", "--out", out)
        child.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == 130
    assert stderr.decode() == "error: interrupted; run the same command to resume\n"
    assert [line["stage"] for line in _state_lines(out) if "stage" in line][-1] == "created"


@pytest.mark.skipif(sys.platform == "win32", reason="no SIGTERM handler nor advisory lock")
async def test_a_second_run_on_the_same_folder_stops_instead_of_paying_again(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    never = SandboxConfig(pending_delay=math.inf, processing_delay=math.inf)
    args = [*STAGING, photos / "bedroom-empty.jpg", "--out", out, "--timeout", "30"]
    async with Sandbox(never) as sb:
        first = await _process_in_a_child(sb, *args)
        try:
            monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
            where = ["--base-url", sb.base_url, *FAST_POLLS]
            assert await run_cli("process", *args, *where) == 2  # a second run: 30 s, not 600
            assert await run_cli("process", *args, *where, "--dry-run") == 0  # looking is fine
            assert sb.stats.processes_created == 1
        finally:
            first.send_signal(signal.SIGTERM)
            await asyncio.wait_for(first.communicate(), 60)
    assert "another 'asyncsdk process' run is using" in capsys.readouterr().err


async def test_every_process_one_creation_makes_is_recorded_and_collected(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # One creation may make several processes, each paid for: before, the command kept the
    # first id and lost the others' results.
    out = tmp_path / "out"
    async with Sandbox(SandboxConfig(processes_per_request=2)) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args = ["process", *STAGING, photos / "bedroom-empty.jpg", "--out", out]
        args += ["--base-url", sb.base_url, *FAST_POLLS]
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 2
        assert len(_results(out)) == 2  # one result image of each process
        [created] = [line for line in _state_lines(out) if line.get("stage") == "created"]
        assert len(created["more_process_ids"]) == 1  # type: ignore[arg-type]
        capsys.readouterr()
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 2
    assert "1 already done" in capsys.readouterr().out


async def test_the_summary_counts_what_was_sent_and_names_what_was_skipped(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A photo refused before its upload sends no generation, and the summary does not count it;
    the folder's file that is not a photo is named on stderr, with the reason."""
    (photos / "broken.jpg").write_bytes(b"not a jpeg at all")
    out = tmp_path / "out"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        assert await run_cli(*stage_args(sb, photos, out)) == 2  # one photo failed
        assert sb.stats.processes_created == 2
    captured = capsys.readouterr()
    assert "3 photo(s): 3 new" in captured.out
    assert "2 generation(s) fit the generation limit" in captured.out
    assert (
        "skipped 1 file(s) that are not photos the service takes (.jpeg, .jpg, .png, .webp): "
        f"{photos / 'notes.txt'}"
    ) in captured.err
