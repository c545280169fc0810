"""``asyncsdk process TOOL PATH...``: one tool over photos or folders, resumable.

Each photo is uploaded as its own order, gets one process, and its results are downloaded to
``--out``.  Every step is written to a state file in ``--out`` (see :mod:`asyncsdk.cli._state`):
a second run skips finished photos and waits again on processes already created, so an
interrupted run is finished by running the same command again, and no photo is paid for twice.
Each photo is a journalled run of the library (``Client.run_steps``) on that file.
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

import attrs

from asyncsdk import ACCEPTED_EXTENSIONS, Client, MissingWidgetError, ResultWaiter, ToolSlug
from asyncsdk.cli import _report
from asyncsdk.cli._arguments import parse_widgets, positive_seconds, service_settings
from asyncsdk.cli._exits import EXIT_OK, UsageError, sigterm_as_interrupt
from asyncsdk.cli._journalled_batch import Batch
from asyncsdk.cli._local_service import local_service
from asyncsdk.cli._pace import DEFAULT_LIMIT, GenerationPace, Pacer, least_time, parse_limit
from asyncsdk.cli._photo_job import JobResult, JobSpec, Runner
from asyncsdk.cli._progress import Progress
from asyncsdk.cli._results import result_name
from asyncsdk.cli._state import (
    FAILED,
    STATE_FILE,
    Action,
    GenerationMark,
    PhotoKey,
    Record,
    StateFile,
    StateJournal,
    decide,
    widgets_digest,
)
from asyncsdk.sandbox import SandboxConfig

__all__ = ["add_parser", "collect_photos", "run"]

DESCRIPTION = """\
Run one tool over photo files or whole folders (JPEG, PNG, WEBP; folders are not searched
recursively, and their other files are skipped and named) and download the results to --out.
Widgets are given by short names, e.g. --widget space=bedroom --widget style=modern (see
`asyncsdk widgets TOOL`); repeat a name, or separate values with commas, for multi-select widgets.

Resumable: the steps of each photo are kept in --out/.asyncsdk-process.jsonl.  Running the same
command again skips finished photos and collects processes already created instead of creating
(and paying for) new ones.  Failed photos are left alone unless --retry-failed is given.
Results are named PHOTO--TOOL-DIGEST.EXT, DIGEST naming the widgets, so runs with other settings
into the same --out never overwrite each other; a file already in --out is never replaced (a
taken name gets .2, .3, ...).

Creations keep to the account's generation limit (--generation-limit, default 10/600: the
service's 10 per 10 minutes); waits are explained as they happen, and the slots taken are kept in
the journal so that the next run resumes the pace.  --dry-run shows the plan and its least time.

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
        "--poll-interval",
        type=positive_seconds,
        metavar="SECONDS",
        help="the least time between two polls of a process (default 5, as the service asks; "
        "less only against a sandbox; 0.5 with --sandbox)",
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
    parser.add_argument(
        "--generation-limit",
        metavar="CALLS/SECONDS",
        help="the account's generation limit to keep to (default 10/600, the service's; none "
        "with --sandbox unless given, and then the sandbox enforces it too)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would be created and how long the generation limit makes it; create "
        "nothing",
    )
    parser.set_defaults(handler=run, interrupt_hint="interrupted; run the same command to resume")


def collect_photos(paths: Sequence[Path], out_dir: Path) -> tuple[list[Path], list[Path]]:
    """The photo files named by ``paths`` (folders give their image files), each once, and the
    folders' other files (not hidden, not in ``out_dir``), which the command names as skipped:
    a file left out of a batch is never left out silently."""
    found: list[Path] = []
    seen: set[Path] = set()
    skipped: list[Path] = []
    out_resolved = out_dir.resolve()
    for path in paths:
        if path.is_dir():
            children = sorted(
                child
                for child in path.iterdir()
                if child.is_file()
                and not child.name.startswith(".")
                and child.resolve().parent != out_resolved
            )
            candidates = [c for c in children if c.suffix.lower() in ACCEPTED_EXTENSIONS]
            skipped.extend(c for c in children if c.suffix.lower() not in ACCEPTED_EXTENSIONS)
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
    return found, skipped


