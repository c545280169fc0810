"""Section 4: the registry's pending waiters: memory, resolve time, Redis wake-up."""

from __future__ import annotations

from typing import Any

from benchmarks._env import REDIS_URL, median, percentile
from benchmarks._plan import Plan
from benchmarks._procs import CLIENT_CPU, Child, run_job
from benchmarks._shared import (
    Section,
    drop_prefix,
    fmt,
    new_prefix,
    redis_problem,
    runs_of,
    table,
)


def run_registry(plan: Plan) -> Section:
    section = Section("registry", "4. Registry: pending waiters")
    n = plan.registry_waiters
    memory: dict[str, list[float]] = {"event": [], "registry": [], "registry-no-timeout": []}
    resolve: list[dict[str, Any]] = []
    for _ in range(plan.runs):
        for kind in memory:
            result = run_job(
                "_registry_bench:memory_job", {"kind": kind, "waiters": n}, cpu=CLIENT_CPU
            )
            memory[kind].append(result["bytes"])
        resolve.append(run_job("_registry_bench:resolve_job", {"waiters": n}, cpu=CLIENT_CPU))
    base = median(memory["event"])
    with_timeout = median(memory["registry"]) - base
    without_timeout = median(memory["registry-no-timeout"]) - base
    all_returned = median([r["all_returned_s"] for r in resolve])
    calls = median([r["resolve_calls_s"] for r in resolve])
    section.lines += [
        f"{n:,} waiters, median of {plan.runs} fresh process(es) per figure (pinned to core 0).  "
        "Memory: `tracemalloc` traced bytes with the waiters pending, minus the same for "
        f"{n:,} bare tasks awaiting `asyncio.Event.wait()` (the caller's own task, coroutine and "
        "future), after a warm-up round of 1,000; process ids exist before either measurement.",
        "",
        *table(
            ["what", "bytes per waiter", "beyond the bare task"],
            [
                ["bare task awaiting an Event (baseline)", fmt(base), ""],
                [
                    "`Registry.wait(pid, timeout=600)`",
                    fmt(median(memory["registry"])),
                    f"**{fmt(with_timeout)}**",
                ],
                [
                    "`Registry.wait(pid)` (no timeout)",
                    fmt(median(memory["registry-no-timeout"])),
                    f"**{fmt(without_timeout)}**",
                ],
            ],
        ),
        "",
        f"Resolving {n:,} pending waiters (`await registry.resolve(event)` for each, then until "
        f"every waiting coroutine has returned): **{all_returned:.3f} s** "
        f"(runs {runs_of([r['all_returned_s'] for r in resolve], 3)}); the `resolve` calls "
        f"alone take {calls:.3f} s, the rest is the event loop waking {n:,} tasks.",
        "",
    ]
    reason = redis_problem()
    if reason:
        section.lines.append(f"Redis wake-up: not run: {reason}")
        return section
    wake = _redis_wakeup(plan)
    p50s = [percentile(run, 50) * 1000 for run in wake]
    p99s = [percentile(run, 99) * 1000 for run in wake]
    pooled = [x for run in wake for x in run]
    p99 = median(p99s)
    section.lines += [
        "Redis wake-up: two processes, each with its own `RedisRegistry` (own connection pool and "
        "subscription; not pinned, Redis is local).  Per sample the waiter enrolls "
        "`wait(pid)` and lets its first read of the result key pass, the resolver notes "
        "`time.monotonic()` then `await registry.resolve(event)` (SET NX + PUBLISH in one "
        "script), and the waiter notes `time.monotonic()` when `wait` returns.  "
        f"{plan.wake_samples:,} samples per run after 20 warm-up samples.",
        "",
        *table(
            ["runs", "p50 ms (runs)", "p99 ms (runs)", "max ms (pooled)"],
            [
                [
                    str(len(wake)),
                    f"**{fmt(median(p50s), 2)}** ({runs_of(p50s, 2)})",
                    f"**{fmt(p99, 2)}** ({runs_of(p99s, 2)})",
                    fmt(max(pooled) * 1000, 2),
                ]
            ],
        ),
    ]
    return section


def _redis_wakeup(plan: Plan) -> list[list[float]]:
    warmup = 20
    runs: list[list[float]] = []
    for _ in range(plan.runs):
        prefix = new_prefix("wake")
        resolver = Child(
            "_registry_bench:redis_resolver", {"redis_url": REDIS_URL, "prefix": prefix}
        )
        waiter: Child | None = None
        try:
            resolver.ready()
            total = plan.wake_samples + warmup
            waiter = Child(
                "_registry_bench:redis_waiter",
                {"redis_url": REDIS_URL, "prefix": prefix, "samples": total, "settle": 0.003},
            )
            sent: list[float] = []
            for number in range(total):
                ready = waiter.recv()
                assert ready["ready"] == number
                resolver.send({"go": number})
                sent.append(resolver.recv()["t0"])
            woke = waiter.result(timeout=60)["woke"]
            runs.append([w - s for w, s in zip(woke, sent, strict=True)][warmup:])
        finally:
            if waiter is not None:
                waiter.stop()
            resolver.stop()
            drop_prefix(prefix)
    return runs
