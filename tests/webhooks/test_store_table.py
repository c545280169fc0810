"""``webhooks.stores``: one row per store, complete enough that the command line, the tests and
the benchmarks need nothing else to reach a store."""

from __future__ import annotations

from importlib.metadata import metadata

import pytest
from store_places import SERVER_FIXTURES, Place

from asyncsdk import ConfigurationError
from webhooks.stores import STORES, store_named


def test_a_store_is_found_by_name_and_a_wrong_name_lists_the_stores() -> None:
    assert store_named("sqlite").title == "SQLite"
    names = ", ".join(store.name for store in STORES)
    with pytest.raises(
        ConfigurationError, match=f"no store is called 'mysql'; the stores are: {names}"
    ):
        store_named("mysql")


def test_each_row_is_complete(pytestconfig: pytest.Config) -> None:
    """Names unique, an extra the package has, a server the tests can reach, a namespace with
    a default, and a place that says what it is."""
    assert len({store.name for store in STORES}) == len(STORES)
    extras = set(metadata("asyncsdk").get_all("Provides-Extra") or [])
    markers = {line.partition(":")[0] for line in pytestconfig.getini("markers")}
    for store in STORES:
        assert store.extra in extras | {""}, store.name
        if store.server:
            assert store.server in SERVER_FIXTURES, store.name
            assert store.server in markers, store.name
        assert bool(store.namespace) == bool(store.default_namespace), store.name
        assert store.place in {"", "URL", "DSN", "PATH"}, store.name
        assert store.shared <= store.durable, store.name  # nodes share only what outlives them


async def test_each_store_opens_an_inbox_that_takes_its_class_s_options(
    store_place: Place,
) -> None:
    inbox = store_place.inbox(claim_timeout=2.5)
    try:
        assert inbox.claim_timeout == 2.5
        assert await store_place.store.exists(inbox) == (not store_place.store.durable)
    finally:
        await inbox.close()
