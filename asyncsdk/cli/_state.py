"""The ``process`` command's memory: one JSON line per step of each photo, in the output folder,
read and written as the library's journal of runs.

A photo's job is known by its path, size and modification time, the tool and the widgets (change
any of them and it is a new job).  Every step is appended as it happens:

* ``uploaded``: the order exists (``order_id``); no process yet;
* ``created``: the process exists (``process_id``); this is the step that costs money;
* ``done`` / ``failed``: the process finished; for ``done`` the result files are in ``outputs``.

Lines of another kind, ``{"kind": "generation", "at": ..., "service": ...}``, record each
generation slot taken (see :mod:`asyncsdk.cli._pace`), so that a second run keeps the pace of the
first.  Journals written before these lines existed read as they did.

The last line of a job wins.  A second run skips ``done`` jobs whose files exist, waits again on
``created`` ones, and for ``uploaded`` ones first looks in the order for a process of its tool the
first run may have created before it stopped, so that no photo is ever paid for twice.  Those
steps are the library's, those of keyed runs (``Client.run_steps``): :class:`StateJournal` is this
file as the library's ``Journal``.

The sandbox forgets everything when it stops, so steps recorded against an embedded sandbox
(``service`` starting with ``sandbox:``) are not resumed on another one: those jobs start again.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import attrs

from asyncsdk import Claim, JournalError, RunEntry, RunStage
from asyncsdk.cli._exits import UsageError
from asyncsdk.cli._results import make_folder, open_private

if sys.platform != "win32":
    import fcntl

__all__ = [
    "STATE_FILE",
    "Action",
    "GenerationMark",
    "PhotoKey",
    "Record",
    "StateFile",
    "StateJournal",
    "decide",
    "finished_result",
    "widgets_digest",
]

STATE_FILE: Final = ".asyncsdk-process.jsonl"
EPHEMERAL_PREFIX: Final = "sandbox:"

# The steps it shares with keyed runs, by their names: a photo at ``uploaded`` is where a keyed run
# at ``creating`` is (the file records no ``creating`` step, so any may have been sent).
UPLOADED: Final = RunStage.UPLOADED
CREATED: Final = RunStage.CREATED
DONE: Final = "done"
FAILED: Final = "failed"
STAGES: Final = frozenset({UPLOADED, CREATED, DONE, FAILED})
GENERATION: Final = "generation"  # the kind of a line that records a generation slot taken


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical_widgets(widgets: Sequence[Mapping[str, Any]]) -> str:
    """The widgets in one spelling: widgets in slug order, each one's items sorted."""
    entries = [
        {
            name: sorted(value) if isinstance(value, list | tuple) else value
            for name, value in w.items()
        }
        for w in widgets
    ]
    return _canonical(sorted(entries, key=_canonical))


def widgets_digest(widgets: Sequence[Mapping[str, Any]]) -> str:
    """Eight hex digits naming the widgets in wire form: however spelled, the same settings give
    the same digest, and it goes into result names so that two jobs never share a file."""
    return hashlib.sha256(_canonical_widgets(widgets).encode()).hexdigest()[:8]


@attrs.frozen(kw_only=True)
class PhotoKey:
    """What identifies one job: the photo file as it is now, the tool and the widgets.

    ``widgets`` is the canonical JSON of the wire form (full slugs), so that two spellings of the
    same settings on the command line are one job.
    """

    photo: str
    size: int
    mtime_ns: int
    tool: str
    widgets: str

    @classmethod
    def of(cls, photo: Path, tool: str, widgets: Sequence[Mapping[str, Any]]) -> PhotoKey:
        """The key of ``photo`` as it is now, with the tool's slug and the wire widgets."""
        stat = photo.stat()
        return cls(
            photo=str(photo.resolve()),
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            tool=tool,
            widgets=_canonical_widgets(widgets),
        )

    @property
    def arguments(self) -> str:
        """The job as a JSON object: what its journalled run is asked."""
        return _canonical(attrs.asdict(self))

    @property
    def digest(self) -> str:
        """The job's key in the file (and so the spelling of every journal written before)."""
        text = _canonical([self.photo, self.size, self.mtime_ns, self.tool, self.widgets])
        return hashlib.sha256(text.encode()).hexdigest()[:32]


def _str_tuple(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value)


@attrs.frozen(kw_only=True)
class Record:
    """One line of the state file."""

    key: str
    photo: str
    size: int
    mtime_ns: int
    tool: str
    widgets: str
    service: str
    stage: str
    order_id: str = ""
    process_id: str = ""
    more_process_ids: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    """The others one creation made (it may make several; each is paid for)."""
    outputs: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    error: str = ""
    at: str = ""

    @classmethod
    def start(cls, key: PhotoKey, service: str) -> Record:
        return cls(
            key=key.digest,
            photo=key.photo,
            size=key.size,
            mtime_ns=key.mtime_ns,
            tool=key.tool,
            widgets=key.widgets,
            service=service,
            stage=UPLOADED,
        )

    def step(self, stage: str, **changes: Any) -> Record:
        """This record moved on to ``stage``, stamped with the current time."""
        now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        return attrs.evolve(self, stage=stage, at=now, **changes)

    def to_json(self) -> str:
        return _canonical(attrs.asdict(self))  # tuples are written as JSON arrays

    @classmethod
    def from_json(cls, line: str) -> Record:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("a state line is a JSON object")
        names = {field.name for field in attrs.fields(cls)}
        record = cls(**{name: value for name, value in data.items() if name in names})
        if record.stage not in STAGES:
            raise ValueError(f"unknown stage {record.stage!r}")
        return record


