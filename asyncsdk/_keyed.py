"""Keyed runs: each step of a run written to the journal before the next, so a key is created at
most once across crashes, restarts and nodes.

A run of a key goes ``intent`` (its arguments and the digests of its photos) → upload →
``uploaded`` (the order and the process request) → ``creating`` → POST → ``created`` (the process
ids) → wait → ``finished`` (the process).  The same key again finds what was recorded: a finished
run's process; a run carried by a live caller, which it waits for; or a run left behind, which it
takes over from its last step.  A run left at ``creating`` may have been created without its
answer: the order is read first and a process of the run's tool it lists is adopted; a new one is
created only when the order lists none.  :class:`RunSteps` takes a run of a caller's own upload,
result and pace (``Client.run_steps``, ``asyncsdk process``) through the same steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Final

import attrs
import cattrs

from asyncsdk._catalogue import PreparedProcess, WidgetSelection
from asyncsdk._errors import (
    ConfigurationError,
    JournalError,
    KeyReusedError,
    ValidationError,
    WaitTimeoutError,
)
from asyncsdk._journal import Journal, RunEntry, RunStage, new_owner
from asyncsdk._journal.contract import corrupt_row
from asyncsdk._models import Process
from asyncsdk._resources import Processes, ResultWaiter
from asyncsdk._uploads import Upload

__all__ = ["KeyedRuns", "RunSteps", "Uploaded", "run_arguments"]

#: How often a caller waiting for another one's run looks at the journal again.
WAIT_POLL: Final = 0.2

#: What a run's upload step gives: the order, the request with its asset ids, and the place
#: taken in the generation window before the upload.
Uploaded = tuple[str, PreparedProcess, float | None]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _sha256_of(upload: Upload) -> str:
    source = upload.source
    if isinstance(source, bytes | bytearray | memoryview):
        return hashlib.sha256(source).hexdigest()
    if isinstance(source, str | os.PathLike):
        digest = hashlib.sha256()
        with open(source, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()
    raise ValidationError(
        "key= needs each photo (and mask) as a path or bytes, whose digest the journal records: "
        "a file object or a stream cannot be read twice; pass its path or its bytes"
    )


async def run_arguments(
    kind: str,
    prepared: PreparedProcess,
    uploads: Sequence[Upload],
    **extra: str | None,
) -> str:
    """The canonical JSON of what a keyed run is asked: the request with placeholder asset ids,
    the digest and role of every file uploaded, and ``extra`` (project, group...)."""
    files = [
        {"sha256": digest, "role": upload.role}
        for upload, digest in zip(
            uploads,
            await asyncio.to_thread(lambda: [_sha256_of(upload) for upload in uploads]),
            strict=True,
        )
    ]
    # One spelling of the widgets: in slug order, each one's items sorted.
    widgets = [
        {"slug": w.slug, "item_slugs": sorted(w.item_slugs)}
        for w in sorted(prepared.widgets, key=lambda w: w.slug)
    ]
    return _canonical(
        {
            "run": kind,
            "tool": prepared.tool,
            "asset_map": dict(prepared.asset_map),
            "widgets": widgets,
            "files": files,
            **extra,
        }
    )


def _differences(recorded: str, given: str) -> dict[str, tuple[object, object]]:
    first, now = json.loads(recorded), json.loads(given)
    return {
        name: (first.get(name), now.get(name))
        for name in sorted(set(first) | set(now))
        if first.get(name) != now.get(name)
    }


def _request_json(prepared: PreparedProcess, process_group_id: str | None) -> str:
    return _canonical(
        {
            "tool": prepared.tool,
            "asset_map": dict(prepared.asset_map),
            "widgets": prepared.widgets_json(),
            "process_group_id": process_group_id,
        }
    )


def _json_object(text: str) -> dict[str, Any] | None:
    """``text`` as a JSON object, or None when it is not one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _request_of(journal: Journal, entry: RunEntry) -> tuple[PreparedProcess, str | None]:
    data = _json_object(entry.request) or {}
    try:
        prepared = PreparedProcess(
            tool=data["tool"],
            asset_map=data["asset_map"],
            widgets=tuple(WidgetSelection(w["slug"], w["item_slugs"]) for w in data["widgets"]),
        )
        return prepared, data["process_group_id"]
    except (KeyError, TypeError, ValueError) as exc:
        raise corrupt_row(journal, entry.key, f"its process request {entry.request!r}") from exc


