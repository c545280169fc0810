"""The documentation site builds with ``mkdocs build --strict`` and documents every public name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from codeblocks import ROOT

import asyncsdk
import asyncsdk.telemetry
import webhooks
import webhooks.asgi
import webhooks.contract
import webhooks.stores

#: The names each package's reference page documents: its ``__all__`` and its public modules'.
PACKAGES = {
    "asyncsdk": [*asyncsdk.__all__, *(f"telemetry.{n}" for n in asyncsdk.telemetry.__all__)],
    "webhooks": [
        *webhooks.__all__,
        *(f"asgi.{n}" for n in webhooks.asgi.__all__),
        *(f"contract.{n}" for n in webhooks.contract.__all__),
        *(f"stores.{n}" for n in webhooks.stores.__all__),
    ],
}
#: A phrase of the docstring of each package's main class, as the reference must show it.
DOCSTRING_TEXT = {
    "asyncsdk": "The asyncio client of the service.",
    "webhooks": "stores them, and runs handlers from the store.",
}
#: A name that some docstring of the package names with a reST role, linked in the reference.
LINKED = {"asyncsdk": "asyncsdk.RetryPolicy", "webhooks": "webhooks.contract.AtomicInbox"}
ROLE_AS_TYPED = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):")
DIRECTIVE = re.compile(r"^::: (\S+)$", re.M)


def referenced(package: str) -> list[str]:
    page = ROOT / "docs" / "reference" / f"{package}.md"
    return DIRECTIVE.findall(page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_the_reference_documents_every_public_name_by_its_public_path(package: str) -> None:
    paths = referenced(package)
    assert len(paths) == len(set(paths)), "a name is documented twice"
    assert sorted(paths) == sorted(f"{package}.{name}" for name in PACKAGES[package])


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_public_name_has_a_rendered_entry(site: Path, package: str) -> None:
    html = (site / "reference" / package / "index.html").read_text(encoding="utf-8")
    for name in PACKAGES[package]:
        assert f'id="{package}.{name}"' in html, f"{package}.{name} was not rendered"
    # The docstrings themselves made it, not just the headings, and their reST roles became
    # links or code instead of showing as typed (scripts/griffe_rst.py).
    assert DOCSTRING_TEXT[package] in html
    assert ROLE_AS_TYPED.search(html) is None, ROLE_AS_TYPED.search(html)
    assert f'href="#{LINKED[package]}"' in html


def test_every_page_is_built_and_linked(site: Path) -> None:
    pages = sorted(p.relative_to(ROOT / "docs") for p in (ROOT / "docs").rglob("*.md"))
    for page in pages:
        built = page.with_suffix("") / "index.html" if page.stem != "index" else Path("index.html")
        assert (site / built).is_file(), f"{page} was not built"
    start = (site / "index.html").read_text(encoding="utf-8")
    assert 'class="mermaid"' in start  # the request and webhook diagram
    assert start.count('src="gallery/') >= 10  # the before/after pictures
    assert (site / "gallery" / "virtual-staging.jpg").is_file()
