"""The in-memory waiter registry: coroutines await a process, the receiver resolves it.

::

    client / app code                 receiver worker
    -----------------                 ---------------
    await registry.wait(pid) ───┐     await registry.resolve(event)
                                └───────────── wakes every waiter of event.process_id

:class:`Registry` implements both halves: :class:`asyncsdk.ResultWaiter` (``healthy`` and
``wait``) for the client, and the receiver's sink (``resolve`` and ``set_healthy``).

Guarantees
----------
* Every waiter of a process id gets the event as soon as ``resolve`` is called for it.
* An event is kept for ``keep_for`` seconds (at most ``max_kept`` events, oldest dropped first),
  so a ``wait`` that starts after the event landed returns at once.
* The first event for a process id wins: while it is kept, later events for the same id (the
  service's duplicate deliveries) change nothing.
* Cancelling one waiter leaves the others alone; a waiter that times out or is cancelled removes
  itself, and an id whose last waiter left is dropped.  Nothing outlives its use.
* ``close`` fails every pending waiter with :class:`RegistryClosedError`; waits after that raise at
  once and events are ignored.

Each waiter costs one future and, when it has a timeout, one timer handle of the event loop: no
task, no lock.  Kept events expire in arrival order on one timer that runs at most once a second.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections import deque
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Final, Self

import attrs

from asyncsdk import ConfigurationError, ProcessCompleted, WaitTimeoutError
from webhooks._checks import non_negative_int, non_negative_seconds
from webhooks._errors import RegistryClosedError

__all__ = [
    "DEFAULT_KEEP_FOR",
    "DEFAULT_MAX_KEPT",
    "Registry",
    "RegistryStats",
]

DEFAULT_KEEP_FOR: Final = 300.0
"""Seconds an event stays available to waiters that start after it landed."""

DEFAULT_MAX_KEPT: Final = 100_000
"""Most events kept at once; past it the oldest is dropped first."""

_SWEEP_GRANULARITY: Final = 1.0
"""Kept events are swept at most once per this many seconds (or per ``keep_for`` if shorter)."""

# A waiter's future: the event, or None when its timer ran out first.
_Waiter = asyncio.Future[ProcessCompleted | None]
# A kept event: (deadline on the loop's clock, process id, event).
_Kept = tuple[float, str, ProcessCompleted]


@attrs.frozen(kw_only=True)
class RegistryStats:
    """A snapshot of what a registry holds."""

    pending_waiters: int
    """Coroutines currently inside ``wait``."""
    pending_ids: int
    """Distinct process ids those waiters wait for."""
    kept_events: int
    """Events kept for waiters that have not started yet (expired ones may linger up to 1 s)."""


def check_process_id(process_id: object) -> str:
    """Return ``process_id`` if it is a non-empty str, else raise ConfigurationError."""
    if not isinstance(process_id, str) or not process_id:
        raise ConfigurationError(
            f"process_id must be a non-empty str (the id the service returned), not {process_id!r}"
        )
    return process_id


def check_timeout(timeout: object) -> float | None:
    """Return ``timeout`` if it is None or a finite number of seconds >= 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or math.isnan(timeout):
        raise ConfigurationError(f"timeout must be None or a number of seconds, not {timeout!r}")
    if timeout < 0:
        raise ConfigurationError(f"timeout must be 0 or more seconds, not {timeout!r}")
    return None if math.isinf(timeout) else timeout


def _time_out(fut: _Waiter) -> None:
    if not fut.done():
        fut.set_result(None)


def _futures(entry: _Waiter | set[_Waiter]) -> Iterable[_Waiter]:
    return entry if isinstance(entry, set) else (entry,)


