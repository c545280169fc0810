"""``python -m benchmarks.sidebyside REF [--runs N] [--quick] [--out PATH]``: the goals' ratios of
this tree and of the tree at git ``REF``, measured side by side in one run.

A ratio taken in two runs moves with the machine between them: on unchanged code the bare
handler's CPU per request has ranged from 57 to 93 us from one run to the next.  Here each round
measures the references once (raw aiohttp, the bare handler, the hand-written peers: code that
does not use the package) and then the package's side for both trees, which goes first
alternating from round to round, so that both trees' ratios of a round rest on the same
reference measurement.

``REF``'s ``asyncsdk`` and ``webhooks`` come from a git worktree of it (removed at the end), which
the helper processes import ahead of this tree's; the benchmark code, the fake API server and the
installed libraries are the same for both.  Measured: client create and get against raw aiohttp;
200 x 1 MiB and 1 x 1,024 MiB uploads against raw aiohttp; the memory, SQLite and Redis receivers
under the receiver section's loads, against the bare handler (req/s) and against their
hand-written peers (CPU per request).  PostgreSQL is left out, so that trees from before
``PostgresInbox`` can be measured.  ``REF`` must take this benchmark's calls as they are
(``Client(max_in_flight=, validate=, generation_limit=, max_upload_bytes=)``,
``WebhookReceiver(queue_limit=, drain_timeout=)``): trees from 2026-11-22 on do.  ``--only
client`` (or ``upload``, ``receiver``, comma-separated) measures those sections alone; the client's
rows then need neither wrk nor Redis.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from benchmarks._env import git_revision, median
from benchmarks._plan import MIB, Plan, make_plan
from benchmarks._procs import ROOT, run_job, serving, which
from benchmarks._receiver_run import PEER_OF, receiver_loads, receiver_once
from benchmarks._receiver_section import REFUSED
from benchmarks._shared import fmt, redis_problem, runs_of, table, workdir

TREES: Final = ("baseline", "this")
SECTIONS: Final = ("client", "upload", "receiver")
STORES: Final = ("memory", "sqlite", "redis")
WORSE_BY: Final = 0.05
"""A ratio more than this much worse on this tree than on the baseline is flagged."""

Ratios = dict[tuple[str, str], dict[str, list[float]]]
"""(section, figure) -> tree -> the figure's ratio in each round."""
HIGHER_IS_BETTER: Final = "req/s", "MiB/s"


@contextlib.contextmanager
def baseline_packages(ref: str) -> Iterator[tuple[Path, str]]:
    """A folder holding ``REF``'s ``asyncsdk`` and ``webhooks`` (links into a git worktree of
    it, removed at the end), checked to be what a helper given it imports, and the commit
    ``REF`` names."""
    commit = _git("rev-parse", "--verify", "--short", "--end-of-options", f"{ref}^{{commit}}")
    folder = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    tree = folder / "tree"
    try:
        _git("worktree", "add", "--detach", str(tree), commit)
        packages = folder / "packages"
        packages.mkdir()
        for name in ("asyncsdk", "webhooks"):
            (packages / name).symlink_to(tree / name, target_is_directory=True)
        check_baseline(packages)
        yield packages, commit
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        _git("worktree", "prune")  # forgets the worktree whose folder is gone


def check_baseline(packages: Path) -> None:
    """Refuse to go on unless a helper process given ``packages`` imports the baseline's
    ``asyncsdk`` and ``webhooks``: else both columns would measure this tree."""
    found = run_job("_env:imported_from", {}, cpu=None, packages=packages)
    for name, file in found.items():
        expected = (packages / name).resolve()
        if not Path(file).resolve().is_relative_to(expected):
            raise SystemExit(
                f"a helper process given the baseline imported {name} from {file}, not from"
                f" {expected}; an import hook of this tree's install wins over PYTHONPATH:"
                " reinstall it with `pip install -e .` (a path entry), or run from a plain clone"
            )


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args],  # noqa: S607 - git from PATH
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def _order(round_number: int) -> tuple[str, ...]:
    return TREES if round_number % 2 == 0 else TREES[::-1]


