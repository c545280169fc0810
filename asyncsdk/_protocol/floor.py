"""The poll floor: requests with the same key (a process id) at least ``interval`` seconds apart.

The service allows one ``GET /v3/process/:id`` per 5 seconds for each process, retries included.
The floor belongs to the process id, whichever code path sends the GET: the transport asks
:meth:`PollFloor.wait_time` before every attempt (after any retry delay, so the wait is the larger
of the two), :meth:`PollFloor.claim` when it sends, and :meth:`PollFloor.answered` when the
attempt ended.  The interval counts from the end of the last attempt, which comes after the
service saw it, so the service sees the GETs at least ``interval`` apart whatever the network
did.  No I/O: times are given.
"""

from __future__ import annotations

import math

import attrs

__all__ = ["PollFloor"]

#: Keys are forgotten once their floor has passed, in one sweep whenever the table has grown to
#: twice its size after the last sweep (at least this many), so a sweep costs O(1) per request.
_KEYS_KEPT = 1024


@attrs.define
class PollFloor:
    """The earliest time of the next attempt, per key (infinite while one is in flight)."""

    interval: float
    _next: dict[str, float] = attrs.field(factory=dict, init=False, repr=False)
    _sweep_at: int = attrs.field(default=_KEYS_KEPT, init=False, repr=False)

    def wait_time(self, key: str, now: float) -> float:
        """Seconds to wait before asking again (0.0: claim and send now).

        While an attempt for ``key`` is in flight the answer is ``interval``: ask again then.
        """
        start = self._next.get(key, now)
        if math.isinf(start):
            return self.interval
        return max(0.0, start - now)

    def claim(self, key: str) -> None:
        """An attempt for ``key`` is being sent: others wait until it has been answered."""
        self._next[key] = math.inf

    def answered(self, key: str, now: float) -> None:
        """The attempt for ``key`` ended now: the next one waits ``interval`` from here."""
        self._next[key] = now + self.interval
        if len(self._next) > self._sweep_at:
            self._next = {k: t for k, t in self._next.items() if t > now}
            self._sweep_at = max(_KEYS_KEPT, 2 * len(self._next))
