"""The stores of :data:`webhooks.stores.STORES` as the benchmarks run them: which exist, the
server each needs (its address, why it cannot be measured, a fresh namespace on it), and the
place of a fresh inbox.  A new store is measured by its row alone; a new server adds a line to
:data:`SERVERS`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

import attrs

from benchmarks._env import POSTGRES_DSN, REDIS_URL
from benchmarks._shared import (
    drop_prefix,
    drop_schema,
    new_prefix,
    new_schema,
    postgres_problem,
    redis_problem,
)
from webhooks.stores import STORES, store_named

__all__ = [
    "DURABLE",
    "SERVERS",
    "STORE_NAMES",
    "Server",
    "StorePlace",
    "drop_place",
    "new_place",
    "problems",
    "receiver_name",
    "server_of",
    "store_of",
]


@attrs.frozen
class Server:
    """A server some stores run on, as the benchmarks reach it."""

    address: str
    problem: Callable[[], str | None]
    """``None`` when it answers, else why the stores on it are not measured."""
    new_namespace: Callable[[str], str]
    """A fresh namespace of the benchmarks' own, named for what it holds."""
    drop_namespace: Callable[[str], None]


SERVERS: Final = {
    "redis": Server(REDIS_URL, redis_problem, new_prefix, drop_prefix),
    "postgres": Server(POSTGRES_DSN, postgres_problem, new_schema, drop_schema),
}

STORE_NAMES: Final = tuple(store.name for store in STORES)
"""Every store, in the table's order: the receiver variants of each section."""
DURABLE: Final = tuple(store.name for store in STORES if store.durable)
"""The stores whose entries outlive the process."""


def receiver_name(store: str) -> str:
    """How the report names the receiver on ``store``: ``receiver + RedisInbox``."""
    return f"receiver + {store_named(store).inbox_type.__name__}"


def store_of(variant: str) -> str:
    """The store a server variant runs on: a store's name, its hand-written peer's
    (``<store>-peer``) or its receiver served by uvicorn (``<store>-uvicorn``); ``""`` for none
    (the bare handler)."""
    name = variant.removesuffix("-peer").removesuffix("-uvicorn")
    return name if name in STORE_NAMES else ""


def server_of(variant: str) -> str:
    """The server a variant needs: ``"redis"``, ``"postgres"``, or ``""`` for none."""
    store = store_of(variant)
    return store_named(store).server if store else ""


def problems() -> dict[str, str]:
    """Each server that cannot be measured, and why."""
    found = {name: server.problem() for name, server in SERVERS.items()}
    return {name: problem for name, problem in found.items() if problem}


StorePlace = tuple[str, str]
"""Where an inbox lives: its place (URL, DSN, file; empty in memory) and its namespace."""


def new_place(variant: str, folder: Path, what: str) -> StorePlace:
    """A fresh place for the inbox of ``variant``'s store (:func:`store_of`): a new namespace on
    its server (named for ``what``), a file in ``folder``, or nothing (in memory, or no store)."""
    store = store_of(variant)
    if not store:
        return "", ""
    row = store_named(store)
    if row.server:
        server = SERVERS[row.server]
        return server.address, server.new_namespace(what)
    return (str(folder / f"{what}.db"), "") if row.place else ("", "")


def drop_place(variant: str, place: StorePlace) -> None:
    """Remove what :func:`new_place` made on a server (a file goes with its folder)."""
    server = server_of(variant)
    if server:
        SERVERS[server].drop_namespace(place[1])