@attrs.frozen(kw_only=True)
class GenerationMark:
    """One generation slot taken on ``service`` at ``at`` (wall-clock seconds)."""

    at: float
    service: str

    def to_json(self) -> str:
        return _canonical({"kind": GENERATION, "at": self.at, "service": self.service})

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> GenerationMark:
        at, service = data.get("at"), data.get("service")
        if isinstance(at, bool) or not isinstance(at, int | float) or not isinstance(service, str):
            raise ValueError("a generation line has a number 'at' and a string 'service'")
        return cls(at=float(at), service=service)


@attrs.define
class StateFile:
    """The append-only JSON-lines file; ``load`` gives the last record of each job, and the
    generation slots taken on each service."""

    path: Path
    skipped_lines: int = 0
    generations: list[GenerationMark] = attrs.Factory(list)

    def load(self) -> dict[str, Record]:
        records: dict[str, Record] = {}
        self.skipped_lines = 0
        self.generations = []
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return records
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if isinstance(data, dict) and data.get("kind") == GENERATION:
                    self.generations.append(GenerationMark.from_data(data))
                    continue
                record = Record.from_json(line)
            except (ValueError, TypeError):
                # A line cut short by a crash, or edited by hand: that step is redone.
                self.skipped_lines += 1
                continue
            records[record.key] = record
        return records

    @contextlib.contextmanager
    def held_alone(self) -> Iterator[None]:
        """This run's hold on the journal's folder, until the block ends: a second run on the same
        folder stops at once (exit 2) instead of paying again for the photos this one does."""
        make_folder(self.path.parent)
        if sys.platform == "win32":
            yield  # no advisory locks there: one run per folder is up to the caller
            return
        fd = open_private(self.path, os.O_RDONLY)  # the journal itself, created if missing
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UsageError(
                    f"another 'asyncsdk process' run is using {self.path.parent}; wait for it to "
                    "end, or give this one another --out"
                ) from None
            yield
        finally:
            os.close(fd)  # which releases the lock

    def generation_times(self, service: str) -> list[float]:
        """When the generations recorded on ``service`` started (as of the last ``load``)."""
        return [mark.at for mark in self.generations if mark.service == service]

    def append(self, record: Record | GenerationMark) -> None:
        """Write one line and push it to disk before the next step starts.

        The journal names orders and processes of the account: the file is created ``0600``
        whatever the umask (its folder, which holds the results, gets the user's umask), and a
        symlink in its place is refused, never followed.
        """
        make_folder(self.path.parent)
        line = (record.to_json() + "\n").encode("utf-8")
        fd = open_private(self.path, os.O_RDWR | os.O_APPEND)
        try:
            if _last_line_cut(fd):
                # This line starts on a line of its own, or the two would read as one unreadable
                # line, and this step be done (and paid for) again.
                line = b"\n" + line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


def _last_line_cut(fd: int) -> bool:
    """True when the journal does not end with a newline: its last line was cut by a crash."""
    size = os.fstat(fd).st_size
    if size == 0:
        return False
    os.lseek(fd, size - 1, os.SEEK_SET)  # for the read only: writes go to the end (O_APPEND)
    return os.read(fd, 1) != b"\n"


@attrs.frozen
class Action:
    """What to do with one job.

    ``kind``: ``new`` (upload and create), ``adopt`` (the order exists: reuse a process it has,
    else create one), ``resume`` (wait on the existing process, then download), ``skip`` (done
    before), ``skip-failed`` (failed before; ``--retry-failed`` creates a new process), or
    ``refuse`` (the process lives on another service: ``reason`` says what to do).
    """

    kind: str
    reason: str = ""


def _kept(path: Path) -> bool:
    """A result file that is there and not empty (no image is)."""
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def decide(
    record: Record | None, *, service: str, out_dir: Path, retry_failed: bool = False
) -> Action:
    """The next action for a job given its last record (pure apart from checking output files)."""
    if record is None:
        return Action("new")
    same = record.service == service
    gone = not same and record.service.startswith(EPHEMERAL_PREFIX)
    if record.stage == DONE:
        if record.outputs and all(_kept(out_dir / name) for name in record.outputs):
            return Action("skip")
        if same:
            return Action("resume", "result files missing: downloading them again")
        if gone:
            return Action("new", "the sandbox that made it has stopped")
        return Action(
            "refuse",
            f"its result files are missing and its process {record.process_id} is on "
            f"{record.service}; run against that service to download them again",
        )
    if record.stage == FAILED:
        return Action("new") if retry_failed else Action("skip-failed", record.error)
    if same:
        return Action("resume") if record.stage == CREATED else Action("adopt")
    if gone or record.stage == UPLOADED:
        return Action("new")
    return Action(
        "refuse",
        f"its process {record.process_id} was created on {record.service}; run against that "
        "service to collect it (a new process would be paid for twice)",
    )


