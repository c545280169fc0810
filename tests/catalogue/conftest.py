"""Fixtures of the catalogue tests; the data lives in ``catalogue_fixture.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import pytest
from catalogue_fixture import ORDER_ASSETS, TOOLS, WIDGETS, CatalogueSource, Clock

from asyncsdk import Asset, Catalogue, Tool, Widget


@pytest.fixture
def catalogue() -> Catalogue:
    return Catalogue(tools=TOOLS, widgets=WIDGETS)


@pytest.fixture
def source() -> CatalogueSource:
    return CatalogueSource()


@pytest.fixture
def order_assets() -> tuple[Asset, ...]:
    return ORDER_ASSETS


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_catalogue() -> Callable[..., Catalogue]:
    """A catalogue with some tools or widgets changed: ``make_catalogue(widgets={...})``."""

    def build(
        *,
        tools: Iterable[Tool] = TOOLS,
        widgets: Mapping[str, tuple[Widget, ...]] | None = None,
    ) -> Catalogue:
        return Catalogue(tools=tuple(tools), widgets={**WIDGETS, **(widgets or {})})

    return build