def _say_skipped(skipped: Sequence[Path]) -> None:
    """Name on stderr the files of the folders given that are not photos."""
    if skipped:
        accepted = ", ".join(sorted(ACCEPTED_EXTENSIONS))
        sys.stderr.write(
            f"skipped {len(skipped)} file(s) that are not photos the service takes ({accepted}):"
            f" {', '.join(str(p) for p in skipped)}\n"
        )


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


@contextlib.asynccontextmanager
async def _service(
    args: argparse.Namespace, limit: GenerationPace | None
) -> AsyncIterator[tuple[Client, ResultWaiter | None, str]]:
    """A client, the registry to wait on (embedded sandbox only) and the service's identity."""
    floor = {} if args.poll_interval is None else {"min_poll_interval": args.poll_interval}
    if args.sandbox:
        config = SandboxConfig(pending_delay=0.2, processing_delay=0.5)
        if limit is not None:  # the embedded sandbox enforces the limit asked for, as the service
            config = attrs.evolve(
                config,
                rate_limit=True,
                rate_limit_count=limit.calls,
                rate_limit_window=limit.period,
            )
        async with local_service(config) as local, local.client(**floor) as client:
            yield client, local.registry, f"sandbox:{uuid.uuid4().hex}"
        return
    _, base, app = service_settings(os.environ, args.base_url, args.app_url)
    # Creations are paced by the command itself (see _pace), with the slots of earlier runs, so
    # the client's own limit is off: two pacers would wait twice.  The key is read by the client
    # from ASYNCSDK_API_KEY, so that a refused key's message names that variable.
    async with Client(base_url=base, app_url=app, generation_limit=None, **floor) as client:
        yield client, None, str(client.settings.base_url)


def _limit(args: argparse.Namespace) -> GenerationPace | None:
    """The pace to keep: the option's, else the service's limit (the embedded sandbox has none)."""
    if args.generation_limit is not None:
        return parse_limit(args.generation_limit)
    return None if args.sandbox else DEFAULT_LIMIT


Plan = list[tuple[JobSpec, PhotoKey, Record | None, Action]]

_EARLIER = {"skip": "skipped", "skip-failed": FAILED, "refuse": "refused"}
_DRY_ACTIONS = {
    "new": "create",
    "adopt": "create (photo uploaded before)",
    "resume": "wait (process created before)",
    "skip": "done before",
    "skip-failed": "failed before",
    "refuse": "refused",
}


def _plan(
    specs: Sequence[JobSpec],
    records: dict[str, Record],
    args: argparse.Namespace,
    service: str,
    tool: str,
    wire_widgets: list[dict[str, object]],
) -> tuple[Plan, list[JobResult]]:
    """The jobs to run, and the results of those an earlier run settled."""
    plan: Plan = []
    results: list[JobResult] = []
    for spec in specs:
        key = PhotoKey.of(spec.photo, tool, wire_widgets)
        record = records.get(key.digest)
        action = decide(record, service=service, out_dir=args.out, retry_failed=args.retry_failed)
        if action.kind not in _EARLIER:
            plan.append((spec, key, record, action))
            continue
        outputs = [args.out / name for name in record.outputs] if record else []
        results.append(
            JobResult(
                spec=spec,
                status=_EARLIER[action.kind],
                process_id=record.process_id if record else "",
                outputs=outputs if action.kind == "skip" else [],
                error=action.reason if action.kind != "skip" else "done in an earlier run",
                exit_code=0 if action.kind == "skip" else 1,
            )
        )
    return plan, results


def _dry_run_rows(plan: Plan, earlier: Sequence[JobResult], tool: str) -> list[list[str]]:
    rows = []
    for spec, _, record, action in plan:
        if action.kind == "resume" and record is not None:
            shown = f"from process {record.process_id}"
        else:
            shown = result_name(spec.stem, tool, 0, 1, spec.widgets_digest) + ".*"
        rows.append([str(spec.photo), _DRY_ACTIONS[action.kind], shown])
    for result in earlier:
        shown = ", ".join(str(p) for p in result.outputs) or result.error
        rows.append([str(result.spec.photo), result.status, shown])
    return rows