@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class Registry:
    """Coroutines wait for a process's ``process.completed`` event; the receiver resolves it.

    ::

        registry = Registry()
        receiver = ...(registry=registry)          # calls resolve() and set_healthy()
        event = await registry.wait(process_id, timeout=600)

    Safe to create outside a running event loop; use it from one loop only.
    """

    keep_for: float = attrs.field(
        default=DEFAULT_KEEP_FOR,
        validator=non_negative_seconds,
        kw_only=True,
        on_setattr=attrs.setters.validate,
    )
    """Seconds an event stays available to later waiters (``0`` keeps nothing)."""
    max_kept: int = attrs.field(
        default=DEFAULT_MAX_KEPT,
        validator=non_negative_int,
        kw_only=True,
        on_setattr=attrs.setters.validate,
    )
    """Most events kept at once; the oldest are dropped first."""
    _healthy: bool = attrs.field(default=False, kw_only=True, alias="healthy")
    _waiters: dict[str, _Waiter | set[_Waiter]] = attrs.field(factory=dict, init=False)
    _pending: int = attrs.field(default=0, init=False)
    # Kept events by process id, and the same items in arrival (= expiry) order.  An item in the
    # queue whose id maps to another item (or none) is stale and skipped when it reaches the front.
    _kept: dict[str, _Kept] = attrs.field(factory=dict, init=False)
    _kept_order: deque[_Kept] = attrs.field(factory=deque, init=False)
    _sweeper: asyncio.TimerHandle | None = attrs.field(default=None, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    # Timer callbacks need no context variables; sharing one context saves a copy per waiter.
    _timer_context: contextvars.Context = attrs.field(factory=contextvars.Context, init=False)
    on_first_waiter: Callable[[str], None] | None = attrs.field(default=None, kw_only=True)
    """Called with a process id when it gets its first waiter, after that waiter is enrolled (so
    whatever it starts may resolve it); :class:`~webhooks.RedisRegistry` reads the result key."""

    # -- ResultWaiter -------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """True while a receiver feeds this registry (see :meth:`set_healthy`) and it is open."""
        return self._healthy and not self._closed

    async def wait(self, process_id: str, *, timeout: float | None = None) -> ProcessCompleted:
        """Return the event of ``process_id`` as soon as it lands, or at once if it is kept.

        Raises :class:`~asyncsdk.WaitTimeoutError` (a ``TimeoutError``) when ``timeout`` seconds
        pass first, and :class:`RegistryClosedError` when the registry is or gets closed.
        """
        timeout = check_timeout(timeout)
        found = self._enroll(check_process_id(process_id))
        if isinstance(found, ProcessCompleted):
            return found
        # Inlined on purpose: a helper coroutine would add a frame (~250 bytes) to every waiter.
        timer = None
        if timeout is not None:
            timer = asyncio.get_running_loop().call_later(
                timeout, _time_out, found, context=self._timer_context
            )
        try:
            result = await found
        finally:
            if timer is not None:
                timer.cancel()
            self._discard(process_id, found)
        if result is None:
            raise WaitTimeoutError(
                f"no process.completed event for process {process_id!r} within {timeout} s;"
                " the process may still finish: wait again or poll it",
                process_id=process_id,
            )
        return result

    # -- sink ---------------------------------------------------------------------------------

    def set_healthy(self, healthy: bool) -> None:
        """Record whether a receiver feeds this registry; waiters' callers poll while it is not."""
        self._healthy = bool(healthy)

    async def resolve(self, event: ProcessCompleted) -> None:
        """Wake every waiter of ``event.process_id`` and keep the event for later waiters."""
        self.resolve_nowait(event)

    def resolve_nowait(self, event: ProcessCompleted) -> int:
        """:meth:`resolve` for synchronous code in the event loop; returns the waiters woken.

        The first event of a process id wins while it is kept; after :meth:`close` events are
        ignored.
        """
        if self._closed:
            return 0
        process_id = event.process_id
        self._keep(process_id, event)
        entry = self._waiters.pop(process_id, None)
        if entry is None:
            return 0
        if not self._waiters:
            self._waiters = {}  # see _discard
        if not isinstance(entry, set):  # one waiter: the common case
            self._pending -= 1
            if entry.done():
                return 0
            entry.set_result(event)
            return 1
        woken = 0
        self._pending -= len(entry)
        for fut in entry:
            if not fut.done():
                fut.set_result(event)
                woken += 1
        return woken

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    async def close(self) -> None:
        """Fail every pending waiter with :class:`RegistryClosedError` and drop kept events.

        Idempotent.  Waits started after this raise at once.
        """
        if self._closed:
            return
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        self._kept.clear()
        self._kept_order.clear()
        waiters, self._waiters, self._pending = self._waiters, {}, 0
        for process_id, entry in waiters.items():
            for fut in _futures(entry):
                if not fut.done():
                    fut.set_exception(_closed_error(process_id))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- introspection ------------------------------------------------------------------------

    @property
    def pending_count(self) -> int:
        """Coroutines currently inside :meth:`wait`."""
        return self._pending

    @property
    def stats(self) -> RegistryStats:
        """Waiters, the process ids they wait on, and the events kept for late waiters."""
        return RegistryStats(
            pending_waiters=self._pending,
            pending_ids=len(self._waiters),
            kept_events=len(self._kept),
        )

    def pending_ids(self) -> list[str]:
        """The process ids that have at least one waiter, oldest first."""
        return list(self._waiters)

    def is_pending(self, process_id: str) -> bool:
        """True while at least one coroutine waits for ``process_id``."""
        return process_id in self._waiters

    # -- internals ------------------------------------------------------------------------------

    def _enroll(self, process_id: str) -> ProcessCompleted | _Waiter:
        """Return the kept event, or a future that ``resolve`` will complete (already enrolled)."""
        if self._closed:
            raise _closed_error(process_id)
        loop = asyncio.get_running_loop()
        kept = self._kept.get(process_id)
        if kept is not None:
            if kept[0] > loop.time():
                return kept[2]
            del self._kept[process_id]
        fut: _Waiter = loop.create_future()
        entry = self._waiters.get(process_id)
        if entry is None:
            self._waiters[process_id] = fut
            if self.on_first_waiter is not None:
                self.on_first_waiter(process_id)
        elif isinstance(entry, set):
            entry.add(fut)
        else:
            self._waiters[process_id] = {entry, fut}
        self._pending += 1
        return fut

    def _discard(self, process_id: str, fut: _Waiter) -> None:
        entry = self._waiters.get(process_id)
        if entry is fut:
            del self._waiters[process_id]
        elif isinstance(entry, set) and fut in entry:
            entry.remove(fut)
            if not entry:
                del self._waiters[process_id]
        else:
            return  # already taken out by resolve or close
        self._pending -= 1
        if not self._waiters:
            # A dict never shrinks its table; start afresh so a burst's memory is given back.
            self._waiters = {}

    # -- kept events --------------------------------------------------------------------------

    def _keep(self, process_id: str, event: ProcessCompleted) -> None:
        if self.keep_for <= 0 or self.max_kept <= 0:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        kept = self._kept.get(process_id)
        if kept is not None and kept[0] > now:
            return  # the first event wins
        item = (now + self.keep_for, process_id, event)
        self._kept[process_id] = item
        self._kept_order.append(item)
        while len(self._kept) > self.max_kept:
            self._drop_oldest()
        if self._sweeper is None:
            self._sweeper = loop.call_at(item[0] + self._sweep_lag(), self._sweep)

    def _sweep_lag(self) -> float:
        # Batch expiries: sweep at most once per second, sooner for short keep_for values.
        return min(_SWEEP_GRANULARITY, self.keep_for)

    def _drop_oldest(self) -> None:
        item = self._kept_order.popleft()
        if self._kept.get(item[1]) is item:
            del self._kept[item[1]]

    def _sweep(self) -> None:
        self._sweeper = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        order = self._kept_order
        while order:
            deadline = order[0][0]
            if deadline > now:
                self._sweeper = loop.call_at(deadline + self._sweep_lag(), self._sweep)
                return
            self._drop_oldest()
        self._kept = {}  # all expired: give the table's memory back


def _closed_error(process_id: str) -> RegistryClosedError:
    return RegistryClosedError(
        f"the registry was closed while waiting for process {process_id!r};"
        " poll the process instead, or wait on a registry that is open"
    )
