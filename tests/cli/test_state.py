"""The ``process`` state file and the decision taken for each photo on a second run."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from asyncsdk.cli._common import UsageError, parse_widgets
from asyncsdk.cli._state import (
    CREATED,
    DONE,
    FAILED,
    UPLOADED,
    PhotoKey,
    Record,
    StateFile,
    decide,
)

SERVICE = "https://api.example.com/"
SPACE = "widget-space-tool-virtual-staging"
STYLE = "widget-style-tool-virtual-staging"
BEDROOM = [{"slug": SPACE, "item_slugs": [f"item-bedroom-{SPACE}"]}]
KITCHEN = [{"slug": SPACE, "item_slugs": [f"item-kitchen-{SPACE}"]}]


@pytest.fixture
def key(tmp_path: Path) -> PhotoKey:
    photo = tmp_path / "room.jpg"
    photo.write_bytes(b"\xff\xd8\xff" + b"0" * 100)
    return PhotoKey.of(photo, "tool-virtual-staging", BEDROOM)


def test_the_key_changes_with_the_photo_the_tool_and_the_widgets(
    key: PhotoKey, tmp_path: Path
) -> None:
    photo = Path(key.photo)
    assert PhotoKey.of(photo, "tool-virtual-staging", BEDROOM).digest == key.digest
    assert PhotoKey.of(photo, "tool-day-to-dusk", BEDROOM).digest != key.digest
    assert PhotoKey.of(photo, "tool-virtual-staging", KITCHEN).digest != key.digest
    # The same settings in another order are the same job.
    both = [{"slug": STYLE, "item_slugs": ["b", "a"]}, *BEDROOM]
    other_order = [*BEDROOM, {"slug": STYLE, "item_slugs": ["a", "b"]}]
    assert (
        PhotoKey.of(photo, "tool-virtual-staging", both).digest
        == PhotoKey.of(photo, "tool-virtual-staging", other_order).digest
    )
    photo.write_bytes(photo.read_bytes() + b"1")
    assert PhotoKey.of(photo, "tool-virtual-staging", BEDROOM).digest != key.digest


def test_last_line_wins_and_broken_lines_are_skipped(key: PhotoKey, tmp_path: Path) -> None:
    state = StateFile(tmp_path / "out" / "state.jsonl")
    first = Record.start(key, SERVICE).step(UPLOADED, order_id="o1")
    state.append(first)
    state.append(first.step(CREATED, process_id="p1"))
    with state.path.open("a") as file:
        file.write('{"key": "cut short by a cra')  # a crash in the middle of a write
    records = state.load()
    assert state.skipped_lines == 1
    assert records[key.digest].stage == CREATED
    assert records[key.digest].process_id == "p1"
    assert records[key.digest].order_id == "o1"


def test_decisions(key: PhotoKey, tmp_path: Path) -> None:
    out = tmp_path
    uploaded = Record.start(key, SERVICE).step(UPLOADED, order_id="o1")
    created = uploaded.step(CREATED, process_id="p1")
    done = created.step(DONE, outputs=("room--virtual-staging.jpg",))
    failed = created.step(FAILED, error="the process failed")

    assert decide(None, service=SERVICE, out_dir=out).kind == "new"
    assert decide(uploaded, service=SERVICE, out_dir=out).kind == "adopt"
    assert decide(created, service=SERVICE, out_dir=out).kind == "resume"
    # Done, but its file is gone: download again from the same process.
    assert decide(done, service=SERVICE, out_dir=out).kind == "resume"
    (out / "room--virtual-staging.jpg").write_bytes(b"x")
    assert decide(done, service=SERVICE, out_dir=out).kind == "skip"
    assert decide(failed, service=SERVICE, out_dir=out).kind == "skip-failed"
    assert decide(failed, service=SERVICE, out_dir=out, retry_failed=True).kind == "new"

    # Another real service: never create a second process for one already created.
    other = "https://other.example.com/"
    assert decide(created, service=other, out_dir=out).kind == "refuse"
    assert decide(uploaded, service=other, out_dir=out).kind == "new"
    # A stopped embedded sandbox remembers nothing: start again.
    gone = attrs.evolve(created, service="sandbox:0123")
    assert decide(gone, service="sandbox:4567", out_dir=out).kind == "new"


def test_parse_widgets() -> None:
    assert parse_widgets(["space=bedroom", "style=modern"]) == {
        "space": "bedroom",
        "style": "modern",
    }
    assert parse_widgets(["options=a", "options=b,c"]) == {"options": ["a", "b", "c"]}
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_widgets(["space="])
