"""Where ``process`` puts results, against a service that answers with hostile values.

The sandbox stands behind a proxy that rewrites each process it returns: a crafted tool name,
result URLs that 404, stop half-way or are not http.  Results land inside ``--out`` under cleaned
names, through no symlink, over no file the command did not make, and ``--out`` and its journal
are for the user alone.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from asyncsdk.sandbox import Sandbox, SandboxConfig

from .conftest import FAST_POLLS, run_cli
from .hostile import PNG, Rewrite, hostile_service

STAGING = ["tool-virtual-staging", "-w", "space=bedroom", "-w", "style=modern"]
JOURNAL = ".asyncsdk-process.jsonl"  # named in `asyncsdk process --help`


def keep(process: dict[str, Any], base: str) -> dict[str, Any]:
    return process


def tool(name: str) -> Rewrite:
    def rewrite(process: dict[str, Any], base: str) -> dict[str, Any]:
        return {**process, "tool": name}

    return rewrite


def result_at(path: str) -> Rewrite:
    """Every result of every process served from ``path`` (joined to the proxy's address when
    it starts with ``/``)."""

    def rewrite(process: dict[str, Any], base: str) -> dict[str, Any]:
        url = base + path if path.startswith("/") else path
        assets = [{**a, "src": url} for a in process["final_assets"]]
        return {**process, "final_assets": assets}

    return rewrite


async def process(
    photo: Path, out: Path, rewrite: Rewrite, monkeypatch: pytest.MonkeyPatch, *more: str
) -> int:
    """``asyncsdk process`` of the staging job on ``photo`` against the rewriting proxy."""
    async with Sandbox(SandboxConfig()) as sb, hostile_service(sb, rewrite) as base:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        return await run_cli(
            "process", *STAGING, photo, "--out", out, "--base-url", base, *FAST_POLLS, *more
        )


async def expected_name(
    photo: Path, out: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> str:
    """The stem of the result ``process`` plans for ``photo``, as its dry run shows it."""
    capsys.readouterr()
    assert await process(photo, out, keep, monkeypatch, "--dry-run") == 0
    found = re.search(r"(bedroom-empty--virtual-staging-[0-9a-f]{8})\.\*", capsys.readouterr().out)
    assert found, "the dry run names the result"
    return found.group(1)


def files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


async def test_the_result_is_named_by_what_it_holds(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    assert await process(photo, out, result_at("/files/result.png"), monkeypatch) == 0
    [result] = [p for p in out.iterdir() if p.suffix == ".png"]
    assert result.read_bytes() == PNG
    assert files(out) == {result.name, JOURNAL}  # no partial file left behind


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/files/missing.jpg", "HTTP 404"),
        ("/files/cut.jpg", "the answer was cut off"),
        ("file:///etc/passwd", "only http:// and https://"),
    ],
)
async def test_a_failed_download_leaves_nothing_behind(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    path: str,
    message: str,
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    assert await process(photo, out, result_at(path), monkeypatch) == 3
    assert message in capsys.readouterr().out
    assert files(out) == {JOURNAL}


async def test_a_crafted_tool_name_cannot_write_outside_out(
    photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    # Folders the attacker guessed, so that `out/<photo>--x/../../escaped` resolves on its own.
    for guessed in ("bedroom-empty--x", ".bedroom-empty--x"):
        (out / guessed).mkdir(parents=True)
    before = files(tmp_path)
    photo = photos / "bedroom-empty.jpg"
    assert await process(photo, out, tool("tool-x/../../escaped"), monkeypatch) == 0
    assert files(tmp_path) == before
    [result] = [p for p in out.iterdir() if p.is_file() and p.name != JOURNAL]
    assert result.name.startswith("bedroom-empty--x-..-..-escaped-")
    assert result.suffix == ".jpg"
    assert all(not any(p.iterdir()) for p in out.iterdir() if p.is_dir())


async def test_a_symlink_in_out_is_never_followed(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    stem = await expected_name(photo, out, monkeypatch, capsys)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out.mkdir(exist_ok=True)
    for planted in (f"{stem}.jpg", f".{stem}.part", f".{stem}.jpg.part"):
        (out / planted).symlink_to(victim)
    assert await process(photo, out, keep, monkeypatch) == 0
    assert victim.read_text() == "precious\n"
    result = out / f"{stem}.2.jpg"
    assert result.read_bytes()[:3] == b"\xff\xd8\xff"
    assert not result.is_symlink()


async def test_a_file_it_did_not_create_is_never_overwritten(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    photo = photos / "bedroom-empty.jpg"
    stem = await expected_name(photo, out, monkeypatch, capsys)
    out.mkdir(exist_ok=True)
    mine = out / f"{stem}.jpg"
    mine.write_bytes(b"the user's own file")
    assert await process(photo, out, keep, monkeypatch) == 0
    assert mine.read_bytes() == b"the user's own file"
    assert (out / f"{stem}.2.jpg").read_bytes()[:3] == b"\xff\xd8\xff"
    assert f"{stem}.2.jpg" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("umask", "folder", "image"), [(0o022, 0o755, 0o644), (0o077, 0o700, 0o600)]
)
async def test_results_get_the_umask_and_the_journal_stays_private(
    photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    umask: int,
    folder: int,
    image: int,
) -> None:
    """Results are written as any program writes a file, with the user's umask (a web server can
    serve them under the usual 022); the journal, which names orders and signed result URLs, is
    the user's alone whatever the umask."""
    out = tmp_path / "out"
    previous = os.umask(umask)
    try:
        assert await process(photos / "bedroom-empty.jpg", out, keep, monkeypatch) == 0
    finally:
        os.umask(previous)
    assert stat.S_IMODE(out.stat().st_mode) == folder
    assert stat.S_IMODE((out / JOURNAL).stat().st_mode) == 0o600
    [result] = [path for path in out.iterdir() if path.name != JOURNAL]
    assert result.suffix == ".jpg"
    assert stat.S_IMODE(result.stat().st_mode) == image
