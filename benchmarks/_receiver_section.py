"""Section 3: ``process.completed`` POSTs against the receiver, its peers and a bare handler."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import _plan as goals
from benchmarks._env import REDIS_URL, median
from benchmarks._plan import Plan
from benchmarks._procs import CLIENT_CPU, SERVER_CPU, Child, ChildError, run_job, which
from benchmarks._shared import (
    Goal,
    Section,
    drop_prefix,
    fmt,
    met_if_measured,
    new_prefix,
    paired,
    ratio,
    redis_problem,
    runs_of,
    table,
    workdir,
)


def _wrk(url: str, connections: int, seconds: int, script: Path) -> dict[str, Any]:
    wrk = which("wrk")
    assert wrk is not None
    argv = [
        wrk,
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(script),
        url,
    ]
    child = Child("wrk", argv=argv, cpu=CLIENT_CPU)
    try:
        out = child.output(timeout=seconds + 60)
    finally:
        child.stop()
    for line in out.splitlines():
        if line.startswith("WRKJSON "):
            data: dict[str, Any] = json.loads(line[len("WRKJSON ") :])
            return data
    raise ChildError(f"wrk printed no result:\n{out[-2000:]}")


def _load(
    url: str, connections: int, seconds: int, folder: Path, run: str, delay_ms: int | None
) -> tuple[dict[str, Any], str]:
    from benchmarks._receiver_bench import lua_script

    if which("wrk") is not None:
        script = folder / f"{run}.lua"
        script.write_text(lua_script(run, delay_ms))
        return _wrk(url, connections, seconds, script), "wrk"
    result = run_job(
        "_receiver_bench:loadgen",
        {
            "url": url,
            "connections": connections,
            "duration": seconds,
            "run": run,
            "delay_ms": delay_ms,
        },
        cpu=CLIENT_CPU,
        timeout=seconds + 120,
    )
    return result, "python"


def _receiver_once(
    plan: Plan, folder: Path, store: str, slow: bool, connections: int, delay_ms: int | None
) -> dict[str, Any]:
    """One fresh server, a warm-up, one measured load; the load generator's figures plus the
    server's CPU and counters over the measured part."""
    run = uuid.uuid4().hex[:10]
    prefix = new_prefix("inbox")
    server_dir = folder / run
    server_dir.mkdir()
    child = Child(
        "_receiver_bench:serve",
        {
            "store": store,
            "slow_handler": slow,
            "workdir": str(server_dir),
            "redis_url": REDIS_URL,
            "prefix": prefix,
        },
        cpu=SERVER_CPU,
    )
    try:
        url = child.ready()["url"]
        _load(url, connections, plan.receiver_warmup_seconds, folder, "w" + run, delay_ms)
        child.send("mark")
        child.recv()
        load, generator = _load(url, connections, plan.receiver_seconds, folder, run, delay_ms)
        child.send("stats")
        load["server"] = child.recv()
    finally:
        child.stop()
        drop_prefix(prefix)
    load["generator"] = generator
    load["rps"] = load["requests"] / (load["duration_us"] / 1e6)
    load["cpu_us"] = load["server"]["cpu_s"] / max(1, load["requests"]) * 1e6
    load["bad"] = load["non_2xx"] + load["errors"] + load["timeouts"]
    server = load["server"]
    # Of the events accepted since the server started, the share the workers finished (acked).
    load["handled"] = server["processed"] / server["accepted"] if server.get("accepted") else None
    return load


_RECEIVER_NAMES = {
    "bare": "bare aiohttp handler",
    "memory": "receiver + MemoryInbox",
    "sqlite": "receiver + SQLiteInbox",
    "redis": "receiver + RedisInbox",
}


def _handled(runs: Sequence[dict[str, Any]]) -> str:
    shares = [r["handled"] for r in runs if r.get("handled") is not None]
    return f"{median(shares) * 100:.1f} %" if shares else ""


