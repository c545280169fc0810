"""Each store of :data:`webhooks.stores.STORES` as the tests parametrize it, and a fresh place
for an inbox on it: a new store is tested here by its row alone, once its server (if it is a new
one) has its fixtures in ``conftest.py`` and a line in :data:`SERVER_FIXTURES`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from webhooks.contract import InspectableInbox
from webhooks.stores import STORES, Store

__all__ = ["SERVER_FIXTURES", "Place", "place_for", "store_params"]

SERVER_FIXTURES: dict[str, tuple[str, str]] = {
    "redis": ("redis_url", "redis_prefix"),
    "postgres": ("postgres_dsn", "postgres_schema"),
}
"""Per server: the fixture of its address and the fixture of a fresh namespace on it (dropped
after the test)."""


def store_params(*, durable: bool | None = None, shared: bool | None = None) -> list[Any]:
    """One ``pytest.param`` per store (its id: the store's name; marked with its server's
    marker), those that are ``durable`` or ``shared`` (when given) only."""
    return [
        pytest.param(store, id=store.name, marks=_marks(store))
        for store in STORES
        if durable in (None, store.durable) and shared in (None, store.shared)
    ]


def _marks(store: Store[Any]) -> list[pytest.MarkDecorator]:
    # The marker named for its server, registered in pyproject.toml (``redis``, ``postgres``):
    # getattr is how pytest makes a marker whose name is a value.
    return [getattr(pytest.mark, store.server)] if store.server else []


@attrs.frozen
class Place:
    """Where a fresh inbox of one store lives: the store, its place and its namespace."""

    store: Store[Any]
    place: str
    namespace: str

    def inbox(self, **options: Any) -> InspectableInbox:
        """An inbox of the store at this place, with its class's ``options``."""
        return self.store.open_inbox(self.place, self.namespace, **options)

    def argv(self) -> list[str]:
        """The place as a child script takes it: ``[store, place, namespace]``."""
        return [self.store.name, self.place, self.namespace]


def place_for(store: Store[Any], request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    """A fresh place for an inbox of ``store``: a new namespace on its server, a new file in
    ``tmp_path``, or nothing (in memory)."""
    if store.server:
        address, namespace = SERVER_FIXTURES[store.server]
        return Place(store, request.getfixturevalue(address), request.getfixturevalue(namespace))
    if store.place:
        return Place(store, str(tmp_path / f"{store.name}-inbox"), "")
    return Place(store, "", "")
