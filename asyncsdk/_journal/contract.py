"""What a journal of runs is: its entries, their stages, and the protocol every journal keeps.

A keyed run (``client.run(..., key=...)``) writes each step to the journal before it takes the
next one, so that a caller after a crash (in this process, after a restart, or on another node
sharing the journal) knows what was already paid for.  One caller at a time carries a run: it
holds the entry's lease (``owner``, ``lease_until``) and renews it while it works; the others
wait for it, or take the run over once the lease has lapsed or its owner's process is gone.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Concatenate, Final, ParamSpec, Protocol, TypeVar

import attrs

from asyncsdk._errors import JournalError

__all__ = [
    "Claim",
    "Journal",
    "RunEntry",
    "RunStage",
    "corrupt_row",
    "lapsed",
    "made_private",
    "new_owner",
    "recorded",
    "stored_ids",
    "takeable",
    "taken_over",
    "translated",
]

S = TypeVar("S")
P = ParamSpec("P")
T = TypeVar("T")


class RunStage:
    """The stages of a keyed run, in the order they are reached.

    ``intent``: the key and its arguments are recorded; nothing is paid for yet.  ``uploaded``:
    the order exists (``order_id``, and the process request in ``request``).  ``creating``: the
    process request may have been sent; a caller that finds a run here reads the order and adopts
    a process it lists before it creates one.  ``created``: the process ids are recorded.
    ``finished``: the finished process is recorded in ``result``.
    """

    INTENT: Final = "intent"
    UPLOADED: Final = "uploaded"
    CREATING: Final = "creating"
    CREATED: Final = "created"
    FINISHED: Final = "finished"


def _str_tuple(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in value)  # type: ignore[attr-defined]  # any iterable


@attrs.frozen(kw_only=True)
class RunEntry:
    """One keyed run as the journal holds it.

    ``arguments`` is the canonical JSON of what the run was asked (tool, widgets, inputs, the
    digests of the photos...) and ``digest`` its SHA-256; ``request`` the JSON of the process
    request with the order's asset ids; ``result`` the JSON of the finished process.
    """

    key: str
    digest: str
    arguments: str
    stage: str
    order_id: str = ""
    request: str = ""
    process_ids: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    result: str = ""
    owner: str = ""
    lease_until: float = 0.0
    updated_at: float = 0.0

    @property
    def finished(self) -> bool:
        """True once the run's result is recorded (stage ``finished``)."""
        return self.stage == RunStage.FINISHED

    @property
    def resumable(self) -> bool:
        """True when ``client.resume()`` can carry the run on without its photos: they were
        uploaded.  A run still at ``intent`` paid for nothing; call ``client.run()`` again with
        its key and its photos."""
        return self.stage in (RunStage.UPLOADED, RunStage.CREATING, RunStage.CREATED)


@attrs.frozen
class Claim:
    """The answer to :meth:`Journal.claim`: the entry as it is now, and whether the caller holds
    its lease (and so carries the run on)."""

    entry: RunEntry
    owned: bool


def new_owner() -> str:
    """A new owner id: this host, this process and a random part (one per carried run)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"


def _process_gone(owner: str) -> bool:
    """True when ``owner`` was a process of this host that no longer runs."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, under another user
    return False


def lapsed(entry: RunEntry, now: float | None = None) -> bool:
    """True when nobody carries ``entry`` on: no owner, its lease passed, or its owner was a
    process of this host that has stopped (a restart takes its runs over at once)."""
    if not entry.owner:
        return True
    if entry.lease_until <= (time.time() if now is None else now):
        return True
    return _process_gone(entry.owner)


def takeable(entry: RunEntry, digest: str, now: float) -> bool:
    """Whether a claim of ``entry`` with the same arguments (``digest``) takes it over: it is
    not finished and nobody carries it on (:func:`lapsed`)."""
    return entry.digest == digest and not entry.finished and lapsed(entry, now)


def recorded(
    stage: str,
    *,
    order_id: str | None,
    request: str | None,
    process_ids: tuple[str, ...] | None,
    result: str | None,
) -> dict[str, str]:
    """The fields an :meth:`Journal.advance` writes besides the lease: the stage, and what of
    the run it recorded (the fields given, as the journals store them)."""
    changes = {"stage": stage}
    if order_id is not None:
        changes["order_id"] = order_id
    if request is not None:
        changes["request"] = request
    if process_ids is not None:
        changes["process_ids"] = json.dumps(list(process_ids))
    if result is not None:
        changes["result"] = result
    return changes


