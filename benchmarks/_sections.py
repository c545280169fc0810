"""The five sections: each runs its helper processes and returns its part of the report."""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from benchmarks import _plan as goals
from benchmarks._env import REDIS_URL, median, percentile
from benchmarks._plan import MIB, Plan
from benchmarks._procs import CLIENT_CPU, SERVER_CPU, Child, ChildError, run_job, serving, which

# -- report pieces --------------------------------------------------------------------------------


@attrs.frozen
class Goal:
    section: str
    goal: str
    measured: str
    target: str
    met: bool | None  # None: not measured


@attrs.define
class Section:
    key: str
    title: str
    lines: list[str] = attrs.Factory(list)
    goals: list[Goal] = attrs.Factory(list)
    seconds: float = 0.0


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def fmt(value: float, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def runs_of(values: Sequence[float], digits: int = 0) -> str:
    return ", ".join(fmt(v, digits) for v in values)


def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def paired(mine: Sequence[float], theirs: Sequence[float]) -> tuple[float, list[float]]:
    """The median of the per-round ratios (each pair measured back to back), and the ratios.

    Load from other work on a shared machine drifts over minutes; a ratio of two figures taken
    seconds apart is steadier than a ratio of medians taken over the whole section.
    """
    ratios = [ratio(a, b) for a, b in zip(mine, theirs, strict=True)]
    return median(ratios), ratios


def _met(value: float, ok: bool) -> bool | None:
    return None if math.isnan(value) else ok


@contextlib.contextmanager
def workdir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def redis_problem() -> str | None:
    """None when the Redis backends can be used, else why not."""
    try:
        from webhooks import RedisInbox, RedisRegistry  # noqa: F401 - importability
    except Exception as exc:  # any failure to import is the reason to report
        return f"webhooks._redis does not import: {type(exc).__name__}: {exc}"
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # unreachable server, missing redis-py: the reason to report
        return f"no Redis at {REDIS_URL}: {type(exc).__name__}: {exc}"
    return None


def new_prefix(what: str) -> str:
    return f"asyncsdk-bench:{what}:{uuid.uuid4().hex[:12]}:"


def drop_prefix(prefix: str) -> None:
    """Delete every Redis key under ``prefix`` (the benchmarks' own, made by new_prefix)."""
    with contextlib.suppress(Exception):
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2, socket_timeout=10)
        try:
            batch = list(client.scan_iter(match=prefix + "*", count=1000))
            for start in range(0, len(batch), 1000):
                client.delete(*batch[start : start + 1000])
        finally:
            client.close()


# -- 1. client ------------------------------------------------------------------------------------


def run_client(plan: Plan) -> Section:
    from benchmarks._client_bench import IMPLEMENTATIONS

    section = Section("client", "1. Client: processes.create / processes.get")
    results: dict[str, list[dict[str, Any]]] = {impl: [] for impl in IMPLEMENTATIONS}
    with serving("_api:serve") as server:
        for _ in range(plan.runs):
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
        f"of {plan.client_warmup}; median of {plan.runs} run(s); each implementation runs in a "
        "fresh process pinned to core 0, the server (aiohttp, canned answers) pinned to core 1; "
        "rounds interleave the implementations.  CPU = `time.process_time()` of the client "
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
                _met(vs_raw, vs_raw >= goals.CLIENT_VS_AIOHTTP),
            )
        )
        section.goals.append(
            Goal(
                "client",
                f"{phase}: req/s >= {goals.CLIENT_VS_HTTPX:g} x httpx",
                f"{vs_httpx:.1f}x",
                f">= {goals.CLIENT_VS_HTTPX:g}",
                _met(vs_httpx, vs_httpx >= goals.CLIENT_VS_HTTPX),
            )
        )
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


# -- 2. upload ------------------------------------------------------------------------------------