@attrs.define
class _Run:
    """A job's run as the journal holds it: its entry (None until claimed when it starts anew)
    and the record its next line is written from."""

    record: Record
    entry: RunEntry | None


@attrs.define
class StateJournal:
    """The state file as the library's :class:`asyncsdk.Journal` of the jobs of one run on
    ``service``, so that a job goes through the library's step logic (``Client.run_steps``), that
    of keyed runs, and the file keeps its lines.

    The command decides each job's start from its last line (:func:`decide`) and tells it with
    :meth:`start`.  The lines map to the library's stages: ``uploaded`` is ``creating`` (the file
    records no ``creating`` step, so the creation may have been sent: its order is read before a
    process is created), ``created`` is ``created``, and ``done``/``failed`` are written at
    ``finished`` from the run's result (:func:`finished_result`).  ``intent`` and ``creating``
    are kept in memory only: nothing is paid for before the upload, and a photo at ``uploaded``
    is adopted already.  The lease is this run's alone: :meth:`StateFile.held_alone` keeps other
    runs off the folder.
    """

    state: StateFile
    service: str
    lease: float = 30.0
    _runs: dict[str, _Run] = attrs.Factory(dict)

    def start(self, key: PhotoKey, record: Record | None, action: Action) -> None:
        """Where the job of ``key`` starts: anew (``new``), from its order (``adopt``), or from
        its processes (``resume``), as ``record`` (its last line on this service) says."""
        if record is None or action.kind == "new":
            self._runs[key.digest] = _Run(Record.start(key, self.service), None)
            return
        stage: str = RunStage.CREATING
        ids: tuple[str, ...] = ()
        if action.kind == "resume":
            stage, ids = RunStage.CREATED, (record.process_id, *record.more_process_ids)
        entry = RunEntry(
            key=key.digest,
            digest="",  # the file keeps none: claim() takes the one given
            arguments=key.arguments,
            stage=stage,
            order_id=record.order_id,
            process_ids=ids,
        )
        self._runs[key.digest] = _Run(record, entry)

    def _run(self, key: str) -> _Run:
        run = self._runs.get(key)
        if run is None:
            raise JournalError(f"the job {key!r} was not started in {self.state.path}")
        return run

    async def claim(self, key: str, digest: str, arguments: str, owner: str) -> Claim:
        """The job's entry, held by ``owner``.  The file records no digest: a job's key is the
        digest of its photo, tool and widgets, so one key is one set of arguments."""
        run = self._run(key)
        entry = run.entry
        if entry is None:
            entry = RunEntry(key=key, digest=digest, arguments=arguments, stage=RunStage.INTENT)
        run.entry = attrs.evolve(entry, digest=digest, arguments=arguments, owner=owner)
        return Claim(run.entry, owned=True)

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
        """Record the job's next stage: a line for ``uploaded``, ``created`` and ``finished``
        (``request`` is not kept: the order gives it again)."""
        run = self._run(key)
        if run.entry is None or run.entry.owner != owner:
            raise JournalError(f"the job {key!r} is not held by {owner}")
        changes: dict[str, Any] = {"stage": stage}
        if stage == RunStage.UPLOADED and order_id is not None:
            run.record = run.record.step(UPLOADED, order_id=order_id)
            self.state.append(run.record)
            changes["order_id"] = order_id
        elif stage == RunStage.CREATED and process_ids:
            first, *more = process_ids
            run.record = run.record.step(CREATED, process_id=first, more_process_ids=more)
            self.state.append(run.record)
            changes["process_ids"] = process_ids
        elif stage == RunStage.FINISHED and result is not None:
            data = json.loads(result)
            run.record = run.record.step(
                data["stage"], outputs=tuple(data["outputs"]), error=data["error"]
            )
            self.state.append(run.record)
            changes["result"] = result
        run.entry = attrs.evolve(run.entry, **changes)

    async def renew(self, key: str, owner: str) -> bool:
        """True while ``owner`` holds the job (always, within this run)."""
        entry = self._run(key).entry
        return entry is not None and entry.owner == owner

    async def release(self, key: str, owner: str) -> None:
        """Nothing to give up: the file is this run's until it ends."""

    async def get(self, key: str) -> RunEntry | None:
        """The entry of a job started in this run, or None."""
        run = self._runs.get(key)
        return None if run is None else run.entry

    async def unfinished(self) -> list[RunEntry]:
        """The jobs of this run not finished."""
        return [
            run.entry
            for run in self._runs.values()
            if run.entry is not None and not run.entry.finished
        ]

    async def close(self) -> None:
        """Nothing to close: every line is written and synced as it is appended."""


def finished_result(stage: str, outputs: Sequence[str], error: str = "") -> str:
    """What a job's run records at ``finished``: the line's stage (``done`` or ``failed``), its
    result files and its error."""
    return _canonical({"stage": stage, "outputs": list(outputs), "error": error})
