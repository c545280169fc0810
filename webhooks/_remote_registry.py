"""What a waiter registry shared through a store does the same on every store (Redis, PostgreSQL).

::

    wait(pid) ─ enrolls in the local Registry ─ first waiter of pid ─► read task ─ read(ids) ──┐
    listen task ─ listen(connected): one subscription ─ (re)made ─► re-read every pending id   │
                                     └─ a message ───────────────────────────────► deliver ◄───┘
                                                                           wakes the local waiters

:class:`RemoteWaiters` holds this process's waiters (a local :class:`~webhooks.Registry`), the
listening task with its reconnect loop, the read task with its batches of ids, and how both stop
at close.  The store's registry gives it two hooks and its own words (:class:`Wording`):

* ``listen(connected)``: hold one subscription until it is lost, then raise; call ``connected()``
  each time the subscription is made (again), which re-reads every id still waited for, so no
  result stored while it was down is missed.
* ``read(ids)``: read the stored results of ``ids`` (never empty), handing each to
  :meth:`RemoteWaiters.deliver`.

The store's registry keeps its commands, its connections and ``resolve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

import attrs

from webhooks._codec import decode_event
from webhooks._errors import RegistryClosedError
from webhooks._registry import Registry

if TYPE_CHECKING:
    from asyncsdk import ProcessCompleted

__all__ = ["RemoteWaiters", "Wording"]

_LOCAL_KEEP_FOR: Final = 30.0
"""Seconds an event heard or read is kept in memory (covers a wait racing a read)."""
_FIRST_BACKOFF: Final = 0.05
_MAX_BACKOFF: Final = 5.0
_CLOSE_TIMEOUT: Final = 5.0
"""Seconds close() waits for the tasks to stop before moving on."""


@attrs.frozen(kw_only=True)
class Wording:
    """How one store's registry names its tasks and words its warnings."""

    logger: logging.Logger
    tasks: str
    """The tasks are named ``<tasks>-listen <scope>`` and ``<tasks>-read <scope>``."""
    store: str
    """The store's name in "<n> <store> registry task(s) did not stop in time"."""
    lost: str
    """The warning when listening is lost; its %-arguments: channel, exception, seconds."""
    undecodable: str
    """The warning of a payload that does not decode; its %-argument: ``source``."""


@attrs.define(eq=False)
class _Backoff:
    """The pause before trying again: doubled after each failure, reset by a success."""

    seconds: float = _FIRST_BACKOFF

    def reset(self) -> None:
        self.seconds = _FIRST_BACKOFF

    async def sleep(self) -> None:
        await asyncio.sleep(self.seconds)
        self.seconds = min(self.seconds * 2, _MAX_BACKOFF)


