"""Section 2: ``orders.create`` uploads against raw aiohttp streaming."""

from __future__ import annotations

from typing import Any

from benchmarks import _plan as goals
from benchmarks._env import median
from benchmarks._plan import MIB, Plan
from benchmarks._procs import CLIENT_CPU, run_job, serving
from benchmarks._shared import (
    Goal,
    Section,
    fmt,
    paired,
    runs_of,
    table,
    workdir,
)


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
