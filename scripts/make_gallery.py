"""Make the before/after pictures of the README and of the docs' start page from the sandbox.

::

    python scripts/make_gallery.py            # or: make gallery

Runs every tool of the sandbox's catalogue on a bundled sample photo, puts the photo and the
result side by side in one small JPEG per tool under ``docs/gallery/``, and rewrites the table
between the ``<!-- gallery:start -->`` and ``<!-- gallery:end -->`` lines of ``README.md`` and
``docs/index.md``.  ``--check --out DIR`` writes the pictures to DIR only, and exits 1 when the
pages or ``docs/gallery/`` do not match what the sandbox makes now.

The sandbox's "AI" is a set of deterministic Pillow drawings, so the pictures show what each tool
changes, not what the real service makes of a photo.  Needs Pillow.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import re
from collections.abc import Sequence
from pathlib import Path

from PIL import Image

import asyncsdk
from asyncsdk import Catalogue, Process, ToolSlug, samples
from asyncsdk.sandbox import Sandbox, SandboxConfig

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- gallery:start -->", "<!-- gallery:end -->"
#: Each page with its path to the pictures and the pairs per table row (the README is wider).
PAGES = {ROOT / "README.md": ("docs/gallery", 2), ROOT / "docs" / "index.md": ("gallery", 1)}

#: Width of each half of a pair, in pixels; a pair is about 10 KB as JPEG.
HALF_WIDTH = 240
GAP = 4
QUALITY = 70

#: The sample photo that suits each tool (any other tool gets the empty bedroom).
PHOTOS = {
    ToolSlug.VIRTUAL_STAGING: "living-room-empty.jpg",
    ToolSlug.IMAGE_ENHANCEMENT: "kitchen.jpg",
    ToolSlug.ITEM_REMOVAL: "kitchen.jpg",
    ToolSlug.ITEM_REMOVAL_MASK: "kitchen.jpg",
    ToolSlug.BACKSPLASH_CHANGE: "kitchen.jpg",
    ToolSlug.DAY_TO_DUSK: "exterior.jpg",
    ToolSlug.UNDER_CONSTRUCTION: "exterior.jpg",
}
#: Tools whose two input slots take a before and an after photo.
BEFORE_AFTER = frozenset({"tool-darkness"})
#: Widget values picked when a required widget offers them, in this order, after the room shown.
PREFERRED = ("bedroom", "modern", "scandinavian")
ROOMS = {"living-room-empty.jpg": "living-room", "kitchen.jpg": "kitchen"}


def widgets_for(catalogue: Catalogue, tool: str, photo: str) -> dict[str, str]:
    """One value for each required widget of ``tool``: the room of ``photo`` or a preferred
    value where the widget offers it, else its first value."""
    preferred = (ROOMS.get(photo, "bedroom"), *PREFERRED)
    chosen: dict[str, str] = {}
    for widget in catalogue.widgets_of(tool):
        if widget.is_optional:
            continue
        values = catalogue.values(tool, widget)
        if not values:
            continue
        liked = [value for value in preferred if value in values]
        chosen[catalogue.handle(tool, widget)] = liked[0] if liked else values[0]
    return chosen


async def run_tool(
    client: asyncsdk.Client, catalogue: Catalogue, tool: str
) -> tuple[Path, Process]:
    photo = samples.path(PHOTOS.get(tool, "bedroom-empty.jpg"))
    if tool == ToolSlug.ITEM_REMOVAL_MASK:
        return photo, await client.run_mask_removal(photo, rectangles=[samples.KITCHEN_BOX])
    widgets = widgets_for(catalogue, tool, photo.name)
    if tool in BEFORE_AFTER:  # the same photo fills both slots of a before/after pair
        pair_map = {"before": 0, "after": 1}
        after = asyncsdk.Upload(photo, role="secondary_angle")
        return photo, await client.run(tool, photo, after, asset_map=pair_map, widgets=widgets)
    return photo, await client.run(tool, photo, widgets=widgets)


def thumbnail(image: Image.Image) -> Image.Image:
    height = round(image.height * HALF_WIDTH / image.width)
    return image.convert("RGB").resize((HALF_WIDTH, height), Image.Resampling.LANCZOS)


def pair(before: bytes, after: bytes) -> bytes:
    """The two images side by side, ``HALF_WIDTH`` pixels each, as a JPEG."""
    left = thumbnail(Image.open(io.BytesIO(before)))
    right = thumbnail(Image.open(io.BytesIO(after)))
    canvas = Image.new(
        "RGB", (2 * HALF_WIDTH + GAP, max(left.height, right.height)), (255, 255, 255)
    )
    canvas.paste(left, (0, 0))
    canvas.paste(right, (HALF_WIDTH + GAP, 0))
    out = io.BytesIO()
    canvas.save(out, "JPEG", quality=QUALITY, optimize=True)
    return out.getvalue()


def table(rows: Sequence[tuple[str, str, str]], folder: str, columns: int) -> str:
    """A markdown table of the pairs, ``columns`` to a row: name, slug, image under ``folder``."""
    cells = [
        f"**{name}** `{slug}`<br>![{name}: before and after]({folder}/{file})"
        for name, slug, file in rows
    ]
    cells += [""] * (-len(cells) % columns)
    lines = ["| " + " | ".join(["Before → after (sandbox)"] + [""] * (columns - 1)) + " |"]
    lines.append("|" + "---|" * columns)
    for start in range(0, len(cells), columns):
        lines.append("| " + " | ".join(cells[start : start + columns]) + " |")
    return "\n".join(lines)


GALLERY = re.compile(f"^{START}\n.*?^{END}$", re.S | re.M)


def current(page: Path) -> str:
    """The gallery block of ``page`` now, markers included."""
    found = GALLERY.search(page.read_text(encoding="utf-8"))
    if found is None:
        raise SystemExit(f"{page} has no {START} ... {END} lines to put the gallery between")
    return found.group(0)


def rewrite(page: Path, block: str) -> None:
    """Replace the page's gallery block (markers included) with ``block``."""
    current(page)
    text = page.read_text(encoding="utf-8")
    page.write_text(GALLERY.sub(lambda _: block, text, count=1), encoding="utf-8")


