"""``asyncsdk demo``: the whole job end to end, offline.

Starts the sandbox and a webhook receiver in this process, sends the bundled sample photos through
several tools at once, waits for each result by webhook, downloads the images and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from asyncsdk import AsyncSDKError, ToolSlug, samples
from asyncsdk.cli._exits import EXIT_OK, UsageError, exit_code_for
from asyncsdk.cli._local_service import local_service
from asyncsdk.cli._photo_job import JobResult, JobSpec, Runner
from asyncsdk.cli._progress import Progress
from asyncsdk.cli._tables import format_table
from asyncsdk.sandbox import SandboxConfig

__all__ = ["add_parser", "demo_jobs", "run"]

DESCRIPTION = """\
Run the service's main job end to end on this machine, with no network and no API key: the
sandbox (a local emulator of the service) and a webhook receiver start in this process, the
bundled sample photos go through several tools at once, each result arrives by webhook, and the
result images are downloaded to --out.
"""


def demo_jobs() -> tuple[JobSpec, ...]:
    """The demo's work: staging on the two empty rooms, enhancement and item removal on the
    kitchen, day to dusk on the house front."""
    return (
        JobSpec(
            photo=samples.path("bedroom-empty.jpg"),
            tool=ToolSlug.VIRTUAL_STAGING,
            widgets={"space": "bedroom", "style": "modern"},
        ),
        JobSpec(
            photo=samples.path("living-room-empty.jpg"),
            tool=ToolSlug.VIRTUAL_STAGING,
            widgets={"space": "living-room", "style": "scandinavian"},
        ),
        JobSpec(
            photo=samples.path("kitchen.jpg"),
            tool=ToolSlug.IMAGE_ENHANCEMENT,
            widgets={
                "space": "indoor",
                "enhancement_options": ["turn-on-the-light", "remove-minor-blemishes"],
            },
        ),
        JobSpec(
            photo=samples.path("kitchen.jpg"),
            tool=ToolSlug.ITEM_REMOVAL_MASK,
            mask_rectangles=(samples.KITCHEN_BOX,),
        ),
        JobSpec(
            photo=samples.path("exterior.jpg"),
            tool=ToolSlug.DAY_TO_DUSK,
            widgets={"sky_style": "golden-hour"},
        ),
    )


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="process the bundled sample photos against the built-in sandbox (offline)",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("results"),
        help="folder for the result images (default: ./results)",
    )
    parser.add_argument(
        "--delay",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="how long the sandbox 'processes' each photo (default 2; it waits half as long "
        "before starting)",
    )
    parser.add_argument(
        "--fail",
        action="append",
        default=[],
        metavar="TOOL",
        help="make the sandbox fail every process of TOOL, to see how failures look (repeatable)",
    )
    parser.set_defaults(handler=run)


def _shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


async def _one(runner: Runner, spec: JobSpec, bar: Progress) -> JobResult:
    started = time.monotonic()
    try:
        result = await runner.run(spec)
    except (AsyncSDKError, OSError) as exc:
        code = exit_code_for(exc) or 1
        result = JobResult(
            spec=spec,
            status="error",
            seconds=time.monotonic() - started,
            error=str(exc),
            exit_code=code,
        )
    if result.status != "done":
        bar.note(f"{spec.tool} on {spec.title}: {result.error or result.status}")
    bar.advance()
    return result


async def run(args: argparse.Namespace) -> int:
    if args.delay < 0:
        raise UsageError(f"--delay must be 0 or more seconds, not {args.delay}")
    specs = demo_jobs()
    config = SandboxConfig(
        pending_delay=args.delay / 2,
        processing_delay=args.delay,
        fail_tools=frozenset(args.fail),
        seed=7,
    )
    out_dir: Path = args.out
    async with local_service(config) as local, local.client() as client:
        base = local.sandbox.base_url
        print(f"sandbox   {base}  (API key {local.sandbox.api_key})")
        hooks = local.webhook_url.rsplit("/", 1)[0]
        print(f"webhooks  {hooks}/<token>  (receiver mounted at /hooks/, in-memory inbox)")
        photos = sorted({spec.photo.name for spec in specs})
        print(f"sending {len(photos)} sample photos through {len(specs)} jobs at once ...")
        sys.stdout.flush()
        runner = Runner(
            client=client,
            out_dir=out_dir,
            registry=local.registry,
            timeout=max(60.0, args.delay * 10),
        )
        for spec in specs:
            await runner.check(spec)
        started = time.monotonic()
        with Progress(total=len(specs), label="processing") as bar:
            async with bar.ticking():
                results = await asyncio.gather(*(_one(runner, s, bar) for s in specs))
        elapsed = time.monotonic() - started
    print()
    print(_table(results))
    done = sum(1 for r in results if r.status == "done")
    print()
    print(f"{done} of {len(results)} done in {elapsed:.1f} s; results in {_shown(out_dir)}{os.sep}")
    return max((r.exit_code for r in results), default=EXIT_OK)


def _table(results: Sequence[JobResult]) -> str:
    rows = []
    for result in results:
        outputs = ", ".join(_shown(p) for p in result.outputs) or (result.error or "-")
        rows.append(
            [
                result.spec.tool.removeprefix("tool-"),
                result.spec.photo.name,
                result.status,
                f"{result.seconds:.1f}",
                outputs,
            ]
        )
    return format_table(["tool", "photo", "status", "seconds", "output"], rows)