def _add(ratios: Ratios, section: str, figure: str, tree: str, value: float) -> None:
    ratios.setdefault((section, figure), {t: [] for t in TREES})[tree].append(value)


def _client_round(
    plan: Plan, server: dict[str, Any], packages: dict[str, Path | None], n: int, ratios: Ratios
) -> None:
    kwargs = {
        "requests": plan.client_requests,
        "concurrency": plan.client_concurrency,
        "warmup": plan.client_warmup,
        "phases": ["create", "get"],
        **server,
    }
    raw = run_job("_client_bench:job", {"impl": "aiohttp", **kwargs}, timeout=900)
    for tree in _order(n):
        sdk = run_job(
            "_client_bench:job", {"impl": "sdk", **kwargs}, timeout=900, packages=packages[tree]
        )
        for phase in ("create", "get"):
            value = sdk[phase]["rps"] / raw[phase]["rps"]
            _add(ratios, "client", f"{phase}: req/s vs raw aiohttp", tree, value)
            value = sdk[phase]["cpu_us"] / raw[phase]["cpu_us"]
            _add(ratios, "client", f"{phase}: CPU/req vs raw aiohttp", tree, value)


def _upload_round(
    plan: Plan,
    server: dict[str, Any],
    packages: dict[str, Path | None],
    n: int,
    ratios: Ratios,
    files: dict[str, tuple[list[str], int, str]],
    warm: str,
) -> None:
    for label, (paths, concurrency, impl) in files.items():
        kwargs = {
            "files": paths,
            "concurrency": concurrency,
            "max_bytes": 2 * plan.big_file,
            "warmup_file": warm,
            **server,
        }
        raw = run_job("_upload_bench:job", {"impl": "aiohttp", **kwargs}, timeout=900)
        for tree in _order(n):
            mine = run_job(
                "_upload_bench:job", {"impl": impl, **kwargs}, timeout=900, packages=packages[tree]
            )
            _add(
                ratios,
                "upload",
                f"{label}: MiB/s vs raw aiohttp",
                tree,
                mine["mib_s"] / raw["mib_s"],
            )


def _receiver_round(
    plan: Plan, folder: Path, packages: dict[str, Path | None], n: int, ratios: Ratios
) -> None:
    references = ("bare", *(PEER_OF[store] for store in STORES))
    for label, connections, delay in receiver_loads(plan):
        ref = {
            v: _answered(v, receiver_once(plan, folder, v, connections, delay)) for v in references
        }
        for tree in _order(n):
            for store in STORES:
                mine = _answered(
                    f"{store} ({tree})",
                    receiver_once(plan, folder, store, connections, delay, packages=packages[tree]),
                )
                if delay is None:
                    # As the receiver section: a round whose load generator was the limit says
                    # nothing of either server's req/s.
                    saturated = mine["saturated"] or ref["bare"]["saturated"]
                    value = math.nan if saturated else mine["rps"] / ref["bare"]["rps"]
                    _add(ratios, "receiver", f"{store} {label}: req/s vs bare", tree, value)
                value = mine["cpu_us"] / ref[PEER_OF[store]]["cpu_us"]
                _add(ratios, "receiver", f"{store} {label}: CPU/req vs peer", tree, value)


def _answered(server: str, load: dict[str, Any]) -> dict[str, Any]:
    """``load`` when every request of it was answered 2xx: else its rates count refusals."""
    if load["bad"]:
        raise SystemExit(
            f"{server}: {load['bad']} of {load['requests']} requests not answered 2xx; the"
            " receiver of the baseline may not take this benchmark's deliveries as they are"
        )
    return load