def run_upload(plan: Plan) -> Section:
    from benchmarks._upload_bench import make_jpeg_file

    section = Section("upload", "2. Upload: orders.create against raw aiohttp streaming")
    with workdir("bench-upload-") as folder:
        big = make_jpeg_file(folder / "big.jpg", plan.big_file)
        public = make_jpeg_file(folder / "limit.jpg", plan.public_file)
        smalls = [
            str(make_jpeg_file(folder / f"small-{n:03d}.jpg", plan.small_file))
            for n in range(plan.small_files)
        ]
        warm = make_jpeg_file(folder / "warm.jpg", 4096)
        big_label = f"1 x {plan.big_file // MIB:,} MiB"
        small_label = f"{plan.small_files} x {plan.small_file // MIB} MiB"
        public_label = f"1 x {plan.public_file // MIB} MiB"
        variants: list[tuple[str, str, list[str], int]] = [
            (big_label, "sdk-raised-limit", [str(big)], 1),
            (big_label, "aiohttp", [str(big)], 1),
            (small_label, "sdk", smalls, plan.small_concurrency),
            (small_label, "aiohttp", smalls, plan.small_concurrency),
            (public_label, "sdk", [str(public)], 1),
            (public_label, "aiohttp", [str(public)], 1),
        ]
        results: dict[tuple[str, str], list[dict[str, Any]]] = {
            (label, impl): [] for label, impl, _, _ in variants
        }
        with serving("_api:serve") as server:
            for _ in range(plan.runs):
                for label, impl, files, concurrency in variants:
                    results[(label, impl)].append(
                        run_job(
                            "_upload_bench:job",
                            {
                                "impl": impl,
                                "files": files,
                                "concurrency": concurrency,
                                "max_bytes": 2 * plan.big_file,
                                "warmup_file": str(warm),
                                **server,
                            },
                            cpu=CLIENT_CPU,
                            timeout=900,
                        )
                    )
    names = {
        "sdk": "orders.create(Upload(path))",
        "sdk-raised-limit": "orders.create(Upload(path)), limit raised¹",
        "aiohttp": "raw aiohttp FormData(open file)",
    }
    rows = []
    for (label, impl), runs in results.items():
        rows.append(
            [
                label,
                names[impl],
                f"**{fmt(median([r['mib_s'] for r in runs]))}** "
                f"({runs_of([r['mib_s'] for r in runs])})",
                fmt(median([r["cpu_s"] for r in runs]), 2),
                f"**{fmt(median([r['rss_growth_mib'] for r in runs]), 1)}** "
                f"({runs_of([r['rss_growth_mib'] for r in runs], 1)})",
            ]
        )
    method = next(iter(results.values()))[0]["memory_method"]
    section.lines += [
        f"Median of {plan.runs} run(s); each run of each variant is a fresh process pinned to "
        "core 0; the server (pinned to core 1) counts the multipart body and keeps nothing.  "
        f"Files are a JPEG header then zeros, in a temp dir (page cache warm).  {small_label}: "
        f"one order per file, {plan.small_concurrency} at a time.  Peak RSS growth = peak RSS "
        f"during the uploads minus the RSS after imports, client set-up and one small warm-up "
        f"upload (method: {method}).",
        "",
        "¹ The service takes at most 50 MB per file, so the large file goes through "
        "`orders.create` of a `Client(max_upload_bytes=...)` with the limit raised; the default "
        f"client is measured on the {public_label} file.",
        "",
        *table(
            ["files", "implementation", "MiB/s (runs)", "client CPU s", "peak RSS growth MiB"],
            rows,
        ),
        "",
    ]
    for label, sdk_impl in (
        (big_label, "sdk-raised-limit"),
        (small_label, "sdk"),
        (public_label, "sdk"),
    ):
        value, per_round = paired(
            [r["mib_s"] for r in results[(label, sdk_impl)]],
            [r["mib_s"] for r in results[(label, "aiohttp")]],
        )
        section.lines.append(
            f"- {label}: SDK / raw aiohttp throughput = **{value:.2f}x** (median of the "
            f"per-round ratios {runs_of(per_round, 2)})"
        )
        if label == public_label:
            continue
        section.goals.append(
            Goal(
                "upload",
                f"{label}: throughput >= {goals.UPLOAD_VS_AIOHTTP} x raw aiohttp",
                f"{value:.2f}x",
                f">= {goals.UPLOAD_VS_AIOHTTP}",
                _met(value, value >= goals.UPLOAD_VS_AIOHTTP),
            )
        )
    for (label, impl), runs in results.items():
        if impl == "aiohttp":
            continue
        growth = max(r["rss_growth_mib"] for r in runs)
        section.goals.append(
            Goal(
                "upload",
                f"{label} ({impl}): peak RSS growth <= {goals.UPLOAD_RSS_MIB:g} MiB",
                f"{growth:.1f} MiB (worst run)",
                f"<= {goals.UPLOAD_RSS_MIB:g} MiB",
                growth <= goals.UPLOAD_RSS_MIB,
            )
        )
    return section


# -- 3. receiver ----------------------------------------------------------------------------------


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
                    _met(worst, worst >= threshold),
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
                    _met(p99, p99 <= goals.RECEIVER_P99_MS),
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


