"""The built documentation site, served on 127.0.0.1 and read in a real headless Chromium with no
other host reachable: every page loads without a console error, every link inside the site and
every image resolves, every Mermaid diagram is drawn, and no code line is cut at the column edge.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
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


@pytest.mark.slow
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


#: The smallest text a diagram may be drawn with at the browser's 1280 px width.
SMALLEST_TEXT_PX = 12.0


async def diagram_text_sizes(browser: Browser, watched: Watched) -> list[tuple[str, float]]:
    """Each text of each diagram on the page and the size, in CSS pixels, it is drawn at.

    A diagram is an ``<svg>`` scaled to the column's width: a text is drawn at its font size
    times the svg's drawn width over its ``viewBox`` width.  The svg sits in a closed shadow
    root, so the DevTools protocol reads it.
    """

    def walk(node: dict[str, Any]) -> list[dict[str, Any]]:
        found = [node]
        for child in [*node.get("children", []), *node.get("shadowRoots", [])]:
            found.extend(walk(child))
        return found

    def attributes(node: dict[str, Any]) -> dict[str, str]:
        flat = node.get("attributes", [])
        return dict(zip(flat[::2], flat[1::2], strict=True))

    sizes = []
    async with browser.cdp_session(watched) as cdp:
        await cdp.send("DOM.enable")
        await cdp.send("CSS.enable")
        tree = await cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})
        diagrams = [
            node
            for node in walk(tree["root"])
            if node.get("nodeName") == "DIV" and "mermaid" in attributes(node).get("class", "")
        ]
        for diagram in diagrams:
            for svg in walk(diagram)[1:]:
                if svg.get("nodeName", "").lower() != "svg" or "viewBox" not in attributes(svg):
                    continue
                view_width = float(attributes(svg)["viewBox"].split()[2])
                box = await cdp.send("DOM.getBoxModel", {"nodeId": svg["nodeId"]})
                scale = box["model"]["width"] / view_width
                for text in walk(svg):
                    if text.get("nodeName", "").lower() != "text":
                        continue
                    style = await cdp.send(
                        "CSS.getComputedStyleForNode", {"nodeId": text["nodeId"]}
                    )
                    font = {p["name"]: p["value"] for p in style["computedStyle"]}["font-size"]
                    words = "".join(
                        n.get("nodeValue", "") for n in walk(text) if n.get("nodeType") == 3
                    )
                    sizes.append((words, float(font.removesuffix("px")) * scale))
    return sizes


async def test_the_start_pages_diagram_is_legible_at_1280_px(site: Path, tmp_path: Path) -> None:
    async with serve(site) as base, chromium(tmp_path / "profile") as browser:
        watched = await browser.open()
        await watched.visit(base)
        await watched.page.wait_for_function(DIAGRAMS_DRAWN, arg=1, timeout=10_000)
        assert await watched.page.evaluate("() => window.innerWidth") == 1280
        sizes = await diagram_text_sizes(browser, watched)
    assert len(sizes) >= 20, sizes  # the participants and the messages were all read
    small = [(words, round(px, 1)) for words, px in sizes if px < SMALLEST_TEXT_PX]
    assert small == [], f"diagram text drawn under {SMALLEST_TEXT_PX} px: {small}"


RESULT_LINKS = (
    "() => Array.from(document.querySelectorAll('.md-search-result__item a'), a => a.href)"
)


async def search(watched: Watched, query: str, answered: Callable[[list[str]], bool]) -> list[str]:
    """The links of the site's search results for ``query``, best first, typed as a reader does.

    The search index loads in a worker after the page, which takes seconds with the suite's
    other browsers on the same cores: the query is typed again until results show (for at most
    45 s).  Each keystroke starts a search in the worker, so the whole query's results can come
    seconds after its last key: each typing waits 5 s for them.  Results for the part typed so
    far ("webh") may show before those for the whole query: they are read again until
    ``answered`` holds of them, for at most 5 s, and the last read is returned either way."""
    from playwright.async_api import TimeoutError as NoResultYet  # installed: a browser runs

    field = "input.md-search__input"
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline:
        await watched.page.fill(field, "")
        await watched.page.type(field, query)
        try:
            await watched.page.wait_for_selector(
                ".md-search-result__item", state="attached", timeout=5_000
            )
        except NoResultYet:  # the index is not loaded yet
            continue
        links: list[str] = await watched.page.evaluate(RESULT_LINKS)
        for _ in range(50):
            if answered(links):
                break
            await asyncio.sleep(0.1)
            links = await watched.page.evaluate(RESULT_LINKS)
        return links
    return []


def first_entries(links: list[str], among: int) -> list[str]:
    """The first ``among`` entries under the result pages, as path#fragment."""
    entries = [URL(link) for link in links if URL(link).fragment]
    return [entry.path + "#" + entry.fragment for entry in entries[:among]]


@pytest.mark.parametrize(
    ("query", "expected", "among"),
    [
        ("processes.wait", "reference/asyncsdk/#asyncsdk.Processes.wait", 1),
        ("Processes.wait", "reference/asyncsdk/#asyncsdk.Processes.wait", 1),
        # "webhook" and "receiver" fill the webhooks reference: its entries that say them most
        # (RECEIVER_KEY's) may rank beside the method's own.
        (
            "WebhookReceiver.from_redis",
            "reference/webhooks/#webhooks.WebhookReceiver.from_redis",
            3,
        ),
    ],
)
async def test_searching_a_name_answers_its_reference_entry_first(
    site: Path, tmp_path: Path, query: str, expected: str, among: int
) -> None:
    async with serve(site) as base, chromium(tmp_path / "profile") as browser:
        watched = await browser.open()
        await watched.visit(base)
        links = await search(
            watched, query, lambda links: "/" + expected in first_entries(links, among)
        )
    assert links, f"no search result for {query!r}"
    pages = [URL(link).path for link in links]
    assert pages[0] == "/" + expected.split("#")[0], links[:5]
    # the first entries under the page hold the name's own, not only names that share a word
    assert "/" + expected in first_entries(links, among), links[:5]