def _checked(journal: Journal, entry: RunEntry) -> RunEntry:
    """``entry`` when what it holds agrees with itself: its arguments are a JSON object whose
    SHA-256 is its digest, and its process request (when recorded for arguments that name a
    tool, as :meth:`KeyedRuns.run`'s do) is one of their tool.  Any
    other row raises :class:`~asyncsdk.JournalError`: it was not written by the library, and
    believing it could return another run's process or pay for a run twice."""
    arguments = _json_object(entry.arguments)
    try:
        digest = hashlib.sha256(entry.arguments.encode()).hexdigest()
    except UnicodeEncodeError:
        digest = ""
    if arguments is None or digest != entry.digest:
        raise corrupt_row(journal, entry.key, "its arguments do not match their digest")
    if entry.request and "tool" in arguments:  # run()'s arguments; run_steps' are the caller's
        request = _json_object(entry.request)
        if request is None or request.get("tool") != arguments.get("tool"):
            raise corrupt_row(
                journal,
                entry.key,
                f"its process request is not one of its arguments' tool "
                f"{arguments.get('tool')!r}: {entry.request!r}",
            )
    return entry


def _encodable(journal: Journal, key: str, arguments: str) -> None:
    """Refuse a key (or arguments) that cannot be written to a journal as UTF-8 text."""
    for name, text in (("key", key), ("arguments", arguments)):
        try:
            text.encode()
        except UnicodeEncodeError as exc:
            raise ValidationError(
                f"the {name} of key {key!r} cannot be written to the journal {journal!r}: "
                f"{exc.reason} at {exc.start}; give text of whole characters (a lone surrogate "
                "such as '\\ud800' is half of one)"
            ) from exc


@attrs.frozen(kw_only=True)
class RunSteps:
    """The steps of a journalled run that are its caller's own (see
    :meth:`~asyncsdk.Client.run_steps`); the journal, the creation (``creating``, adoption) and
    the wait are the library's, as for a keyed run.

    ``upload()``: make the run's order and return its id and the request to create on it, with
    the order's asset ids.  ``finish(processes)``: what the run's ``finished`` step records (a
    string, returned again for the key), once the processes the creation made are done or
    failed; it may download their results first.  ``prepare(order_id)``: the request again, for
    a run its journal recorded without one (``RunEntry.request`` empty).  ``pace()``: an async
    context manager held while the creation request is sent (a pacer of the caller's own).
    ``wait_every``: wait for every process one creation makes, not only the first.
    """

    upload: Callable[[], Awaitable[tuple[str, PreparedProcess]]]
    finish: Callable[[Sequence[Process]], Awaitable[str]]
    prepare: Callable[[str], Awaitable[PreparedProcess]] | None = None
    pace: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None = None
    wait_every: bool = False


@attrs.frozen(kw_only=True)
class _Steps:
    """A run's own steps as the journal's step logic takes them: a keyed run's (its upload, its
    process recorded as JSON) or a caller's :class:`RunSteps`."""

    upload: Callable[[], Awaitable[Uploaded]]
    finish: Callable[[Sequence[Process], str | None], Awaitable[str]]
    process_group_id: str | None = None
    prepare: Callable[[str], Awaitable[PreparedProcess]] | None = None
    pace: Callable[[], contextlib.AbstractAsyncContextManager[Any]] | None = None
    wait_every: bool = False
    wait_timeout: float | None = None
    """The wait's own timeout; None: what is left of the run's."""