def stale(rows: Sequence[tuple[str, str, str]]) -> list[str]:
    """What in the repository differs from ``rows``: pages to rewrite, pictures missing."""
    problems = [
        f"{page.relative_to(ROOT)}: the gallery table is out of date"
        for page, (folder, columns) in PAGES.items()
        if current(page) != f"{START}\n{table(rows, folder, columns)}\n{END}"
    ]
    committed = ROOT / "docs" / "gallery"
    problems += [f"docs/gallery/{f}: missing" for _, _, f in rows if not (committed / f).is_file()]
    return problems


async def make(out: Path) -> list[tuple[str, str, str]]:
    """Write one pair per tool into ``out`` (a folder); returns (name, slug, file name) rows."""
    rows: list[tuple[str, str, str]] = []
    async with Sandbox(SandboxConfig()) as sb, sb.client() as client:
        tools = [tool for tool in await client.catalogue.tools() if tool.is_active]
        catalogue = await client.catalogue.catalogue(*[tool.slug for tool in tools])
        done = await asyncio.gather(*(run_tool(client, catalogue, t.slug) for t in tools))
        for tool, (photo, process) in zip(tools, done, strict=True):
            if process.status != "done" or not process.final_assets:
                raise SystemExit(f"{tool.slug} ended {process.status} in the sandbox")
            result = io.BytesIO()
            await client.download(process.final_assets[0], result)
            name = tool.slug.removeprefix("tool-") + ".jpg"
            (out / name).write_bytes(pair(photo.read_bytes(), result.getvalue()))
            rows.append((tool.name, tool.slug, name))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "gallery", help="folder of the images"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change no page: exit 1 if the pages or docs/gallery do not match the sandbox",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = asyncio.run(make(args.out))
    if args.check:
        problems = stale(rows)
        for problem in problems:
            print(f"{problem} (run `make gallery`)")
        return 1 if problems else 0
    for page, (folder, columns) in PAGES.items():
        rewrite(page, f"{START}\n{table(rows, folder, columns)}\n{END}")
    total = sum((args.out / file).stat().st_size for _, _, file in rows)
    print(f"{len(rows)} pairs in {args.out} ({total // 1024} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
