"""Keyed runs: each step of a run written to the journal before the next, so a key is created at
most once across crashes, restarts and nodes.

A run of a key goes ``intent`` (its arguments and the digests of its photos) → upload →
``uploaded`` (the order and the process request) → ``creating`` → POST → ``created`` (the process
ids) → wait → ``finished`` (the process).  The same key again finds what was recorded: a finished
run's process; a run carried by a live caller, which it waits for; or a run left behind, which it
takes over from its last step.  A run left at ``creating`` may have been created without its
answer: the order is read first and a process of the run's tool it lists is adopted; a new one is
created only when the order lists none.
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
from asyncsdk._models import Process
from asyncsdk._resources import Processes, ResultWaiter
from asyncsdk._uploads import Upload

__all__ = ["KeyedRuns", "Uploaded", "run_arguments"]

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


def _request_of(entry: RunEntry) -> tuple[PreparedProcess, str | None]:
    data = json.loads(entry.request)
    prepared = PreparedProcess(
        tool=data["tool"],
        asset_map=data["asset_map"],
        widgets=tuple(WidgetSelection(w["slug"], w["item_slugs"]) for w in data["widgets"]),
    )
    return prepared, data["process_group_id"]


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
        digest = hashlib.sha256(arguments.encode()).hexdigest()
        deadline = time.monotonic() + timeout
        owner = new_owner()
        while True:
            claim = await self.journal.claim(key, digest, arguments, owner)
            entry = claim.entry
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
                return self._result(entry)
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
                upload,
                process_group_id,
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
        """Carry a recorded run on from its last step, without its photos."""
        key = entry if isinstance(entry, str) else entry.key
        found = await self.journal.get(key)
        if found is None:
            raise ConfigurationError(f"the journal has no run of key {key!r}")
        if found.stage == RunStage.INTENT:
            raise ConfigurationError(
                f"the run of key {key!r} stopped before its files were uploaded (nothing was "
                "paid for): call client.run() again with its key and its photos"
            )

        async def no_upload() -> Uploaded:  # never called: the run is past its upload
            raise ConfigurationError(f"the run of key {key!r} has no files to upload")

        return await self.run(
            key,
            found.arguments,
            no_upload,
            None,
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )

    @contextlib.asynccontextmanager
    async def _held(self, key: str, owner: str) -> AsyncIterator[None]:
        """The lease on ``key`` renewed while the block runs, and given up after it."""

        renewing = asyncio.create_task(self._renewing(key, owner))
        try:
            yield
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            # A journal out of reach now must not hide how the run ended: the lease lapses.
            with contextlib.suppress(JournalError):
                await self.journal.release(key, owner)

    async def _renewing(self, key: str, owner: str) -> None:
        """Renew the lease every third of it, until the journal says it is held no more."""
        held = True
        while held:
            await asyncio.sleep(self.journal.lease / 3)
            with contextlib.suppress(JournalError):  # out of reach for now: try again later
                held = await self.journal.renew(key, owner)

    def _result(self, entry: RunEntry) -> Process:
        return self.converter.structure(json.loads(entry.result), Process)

    async def _carry(
        self,
        entry: RunEntry,
        owner: str,
        upload: Callable[[], Awaitable[Uploaded]],
        process_group_id: str | None,
        *,
        timeout: float,
        registry: ResultWaiter | None,
        webhook_grace: float | None,
    ) -> Process:
        key, stage = entry.key, entry.stage
        group_id = process_group_id
        reserved: float | None = None
        process_ids = entry.process_ids
        if stage == RunStage.INTENT:
            order_id, prepared, reserved = await upload()
            await self.journal.advance(
                key,
                owner,
                RunStage.UPLOADED,
                order_id=order_id,
                request=_request_json(prepared, group_id),
            )
        else:
            order_id = entry.order_id
            prepared, group_id = _request_of(entry)
        if stage != RunStage.CREATED:
            adopt = stage == RunStage.CREATING
            process_ids, created_group = await self._create(
                key, owner, order_id, prepared, group_id, reserved, adopt=adopt
            )
            group_id = created_group or group_id
        process = await self.processes.wait(
            process_ids[0], timeout=timeout, registry=registry, webhook_grace=webhook_grace
        )
        if process.process_group_id is None and group_id:
            process = attrs.evolve(process, process_group_id=group_id)
        await self.journal.advance(
            key,
            owner,
            RunStage.FINISHED,
            result=_canonical(self.converter.unstructure(process)),
        )
        return process

    async def _create(
        self,
        key: str,
        owner: str,
        order_id: str,
        prepared: PreparedProcess,
        process_group_id: str | None,
        reserved: float | None,
        *,
        adopt: bool,
    ) -> tuple[tuple[str, ...], str | None]:
        """The run's process ids (and the group id its creation gave): adopted from the order
        when the creation may have been sent before, else created (``creating`` recorded
        first)."""

        async def creating() -> None:
            await self.journal.advance(key, owner, RunStage.CREATING)

        created = await self.processes.create_once(
            order_id,
            prepared,
            sent_before=adopt,
            before_sending=creating,
            process_group_id=process_group_id,
            reserved=reserved,
        )
        await self.journal.advance(key, owner, RunStage.CREATED, process_ids=created.process_ids)
        return created.process_ids, created.process_group_id
