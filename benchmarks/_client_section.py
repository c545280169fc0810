"""Section 1: ``processes.create`` / ``processes.get`` against raw aiohttp and httpx, and a batch
of ``client.run()`` calls paced by the generation limit."""

from __future__ import annotations

import math
from typing import Any

from benchmarks import _plan as goals
from benchmarks._env import median
from benchmarks._plan import Plan
from benchmarks._procs import CLIENT_CPU, run_job, serving
from benchmarks._shared import (
    Goal,
    Section,
    fmt,
    met_if_measured,
    paired,
    runs_of,
    table,
)


def run_client(plan: Plan) -> Section:
    from benchmarks._client_bench import IMPLEMENTATIONS

    section = Section("client", "1. Client: processes.create / processes.get")
    results: dict[str, list[dict[str, Any]]] = {impl: [] for impl in IMPLEMENTATIONS}
    with serving("_api:serve") as server:
        for _ in range(plan.client_runs):
            for impl in IMPLEMENTATIONS:
                count = plan.httpx_requests if impl == "httpx" else plan.client_requests
                phases = ["create"] if impl == "sdk-novalidate" else ["create", "get"]
                results[impl].append(
                    run_job(
                        "_client_bench:job",
                        {
                            "impl": impl,
                            "requests": count,
                            "concurrency": plan.client_concurrency,
                            "warmup": min(plan.client_warmup, count),
                            "phases": phases,
                            **server,
                        },
                        cpu=CLIENT_CPU,
                        timeout=900,
                    )
                )

    def values(impl: str, phase: str, key: str) -> list[float]:
        return [run[phase][key] for run in results[impl] if phase in run]

    def med(impl: str, phase: str, key: str) -> float:
        return median(values(impl, phase, key))

    def cell(impl: str, phase: str) -> str:
        if not values(impl, phase, "rps"):
            return "(same as above)"
        return f"**{fmt(med(impl, phase, 'rps'))}** ({runs_of(values(impl, phase, 'rps'))})"

    names = {
        "sdk": "asyncsdk Client (default: validate=True)",
        "sdk-novalidate": "asyncsdk Client(validate=False)",
        "aiohttp": "raw aiohttp",
        "httpx": "httpx.AsyncClient",
    }
    rows = []
    for impl in IMPLEMENTATIONS:
        count = plan.httpx_requests if impl == "httpx" else plan.client_requests
        rows.append(
            [
                names[impl],
                f"{count:,}",
                cell(impl, "create"),
                fmt(med(impl, "create", "cpu_us")),
                cell(impl, "get"),
                fmt(med(impl, "get", "cpu_us")),
            ]
        )
    section.lines += [
        f"Concurrency {plan.client_concurrency}; each phase times its requests after a warm-up "
        f"of {plan.client_warmup}; median of {plan.client_runs} run(s); each implementation runs "
        "in a fresh process pinned to core 0, the server (aiohttp, canned answers) pinned to "
        "core 1; rounds interleave the implementations.  CPU = `time.process_time()` of the client "
        "process per request.  The client validates process requests against the catalogue by "
        "default: the minimal server serves `/api/tools` and the widgets endpoint (the sandbox's "
        "catalogue), which the client fetches once in the warm-up and caches; "
        "`Client(validate=False)` is shown beside it.  The raw aiohttp and httpx versions send "
        "the same JSON body and headers and decode the JSON answer.",
        "",
        *table(
            [
                "implementation",
                "requests/phase",
                "create req/s (runs)",
                "create CPU us/req",
                "get req/s (runs)",
                "get CPU us/req",
            ],
            rows,
        ),
        "",
    ]
    ratio_rows = []
    for impl, phase in (("sdk", "create"), ("sdk-novalidate", "create"), ("sdk", "get")):
        vs_raw, raw_runs = paired(values(impl, phase, "rps"), values("aiohttp", phase, "rps"))
        vs_httpx, httpx_runs = paired(values(impl, phase, "rps"), values("httpx", phase, "rps"))
        cpu_raw, cpu_runs = paired(
            values(impl, phase, "cpu_us"), values("aiohttp", phase, "cpu_us")
        )
        label = f"{phase} ({names[impl]})"
        ratio_rows.append(
            [
                label,
                f"**{fmt(vs_raw, 2)}** ({runs_of(raw_runs, 2)})",
                f"{fmt(cpu_raw, 2)} ({runs_of(cpu_runs, 2)})",
                f"**{fmt(vs_httpx, 1)}** ({runs_of(httpx_runs, 1)})",
            ]
        )
        if impl == "sdk-novalidate":
            continue
        section.goals.append(
            Goal(
                "client",
                f"{phase}: req/s >= {goals.CLIENT_VS_AIOHTTP} x raw aiohttp",
                f"{vs_raw:.2f}x",
                f">= {goals.CLIENT_VS_AIOHTTP}",
                met_if_measured(vs_raw, vs_raw >= goals.CLIENT_VS_AIOHTTP),
            )
        )
        section.goals.append(
            Goal(
                "client",
                f"{phase}: req/s >= {goals.CLIENT_VS_HTTPX:g} x httpx",
                f"{vs_httpx:.1f}x",
                f">= {goals.CLIENT_VS_HTTPX:g}",
                met_if_measured(vs_httpx, vs_httpx >= goals.CLIENT_VS_HTTPX),
            )
        )
    _pacing(plan, section)
    _journal(plan, section)
    section.lines += [
        "Ratios: the median of the per-round ratios (the two figures of a round are taken "
        "back to back), per-round values in brackets.",
        "",
        *table(
            [
                "phase",
                "SDK / aiohttp req/s",
                "SDK / aiohttp CPU per req",
                "SDK / httpx req/s",
            ],
            ratio_rows,
        ),
    ]
    return section


