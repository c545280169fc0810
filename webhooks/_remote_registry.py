""":class:`RemoteRegistry`: what a waiter registry shared through a store (Redis, PostgreSQL) does
the same on every store.

::

    wait(pid) ─ enrolls in the local Registry ─ first waiter of pid ─► read task ─ _read(ids) ─┐
    listen task ─ _listen(connected): one subscription ─ (re)made ─► re-read every pending id   │
                                     └─ a message ───────────────────────────────► _deliver ◄───┘
                                                                           wakes the local waiters

The base class holds this process's waiters (a local :class:`~webhooks.Registry`), the listening
task with its reconnect loop, the read task with its batches of ids, how both stop at close, and
the whole public API but ``resolve``.  A store's registry subclasses it, calls
:meth:`RemoteRegistry._setup` once its own fields are set, and gives it its own words
(:class:`Wording`) and four methods:

* ``_listen(connected)``: hold one subscription until it is lost, then raise; call ``connected()``
  each time the subscription is made (again), which re-reads every id still waited for, so no
  result stored while it was down is missed.
* ``_read(ids)``: read the stored results of ``ids`` (never empty), handing each to
  :meth:`RemoteRegistry._deliver`.
* ``_release()``: release the store's connections, once both tasks have stopped.
* ``_unreachable(timeout)``: the message of :meth:`RemoteRegistry.start`'s error.

The store's registry keeps its commands, its connections and ``resolve``.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Final, Self

import attrs

from asyncsdk import ConfigurationError
from webhooks._cancelling import stopped_from_outside
from webhooks._codec import decode_process_event
from webhooks._errors import RegistryClosedError, RegistryUnavailableError
from webhooks._registry import Registry, RegistryStats

if TYPE_CHECKING:
    from asyncsdk import ProcessCompleted

__all__ = ["RemoteRegistry", "Wording"]

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


@attrs.define(eq=False, repr=False)
class RemoteRegistry(abc.ABC):
    """The waiters of this process on a registry shared through a store; subclassed per store.

    Same API as :class:`~webhooks.Registry`: ``wait`` (the client's ``ResultWaiter``), ``resolve``
    and ``set_healthy`` (the receiver's sink), ``close`` / ``async with``.  Safe to create outside
    a running event loop: the tasks start with the first ``wait``, a ``set_healthy(True)`` in a
    running loop, or ``start``.
    """

    _WORDING: ClassVar[Wording]
    _scope: str = attrs.field(init=False)
    """The prefix or schema, ending the tasks' names."""
    _channel: str = attrs.field(init=False)
    """Where results are announced, as the warnings name it."""
    _source: str = attrs.field(init=False)
    """Where undecodable payloads come from, as their warning names it."""
    _local: Registry = attrs.field(init=False)
    """This process's waiters, and the events heard or read lately; :meth:`_deliver` feeds it."""
    _tasks: list[asyncio.Task[None]] = attrs.field(factory=list, init=False)
    _live: asyncio.Event | None = attrs.field(default=None, init=False)
    _refused: ConfigurationError | None = attrs.field(default=None, init=False)
    """Why the store refused to let the registry listen (a wrong password), until it listens."""
    _answered: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    """Set when listening is live, or when the store refused the registry's configuration."""
    _to_read: set[str] = attrs.field(factory=set, init=False)
    _read_wanted: asyncio.Event | None = attrs.field(default=None, init=False)
    _listen_backoff: _Backoff = attrs.field(factory=_Backoff, init=False)
    _fed: bool = attrs.field(default=True, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    _subscriptions: int = attrs.field(default=0, init=False)

    def _setup(self, *, keep_for: float, scope: str, channel: str, source: str) -> None:
        """Called by the store's ``__attrs_post_init__`` once its own fields are set."""
        self._scope, self._channel, self._source = scope, channel, source
        self._local = Registry(
            keep_for=min(_LOCAL_KEEP_FOR, keep_for),
            healthy=True,
            on_first_waiter=self._want_read,
        )

    # -- the store's part ---------------------------------------------------------------------

    @abc.abstractmethod
    async def resolve(self, event: ProcessCompleted) -> None:
        """Store the event under its process id (first wins) and announce it to every instance.

        Raises :class:`~webhooks.RegistryUnavailableError` when the store cannot be reached, so
        the receiver retries the event later.
        """

    @abc.abstractmethod
    async def _listen(self, connected: Callable[[], None]) -> None:
        """Hold one subscription until it is lost, calling ``connected`` each time it is made."""

    @abc.abstractmethod
    async def _read(self, ids: list[str]) -> None:
        """Read the stored results of ``ids``, handing each to :meth:`_deliver`."""

    @abc.abstractmethod
    async def _release(self) -> None:
        """Release the store's connections; both tasks have stopped."""

    @abc.abstractmethod
    def _unreachable(self, timeout: float) -> str:
        """The message of the error :meth:`start` raises when listening is not live in time."""

    # -- ResultWaiter -------------------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """True while listening is live, the registry open, and no receiver of this process has
        reported itself stopped (``set_healthy(False)``)."""
        return not self._closed and self._fed and self._live is not None and self._live.is_set()

    async def wait(self, process_id: str, *, timeout: float | None = None) -> ProcessCompleted:
        """Return the event of ``process_id`` as soon as any process resolves it.

        Raises :class:`~asyncsdk.WaitTimeoutError` (a ``TimeoutError``) when ``timeout`` passes
        first and :class:`~webhooks.RegistryClosedError` when the registry is or gets closed.
        The store being briefly unreachable does not fail a wait: results are re-read when
        listening is live again.
        """
        if self._closed:
            raise RegistryClosedError(
                f"the registry was closed; cannot wait for process {process_id!r}"
            )
        self._ensure_started()
        return await self._local.wait(process_id, timeout=timeout)

    # -- sink ---------------------------------------------------------------------------------

    def set_healthy(self, healthy: bool) -> None:
        """Record whether the receiver of this process runs; starts listening if it does."""
        self._fed = bool(healthy)
        if healthy:
            with contextlib.suppress(RuntimeError):  # no running loop: start() or wait() will
                self._ensure_started()

    def _check_can_resolve(self, event: ProcessCompleted) -> None:
        """Raise :class:`RegistryClosedError` if the registry was closed."""
        if self._closed:
            raise RegistryClosedError(
                f"the registry was closed; cannot publish the event of {event.process_id!r}"
            )

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self, *, timeout: float = 10.0) -> None:
        """Listen now and wait until listening is live.

        Raises :class:`~webhooks.RegistryUnavailableError` (after closing the registry) if the
        store does not answer within ``timeout`` seconds.
        """
        if self._closed:
            raise RegistryClosedError("the registry was closed; create a new one")
        self._ensure_started()
        try:
            async with asyncio.timeout(timeout):
                await self._answered.wait()
        except TimeoutError:
            await self.close()
            raise RegistryUnavailableError(self._unreachable(timeout)) from None
        if self._refused is not None:
            await self.close()
            raise self._refused

    async def close(self) -> None:
        """Stop listening, fail pending waiters with RegistryClosedError, release connections;
        idempotent."""
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
                self._WORDING.logger.warning(
                    "%d %s registry task(s) did not stop in time", len(stuck), self._WORDING.store
                )
        await self._local.close()
        await self._release()

    async def __aenter__(self) -> Self:
        await self.start()
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
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @property
    def pending_count(self) -> int:
        """Coroutines of this process currently inside :meth:`wait`."""
        return self._local.pending_count

    @property
    def stats(self) -> RegistryStats:
        """What this process holds in memory (events heard or read lately are kept a few
        seconds)."""
        return self._local.stats

    @property
    def subscriptions(self) -> int:
        """How many times listening was made live (1 + the reconnects so far)."""
        return self._subscriptions

    # -- what the store's hooks call ----------------------------------------------------------

    def _heard_of(self, process_id: str) -> None:
        """The store announced a result of ``process_id``: read it if a waiter here wants it."""
        if self._local.is_pending(process_id):
            self._want_read(process_id)

    def _deliver(self, payload: object) -> None:
        """Wake the waiters of the event stored as ``payload`` (a payload that is not one is
        logged and dropped)."""
        if not isinstance(payload, bytes | str):
            return
        try:
            event = decode_process_event(payload)
        except Exception:  # anything else in the store: a decode error of any kind
            self._WORDING.logger.warning(self._WORDING.undecodable, self._source, exc_info=True)
            return
        self._local.resolve_nowait(event)

    # -- the two tasks ------------------------------------------------------------------------

    def _ensure_started(self) -> asyncio.Event:
        if self._live is None or self._read_wanted is None:
            self._live = asyncio.Event()
            self._read_wanted = asyncio.Event()
            if self._to_read:
                self._read_wanted.set()
            name = self._WORDING.tasks
            self._tasks = [
                asyncio.create_task(self._listen_again(), name=f"{name}-listen {self._scope}"),
                asyncio.create_task(self._read_batches(), name=f"{name}-read {self._scope}"),
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
        self._refused = None
        self._live.set()
        self._answered.set()
        self._listen_backoff.reset()
        for process_id in self._local.pending_ids():
            self._want_read(process_id)

    async def _listen_again(self) -> None:
        """Listen through the store's hook, and listen again after a pause when it is lost."""
        assert self._live is not None
        backoff = self._listen_backoff
        while True:
            if stopped_from_outside():  # a driver swallowed close()'s cancel (see StoreReading)
                raise asyncio.CancelledError
            try:
                await self._listen(self._connected)
            except RegistryClosedError:
                return  # closed while the store's connections were being opened
            except ConfigurationError as exc:  # a wrong password: start() refuses, waits retry
                self._live.clear()
                if self._refused is None:
                    said = "%s; listening again in %.2f s"
                    self._WORDING.logger.error(said, exc, backoff.seconds)
                self._refused = exc
                self._answered.set()
                await backoff.sleep()
            except Exception as exc:  # drivers raise many types; all mean "listen again"
                if stopped_from_outside():  # ... or answered it with an error of its own
                    raise asyncio.CancelledError from exc
                self._live.clear()
                # Never live yet, nothing was lost: say so, not "lost".
                said = self._WORDING.lost if self._subscriptions else self._not_yet
                self._WORDING.logger.warning(said, self._channel, exc, backoff.seconds)
                await backoff.sleep()

    @property
    def _not_yet(self) -> str:
        """The warning when listening fails before it was ever live (arguments as ``lost``)."""
        return f"cannot listen on %s on {self._WORDING.store} yet (%r); trying again in %.2f s"

    async def _read_batches(self) -> None:
        """Read the results of newly pending ids in batches, through the store's hook."""
        assert self._read_wanted is not None
        backoff = _Backoff()
        while True:
            if stopped_from_outside():  # as in _listen_again
                raise asyncio.CancelledError
            await self._read_wanted.wait()
            self._read_wanted.clear()
            wanted, self._to_read = self._to_read, set()
            ids = [pid for pid in wanted if self._local.is_pending(pid)]
            try:
                if ids:
                    await self._read(ids)
            except RegistryClosedError:
                return  # closed while the store's connections were being opened
            except Exception as exc:  # see _listen; the ids are read again after a pause
                if stopped_from_outside():  # as in _listen_again
                    raise asyncio.CancelledError from exc
                self._to_read.update(ids)
                self._WORDING.logger.warning(
                    "reading results failed (%r); again in %.2f s", exc, backoff.seconds
                )
                await backoff.sleep()
                self._read_wanted.set()
            else:
                backoff.reset()
