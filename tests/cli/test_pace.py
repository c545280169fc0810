"""``asyncsdk process`` keeps every result and the service's generation pace, across runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from asyncsdk import samples

# The pace arithmetic and the journal are the command's own, in private modules: a schedule over
# a generation limit of hours cannot be waited for in a test, so its arithmetic is checked as
# functions, and the journal lines a long run leaves behind are written here directly.
from asyncsdk.cli._exits import UsageError
from asyncsdk.cli._pace import (
    DEFAULT_LIMIT,
    GenerationPace,
    about,
    least_time,
    parse_limit,
    slots,
    waiting_message,
)
from asyncsdk.cli._state import DONE, STATE_FILE, UPLOADED, PhotoKey, Record, StateFile
from asyncsdk.sandbox import Sandbox, SandboxConfig

from .conftest import run_cli

STAGING = ["tool-virtual-staging", "-w", "space=bedroom"]
MODERN = [*STAGING, "-w", "style=modern"]
WAITING = re.compile(
    r"^waiting for a generation slot: next in \d+ s, (\d+) left, under a minute$", re.M
)


def test_the_schedule_keeps_the_sliding_window() -> None:
    limit = GenerationPace(calls=2, period=10.0)
    # Two slots taken at 0 and 5: the next ones are a period after the one two places back.
    assert slots([0.0, 5.0], 3, 6.0, limit) == [10.0, 15.0, 20.0]
    # Slots older than the window no longer count.
    assert slots([0.0, 5.0], 2, 16.0, limit) == [16.0, 16.0]


def test_the_wait_says_why_and_until_when() -> None:
    assert (
        waiting_message(0.0, 192.0, 41, 2700.0)
        == "waiting for a generation slot: next in 3 m 12 s, 41 left, about 45 min"
    )
    # 500 photos at the service's 10 per 10 minutes: the last can start after 49 full windows.
    assert about(least_time([], 500, 0.0, DEFAULT_LIMIT)) == "8 h 10 min"
    assert str(DEFAULT_LIMIT) == "10 per 10 min"


def test_a_bad_limit_names_the_form() -> None:
    assert parse_limit("3/1.5") == GenerationPace(calls=3, period=1.5)
    for bad in ("10", "0/600", "ten/600", "10/0"):
        with pytest.raises(UsageError, match=re.escape("CALLS/SECONDS, e.g. 10/600")):
            parse_limit(bad)


@pytest.fixture
def three_photos(tmp_path: Path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("a.jpg", "b.jpg", "c.jpg"):
        shutil.copy(samples.path("bedroom-empty.jpg"), folder / name)
    return folder


async def test_two_styles_keep_their_results_and_the_pace_outlives_the_run(
    three_photos: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    # The service's limit with its window shortened: 2 generations in any 1.5 s.
    config = SandboxConfig(rate_limit=True, rate_limit_count=2, rate_limit_window=1.5)
    async with Sandbox(config) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        common = [three_photos, "--out", out, "--base-url", sb.base_url, "-j", "3"]
        common += ["--generation-limit", "2/1.5"]

        assert await run_cli("process", *STAGING, "-w", "style=modern", *common) == 0
        first = capsys.readouterr()
        # The third photo waited for a slot, and the wait was explained.
        assert [int(left) for left in WAITING.findall(first.err)] == [1]
        assert "against 2 s at least under the generation limit (2 per 1.5 s)" in first.out

        # Right away, another style: the journal remembers the slots just taken, so creations
        # wait for them to leave the window instead of drawing 429s.
        assert await run_cli("process", *STAGING, "-w", "style=scandinavian", *common) == 0
        second = capsys.readouterr()
        assert WAITING.findall(second.err)

        assert sb.stats.processes_created == 6
        assert sb.stats.requests["POST /v3/process"] == 6  # no creation was refused with 429
    results = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert len(results) == 6  # the second style wrote beside the first, over nothing
    for stem in ("a", "b", "c"):
        mine = [name for name in results if name.startswith(f"{stem}--virtual-staging-")]
        assert len(mine) == 2
    journal = StateFile(out / STATE_FILE)
    journal.load()
    assert len(journal.generations) == 6


async def test_dry_run_lists_the_results_and_the_time_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    for index in range(25):
        (folder / f"room-{index:02d}.jpg").write_bytes(samples.path("kitchen.jpg").read_bytes())
    out = tmp_path / "out"
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        args = ["process", *MODERN, folder, "--out", out, "--base-url", sb.base_url]
        assert await run_cli(*args, "--dry-run") == 0
        assert sb.stats.orders_created == 0
        assert sb.stats.processes_created == 0
    text = capsys.readouterr().out
    assert re.search(r"room-00\.jpg\s+create\s+room-00--virtual-staging-[0-9a-f]{8}\.\*", text)
    # 25 at 10 per 10 minutes: slots at 0, 10 and 20 minutes.
    assert "would create 25 process(es); at 10 per 10 min the last starts in about 20 min" in text
    assert not out.exists()


async def test_a_journal_from_before_result_digests_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Results named ``photo--tool.jpg`` and no generation lines: the photo is done."""
    photo = tmp_path / "bedroom.jpg"
    shutil.copy(samples.path("bedroom-empty.jpg"), photo)
    out = tmp_path / "out"
    out.mkdir()
    async with Sandbox(SandboxConfig()) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        wire = [
            {
                "slug": f"widget-{name}-tool-virtual-staging",
                "item_slugs": [f"item-{value}-widget-{name}-tool-virtual-staging"],
            }
            for name, value in (("space", "bedroom"), ("style", "modern"))
        ]
        key = PhotoKey.of(photo, "tool-virtual-staging", wire)
        old = Record.start(key, sb.base_url + "/").step(UPLOADED, order_id="o-1")
        old = old.step(DONE, process_id="p-1", outputs=("bedroom--virtual-staging.jpg",))
        (out / "bedroom--virtual-staging.jpg").write_bytes(b"an earlier result")
        (out / STATE_FILE).write_text(old.to_json() + "\n")

        args = ["process", *MODERN, photo, "--out", out, "--base-url", sb.base_url]
        assert await run_cli(*args) == 0
        assert sb.stats.processes_created == 0
    text = capsys.readouterr().out
    assert "1 photo(s): 1 already done" in text
    assert "bedroom--virtual-staging.jpg" in text