@attrs.frozen
class KeyedRuns:
    """The keyed runs of a client, over its journal."""

    journal: Journal
    processes: Processes
    converter: cattrs.Converter

    async def run(
        self,
        key: str,
        arguments: str,
        upload: Callable[[], Awaitable[Uploaded]],
        process_group_id: str | None,
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> Process:
        """The run of ``key``: its recorded process, or the run carried on from its last step
        (``upload()`` uploads its files when none were)."""
        result = await self.carry(
            key,
            arguments,
            _Steps(upload=upload, finish=self._finished_process, process_group_id=process_group_id),
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )
        try:
            process = self.converter.structure(json.loads(result), Process)
        except (ValueError, TypeError, cattrs.BaseValidationError) as exc:
            raise corrupt_row(self.journal, key, f"its process {result!r}") from exc
        tool = (_json_object(arguments) or {}).get("tool")
        if process.tool != tool:
            raise corrupt_row(
                self.journal,
                key,
                f"its process {process.id!r} is of {process.tool!r}, not {tool!r}",
            )
        return process

    async def run_steps(
        self,
        key: str,
        arguments: str,
        steps: RunSteps,
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> str:
        """The run of ``key`` with ``steps`` of the caller's own: what its ``finished`` step
        recorded."""
        upload, finish = steps.upload, steps.finish

        async def uploaded() -> Uploaded:
            order_id, prepared = await upload()
            return order_id, prepared, None

        async def finished(processes: Sequence[Process], _group: str | None) -> str:
            return await finish(processes)

        return await self.carry(
            key,
            arguments,
            _Steps(
                upload=uploaded,
                finish=finished,
                prepare=steps.prepare,
                pace=steps.pace,
                wait_every=steps.wait_every,
                wait_timeout=timeout,
            ),
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )

    async def carry(
        self,
        key: str,
        arguments: str,
        steps: _Steps,
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> str:
        """The result recorded for ``key``: found in the journal, waited for while another
        caller carries the run, or made by carrying the run on from its last step."""
        _encodable(self.journal, key, arguments)
        digest = hashlib.sha256(arguments.encode()).hexdigest()
        deadline = time.monotonic() + timeout
        owner = new_owner()
        while True:
            claim = await self.journal.claim(key, digest, arguments, owner)
            entry = _checked(self.journal, claim.entry)
            if entry.digest != digest:
                differences = _differences(entry.arguments, arguments)
                said = "; ".join(
                    f"{name}: first {first!r}, now {now!r}"
                    for name, (first, now) in differences.items()
                )
                raise KeyReusedError(
                    f"key {key!r} was first used for a run with other arguments ({said}): give "
                    "another key for another run, or the first run's arguments for its result",
                    key=key,
                    differences=differences,
                )
            if entry.finished:
                return entry.result
            if claim.owned:
                break
            if time.monotonic() >= deadline:
                raise WaitTimeoutError(
                    f"the run of key {key!r} is carried on by another caller ({entry.owner}) "
                    f"and did not finish within {timeout:g} s",
                    process_id=entry.process_ids[0] if entry.process_ids else "",
                    last_status=entry.stage,
                )
            await asyncio.sleep(WAIT_POLL)
        async with self._held(key, owner):
            return await self._carry(
                entry,
                owner,
                steps,
                timeout=max(deadline - time.monotonic(), 0.0),
                registry=registry,
                webhook_grace=webhook_grace,
            )

    async def resume(
        self,
        entry: RunEntry | str,
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> Process:
        """Carry a recorded run on from its last step, without its photos.  Given an entry, the
        run of its arguments: a journal that now holds others for its key raises
        :class:`~asyncsdk.KeyReusedError` with the differences."""
        key = entry if isinstance(entry, str) else entry.key
        _encodable(self.journal, key, "" if isinstance(entry, str) else entry.arguments)
        found = await self.journal.get(key)
        if found is None:
            raise ConfigurationError(
                f"the journal has no run of key {key!r}: resume a key that "
                "client.journal.unfinished() lists, or start the run with client.run() and key="
            )
        if found.stage == RunStage.INTENT:
            raise ConfigurationError(
                f"the run of key {key!r} stopped before its files were uploaded (nothing was "
                "paid for): call client.run() again with its key and its photos"
            )

        async def no_upload() -> Uploaded:  # never called: the run is past its upload
            raise ConfigurationError(f"the run of key {key!r} has no files to upload")

        return await self.run(
            key,
            found.arguments if isinstance(entry, str) else entry.arguments,
            no_upload,
            None,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )

    @contextlib.asynccontextmanager
    async def _held(self, key: str, owner: str) -> AsyncIterator[None]:
        """The lease on ``key`` renewed while the block runs, and given up after it."""
        ended = asyncio.Event()
        renewing = asyncio.create_task(self._renewing(key, owner, ended))
        try:
            yield
        finally:
            ended.set()
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            # A journal out of reach now must not hide how the run ended: the lease lapses.
            with contextlib.suppress(JournalError):
                await self.journal.release(key, owner)

    async def _renewing(self, key: str, owner: str, ended: asyncio.Event) -> None:
        """Renew the lease every third of it, until the run has ``ended`` or the journal says
        it is held no more.  ``ended`` as well as the task's cancellation: a store's driver can
        lose a cancellation that lands as its answer arrives (on Python 3.11, redis-py sends
        each command through ``asyncio.wait_for``, which then returns the answer instead), and
        the renewal would go on for good."""
        held = True
        while held and not ended.is_set():
            await asyncio.sleep(self.journal.lease / 3)
            with contextlib.suppress(JournalError):  # out of reach for now: try again later
                held = await self.journal.renew(key, owner)

    async def _finished_process(self, processes: Sequence[Process], group_id: str | None) -> str:
        """A keyed run's result: its process as JSON, with the group id its creation gave."""
        process = processes[0]
        if process.process_group_id is None and group_id:
            process = attrs.evolve(process, process_group_id=group_id)
        return _canonical(self.converter.unstructure(process))

    async def _prepared_again(self, entry: RunEntry, steps: _Steps) -> PreparedProcess:
        """The process request of a run its journal recorded without one, made again."""
        if steps.prepare is None:
            raise JournalError(
                f"the journal recorded the run of key {entry.key!r} without its process request, "
                "and nothing was given to make it again"
            )
        return await steps.prepare(entry.order_id)

    async def _carry(
        self,
        entry: RunEntry,
        owner: str,
        steps: _Steps,
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> str:
        key, stage = entry.key, entry.stage
        group_id = steps.process_group_id
        reserved: float | None = None
        process_ids = entry.process_ids
        prepared: PreparedProcess | None = None
        if stage == RunStage.INTENT:
            order_id, prepared, reserved = await steps.upload()
            await self.journal.advance(
                key,
                owner,
                RunStage.UPLOADED,
                order_id=order_id,
                request=_request_json(prepared, group_id),
            )
        else:
            order_id = entry.order_id
            if entry.request:
                prepared, group_id = _request_of(self.journal, entry)
        if stage != RunStage.CREATED:
            if prepared is None:
                prepared = await self._prepared_again(entry, steps)

            async def creating() -> None:
                await self.journal.advance(key, owner, RunStage.CREATING)

            created = await self.processes.create_once(
                order_id,
                prepared,
                sent_before=stage == RunStage.CREATING,
                before_sending=creating,
                pace=steps.pace,
                process_group_id=group_id,
                reserved=reserved,
            )
            await self.journal.advance(
                key, owner, RunStage.CREATED, process_ids=created.process_ids
            )
            process_ids = created.process_ids
            group_id = created.process_group_id or group_id
        processes = await self._wait(
            process_ids if steps.wait_every else process_ids[:1],
            timeout=timeout if steps.wait_timeout is None else steps.wait_timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )
        result = await steps.finish(processes, group_id)
        await self.journal.advance(key, owner, RunStage.FINISHED, result=result)
        return result

    async def _wait(
        self,
        process_ids: Sequence[str],
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> list[Process]:
        """Wait for the processes under one deadline; when one wait fails, the others are
        stopped before the error is raised."""
        waits = [
            asyncio.ensure_future(
                self.processes.wait(
                    process_id, timeout=timeout, registry=registry, webhook_grace=webhook_grace
                )
            )
            for process_id in process_ids
        ]
        try:
            return list(await asyncio.gather(*waits))
        except BaseException:
            for wait in waits:
                wait.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
            raise