# -- 4. registry ----------------------------------------------------------------------------------


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
    section.goals += [
        Goal(
            "registry",
            f"<= {goals.REGISTRY_BYTES:g} bytes per pending waiter (with a timeout)",
            f"{with_timeout:.0f} B",
            f"<= {goals.REGISTRY_BYTES:g} B",
            _met(with_timeout, with_timeout <= goals.REGISTRY_BYTES),
        ),
        Goal(
            "registry",
            f"{n:,} resolved in <= {goals.REGISTRY_RESOLVE_S:g} s",
            f"{all_returned:.3f} s",
            f"<= {goals.REGISTRY_RESOLVE_S:g} s",
            _met(all_returned, all_returned <= goals.REGISTRY_RESOLVE_S),
        ),
    ]
    reason = redis_problem()
    if reason:
        section.lines.append(f"Redis wake-up: not run: {reason}")
        section.goals.append(
            Goal("registry", "Redis wake-up p99 <= 3 ms", "not run", "<= 3 ms", None)
        )
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
    section.goals.append(
        Goal(
            "registry",
            f"Redis wake-up p99 <= {goals.REGISTRY_WAKE_P99_MS:g} ms (two processes)",
            f"{p99:.2f} ms",
            f"<= {goals.REGISTRY_WAKE_P99_MS:g} ms",
            _met(p99, p99 <= goals.REGISTRY_WAKE_P99_MS),
        )
    )
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


# -- 5. end to end --------------------------------------------------------------------------------


def run_e2e(plan: Plan) -> Section:
    section = Section("e2e", "5. End to end: completion in the sandbox → `wait()` returns")
    redis_reason = redis_problem()
    paths: list[tuple[str, str, float, int]] = [
        ("webhook: receiver + MemoryInbox + Registry", "webhook-memory", 5.0, 0),
        ("webhook: receiver + SQLiteInbox + RedisRegistry", "webhook-sqlite-redis", 5.0, 0),
        (f"polling, min_poll_interval={plan.poll_default:g} s (default)", "poll", 5.0, 1),
        (f"polling, min_poll_interval={plan.poll_small:g} s", "poll", plan.poll_small, 1),
    ]
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in paths}
    with workdir("bench-e2e-") as folder:
        for round_number in range(plan.runs):
            for label, path, interval, polling in paths:
                if path == "webhook-sqlite-redis" and redis_reason:
                    continue
                prefix = new_prefix("e2e")
                run_dir = folder / f"{round_number}-{path}-{interval}"
                run_dir.mkdir()
                try:
                    results[label].append(
                        run_job(
                            "_e2e_bench:job",
                            {
                                "path": path,
                                "samples": plan.e2e_poll_samples
                                if polling
                                else plan.e2e_webhook_samples,
                                "interval": interval,
                                "workdir": str(run_dir),
                                "redis_url": REDIS_URL,
                                "prefix": prefix,
                            },
                            cpu=None,
                            timeout=300,
                        )
                    )
                finally:
                    drop_prefix(prefix)
    rows = []
    p50_of: dict[str, float] = {}
    for label, *_ in paths:
        runs = results[label]
        if not runs:
            rows.append([label, "not run", "", "", "", redis_reason or ""])
            continue
        pooled = [x * 1000 for run in runs for x in run["latencies"]]
        p50_of[label] = percentile(pooled, 50)
        rows.append(
            [
                label,
                str(len(pooled)),
                f"**{fmt(percentile(pooled, 50), 1)}**",
                fmt(statistics_mean(pooled), 1),
                fmt(percentile(pooled, 90), 1),
                fmt(max(pooled), 1),
            ]
        )
    section.lines += [
        "One fresh process per path and run (sandbox, client and receiver in one event loop, "
        "not pinned).  The sandbox holds each process at `processing` until `advance()`; the "
        "latency runs from `advance()` (the completion) to `client.processes.wait()` returning "
        "(`time.monotonic()`).  Webhook path: one process at a time, the client waits with "
        "`registry=` (the receiver feeds that registry).  Polling path: waiters whose polls are "
        "spread evenly over one interval, released together, so the figures sample every phase "
        f"of the poll cycle.  Pooled over {plan.runs} run(s).",
        "",
        *table(["path", "samples", "p50 ms", "mean ms", "p90 ms", "max ms"], rows),
    ]
    webhook = p50_of.get(paths[0][0], math.nan)
    polled = p50_of.get(paths[2][0], math.nan)
    if not math.isnan(webhook) and not math.isnan(polled):
        section.lines += [
            "",
            f"Median latency, polling at the default interval / webhook path: "
            f"**{polled / webhook:,.0f} x**.",
        ]
    return section


def statistics_mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


RUNNERS: dict[str, Callable[[Plan], Section]] = {
    "client": run_client,
    "upload": run_upload,
    "receiver": run_receiver,
    "registry": run_registry,
    "e2e": run_e2e,
}


def run_section(key: str, plan: Plan) -> Section:
    started = time.monotonic()
    section = RUNNERS[key](plan)
    section.seconds = time.monotonic() - started
    return section
