"""One job of ``process`` at a time, through the library's journalled-run steps on its journal.

A job runs as ``Client.run_steps`` runs a keyed run, on the command's state file
(:class:`~asyncsdk.cli._state.StateJournal`): its photo is uploaded, a generation slot taken from
the pacer while the process is created (or adopted from the order), every process the creation
made is waited for, and the results are downloaded before the job is recorded ``done`` or
``failed``.  It starts from the step its last line reached (see :mod:`asyncsdk.cli._state`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import attrs

from asyncsdk import (
    AsyncSDKError,
    PreparedProcess,
    Process,
    ProcessStatus,
    RunSteps,
    WaitTimeoutError,
)
from asyncsdk.cli._exits import EXIT_FAILED, exit_code_for
from asyncsdk.cli._pace import Pacer
from asyncsdk.cli._photo_job import JobResult, JobSpec, Runner, Steps
from asyncsdk.cli._progress import Progress
from asyncsdk.cli._state import (
    DONE,
    FAILED,
    Action,
    PhotoKey,
    Record,
    StateJournal,
    finished_result,
)

__all__ = ["Batch"]


@attrs.define(kw_only=True)
class Batch:
    """One run of the command: the runner, the journal, and its pace (``pacer`` is ``None`` when
    nothing limits generations)."""

    runner: Runner
    journal: StateJournal
    bar: Progress
    pacer: Pacer | None = None

    def show_wait(self, message: str, first: bool) -> None:
        """The pacer's word on a wait: on the bar when there is one, else once per wait."""
        if self.bar.enabled:
            self.bar.set_status(message)
        elif first:
            sys.stderr.write(message + "\n")
            sys.stderr.flush()

    async def job(
        self, spec: JobSpec, key: PhotoKey, record: Record | None, action: Action
    ) -> JobResult:
        started = time.monotonic()
        result = JobResult(spec=spec, status="error")
        runner = self.runner
        collected: list[Process] = []
        outputs: list[Path] = []

        async def upload() -> tuple[str, PreparedProcess]:
            steps = Steps()
            await runner.upload(spec, steps)
            return steps.order_id, await runner.prepared(spec, steps.order_id, steps.assets)

        async def prepare(order_id: str) -> PreparedProcess:
            return await runner.prepared(spec, order_id)

        async def finish(processes: Sequence[Process]) -> str:
            if record is not None and action.kind == "resume":
                self._drop_empty(record.outputs)
            # Every result paid for is kept, that of a process beside one that failed too.
            outputs.extend(await runner.fetch(spec, processes))
            collected.extend(processes)
            names = [path.name for path in outputs]
            failed = sum(1 for process in processes if not process.succeeded)
            if not failed:
                return finished_result(DONE, names)
            what = "the process" if len(processes) == 1 else f"{failed} of the processes"
            return finished_result(FAILED, names, f"{what} failed")

        steps = RunSteps(
            upload=upload,
            finish=finish,
            prepare=prepare,
            pace=None if self.pacer is None else functools.partial(self._slot, self.pacer),
            wait_every=True,
        )
        try:
            self.journal.start(key, record, action)
            recorded = json.loads(
                await runner.client.run_steps(
                    key.digest,
                    key.arguments,
                    steps,
                    journal=self.journal,
                    timeout=runner.timeout,
                    registry=runner.registry,
                )
            )
            result.process_id = collected[0].id if collected else ""
            result.outputs = outputs
            if recorded["stage"] == DONE:
                result.status = ProcessStatus.DONE
            else:
                result.error = f"{recorded['error']}; --retry-failed runs it again"
                result.exit_code = EXIT_FAILED
                result.status = ProcessStatus.FAILED
        except WaitTimeoutError as exc:
            result.status = "waiting"
            result.error = f"still running after {runner.timeout:g} s; run again to collect it"
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

    def _drop_empty(self, outputs: tuple[str, ...]) -> None:
        """Remove the empty files among a job's recorded results (what a power loss can leave),
        so that they are downloaded again under their own names."""
        for name in outputs:
            path = self.runner.out_dir / name
            with contextlib.suppress(OSError):
                if path.is_file() and path.stat().st_size == 0:
                    path.unlink()

    @contextlib.asynccontextmanager
    async def _slot(self, pacer: Pacer) -> AsyncIterator[None]:
        """A generation slot from ``pacer``, held while the creation request is sent."""
        async with pacer.slot():
            if self.bar.enabled:
                self.bar.set_status("")
            yield