def measure(plan: Plan, baseline: Path, sections: tuple[str, ...] = SECTIONS) -> Ratios:
    """Every figure of ``sections`` for both trees, ``plan.runs`` rounds."""
    from benchmarks._upload_bench import make_jpeg_file

    packages: dict[str, Path | None] = {"baseline": baseline, "this": None}
    ratios: Ratios = {}
    with workdir("bench-sidebyside-") as folder:
        smalls = [
            str(make_jpeg_file(folder / f"small-{k:03d}.jpg", plan.small_file))
            for k in range(plan.small_files)
        ]
        big = str(make_jpeg_file(folder / "big.jpg", plan.big_file))
        warm = str(make_jpeg_file(folder / "warm.jpg", 4096))
        files = {
            f"{plan.small_files} x {plan.small_file // MIB} MiB": (
                smalls,
                plan.small_concurrency,
                "sdk",
            ),
            f"1 x {plan.big_file // MIB:,} MiB": ([big], 1, "sdk-raised-limit"),
        }
        for n in range(plan.runs):
            print(f"[sidebyside] round {n + 1} of {plan.runs}", file=sys.stderr, flush=True)
            with serving("_api:serve") as server:
                if "client" in sections:
                    _client_round(plan, server, packages, n, ratios)
                if "upload" in sections:
                    _upload_round(plan, server, packages, n, ratios, files, warm)
            if "receiver" in sections:
                _receiver_round(plan, folder, packages, n, ratios)
    return ratios


def report(ratios: Ratios, commit: str, head: str, runs: int) -> list[str]:
    rows = []
    for (section, figure), by_tree in ratios.items():
        pairs = [
            (a, b)
            for a, b in zip(by_tree["this"], by_tree["baseline"], strict=True)
            if not (math.isnan(a) or math.isnan(b))
        ]
        if not pairs:
            rows.append([section, figure, REFUSED, REFUSED, "", "", ""])
            continue
        mine, theirs = [a for a, _ in pairs], [b for _, b in pairs]
        change = median([a / b for a, b in pairs])
        higher = any(unit in figure for unit in HIGHER_IS_BETTER)
        worse = change < 1 - WORSE_BY if higher else change > 1 + WORSE_BY
        rows.append(
            [
                section,
                figure,
                f"{fmt(median(theirs), 2)} ({runs_of(theirs, 2)})",
                f"{fmt(median(mine), 2)} ({runs_of(mine, 2)})",
                f"**{fmt(change, 2)}**",
                "higher" if higher else "lower",
                f"**more than {WORSE_BY:.0%} worse**" if worse else "",
            ]
        )
    return [
        f"This tree (git {head}) against git {commit}, side by side: {runs} rounds; in each, "
        "the references once, then both trees (which goes first alternating).  Each cell: the "
        "median of the per-round ratios, the rounds in brackets; 'this / baseline': the median "
        "of the rounds' ratios of the two.  A req/s round whose load generator was the limit "
        "is left out, as in the receiver section.",
        "",
        *table(
            [
                "section",
                "figure",
                f"git {commit}",
                f"this tree (git {head})",
                "this / baseline",
                "better",
                "",
            ],
            rows,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sidebyside")
    parser.add_argument("ref", help="the git commit, tag or branch to measure beside this tree")
    parser.add_argument("--runs", type=int, default=None, help="rounds (default: the plan's)")
    parser.add_argument("--quick", action="store_true", help="short loads, for a smoke test")
    parser.add_argument("--out", type=Path, default=None, help="write the table here too")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to measure (default: all of {','.join(SECTIONS)})",
    )
    args = parser.parse_args(argv)
    sections = tuple(name.strip() for name in args.only.split(",") if name.strip())
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown or not sections:
        parser.error(f"--only takes some of {','.join(SECTIONS)}, not {args.only!r}")
    if "receiver" in sections:
        if which("wrk") is None:
            parser.error("wrk is needed for the receiver's req/s ratios: apt-get install wrk")
        problem = redis_problem()
        if problem:
            parser.error(f"the Redis receiver needs Redis: {problem}")
    plan = make_plan(quick=args.quick, runs=args.runs)
    head = git_revision()
    with baseline_packages(args.ref) as (packages, commit):
        ratios = measure(plan, packages, sections)
    lines = report(ratios, commit, head, plan.runs)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
