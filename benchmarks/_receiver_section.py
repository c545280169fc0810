"""Section 3: ``process.completed`` POSTs against the receiver, its peers and a bare handler,
flat out; the cost of retained dedup keys; and a burst against every receiver."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

import attrs

from benchmarks import _plan as goals
from benchmarks._burst import STORES, burst
from benchmarks._env import median
from benchmarks._peers import PEERS
from benchmarks._plan import Plan
from benchmarks._procs import which
from benchmarks._receiver_run import (
    NAMES,
    PEER_OF,
    Load,
    paced_delay,
    receiver_loads,
    receiver_once,
)
from benchmarks._retention import retention
from benchmarks._shared import (
    Goal,
    Section,
    fmt,
    met_if_measured,
    paired,
    runs_of,
    table,
    workdir,
)
from benchmarks._stores import DURABLE as DURABLE_STORES
from benchmarks._stores import STORE_NAMES, problems, server_of

Results = dict[tuple[str, str], list[dict[str, Any]]]
"""The measurements of each (load label, server), one per round, in round order."""

VARIANTS: Final = (*PEERS, *STORE_NAMES)
"""The servers: the bare handler, the hand-written peers of ``_peers.py``, the receivers."""
DURABLE: Final = tuple(store for store in DURABLE_STORES if store in PEER_OF)
"""The receivers on a durable store whose CPU per delivery is held against their peer's (a
goal)."""
REFUSED: Final = "refused: load generator saturated"


def _measure(plan: Plan, runnable: Sequence[str], loads: Sequence[Load]) -> tuple[Results, str]:
    """Every runnable variant under every load, ``plan.runs`` rounds (variants interleaved)."""
    results: Results = {}
    generator = "wrk" if which("wrk") else "python"
    with workdir("bench-receiver-") as folder:
        for _ in range(plan.runs):
            for label, connections, delay_ms in loads:
                for store in runnable:
                    result = receiver_once(plan, folder, store, connections, delay_ms)
                    generator = result["generator"]
                    results.setdefault((label, store), []).append(result)
    return results, generator


def _median(results: Results, label: str, store: str, key: str) -> float:
    runs = results.get((label, store))
    return median([r[key] for r in runs]) if runs else math.nan


def _rps_vs_bare(results: Results, label: str, store: str) -> float | None:
    """The per-round median of req/s over the bare handler's, from the rounds where neither
    load generator saturated; None (refused) when there is no such round; NaN if not run."""
    mine = results.get((label, store))
    if not mine:
        return math.nan
    pairs = zip(mine, results[(label, "bare")], strict=True)
    kept = [(a, b) for a, b in pairs if not a["saturated"] and not b["saturated"]]
    if not kept:
        return None
    return paired([a["rps"] for a, _ in kept], [b["rps"] for _, b in kept])[0]


def _cpu_vs_peer(results: Results, label: str, store: str) -> float:
    """The per-round median of server CPU per request over the peer's (NaN: not run)."""
    mine = results.get((label, store))
    theirs = results.get((label, PEER_OF[store]))
    if not mine or not theirs:
        return math.nan
    return paired([r["cpu_us"] for r in mine], [r["cpu_us"] for r in theirs])[0]


def _shares(runs: Sequence[dict[str, Any]]) -> str:
    generator = median([r["generator_share"] for r in runs]) * 100
    server = median([r["server_share"] for r in runs]) * 100
    saturated = sum(r["saturated"] for r in runs)
    note = f" (saturated in {saturated} of {len(runs)})" if saturated else ""
    return f"{fmt(generator)}{note} / {fmt(server)}"


def _times(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}x"


def _handled(runs: Sequence[dict[str, Any]]) -> str:
    shares = [r["handled"] for r in runs if r.get("handled") is not None]
    return f"{median(shares) * 100:.1f} %" if shares else ""


def _row(results: Results, load: Load, store: str, reasons: dict[str, str]) -> list[str]:
    label, connections, delay = load
    name = NAMES[store]
    runs = results.get((label, store))
    if not runs:
        return [label, name, "not run: " + reasons.get(server_of(store), "?"), *[""] * 10]
    rps = _median(results, label, store, "rps")
    vs_bare = _rps_vs_bare(results, label, store)
    vs_peer = (
        f"{fmt(_cpu_vs_peer(results, label, store), 2)} ({NAMES[PEER_OF[store]]})"
        if store in PEER_OF
        else ""
    )
    return [
        label,
        name,
        f"**{fmt(rps)}** ({runs_of([r['rps'] for r in runs])})",
        REFUSED if vs_bare is None else fmt(vs_bare, 2),
        fmt(_median(results, label, store, "cpu_us")),
        vs_peer,
        fmt(_median(results, label, store, "waits"), 2),
        _shares(runs),
        fmt(_median(results, label, store, "p50_us") / 1000, 1),
        f"**{fmt(_median(results, label, store, 'p99_us') / 1000, 1)}**",
        "" if delay is not None else fmt(connections / rps * 1000, 1),
        _handled(runs),
        str(sum(r["bad"] for r in runs)),
    ]


