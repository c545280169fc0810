"""One job of ``process`` at a time: its steps, each written to the journal as it happens.

A job uploads its photo, takes a generation slot from the pacer, creates the process, waits and
downloads, resuming from the step its last record reached (see :mod:`asyncsdk.cli._state`).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import AsyncIterator

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

    @contextlib.asynccontextmanager
    async def _slot(self, pacer: Pacer) -> AsyncIterator[None]:
        """A generation slot from ``pacer``, held while the creation request is sent."""
        async with pacer.slot():
            if self.bar.enabled:
                self.bar.set_status("")
            yield

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
            # An order left at "uploaded" may have had its process created by a run that stopped
            # before it could write the ids down: those the order lists for this tool are adopted
            # (the order was made for this photo alone), and one is created only when it has none.
            await runner.create(
                spec,
                steps,
                sent_before=action.kind == "adopt",
                pace=None if self.pacer is None else functools.partial(self._slot, self.pacer),
            )
            current = current.step(
                CREATED, process_id=steps.process_id, more_process_ids=steps.more_process_ids
            )
            self.state.append(current)
        return await runner.wait(steps), current
