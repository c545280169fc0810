"""One measured load against one server of the receiver section: the servers' names and peers,
the section's loads, and :func:`receiver_once` (``benchmarks.sidebyside`` and
``benchmarks.instructions`` run the same servers)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from benchmarks import _plan as goals
from benchmarks._load import run_load
from benchmarks._peers import PEERS
from benchmarks._plan import Plan
from benchmarks._procs import SERVER_CPU, Child
from benchmarks._stores import (
    STORE_NAMES,
    StorePlace,
    drop_place,
    new_place,
    receiver_name,
)

Load = tuple[str, int, int | None]
"""A load: its label, its connections, and the pause of a paced one (ms; None: flat out)."""
Kept = tuple[StorePlace, Path]
"""An inbox kept across servers: where it lives, and the server's folder beside it."""
NAMES: Final = {**PEERS, **{store: receiver_name(store) for store in STORE_NAMES}}
"""How the report names each server: the hand-written handlers, the receiver on each store."""
PEER_OF: Final = {store: store + "-peer" for store in STORE_NAMES if store + "-peer" in PEERS}
"""The handler each receiver's CPU per request is held against: the same work by hand."""


def paced_delay(plan: Plan) -> int:
    """The pause (ms) of each connection of the paced load: about ``receiver_paced_rate`` req/s
    from the top connection count."""
    return round(max(plan.receiver_connections) * 1000 / plan.receiver_paced_rate)


def receiver_loads(plan: Plan) -> list[Load]:
    """Flat out at each connection count, then paced at the top one."""
    top = max(plan.receiver_connections)
    loads: list[Load] = [(f"{c} conns, flat out", c, None) for c in plan.receiver_connections]
    paced = f"{top} conns, paced to ~{plan.receiver_paced_rate:,} req/s"
    loads.append((paced, top, paced_delay(plan)))
    return loads


@contextlib.contextmanager
def receiver_server(
    store: str,
    folder: Path,
    kept: Kept | None = None,
    packages: Path | None = None,
    **options: Any,
) -> Iterator[tuple[Child, str]]:
    """A fresh server of ``store`` (a store's name, or a peer of :data:`NAMES`;
    ``_receiver_bench:serve`` with ``options``) for the block: the child and the URL to post to.
    The inbox is a new one, dropped after, unless ``kept`` names an existing one (kept).
    ``packages``: as for :class:`~benchmarks._procs.Child`."""
    if kept is None:
        server_dir = folder / uuid.uuid4().hex[:10]
        server_dir.mkdir()
        place = new_place(store, server_dir, "inbox")
    else:
        place, server_dir = kept
    child = Child(
        "_receiver_bench:serve",
        {
            "store": store,
            "workdir": str(server_dir),
            "place": place[0],
            "namespace": place[1],
            **options,
        },
        cpu=SERVER_CPU,
        packages=packages,
    )
    try:
        yield child, child.ready()["url"]
    finally:
        child.stop()
        if kept is None:
            drop_place(store, place)


def receiver_once(
    plan: Plan,
    folder: Path,
    store: str,
    connections: int,
    delay_ms: int | None,
    kept: Kept | None = None,
    observed: str = "",
    packages: Path | None = None,
) -> dict[str, Any]:
    """One fresh server (:func:`receiver_server`), a warm-up, one measured load; the load
    generator's figures plus the server's CPU and counters over the measured part."""
    run = uuid.uuid4().hex[:10]
    with receiver_server(store, folder, kept, packages, observed=observed) as (child, url):
        run_load(url, connections, plan.receiver_warmup_seconds, folder, "w" + run, delay_ms)
        child.send("mark")
        child.recv()
        load, generator = run_load(url, connections, plan.receiver_seconds, folder, run, delay_ms)
        child.send("stats")
        load["server"] = child.recv()
    seconds = load["duration_us"] / 1e6
    load["generator"] = generator
    load["rps"] = load["requests"] / seconds
    load["cpu_us"] = load["server"]["cpu_s"] / max(1, load["requests"]) * 1e6
    load["waits"] = load["server"]["waits"] / max(1, load["requests"])
    # Shares of one core over the measured load.  The generator was the limit, not the server,
    # when it used (nearly) all of its core, or more CPU per request than the server: with a
    # core each, the side that spends more per request runs out first, even when other work on
    # the machine keeps both below 100 %.
    load["generator_share"] = load["cpu_s"] / seconds
    load["server_share"] = load["server"]["cpu_s"] / seconds
    load["saturated"] = (
        load["generator_share"] >= goals.GENERATOR_SATURATED
        or load["cpu_s"] >= load["server"]["cpu_s"]
    )
    load["bad"] = load["non_2xx"] + load["errors"] + load["timeouts"]
    server = load["server"]
    # Of the events accepted since the server started, the share the workers finished (acked).
    load["handled"] = server["processed"] / server["accepted"] if server.get("accepted") else None
    return load
