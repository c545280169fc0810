"""``python -m benchmarks.soak``: run the soak and write its report; ``... node ...`` is one
receiver process (started by the run itself)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import benchmarks.soak
from benchmarks.soak._node import run_node
from benchmarks.soak._report import render, verdict
from benchmarks.soak._run import Options, soak

DEFAULT_OUT: Final = Path(__file__).resolve().parents[1] / "SOAK.md"
DEFAULT_REDIS: Final = os.environ.get("ASYNCSDK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.soak",
        description=(benchmarks.soak.__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument("--events", type=int, default=100_000, help="deliveries to send")
    parser.add_argument("--concurrency", type=int, default=32, help="deliveries in flight")
    parser.add_argument(
        "--redis", default=DEFAULT_REDIS, help="Redis URL (a unique prefix is used)"
    )
    parser.add_argument("--prefix", default=None, help="key prefix (default: a fresh one)")
    parser.add_argument("--claim-timeout", type=float, default=5.0, help="RedisInbox claim_timeout")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown report")
    parser.add_argument("--no-report", action="store_true", help="do not write the report")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.events < 100:
        parser.error("--events must be at least 100")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["node"]:
        url, prefix, name, claim_timeout = arguments[1:5]
        asyncio.run(run_node(url, prefix, name, float(claim_timeout)))
        return 0
    args = parse(arguments)
    options = Options(
        events=args.events,
        concurrency=args.concurrency,
        redis_url=args.redis,
        claim_timeout=args.claim_timeout,
        seed=args.seed,
        prefix=args.prefix,
    )
    result = asyncio.run(soak(options))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if not args.no_report:
        args.out.write_text(render(result))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))
    problems = verdict(result)
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
