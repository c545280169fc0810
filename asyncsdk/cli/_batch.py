"""One job of ``process`` at a time: its steps, each written to the journal as it happens.

A job uploads its photo, takes a generation slot from the pacer, creates the process, waits and
downloads, resuming from the step its last record reached (see :mod:`asyncsdk.cli._state`).
"""

from __future__ import annotations

import contextlib
import sys
import time

import attrs

from asyncsdk import AsyncSDKError, Process, ProcessStatus, WaitTimeoutError
from asyncsdk.cli._common import EXIT_FAILED, exit_code_for
from asyncsdk.cli._jobs import JobResult, JobSpec, Runner, Steps
from asyncsdk.cli._pace import Pacer
from asyncsdk.cli._progress import Progress
from asyncsdk.cli._state import (
    CREATED,
    DONE,
    FAILED,
    UPLOADED,
    Action,
    PhotoKey,
    Record,
    StateFile,
)

__all__ = ["Batch"]


@attrs.define(kw_only=True)
class Batch:
    """One run of the command: the runner, the journal, where the service is, and its pace
    (``pacer`` is ``None`` when nothing limits generations)."""

    runner: Runner
    state: StateFile
    service: str
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
        try:
            processes, current = await self._steps(spec, key, record, action)
            result.process_id = processes[0].id
            if record is not None and action.kind == "resume":
                self._drop_empty(record.outputs)
            # Every result paid for is kept, that of a process beside one that failed too.
            result.outputs = await self.runner.fetch(spec, processes)
            names = tuple(p.name for p in result.outputs)
            failed = sum(1 for process in processes if not process.succeeded)
            if not failed:
                self.state.append(current.step(DONE, outputs=names))
                result.status = ProcessStatus.DONE
            else:
                what = "the process" if len(processes) == 1 else f"{failed} of the processes"
                self.state.append(current.step(FAILED, error=f"{what} failed", outputs=names))
                result.error = f"{what} failed; --retry-failed runs it again"
                result.exit_code = EXIT_FAILED
                result.status = ProcessStatus.FAILED
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

    def _drop_empty(self, outputs: tuple[str, ...]) -> None:
        """Remove the empty files among a job's recorded results (what a power loss can leave),
        so that they are downloaded again under their own names."""
        for name in outputs:
            path = self.runner.out_dir / name
            with contextlib.suppress(OSError):
                if path.is_file() and path.stat().st_size == 0:
                    path.unlink()

    async def _create(self, spec: JobSpec, steps: Steps) -> None:
        """Create the process, in a generation slot when the pace is kept."""
        if self.pacer is None:
            await self.runner.create(spec, steps)
            return
        async with self.pacer.slot():
            if self.bar.enabled:
                self.bar.set_status("")
            await self.runner.create(spec, steps)

    async def _steps(
        self, spec: JobSpec, key: PhotoKey, record: Record | None, action: Action
    ) -> tuple[list[Process], Record]:
        """Upload, create or adopt, and wait, as ``action`` says; each step is recorded."""
        runner = self.runner
        steps = Steps()
        if record is not None and record.service == self.service and action.kind != "new":
            current = record
            steps.order_id = record.order_id
            if action.kind == "resume":
                steps.process_id = record.process_id
                steps.more_process_ids = record.more_process_ids
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
                    # The order was made for this photo alone: its processes are ours, created
                    # by a run that stopped before it could write their ids down.
                    steps.process_id, *more = (process.id for process in order.processes)
                    steps.more_process_ids = tuple(more)
            if not steps.process_id:
                await self._create(spec, steps)
            current = current.step(
                CREATED, process_id=steps.process_id, more_process_ids=steps.more_process_ids
            )
            self.state.append(current)
        return await runner.wait(steps), current