def _pacing(plan: Plan, section: Section) -> None:
    """The batch under the generation limit (``_pacing_bench``), one run."""
    limit = {"max_calls": 10, "window": plan.pacing_window}
    with serving("_pacing_bench:serve", limit) as server:
        run = run_job(
            "_pacing_bench:job",
            {"photos": plan.pacing_photos, **limit, **server},
            cpu=CLIENT_CPU,
            timeout=600,
        )
    ratio = run["ratio"]
    section.lines += [
        f"Pacing: {run['photos']} concurrent `client.run()` calls against the sandbox with its "
        f"generation limit on, 10 per {run['window']:g} s (the service's 10 per 600 s, the "
        "window shortened), and the client's `GenerationLimit` of the same numbers: each call "
        "takes its place before its upload.  The limit-bound minimum is the last group's start, "
        f"{math.ceil(run['photos'] / 10) - 1} windows, plus one `run()` alone "
        f"({fmt(run['single'], 3)} s).",
        "",
        *table(
            ["batch", "time s", "minimum s", "time / minimum", "429s raised"],
            [
                [
                    f"{run['photos']} photos",
                    fmt(run["elapsed"], 2),
                    fmt(run["minimum"], 2),
                    f"**{fmt(ratio, 3)}**",
                    str(run["refused"]),
                ]
            ],
        ),
        "",
    ]
    section.goals.append(
        Goal(
            "client",
            f"pacing: batch time <= {goals.PACING_VS_MINIMUM} x the limit-bound minimum",
            f"{ratio:.3f}x",
            f"<= {goals.PACING_VS_MINIMUM}",
            met_if_measured(ratio, ratio <= goals.PACING_VS_MINIMUM and run["refused"] == 0),
        )
    )


def _journal(plan: Plan, section: Section) -> None:
    """What an SQLite journal adds to one ``client.run()`` (``_journal_bench``), one run."""
    with serving("_journal_bench:serve") as server:
        run = run_job(
            "_journal_bench:job",
            {"runs": plan.journal_runs, "warmup": 10, **server},
            cpu=CLIENT_CPU,
            timeout=600,
        )
    added = run["added_ms"]
    section.lines += [
        f"Journal: {run['runs']} pairs of `client.run()` one after the other against the "
        "sandbox (processes done at once, no generation limit): one without a journal, then one "
        "with a fresh `key=` on `Client(journal=path)` (SQLite, WAL, `synchronous=FULL`, in a "
        "temporary folder).  Medians per run.",
        "",
        *table(
            ["run", "ms per run", "added by the journal ms"],
            [
                ["no journal", fmt(run["plain_ms"], 2), ""],
                ["keyed, SQLite journal", fmt(run["keyed_ms"], 2), f"**{fmt(added, 2)}**"],
            ],
        ),
        "",
    ]
    section.goals.append(
        Goal(
            "client",
            f"journal: an SQLite journal adds <= {goals.JOURNAL_ADDED_MS:g} ms per run()",
            f"{added:.2f} ms",
            f"<= {goals.JOURNAL_ADDED_MS:g} ms",
            met_if_measured(added, added <= goals.JOURNAL_ADDED_MS),
        )
    )
