"""``asyncsdk process TOOL PATH...``: one tool over photos or folders, resumable.

Each photo is uploaded as its own order, gets one process, and its results are downloaded to
``--out``.  Every step is written to a state file in ``--out`` (see :mod:`asyncsdk._cli._state`):
a second run skips finished photos and waits again on processes already created, so an
interrupted run is finished by running the same command again, and no photo is paid for twice.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import aiohttp
import attrs

from asyncsdk import ResultWaiter
from asyncsdk._cli._common import (
    EXIT_FAILED,
    EXIT_OK,
    UsageError,
    exit_code_for,
    format_table,
    parse_widgets,
    service_settings,
)
from asyncsdk._cli._jobs import JobResult, JobSpec, Runner, Steps
from asyncsdk._cli._local import local_service
from asyncsdk._cli._state import (
    CREATED,
    DONE,
    FAILED,
    STATE_FILE,
    UPLOADED,
    Action,
    PhotoKey,
    Record,
    StateFile,
    decide,
)
from asyncsdk._client import Client
from asyncsdk._errors import AsyncSDKError, WaitTimeoutError
from asyncsdk._limits import GenerationLimit
from asyncsdk._models import Process, ToolSlug
from asyncsdk._progress import Progress
from asyncsdk._uploads import ACCEPTED_EXTENSIONS
from asyncsdk.sandbox import SandboxConfig

__all__ = ["add_parser", "collect_photos", "run"]

DESCRIPTION = """\
Run one tool over photo files or whole folders (JPEG, PNG, WEBP; folders are not searched
recursively) and download the results to --out.  Widgets are given by short names, e.g.
--widget space=bedroom --widget style=modern (see `asyncsdk widgets TOOL`); repeat a name, or
separate values with commas, for multi-select widgets.

Resumable: the steps of each photo are kept in --out/.asyncsdk-process.jsonl.  Running the same
command again skips finished photos and collects processes already created instead of creating
(and paying for) new ones.  Failed photos are left alone unless --retry-failed is given.

The service comes from ASYNCSDK_API_KEY, ASYNCSDK_BASE_URL (or --base-url) and ASYNCSDK_APP_URL;
--sandbox runs everything against a built-in emulator instead.
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "process",
        help="run one tool over photos or folders, with resumable results",
        description=DESCRIPTION,
    )
    parser.add_argument("tool", help="tool slug or name, e.g. tool-virtual-staging")
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="photo or folder")
    parser.add_argument(
        "--widget",
        "-w",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a widget setting, e.g. space=bedroom (repeatable)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("results"), help="folder for results (default ./results)"
    )
    parser.add_argument(
        "--concurrency",
        "-j",
        type=int,
        default=4,
        metavar="N",
        help="photos in flight at once (default 4)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="how long to wait for each process before leaving it for the next run (default 900)",
    )
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="create a new process for photos whose process failed in an earlier run",
    )
    parser.add_argument("--project-id", help="attach the orders to this project")
    parser.add_argument("--base-url", help="the service address (default: $ASYNCSDK_BASE_URL)")
    parser.add_argument("--app-url", help="the catalogue host (default: $ASYNCSDK_APP_URL)")
    parser.add_argument(
        "--sandbox",
        action="store_true",
        help="run against a built-in emulator of the service (no key, no network, no cost)",
    )
    parser.set_defaults(handler=run, interrupt_hint="interrupted; run the same command to resume")


def collect_photos(paths: Sequence[Path], out_dir: Path) -> list[Path]:
    """The photo files named by ``paths`` (folders give their image files), each once."""
    found: list[Path] = []
    seen: set[Path] = set()
    out_resolved = out_dir.resolve()
    for path in paths:
        if path.is_dir():
            children = sorted(
                child
                for child in path.iterdir()
                if child.is_file()
                and not child.name.startswith(".")
                and child.suffix.lower() in ACCEPTED_EXTENSIONS
            )
            candidates = [c for c in children if c.resolve().parent != out_resolved]
        elif path.is_file():
            if path.suffix.lower() not in ACCEPTED_EXTENSIONS:
                accepted = ", ".join(sorted(ACCEPTED_EXTENSIONS))
                raise UsageError(f"{path} is not a photo the service takes ({accepted})")
            candidates = [path]
        else:
            raise UsageError(f"{path} does not exist")
        for candidate in candidates:
            resolved = candidate.resolve()
            if resolved not in seen:
                seen.add(resolved)
                found.append(candidate)
    if not found:
        shown = " ".join(str(p) for p in paths)
        raise UsageError(f"no photos (.jpg, .jpeg, .png, .webp) found in {shown}")
    return found