def run_receiver(plan: Plan) -> Section:
    section = Section("receiver", "3. Receiver: process.completed POSTs")
    redis_reason = redis_problem()
    variants: list[tuple[str, bool]] = [
        ("bare", False),
        ("memory", False),
        ("sqlite", False),
        ("redis", False),
        ("memory", True),
        ("sqlite", True),
        ("redis", True),
    ]
    runnable = [v for v in variants if not (v[0] == "redis" and redis_reason)]
    top = max(plan.receiver_connections)
    paced_delay = round(top * 1000 / plan.receiver_paced_rate)
    # (label, connections, delay_ms): saturating loads at each connection count, then a paced one
    loads: list[tuple[str, int, int | None]] = [
        (f"{c} conns, flat out", c, None) for c in plan.receiver_connections
    ]
    loads.append((f"{top} conns, paced to ~{plan.receiver_paced_rate:,} req/s", top, paced_delay))
    results: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}
    generator = "wrk" if which("wrk") else "python"
    with workdir("bench-receiver-") as folder:
        for _ in range(plan.runs):
            for label, connections, delay_ms in loads:
                for store, slow in runnable:
                    result = _receiver_once(plan, folder, store, slow, connections, delay_ms)
                    generator = result["generator"]
                    results.setdefault((label, store, slow), []).append(result)

    def med(label: str, store: str, slow: bool, key: str) -> float:
        runs = results.get((label, store, slow))
        return median([r[key] for r in runs]) if runs else math.nan

    rows = []
    for label, connections, delay in loads:
        bare_cpu = med(label, "bare", False, "cpu_us")
        for store, slow in variants:
            name = _RECEIVER_NAMES[store] + (", 30 s handler" if slow else "")
            runs = results.get((label, store, slow))
            if not runs:
                rows.append([label, name, "not run: " + (redis_reason or "?"), *[""] * 8])
                continue
            rps = med(label, store, slow, "rps")
            vs_bare, _ = paired(
                [r["rps"] for r in runs], [r["rps"] for r in results[(label, "bare", False)]]
            )
            rows.append(
                [
                    label,
                    name,
                    f"**{fmt(rps)}** ({runs_of([r['rps'] for r in runs])})",
                    fmt(vs_bare, 2),
                    fmt(med(label, store, slow, "cpu_us")),
                    fmt(ratio(bare_cpu, med(label, store, slow, "cpu_us")), 2),
                    fmt(med(label, store, slow, "p50_us") / 1000, 1),
                    f"**{fmt(med(label, store, slow, 'p99_us') / 1000, 1)}**",
                    "" if delay is not None else fmt(connections / rps * 1000, 1),
                    _handled(runs),
                    str(sum(r["bad"] for r in runs)),
                ]
            )
    section.lines += [
        f"Load generator: **{generator}** (one thread, pinned to core 0; every request carries "
        "a new `process_id`, so every POST is a new event and dedup never short-circuits); "
        f"{plan.receiver_warmup_seconds} s warm-up then {plan.receiver_seconds} s measured; "
        f"median of {plan.runs} run(s); a fresh server process (pinned to core 1) per "
        "measurement.  Latency is measured by the load generator (request sent to answer "
        "read).  The receiver: `receiver.setup(app, '/hooks/')` on an aiohttp app, a "
        "`TokenVerifier` (token in the path), the default 8 workers (no handler, or one "
        "handler that sleeps 30 s); `queue_limit` raised to 10,000,000 so that backpressure "
        "(503 once 10,000 events wait, the default) does not mix into the ack timing: with the "
        "30 s handler the backlog grows at the full request rate.  The bare handler reads the "
        "body, `json.loads` it and answers 200 JSON.  Every server process, bare or not, calls "
        "`gc.freeze()` once its app has started (the deployment `docs/webhooks.md` recommends).  "
        "Server CPU = `time.process_time()` of the "
        "server process (every thread, worker pool included) over the measured part, per "
        f"request.  Paced load: each of the {top} connections waits a random 0 to "
        f"{2 * paced_delay} ms between its requests.  Little's law: flat out, the mean latency "
        "is connections / throughput (the 'conns/throughput' column), a floor no variant "
        "can beat at that throughput.  'Handled by workers': of the events the server "
        "accepted, the share its worker pool had finished (handlers run, entry acked) when the "
        "measured load ended; 100 % less one claim's reserve means the workers kept up, so the "
        "req/s is a rate the receiver sustains (the 30 s handler finishes nothing by design).",
        "",
        *table(
            [
                "load",
                "variant",
                "req/s (runs)",
                "x bare req/s (per-round median)",
                "server CPU us/req",
                "bare CPU / CPU",
                "p50 ms",
                "p99 ms",
                "conns/throughput ms",
                "handled by workers",
                "non-2xx/errors",
            ],
            rows,
        ),
    ]
    if redis_reason:
        section.lines += ["", f"Redis rows not run: {redis_reason}"]
    flat = [(label, c) for label, c, delay in loads if delay is None]
    top_label = next(label for label, c, delay in loads if delay is None and c == top)
    for store in ("memory", "sqlite", "redis"):
        threshold = goals.RECEIVER_VS_BARE[store]
        for slow in (False, True):
            suffix = " (30 s handler)" if slow else ""
            ratios = [
                paired(
                    [r["rps"] for r in results.get((label, store, slow), [])],
                    [r["rps"] for r in results.get((label, "bare", False), [])],
                )[0]
                if (label, store, slow) in results
                else math.nan
                for label, _ in flat
            ]
            worst = min(ratios)
            if math.isnan(sum(ratios)):
                worst = math.nan
            section.goals.append(
                Goal(
                    "receiver",
                    f"{store}{suffix}: req/s >= {threshold} x bare",
                    " / ".join(f"{r:.2f}x @{c}" for r, (_, c) in zip(ratios, flat, strict=True)),
                    f">= {threshold}",
                    met_if_measured(worst, worst >= threshold),
                )
            )
            p99 = med(top_label, store, slow, "p99_us") / 1000
            bare_p99 = med(top_label, "bare", False, "p99_us") / 1000
            section.goals.append(
                Goal(
                    "receiver",
                    f"{store}{suffix}: p99 ack <= {goals.RECEIVER_P99_MS:g} ms @{top}, flat out",
                    f"{p99:.1f} ms (bare: {bare_p99:.1f} ms)",
                    f"<= {goals.RECEIVER_P99_MS:g} ms",
                    met_if_measured(p99, p99 <= goals.RECEIVER_P99_MS),
                )
            )
            bad = sum(
                r["bad"] for label, _, _ in loads for r in results.get((label, store, slow), [])
            )
            if slow and (store, slow) in runnable:
                section.goals.append(
                    Goal(
                        "receiver",
                        f"{store} (30 s handler): every POST answered 2xx",
                        f"{bad} non-2xx/errors",
                        "0",
                        bad == 0,
                    )
                )
    return section
