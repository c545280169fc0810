"""Acknowledged entries a failover lost: each node remembers the ids of the entries it answered
2xx lately, and looks for them when the server it reaches is another one.

With asynchronous replication a standby promoted after its primary died lacks the last commits
the primary acknowledged.  Every new connection of the inbox's pool reads the server's start
time (``pg_postmaster_start_time()``); when it differs from the one seen before (a promoted
standby, or a restart), the ids answered in the last ``WINDOW`` seconds are looked up, and those
that are gone are logged in one error line and counted in the inbox's ``counts`` table, which
``stats()`` reads on any node.  Each node counts only what it answered, so each loss is counted
once.  A restart that lost nothing (synchronous commits survive a crash) finds nothing.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable
from typing import Final

__all__ = ["WINDOW", "AnsweredWindow", "loss_line"]

WINDOW: Final = 120.0
"""Seconds an answered id is remembered: far longer than a standby's lag."""
_MAX_REMEMBERED: Final = 200_000
"""A bound on memory, whatever the rate of deliveries (4 MB or so of ids and times)."""


class AnsweredWindow:
    """The ids of the entries this node answered 2xx in the last ``WINDOW`` seconds, and the
    start time of the server it last reached."""

    def __init__(self) -> None:
        self._answered: collections.deque[tuple[float, int]] = collections.deque(
            maxlen=_MAX_REMEMBERED
        )
        self._server: object = None

    def note(self, ids: Iterable[int]) -> None:
        now = time.monotonic()
        self._answered.extend((now, entry_id) for entry_id in ids)
        while self._answered and self._answered[0][0] < now - WINDOW:
            self._answered.popleft()

    def server_seen(self, started: object) -> bool:
        """Note the start time of the server a new connection reached; whether it is another
        server than the one seen before (never for the first)."""
        changed = self._server is not None and started != self._server
        self._server = started
        return changed

    def recent(self) -> list[int]:
        now = time.monotonic()
        return [entry_id for at, entry_id in self._answered if at >= now - WINDOW]

    def forget(self, ids: Iterable[int]) -> None:
        gone = set(ids)
        kept = [(at, entry_id) for at, entry_id in self._answered if entry_id not in gone]
        self._answered.clear()
        self._answered.extend(kept)


def loss_line(lost: int, where: str, schema: str) -> str:
    """The error a node logs when entries it answered 2xx are gone from the server."""
    return (
        f"PostgreSQL at {where} lost {lost} acknowledged deliver{'y' if lost == 1 else 'ies'} of"
        f" the inbox in schema {schema!r}: the server now reached is another one (a standby"
        " promoted before it had received them, with asynchronous replication).  Those not"
        " handled yet will not be (their senders were answered 2xx and will not send them"
        " again); those handled already lost their dedup keys, so a retry of one is handled"
        " again.  Counted in 'asyncsdk inbox stats'; synchronous replication"
        " (synchronous_standby_names, synchronous_commit on) answers only once a standby has"
        " each commit"
    )