def _stems(photos: Sequence[Path]) -> dict[Path, str]:
    """Result name stems; photos of one name in different folders get a short hash added."""
    counts = Counter(photo.stem for photo in photos)
    stems = {}
    for photo in photos:
        stem = photo.stem
        if counts[stem] > 1:
            digest = hashlib.sha256(str(photo.resolve()).encode()).hexdigest()[:6]
            stem = f"{stem}-{digest}"
        stems[photo] = stem
    return stems


@attrs.define(kw_only=True)
class _Batch:
    """One run of the command: the runner, the state file and where the service is."""

    runner: Runner
    state: StateFile
    service: str
    out_dir: Path
    bar: Progress

    async def job(
        self, spec: JobSpec, key: PhotoKey, record: Record | None, action: Action
    ) -> JobResult:
        started = time.monotonic()
        result = JobResult(spec=spec, status="error")
        try:
            process, current = await self._steps(spec, key, record, action)
            result.process_id = process.id
            if process.succeeded:
                result.outputs = await self.runner.fetch(spec, process)
                names = tuple(p.name for p in result.outputs)
                self.state.append(current.step(DONE, outputs=names))
            else:
                self.state.append(current.step(FAILED, error="the process failed"))
                result.error = "the process failed; --retry-failed runs it again"
                result.exit_code = EXIT_FAILED
            result.status = process.status
        except WaitTimeoutError as exc:
            result.status = "waiting"
            result.error = f"still running after {self.runner.timeout:g} s; run again to collect it"
            result.process_id = exc.process_id
            result.exit_code = EXIT_FAILED
        except (AsyncSDKError, OSError) as exc:
            result.error = str(exc)
            result.exit_code = exit_code_for(exc) or EXIT_FAILED
        result.seconds = time.monotonic() - started
        if result.status != DONE:
            self.bar.note(f"{spec.photo}: {result.error or result.status}")
        self.bar.advance()
        return result

    async def _steps(
        self, spec: JobSpec, key: PhotoKey, record: Record | None, action: Action
    ) -> tuple[Process, Record]:
        """Upload, create or adopt, and wait, as ``action`` says; each step is recorded."""
        runner = self.runner
        steps = Steps()
        if record is not None and record.service == self.service and action.kind != "new":
            current = record
            steps.order_id = record.order_id
            steps.process_id = record.process_id if action.kind == "resume" else ""
        else:
            current = Record.start(key, self.service)
        if action.kind == "new":
            await runner.upload(spec, steps)
            current = current.step(UPLOADED, order_id=steps.order_id)
            self.state.append(current)
        if not steps.process_id:
            if action.kind == "adopt":
                order = await runner.client.orders.get(steps.order_id)
                if order.processes:
                    # The order was made for this photo alone: a process on it is ours, created
                    # by a run that stopped before it could write the process id down.
                    steps.process_id = order.processes[0].id
            if not steps.process_id:
                await runner.create(spec, steps)
            current = current.step(CREATED, process_id=steps.process_id)
            self.state.append(current)
        return await runner.wait(steps), current


@contextlib.asynccontextmanager
async def _service(
    args: argparse.Namespace,
) -> AsyncIterator[tuple[Client, ResultWaiter | None, str]]:
    """A client, the registry to wait on (embedded sandbox only) and the service's identity."""
    if args.sandbox:
        config = SandboxConfig(pending_delay=0.2, processing_delay=0.5)
        async with local_service(config) as local, local.client() as client:
            yield client, local.registry, f"sandbox:{uuid.uuid4().hex}"
        return
    key, base, app = service_settings(os.environ, args.base_url, args.app_url)
    # The service allows 10 generations per 10 minutes: creations wait for a place rather than
    # drawing 429s.
    async with Client(
        api_key=key, base_url=base, app_url=app, generation_limit=GenerationLimit()
    ) as client:
        yield client, None, str(client.settings.base_url)


