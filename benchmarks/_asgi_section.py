"""Section 7: the same receiver served by uvicorn (``ReceiverASGI``) beside the aiohttp sub-app:
deliveries per second and server CPU per delivery, same store, same load, rounds interleaved."""

from __future__ import annotations

from typing import Any, Final

from benchmarks._env import median
from benchmarks._plan import Plan
from benchmarks._procs import which
from benchmarks._receiver_bench import UVICORN
from benchmarks._receiver_run import NAMES, receiver_once
from benchmarks._shared import (
    Section,
    fmt,
    paired,
    runs_of,
    table,
    workdir,
)
from benchmarks._stores import STORE_NAMES, problems, server_of

STORES: Final = STORE_NAMES
HEADER: Final = (
    "store",
    "served by",
    "deliveries/s (runs)",
    "x aiohttp deliveries/s (per-round median)",
    "server CPU us/delivery",
    "x aiohttp CPU/delivery (per-round median)",
    "p50 ms",
    "p99 ms",
    "load gen / server CPU %",
    "non-2xx/errors",
)


def _uvicorn_problem() -> str | None:
    try:
        import uvicorn  # noqa: F401 - importability
    except ImportError:
        return "uvicorn is not installed (pip install 'asyncsdk[asgi]')"
    return None


def _ratio(mine: list[dict[str, Any]], theirs: list[dict[str, Any]], key: str) -> str:
    value, rounds = paired([r[key] for r in mine], [r[key] for r in theirs])
    return f"{fmt(value, 2)} ({runs_of(rounds, 2)})"


def _row(
    store: str,
    served_by: str,
    runs: list[dict[str, Any]],
    aiohttp: list[dict[str, Any]] | None = None,
) -> list[str]:
    """A row of ``runs``; with ``aiohttp``'s runs, its ratios to them."""
    ratios = (
        ["", ""]
        if aiohttp is None
        else [_ratio(runs, aiohttp, "rps"), _ratio(runs, aiohttp, "cpu_us")]
    )
    generator = median([r["generator_share"] for r in runs]) * 100
    server = median([r["server_share"] for r in runs]) * 100
    return [
        NAMES[store],
        served_by,
        f"**{fmt(median([r['rps'] for r in runs]))}** ({runs_of([r['rps'] for r in runs])})",
        ratios[0],
        fmt(median([r["cpu_us"] for r in runs])),
        ratios[1],
        fmt(median([r["p50_us"] for r in runs]) / 1000, 1),
        fmt(median([r["p99_us"] for r in runs]) / 1000, 1),
        f"{fmt(generator)} / {fmt(server)}",
        str(sum(r["bad"] for r in runs)),
    ]


def run_asgi(plan: Plan) -> Section:
    section = Section("asgi", "7. The receiver under uvicorn beside aiohttp")
    reasons = problems()
    if (problem := _uvicorn_problem()) is not None:
        section.lines.append(f"Not run: {problem}.")
        return section
    stores = [store for store in STORES if server_of(store) not in reasons]
    top = max(plan.receiver_connections)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with workdir("bench-asgi-") as folder:
        for _ in range(plan.runs):
            for store in stores:
                for variant in (store, store + UVICORN):
                    result = receiver_once(plan, folder, variant, top, None)
                    results.setdefault((store, variant), []).append(result)
    rows: list[list[str]] = []
    http = "?"
    generator = "wrk" if which("wrk") else "python"
    for store in STORES:
        if store not in stores:
            reason = reasons.get(server_of(store), "?")
            rows.append([NAMES[store], "", f"not run: {reason}", *[""] * 7])
            continue
        aiohttp, uvicorn = results[(store, store)], results[(store, store + UVICORN)]
        http = uvicorn[0]["server"].get("http", "?")
        generator = aiohttp[0]["generator"]
        rows.append(_row(store, "aiohttp (`receiver.setup(app, '/hooks/')`)", aiohttp))
        rows.append(_row(store, f"uvicorn ({http}) + `ReceiverASGI`", uvicorn, aiohttp))
    section.lines += [
        f"The receiver of section 3 (a `TokenVerifier`, the default 8 workers, no handler, "
        f"`queue_limit` raised to 10,000,000) served two ways in fresh server processes pinned "
        f"to core 1: mounted in an aiohttp app, and wrapped in `webhooks.asgi.ReceiverASGI` "
        f"served alone by uvicorn (HTTP parser: **{http}**, the one uvicorn picks as installed; "
        f"`pip install httptools` gives it its C parser; no access log; the ASGI lifespan "
        f"starts and drains the receiver).  Load generator: **{generator}**, {top} connections "
        f"flat out, every request a new `process_id`; {plan.receiver_warmup_seconds} s warm-up "
        f"then {plan.receiver_seconds} s measured; median of {plan.runs} run(s), the two "
        "servers of a store measured back to back in each round.  Server CPU = "
        "`time.process_time()` of the server process over the measured part, per delivery.",
        "",
        *table(HEADER, rows),
    ]
    return section
