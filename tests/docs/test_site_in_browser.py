"""The built documentation site, served on 127.0.0.1 and read in a real headless Chromium with no
other host reachable: every page loads without a console error, every link inside the site and
every image resolves, every Mermaid diagram is drawn, and no code line is cut at the column edge.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from browser import Browser, Watched, chromium
from yarl import URL

#: Pages whose screenshots are kept: a diagram, long code, the included ARCHITECTURE.md.
SCREENSHOTS = (
    "index.html",
    "webhooks/index.html",
    "getting-started/index.html",
    "architecture/index.html",
)

# What each page is asked in the browser, once its scripts have run.
IMAGES_LOADED = """async () => {
  const images = Array.from(document.images);
  for (const image of images) { image.loading = "eager"; }
  await Promise.all(images.map((image) => image.decode().catch(() => null)));
  return images.filter((image) => image.naturalWidth === 0).map((image) => image.src);
}"""
LINKS = "() => Array.from(document.querySelectorAll('a[href]'), (a) => a.href)"
CUT_CODE = """() => Array.from(document.querySelectorAll('pre > code'))
  .filter((code) => code.scrollWidth > code.clientWidth + 1)
  .map((code) => code.textContent.split('\\n').reduce((a, b) => (a.length > b.length ? a : b)))"""
DIAGRAMS_DRAWN = "(n) => document.querySelectorAll('div.mermaid').length >= n"


@contextlib.asynccontextmanager
async def serve(root: Path) -> AsyncIterator[str]:
    """The folder ``root`` as a static site (``dir/`` answers ``dir/index.html``), on a free
    port of 127.0.0.1, as a web server in front of a built site would."""

    async def handle(request: web.Request) -> web.StreamResponse:
        target = (root / request.match_info["path"]).resolve()
        if not target.is_relative_to(root):
            raise web.HTTPNotFound
        if target.is_dir():
            if not request.path.endswith("/"):
                raise web.HTTPMovedPermanently(request.path + "/")
            target = target / "index.html"
        if not target.is_file():
            raise web.HTTPNotFound
        return web.FileResponse(target)

    app = web.Application()
    app.router.add_get("/{path:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        await runner.cleanup()


def drawn_diagrams(document: dict[str, Any]) -> tuple[int, int]:
    """(diagrams, diagrams holding an ``<svg>``) in a DevTools ``DOM.getDocument`` tree.

    The theme draws each diagram into a closed shadow root, which scripts of the page cannot
    open; the DevTools protocol shows it (``pierce``).
    """

    def walk(node: dict[str, Any]) -> list[dict[str, Any]]:
        found = [node]
        for child in [*node.get("children", []), *node.get("shadowRoots", [])]:
            found.extend(walk(child))
        return found

    diagrams = 0
    drawn = 0
    for node in walk(document["root"]):
        attributes = node.get("attributes", [])
        named = dict(zip(attributes[::2], attributes[1::2], strict=True))
        if node.get("nodeName") == "DIV" and "mermaid" in named.get("class", "").split():
            diagrams += 1
            drawn += any(n.get("nodeName", "").lower() == "svg" for n in walk(node)[1:])
    return diagrams, drawn


async def check_page(
    browser: Browser, watched: Watched, url: str, expected_diagrams: int
) -> list[str]:
    """What is wrong with the page at ``url`` as a reader sees it (empty when nothing)."""
    await watched.visit(url)
    problems = list(watched.errors)
    problems += [f"image not shown: {src}" for src in await watched.page.evaluate(IMAGES_LOADED)]
    problems += [f"code line cut: {line!r}" for line in await watched.page.evaluate(CUT_CODE)]
    if expected_diagrams:
        try:
            await watched.page.wait_for_function(
                DIAGRAMS_DRAWN, arg=expected_diagrams, timeout=10_000
            )
        except Exception as exc:  # playwright's TimeoutError: the diagrams stayed text
            problems.append(f"Mermaid diagrams left as text: {exc}")
        tree = await browser.cdp(watched, "DOM.getDocument", {"depth": -1, "pierce": True})
        diagrams, drawn = drawn_diagrams(tree)
        if (diagrams, drawn) != (expected_diagrams, expected_diagrams):
            problems.append(f"{expected_diagrams} diagrams, {drawn} drawn as <svg>")
    return problems


async def broken_links(links: set[str], base: str) -> list[str]:
    """The links into the site whose page does not answer 200, or lacks the anchor named."""
    problems = []
    pages: dict[URL, str | None] = {}
    async with aiohttp.ClientSession() as http:
        for link in sorted(links):
            url = URL(link)
            if url.origin() != URL(base).origin():
                continue
            page = url.with_fragment(None)
            if page not in pages:
                async with http.get(page) as response:
                    pages[page] = await response.text() if response.status == 200 else None
            text = pages[page]
            if text is None:
                problems.append(f"broken link: {link}")
            elif url.fragment and f'id="{url.fragment}"' not in text:
                problems.append(f"link to a missing anchor: {link}")
    return problems


def diagrams_by_page(site: Path) -> dict[str, int]:
    """Every page of the built site (its path in the site) and how many diagrams it holds."""
    return {
        page.relative_to(site).as_posix(): page.read_text(encoding="utf-8").count(
            '<pre class="mermaid">'
        )
        for page in sorted(site.rglob("*.html"))
    }


async def test_every_page_works_offline_in_a_real_browser(
    site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = diagrams_by_page(site)
    assert "architecture/index.html" in pages
    assert "changelog/index.html" in pages
    assert pages["index.html"] >= 1, "the diagram of the start page is no longer found"
    problems: list[str] = []
    links: set[str] = set()
    shots: list[Path] = []
    async with serve(site) as base:
        async with chromium(tmp_path / "profile") as browser:
            for page, expected in pages.items():
                watched = await browser.open()
                url = base + page.removesuffix("index.html")
                problems += await check_page(browser, watched, url, expected)
                links.update(await watched.page.evaluate(LINKS))
                if page in SCREENSHOTS:
                    name = page.replace("/index.html", "").replace(".html", "")
                    shots.append(await watched.screenshot(tmp_path / "screenshots" / f"{name}.png"))
                await watched.page.close()
        problems += await broken_links(links, base)
    with capsys.disabled():
        for shot in shots:
            print(f"\nscreenshot of the site: {shot}")
    assert problems == [], "\n".join(problems)
    assert len(shots) == len(SCREENSHOTS)
    # The site was read for real: its two diagrams pages and their links were seen.
    assert any(link.endswith("/architecture/") for link in links)