async def run(args: argparse.Namespace) -> int:
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be 1 or more, not {args.concurrency}")
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}")
    widgets = parse_widgets(args.widget)
    out_dir: Path = args.out
    photos = collect_photos(args.paths, out_dir)
    stems = _stems(photos)
    specs = [
        JobSpec(photo=photo, tool=args.tool, widgets=widgets, output_stem=stems[photo])
        for photo in photos
    ]
    state = StateFile(out_dir / STATE_FILE)
    records = state.load()
    if state.skipped_lines:
        sys.stderr.write(
            f"warning: {state.skipped_lines} unreadable line(s) in {state.path} were ignored\n"
        )

    async with _service(args) as (client, registry, service), aiohttp.ClientSession() as session:
        runner = Runner(
            client=client,
            session=session,
            out_dir=out_dir,
            registry=registry,
            timeout=args.timeout,
            project_id=args.project_id,
        )
        tool = await runner.tool_slug(args.tool)
        if tool == ToolSlug.ITEM_REMOVAL_MASK:
            raise UsageError(
                "the mask tool needs a mask for each photo, which this command cannot draw; use "
                "client.orders.append_mask() from Python (see asyncsdk.samples)"
            )
        # Jobs are known by the tool's slug and the widgets' full slugs, however they were
        # spelled on the command line: another spelling must not pay for a photo twice.
        tool, wire_widgets = await runner.check(specs[0])
        plan = []
        results: list[JobResult] = []
        for spec in specs:
            key = PhotoKey.of(spec.photo, tool, wire_widgets)
            record = records.get(key.digest)
            action = decide(
                record, service=service, out_dir=out_dir, retry_failed=args.retry_failed
            )
            if action.kind in ("skip", "skip-failed", "refuse"):
                status = {"skip": "skipped", "skip-failed": FAILED, "refuse": "refused"}[
                    action.kind
                ]
                outputs = [out_dir / name for name in record.outputs] if record else []
                results.append(
                    JobResult(
                        spec=spec,
                        status=status,
                        process_id=record.process_id if record else "",
                        outputs=outputs if action.kind == "skip" else [],
                        error=action.reason if action.kind != "skip" else "done in an earlier run",
                        exit_code=0 if action.kind == "skip" else 1,
                    )
                )
            else:
                plan.append((spec, key, record, action))
        counts = Counter(action.kind for *_, action in plan)
        _announce(len(specs), counts, results)
        semaphore = asyncio.Semaphore(args.concurrency)
        with Progress(total=len(plan), label=args.tool.removeprefix("tool-")) as bar:
            batch = _Batch(runner=runner, state=state, service=service, out_dir=out_dir, bar=bar)

            async def limited(item: tuple[JobSpec, PhotoKey, Record | None, Action]) -> JobResult:
                async with semaphore:
                    return await batch.job(*item)

            async with bar.ticking():
                results.extend(await asyncio.gather(*(limited(item) for item in plan)))

    order = {spec.photo: index for index, spec in enumerate(specs)}
    results.sort(key=lambda r: order[r.spec.photo])
    print(_table(results))
    print()
    print(_summary(results, out_dir))
    return max((r.exit_code for r in results), default=EXIT_OK)


def _announce(total: int, counts: Counter[str], earlier: Sequence[JobResult]) -> None:
    parts = []
    if counts["new"]:
        parts.append(f"{counts['new']} new")
    resumed = counts["resume"] + counts["adopt"]
    if resumed:
        parts.append(f"{resumed} resumed from an earlier run")
    skipped = sum(1 for r in earlier if r.status == "skipped")
    if skipped:
        parts.append(f"{skipped} already done")
    failed = sum(1 for r in earlier if r.status == FAILED)
    if failed:
        parts.append(f"{failed} failed before (--retry-failed to run them again)")
    print(f"{total} photo(s): {', '.join(parts) or 'nothing to do'}")
    sys.stdout.flush()


def _table(results: Sequence[JobResult]) -> str:
    rows = []
    for result in results:
        outputs = ", ".join(str(p) for p in result.outputs) or result.error or "-"
        seconds = f"{result.seconds:.1f}" if result.status != "skipped" else "-"
        rows.append([str(result.spec.photo), result.status, seconds, outputs])
    return format_table(["photo", "status", "seconds", "output"], rows)


def _summary(results: Sequence[JobResult], out_dir: Path) -> str:
    counts = Counter(result.status for result in results)
    parts = [f"{count} {status}" for status, count in sorted(counts.items())]
    return f"{', '.join(parts)}; results in {out_dir}{os.sep}"