def _describe(plan: Plan, generator: str) -> str:
    return (
        f"Load generator: **{generator}** (one thread, pinned to core 0; every request carries "
        "a new `process_id`, so every POST is a new event and dedup never short-circuits); "
        f"{plan.receiver_warmup_seconds} s warm-up then {plan.receiver_seconds} s measured; "
        f"median of {plan.runs} run(s); a fresh server process (pinned to core 1) per "
        "measurement.  Latency is measured by the load generator (request sent to answer "
        "read).  The receiver: `receiver.setup(app, '/hooks/')` on an aiohttp app, a "
        "`TokenVerifier` (token in the path), the default 8 workers, no handler; `queue_limit` "
        "raised to 10,000,000 so that backpressure (503 once 10,000 events wait, the default) "
        "does not mix into the ack timing (the burst below keeps the default).  The bare "
        "handler reads the "
        "body, `json.loads` it and answers 200 JSON: the reference line.  The hand-written "
        "handlers do the work a user would write instead of mounting the receiver: the token "
        "check, `json.loads`, then the dedup key looked up in a dict and the body put on an "
        "`asyncio.Queue` that eight worker tasks take from (the memory inbox's peer), one "
        "SQLite `INSERT ... ON CONFLICT (dedup_key) DO NOTHING` committed on the event loop "
        "(WAL, `synchronous=FULL`, as `SQLiteInbox`), a Redis `SET NX` of the dedup key and an "
        "`XADD` (redis-py's asyncio client), or one PostgreSQL `INSERT ... ON CONFLICT DO "
        "NOTHING` (asyncpg, on a pool set up as `PostgresInbox`'s), then 200 JSON; the durable "
        "ones run no handler afterwards.  Every server process calls `gc.freeze()` once its "
        "app has started (the deployment `docs/webhooks.md` recommends).  Server CPU = "
        "`time.process_time()` of the server process (every thread, worker pool included) over "
        "the measured part, per request; 'x peer CPU/req' holds it against the hand-written "
        "handler doing the same work, round by round.  'Server thread waits/req': the "
        "times a thread of the server blocked and was woken (voluntary context switches of "
        "every thread, from `/proc`), per request: the event loop waiting for the network or "
        "a store, a writer thread for work or an fsync.  'Load gen / server CPU %': the "
        "share of one core each used over the measured part (wrk's from its resource usage once "
        "reaped).  A load generator at "
        f"{goals.GENERATOR_SATURATED * 100:.0f} % or more of its core, or using more CPU than "
        "the server, was the limit, not the server ('saturated'): its rounds are left out of "
        "the req/s ratios, and a ratio with no round left is refused.  Little's law: the mean "
        "latency is connections / throughput (the 'conns/throughput' column), a floor no "
        "variant can beat at that throughput.  'Handled by workers': of the events the server "
        "accepted, the share its worker pool had finished (entry acked) when the measured load "
        "ended; 100 % less one claim's reserve means the workers kept up, so the req/s is a "
        "rate the receiver sustains."
    )


HEADER: Final = (
    "load",
    "variant",
    "req/s (runs)",
    "x bare req/s (per-round median)",
    "server CPU us/req",
    "x peer CPU/req (per-round median)",
    "server thread waits/req",
    "load gen / server CPU %",
    "p50 ms",
    "p99 ms",
    "conns/throughput ms",
    "handled by workers",
    "non-2xx/errors",
)


def run_receiver(plan: Plan) -> Section:
    section = Section("receiver", "3. Receiver: process.completed POSTs")
    reasons = problems()
    runnable = [store for store in VARIANTS if server_of(store) not in reasons]
    top, pause = max(plan.receiver_connections), paced_delay(plan)
    loads = [load for load in receiver_loads(plan) if load[2] is None]
    results, generator = _measure(plan, runnable, loads)
    rows = [_row(results, load, store, reasons) for load in loads for store in VARIANTS]
    section.lines += [_describe(plan, generator), "", *table(HEADER, rows)]
    section.goals += [_cpu_goal(results, top, store) for store in DURABLE]
    stores = [store for store in runnable if store in STORES]
    with workdir("bench-burst-") as folder:
        lines, found = burst(plan, folder, stores, reasons)
    section.lines += ["", *lines]
    section.goals += found
    longer = attrs.evolve(plan, receiver_seconds=plan.retained_seconds)
    with workdir("bench-retained-") as folder:
        section.lines += [
            "",
            *retention(
                plan,
                folder,
                [store for store in stores if store != "memory"],
                lambda store, place: receiver_once(longer, folder, store, top, pause, place),
            ),
        ]
    for server, reason in reasons.items():
        section.lines += ["", f"{server} rows not run: {reason}"]
    return section


def _cpu_goal(results: Results, top: int, store: str) -> Goal:
    """Server CPU per delivery against the peer doing the same durable write, at ``top``
    connections flat out: met at or under the goal, or within the noise margin when one of the
    rounds is at or under it."""
    limit, noise = goals.RECEIVER_CPU_VS_PEER, goals.RECEIVER_CPU_NOISE
    label = f"{top} conns, flat out"
    mine = results.get((label, store))
    theirs = results.get((label, PEER_OF[store]))
    title = f"{store}: server CPU/delivery <= {limit} x {NAMES[PEER_OF[store]]}'s @{top}"
    if not mine or not theirs:
        return Goal("receiver", title, "not run", f"<= {limit}", None)
    ratio, per_round = paired([r["cpu_us"] for r in mine], [r["cpu_us"] for r in theirs])
    within_noise = ratio <= noise and min(per_round) <= limit
    return Goal(
        "receiver",
        title,
        f"{_times(ratio)} (rounds {', '.join(_times(r) for r in per_round)})",
        f"<= {limit} ({noise} where a round is <= {limit})",
        met_if_measured(ratio, ratio <= limit or within_noise),
    )
