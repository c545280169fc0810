"""The before/after pictures: made by scripts/make_gallery.py, small, shown for every tool."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from codeblocks import ROOT
from PIL import Image

from asyncsdk.sandbox import Sandbox

GALLERY = ROOT / "docs" / "gallery"
SCRIPT = ROOT / "scripts" / "make_gallery.py"
PAGES = {ROOT / "README.md": "docs/gallery/", ROOT / "docs" / "index.md": "gallery/"}
MAX_BYTES = 20_000


def test_the_pages_and_pictures_are_what_the_script_makes_now(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--check", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    made = sorted(path.name for path in tmp_path.iterdir())
    assert made == sorted(path.name for path in GALLERY.glob("*.jpg"))
    for name in made:
        with Image.open(tmp_path / name) as pair:
            assert pair.format == "JPEG"
            assert pair.width == 2 * 240 + 4  # before and after, side by side


async def test_every_active_tool_has_a_small_picture_on_both_pages(sandbox: Sandbox) -> None:
    async with sandbox.client() as client:
        tools = [tool.slug for tool in await client.catalogue.tools() if tool.is_active]
    assert tools
    for slug in tools:
        picture = GALLERY / (slug.removeprefix("tool-") + ".jpg")
        assert picture.is_file(), f"no picture of {slug}: run `make gallery`"
        assert picture.stat().st_size <= MAX_BYTES, f"{picture.name} is not a thumbnail"
        for page, folder in PAGES.items():
            text = page.read_text(encoding="utf-8")
            assert f"`{slug}`<br>![" in text, f"{page.name} does not show {slug}"
            assert f"]({folder}{picture.name})" in text


def test_both_pages_draw_the_request_and_webhook_paths() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        diagram = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
        assert diagram.startswith("sequenceDiagram\n")
        for step in ("POST /v3/order", "POST /v3/process", "POST /hooks/{token}", "resolve(event)"):
            assert step in diagram, f"{page.name}: the diagram lost {step!r}"