async def run(args: argparse.Namespace) -> int:
    """The ``process`` command; SIGTERM stops it as Ctrl-C does (resumable, exit 130)."""
    with sigterm_as_interrupt(), contextlib.ExitStack() as held:
        return await _run(args, held)


async def _run(args: argparse.Namespace, held: contextlib.ExitStack) -> int:
    """The command; ``held`` keeps the journal to this run until the command ends."""
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be 1 or more, not {args.concurrency}")
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}")
    limit = _limit(args)
    widgets = parse_widgets(args.widget)
    out_dir: Path = args.out
    photos, skipped = collect_photos(args.paths, out_dir)
    stems = _stems(photos)
    specs = [
        JobSpec(photo=photo, tool=args.tool, widgets=widgets, output_stem=stems[photo])
        for photo in photos
    ]
    state = StateFile(out_dir / STATE_FILE)
    if not args.dry_run:
        held.enter_context(state.held_alone())
    records = state.load()
    if state.skipped_lines:
        sys.stderr.write(
            f"warning: {state.skipped_lines} unreadable line(s) in {state.path} were ignored\n"
        )

    async with _service(args, limit) as (client, registry, service):
        runner = Runner(
            client=client,
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
        # spelled on the command line: another spelling must not pay for a photo twice, and
        # other widgets never share a result file name.
        try:
            tool, wire_widgets = await runner.check(specs[0])
        except MissingWidgetError as exc:
            raise UsageError(
                f"{exc.tool!r} needs the widget {exc.handle!r}: add -w {exc.handle}=VALUE, "
                f"VALUE one of {', '.join(exc.valid)} ('asyncsdk widgets {exc.tool}' lists "
                "every widget)"
            ) from exc
        digest = widgets_digest(wire_widgets)
        specs = [attrs.evolve(spec, widgets_digest=digest) for spec in specs]
        plan, results = _plan(specs, records, args, service, tool, wire_widgets)
        counts = Counter(action.kind for *_, action in plan)
        generations = counts["new"] + counts["adopt"]
        taken = state.generation_times(service)
        least = least_time(taken, generations, time.time(), limit) if limit is not None else 0.0
        _say_skipped(skipped)  # once the command is known to go ahead, before its plan
        if args.dry_run:
            rows = _dry_run_rows(plan, results, tool)
            print(_report.dry_run(rows, generations, least, limit))
            return EXIT_OK
        _report.announce(len(specs), counts, results)
        semaphore = asyncio.Semaphore(args.concurrency)
        started = time.monotonic()
        # The generations this run sent (a photo that failed before its creation request, an
        # upload refused say, sends none), and the limit's pace for them from where it started.
        sent: list[float] = []
        earlier, started_at = list(taken), time.time()
        with Progress(total=len(plan), label=args.tool.removeprefix("tool-")) as bar:
            journal = StateJournal(state, service)
            batch = Batch(runner=runner, journal=journal, bar=bar)
            if limit is not None:

                def on_taken(at: float) -> None:
                    sent.append(at)
                    state.append(GenerationMark(at=at, service=service))

                batch.pacer = Pacer(
                    limit=limit,
                    taken=taken,
                    left=generations,
                    on_taken=on_taken,
                    on_wait=batch.show_wait,
                )

            async def limited(item: tuple[JobSpec, PhotoKey, Record | None, Action]) -> JobResult:
                async with semaphore:
                    return await batch.job(*item)

            async with bar.ticking():
                results.extend(await asyncio.gather(*(limited(item) for item in plan)))
        took = time.monotonic() - started

    order = {spec.photo: index for index, spec in enumerate(specs)}
    results.sort(key=lambda r: order[r.spec.photo])
    print(_report.results_table(results))
    print()
    print(_report.summary(results, out_dir))
    if plan:
        if limit is not None:
            least = least_time(earlier, len(sent), started_at, limit)
        print(_report.timing(took, len(sent), least, limit))
    return max((r.exit_code for r in results), default=EXIT_OK)
