"""``python -m benchmarks.instructions [--baseline REF] [--requests N] [--variants a,b,...]``:
the receiver's CPU work per delivery as instructions counted by valgrind, which the machine's
load does not move.

The receiver section's CPU per request moves by 15 to 30 % from one block of load to the next on a
shared machine, more than most changes a commit makes.  Here each server (the receiver section's
``_receiver_bench:serve``, one variant each) runs under ``valgrind --tool=callgrind`` with counting
off; after a warm-up of deliveries, counting is switched on for ``N`` deliveries (16 connections,
every one a new event) and the count is read back: instructions per delivery, the same to within
a percent from run to run whatever else the machine does.  Instructions are not time (a cache
miss or a system call costs more than its count), so this tells what a change of the code adds or
saves, and the receiver section tells what it costs on a machine.

With ``--baseline REF`` the receivers also run on git ``REF``'s packages (as
``benchmarks.sidebyside`` does), and the table holds both.  Needs valgrind (Debian: ``apt-get
install valgrind``); Redis or PostgreSQL for the variants that use them.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Final

import aiohttp

from benchmarks._env import POSTGRES_DSN, REDIS_URL, git_revision
from benchmarks._procs import Child
from benchmarks._receiver_bench import body_for
from benchmarks._receiver_run import NAMES, PEER_OF, backend
from benchmarks._shared import (
    drop_prefix,
    drop_schema,
    fmt,
    new_prefix,
    new_schema,
    postgres_problem,
    redis_problem,
    table,
)
from benchmarks.sidebyside import baseline_packages

DEFAULT_VARIANTS: Final = ("bare", "memory-peer", "memory", "sqlite-peer", "sqlite")
RECEIVERS: Final = frozenset(PEER_OF)
CONNECTIONS: Final = 16
STARTUP_TIMEOUT: Final = 180.0
"""Seconds a server may take to start under valgrind (tens of times slower than without)."""


async def _deliver(url: str, count: int, run: str) -> int:
    """POST ``count`` new deliveries over ``CONNECTIONS`` connections; the answers not 200."""
    numbers = iter(range(count))
    refused = 0
    headers = {"Content-Type": "application/json"}
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def connection() -> None:
            nonlocal refused
            for number in numbers:
                body = body_for(f"{run}-{number}")
                async with session.post(url, data=body, headers=headers) as response:
                    await response.read()
                    refused += response.status != 200

        await asyncio.gather(*(connection() for _ in range(CONNECTIONS)))
    return refused


def _callgrind(pid: int, *args: str) -> None:
    subprocess.run(
        ["callgrind_control", *args, str(pid)],  # noqa: S607 - valgrind's tool from PATH
        capture_output=True,
        check=True,
        timeout=60,
    )


def count(variant: str, requests: int, folder: Path, packages: Path | None = None) -> float:
    """Instructions per delivery of one server of ``variant``."""
    run = uuid.uuid4().hex[:10]
    out = folder / f"{variant}-{run}.callgrind"
    prefix, schema = new_prefix("instr"), new_schema("instr")
    (folder / run).mkdir()
    child = Child(
        "_receiver_bench:serve",
        {
            "store": variant,
            "workdir": str(folder / run),
            "redis_url": REDIS_URL,
            "prefix": prefix,
            "postgres_dsn": POSTGRES_DSN,
            "schema": schema,
        },
        packages=packages,
        wrapper=[
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
        ],
    )
    try:
        url = child.ready(timeout=STARTUP_TIMEOUT)["url"]
        refused = asyncio.run(_deliver(url, max(100, requests // 5), "warm-" + run))
        _callgrind(child.pid, "--instr=on")
        refused += asyncio.run(_deliver(url, requests, run))
        _callgrind(child.pid, "--dump")
    finally:
        child.stop()
        if backend(variant) == "redis":
            drop_prefix(prefix)
        if backend(variant) == "postgres":
            drop_schema(schema)
    if refused:
        raise SystemExit(f"{variant}: {refused} deliveries not answered 200")
    dump = out.with_name(out.name + ".1")  # the first dump; the file without a number: the exit
    for line in dump.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1]) / requests
    raise SystemExit(f"{dump}: no instruction total in callgrind's output")


def report(
    counts: dict[str, float], baseline: dict[str, float], commit: str, requests: int
) -> list[str]:
    header = ["variant", "instructions per delivery", "x bare", "x peer"]
    if baseline:
        header += [f"git {commit}", "this / baseline"]
    rows = []
    for variant, mine in counts.items():
        peer = counts.get(PEER_OF.get(variant, ""))
        row = [
            NAMES[variant],
            f"{mine:,.0f}",
            fmt(mine / counts["bare"], 2) if "bare" in counts else "",
            fmt(mine / peer, 2) if peer else "",
        ]
        if baseline:
            theirs = baseline.get(variant)
            row += [
                "" if theirs is None else f"{theirs:,.0f}",
                "" if theirs is None else fmt(mine / theirs, 2),
            ]
        rows.append(row)
    return [
        f"Instructions per delivery (valgrind's callgrind), this tree (git {git_revision()}): "
        f"{requests:,} deliveries over {CONNECTIONS} connections after a warm-up, every one a "
        "new event; no handler.",
        "",
        *table(header, rows),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("--baseline", metavar="REF", help="also count the receivers of git REF")
    parser.add_argument("--requests", type=int, default=2000, help="deliveries counted")
    parser.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help=f"comma-separated, of {', '.join(NAMES)}",
    )
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in NAMES]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        parser.error("valgrind is needed: apt-get install valgrind")
    for server, problem in (("redis", redis_problem()), ("postgres", postgres_problem())):
        if problem and any(backend(v) == server for v in variants):
            parser.error(f"the {server} variants need their server: {problem}")
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        folder = Path(tmp)
        counts = {}
        for variant in variants:
            print(f"[instructions] {variant} ...", file=sys.stderr, flush=True)
            counts[variant] = count(variant, args.requests, folder)
        baseline: dict[str, float] = {}
        commit = ""
        if args.baseline:
            with baseline_packages(args.baseline) as (packages, commit):
                for variant in variants:
                    if variant in RECEIVERS:
                        print(f"[instructions] {variant} @ {commit} ...", file=sys.stderr)
                        baseline[variant] = count(variant, args.requests, folder, packages)
    print("\n".join(report(counts, baseline, commit, args.requests)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