@attrs.define(eq=False, kw_only=True)
class RemoteWaiters:
    """This process's waiters on a shared registry, the task that listens and the one that reads.

    Safe to create outside a running event loop: the tasks start with the first ``wait``, a
    ``set_healthy(True)`` in a running loop, or ``until_live``.
    """

    wording: Wording = attrs.field(repr=False)
    keep_for: float
    """Seconds the store keeps a result; events are kept here for at most 30 of them."""
    scope: str
    """The prefix or schema, ending the tasks' names."""
    channel: str
    """Where results are announced, as the warnings name it."""
    source: str
    """Where undecodable payloads come from, as their warning names it."""
    listen: Callable[[Callable[[], None]], Awaitable[None]] = attrs.field(repr=False)
    """Hold one subscription until it is lost, calling its argument each time it is (re)made."""
    read: Callable[[list[str]], Awaitable[None]] = attrs.field(repr=False)
    """Read the stored results of these ids, handing each to :meth:`deliver`."""
    local: Registry = attrs.field(init=False)
    """This process's waiters, and the events heard or read lately; :meth:`deliver` feeds it."""
    _tasks: list[asyncio.Task[None]] = attrs.field(factory=list, init=False)
    _live: asyncio.Event | None = attrs.field(default=None, init=False)
    _to_read: set[str] = attrs.field(factory=set, init=False)
    _read_wanted: asyncio.Event | None = attrs.field(default=None, init=False)
    _listen_backoff: _Backoff = attrs.field(factory=_Backoff, init=False)
    _fed: bool = attrs.field(default=True, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _subscriptions: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        self.local = Registry(
            keep_for=min(_LOCAL_KEEP_FOR, self.keep_for),
            healthy=True,
            on_first_waiter=self._want_read,
        )

    # -- what the registry's public methods do ------------------------------------------------

    @property
    def healthy(self) -> bool:
        """Listening is live, the registry open, and this process's receiver has not stopped."""
        return not self._closed and self._fed and self._live is not None and self._live.is_set()

    async def wait(self, process_id: str, timeout: float | None) -> ProcessCompleted:
        if self._closed:
            raise RegistryClosedError(
                f"the registry was closed; cannot wait for process {process_id!r}"
            )
        self._ensure_started()
        return await self.local.wait(process_id, timeout=timeout)

    def set_healthy(self, healthy: bool) -> None:
        self._fed = bool(healthy)
        if healthy:
            with contextlib.suppress(RuntimeError):  # no running loop: start() or wait() will
                self._ensure_started()

    def check_can_resolve(self, event: ProcessCompleted) -> None:
        """Raise :class:`RegistryClosedError` if the registry was closed."""
        if self._closed:
            raise RegistryClosedError(
                f"the registry was closed; cannot publish the event of {event.process_id!r}"
            )

    async def until_live(self, timeout: float) -> bool:
        """Start listening; False if listening is not live within ``timeout`` seconds."""
        if self._closed:
            raise RegistryClosedError("the registry was closed; create a new one")
        live = self._ensure_started()
        try:
            async with asyncio.timeout(timeout):
                await live.wait()
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stop both tasks (waiting a bounded time) and fail the pending waiters; idempotent.

        The store's connections are the registry's to release afterwards.
        """
        if self._closed:
            return
        self._closed = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            # Bounded: a driver call that ignores cancellation must not hang the shutdown.
            _, stuck = await asyncio.wait(tasks, timeout=_CLOSE_TIMEOUT)
            if stuck:
                self.wording.logger.warning(
                    "%d %s registry task(s) did not stop in time", len(stuck), self.wording.store
                )
        await self.local.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def subscriptions(self) -> int:
        """How many times listening was made live (1 + the reconnects so far)."""
        return self._subscriptions

    # -- what the store's hooks call ----------------------------------------------------------

    def heard_of(self, process_id: str) -> None:
        """The store announced a result of ``process_id``: read it if a waiter here wants it."""
        if self.local.is_pending(process_id):
            self._want_read(process_id)

    def deliver(self, payload: object) -> None:
        """Wake the waiters of the event stored as ``payload`` (a payload that is not one is
        logged and dropped)."""
        if not isinstance(payload, bytes | str):
            return
        try:
            event = decode_event(payload)
        except Exception:  # anything else in the store: a decode error of any kind
            self.wording.logger.warning(self.wording.undecodable, self.source, exc_info=True)
            return
        self.local.resolve_nowait(event)

    # -- the two tasks ------------------------------------------------------------------------

    def _ensure_started(self) -> asyncio.Event:
        if self._live is None or self._read_wanted is None:
            self._live = asyncio.Event()
            self._read_wanted = asyncio.Event()
            if self._to_read:
                self._read_wanted.set()
            name = self.wording.tasks
            self._tasks = [
                asyncio.create_task(self._listen(), name=f"{name}-listen {self.scope}"),
                asyncio.create_task(self._read(), name=f"{name}-read {self.scope}"),
            ]
        return self._live

    def _want_read(self, process_id: str) -> None:
        self._to_read.add(process_id)
        if self._read_wanted is not None:
            self._read_wanted.set()

    def _connected(self) -> None:
        """Listening is live (again): re-read every id still waited for."""
        assert self._live is not None
        self._subscriptions += 1
        self._live.set()
        self._listen_backoff.reset()
        for process_id in self.local.pending_ids():
            self._want_read(process_id)

    async def _listen(self) -> None:
        """Listen through the store's hook, and listen again after a pause when it is lost."""
        assert self._live is not None
        backoff = self._listen_backoff
        while True:
            try:
                await self.listen(self._connected)
            except RegistryClosedError:
                return  # closed while the store's connections were being opened
            except Exception as exc:  # drivers raise many types; all mean "listen again"
                self._live.clear()
                # Never live yet, nothing was lost: say so, not "lost".
                said = self.wording.lost if self._subscriptions else self._not_yet
                self.wording.logger.warning(said, self.channel, exc, backoff.seconds)
                await backoff.sleep()

    @property
    def _not_yet(self) -> str:
        """The warning when listening fails before it was ever live (arguments as ``lost``)."""
        return f"cannot listen on %s on {self.wording.store} yet (%r); trying again in %.2f s"

    async def _read(self) -> None:
        """Read the results of newly pending ids in batches, through the store's hook."""
        assert self._read_wanted is not None
        backoff = _Backoff()
        while True:
            await self._read_wanted.wait()
            self._read_wanted.clear()
            wanted, self._to_read = self._to_read, set()
            ids = [pid for pid in wanted if self.local.is_pending(pid)]
            try:
                if ids:
                    await self.read(ids)
            except RegistryClosedError:
                return  # closed while the store's connections were being opened
            except Exception as exc:  # see _listen; the ids are read again after a pause
                self._to_read.update(ids)
                self.wording.logger.warning(
                    "reading results failed (%r); again in %.2f s", exc, backoff.seconds
                )
                await backoff.sleep()
                self._read_wanted.set()
            else:
                backoff.reset()
