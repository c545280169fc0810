"""A real browser for the tests that need one: the OS's headless Chromium, driven by Playwright
over the DevTools protocol, with every console error and failed request of a page collected.

Playwright drives the Chromium of the machine's packages (``apt-get install chromium``; no
browser of its own is downloaded).  ``ASYNCSDK_TEST_CHROMIUM`` names another executable.  Without
one the tests skip with a reason, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from yarl import URL

CHROMIUM = (
    os.environ.get("ASYNCSDK_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
)
#: No GPU, no QUIC, nothing fetched behind the page's back (updates, sync, field trials): the
#: pages under test are the only traffic.  Playwright adds ``--headless`` and a fresh profile.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

if TYPE_CHECKING:  # playwright itself is imported when a browser is asked for
    from playwright.async_api import BrowserContext, CDPSession, Page


def chromium_problem() -> str | None:
    """None when a browser can be launched here, else why not."""
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM}: apt-get install chromium, or set ASYNCSDK_TEST_CHROMIUM"
    return None


def require_chromium() -> None:
    """Skip the test without a browser; under ``CI=true`` fail it instead."""
    problem = chromium_problem()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{problem}; CI=true requires a browser for the browser tests")
    pytest.skip(problem)


@attrs.define
class Watched:
    """A page of the browser and what went wrong on it since it was opened."""

    page: Page
    errors: list[str] = attrs.Factory(list)

    async def visit(self, url: str) -> None:
        """Load ``url`` and wait until the network is quiet (scripts have run)."""
        response = await self.page.goto(url, wait_until="networkidle")
        if response is None or not response.ok:
            status = "no answer" if response is None else response.status
            self.errors.append(f"{url}: {status}")

    async def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        await self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path


def _watch(page: Page) -> Watched:
    watched = Watched(page)

    def console(message: Any) -> None:
        if message.type == "error":
            watched.errors.append(f"console error on {page.url}: {message.text}")

    def page_error(error: Any) -> None:
        watched.errors.append(f"uncaught error on {page.url}: {error}")

    def request_failed(request: Any) -> None:
        watched.errors.append(f"request failed on {page.url}: {request.url} {request.failure}")

    page.on("console", console)
    page.on("pageerror", page_error)
    page.on("requestfailed", request_failed)
    return watched


@attrs.define
class Browser:
    """One headless Chromium with a fresh profile; :meth:`open` gives watched pages.

    Only 127.0.0.1 is reachable: a page that asks another host for anything (a script or font of
    a CDN) has that request refused and noted as an error of the page, so a page that passes
    works offline.
    """

    context: BrowserContext

    async def open(self) -> Watched:
        return _watch(await self.context.new_page())

    async def cdp(self, watched: Watched, method: str, params: dict[str, Any]) -> Any:
        """Send one DevTools protocol command about ``watched``'s page and return its answer."""
        async with self.cdp_session(watched) as session:
            return await session.send(method, params)

    @contextlib.asynccontextmanager
    async def cdp_session(self, watched: Watched) -> AsyncIterator[CDPSession]:
        """A DevTools protocol session on ``watched``'s page, for commands that build on each
        other (the node ids of ``DOM.getDocument`` hold within one session only)."""
        session = await self.context.new_cdp_session(watched.page)
        try:
            yield session
        finally:
            await session.detach()


def _local(url: str) -> bool:
    return URL(url).host in {"127.0.0.1", None} or url.startswith(("data:", "blob:", "about:"))


@contextlib.asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[Browser]:
    """A headless Chromium whose profile is the fresh folder ``profile``, closed at the end."""
    require_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as driver:
        context = await driver.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=list(FLAGS),
            viewport={"width": 1280, "height": 900},
        )
        browser = Browser(context)

        async def refuse(route: Any) -> None:  # the page notes it as a failed request
            await route.abort("addressunreachable")

        await context.route(lambda url: not _local(url), refuse)
        try:
            yield browser
        finally:
            await context.close()