def corrupt_row(journal: object, key: str, what: str) -> JournalError:
    """The error of a row of ``journal`` that cannot be what the library wrote: ``what`` says
    which part of it."""
    return JournalError(
        f"the journal {journal!r} holds a row for key {key!r} that the library did not write "
        f"({what}): it cannot be trusted to say what was paid for; look the run up on the "
        "service, then delete that row (or run with another key)"
    )


def stored_ids(journal: object, key: str, text: str) -> tuple[str, ...]:
    """The process ids a row of ``journal`` holds as a JSON list of strings."""
    try:
        ids = json.loads(text)
    except ValueError:
        ids = None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise corrupt_row(journal, key, f"its process ids {text!r} are not a JSON list of ids")
    return tuple(ids)


def made_private(folder: Path) -> None:
    """Create ``folder`` and its missing parents readable by their owner only (``0700``): a
    journal names the account's orders.  A folder that exists is left as it is."""
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for part in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            part.mkdir(mode=0o700)


def taken_over(key: str, lease: float) -> JournalError:
    """The error of an :meth:`Journal.advance` whose caller no longer holds the run."""
    return JournalError(
        f"the run of key {key!r} was taken over by another caller while this one "
        f"stopped longer than the journal's lease ({lease:g} s): it goes on there"
    )


def translated(
    errors: Callable[[], tuple[type[BaseException], ...]],
    advice: Callable[[BaseException], str] = lambda exc: "",
) -> Callable[
    [Callable[Concatenate[S, P], Awaitable[T]]], Callable[Concatenate[S, P], Awaitable[T]]
]:
    """A journal method whose store's failures (``errors()``: its driver's error classes) raise
    :class:`~asyncsdk.JournalError`, from the store's own error, followed by ``advice(error)``
    (the fix, for the failures that have one)."""

    def wrap(
        method: Callable[Concatenate[S, P], Awaitable[T]],
    ) -> Callable[Concatenate[S, P], Awaitable[T]]:
        @functools.wraps(method)
        async def call(journal: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return await method(journal, *args, **kwargs)
            except errors() as exc:
                raise JournalError(
                    f"the journal {journal!r} could not be used: {exc!r}{advice(exc)}"
                ) from exc

        return call

    return wrap


class Journal(Protocol):
    """A durable journal of keyed runs (``Client(journal=...)``).

    ``lease``: the seconds an owner holds a run without renewing it.  Every write is durable
    when the call returns.  :class:`~asyncsdk.SQLiteJournal` serves the processes of one host;
    :class:`~asyncsdk.PostgresJournal` and :class:`~asyncsdk.RedisJournal` several nodes.
    """

    lease: float

    async def claim(self, key: str, digest: str, arguments: str, owner: str) -> Claim:
        """In one step: record the run of ``key`` at ``intent`` held by ``owner`` if the key is
        new, or take an unfinished run over if it has :func:`lapsed` and ``digest`` is its own;
        otherwise leave it as it is.  Returns the entry as it is after the step."""
        ...

    async def advance(
        self,
        key: str,
        owner: str,
        stage: str,
        *,
        order_id: str | None = None,
        request: str | None = None,
        process_ids: tuple[str, ...] | None = None,
        result: str | None = None,
    ) -> None:
        """Record the run's next stage (and renew the lease) while ``owner`` holds it; raise
        :class:`~asyncsdk.JournalError` when it no longer does."""
        ...

    async def renew(self, key: str, owner: str) -> bool:
        """Extend ``owner``'s lease on ``key``; False when it no longer holds it."""
        ...

    async def release(self, key: str, owner: str) -> None:
        """Give the lease up (the run stays where it is), so that the next caller goes on at
        once."""
        ...

    async def get(self, key: str) -> RunEntry | None:
        """The entry of ``key``, or None."""
        ...

    async def unfinished(self) -> list[RunEntry]:
        """The runs not finished, oldest first: those a restart resumes (see
        :attr:`RunEntry.resumable`)."""
        ...

    async def close(self) -> None:
        """Release what the journal holds (connections, threads).  Safe to call twice."""
        ...
