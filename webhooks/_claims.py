"""How many entries the worker pool's feeder claims at a time, from the pace of its workers.

While the inbox has a backlog the feeder claims entries in reserve beyond the free workers, so
that a worker that finishes starts the next entry at once and claims come in batches: as many
as the workers finish, at their recent pace, during one claim's round trip; at least
``workers`` (slow handlers take no more from other processes than that), at most
``workers * BURST`` (what they run in one turn of the event loop).
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["BURST", "ClaimSize"]

BURST: Final = 16
"""Entries a worker runs back to back without suspending before it yields to the event loop."""
_PACE_WEIGHT: Final = 0.05
"""Weight of the latest entry in the moving average of the time per entry."""


@attrs.define(eq=False)
class ClaimSize:
    """The reserve and the low-water mark of one pool of ``workers``."""

    workers: int
    pace: float = attrs.field(default=0.0, init=False)
    """Seconds a worker spends on an entry, as a moving average (0 until one finishes)."""
    claim_time: float = attrs.field(default=0.0, init=False)
    """Seconds the last claim took, answer included."""
    low_water: int = attrs.field(default=0, init=False)
    """Claimed entries left waiting below which a worker asks the feeder for more."""

    def finished(self, took: float) -> None:
        """A worker finished an entry in ``took`` seconds."""
        self.pace = took if self.pace <= 0.0 else self.pace + (took - self.pace) * _PACE_WEIGHT

    def reserve(self, backlog: bool) -> int:
        """Entries to claim beyond the free workers (none without a ``backlog``); sets the
        low-water mark to half of it, at least ``workers``."""
        reserve = 0
        if backlog:
            reserve = self.workers
            if self.pace > 0.0:
                wanted = int(self.workers * self.claim_time / self.pace)
                reserve = max(self.workers, min(wanted, self.workers * BURST))
        self.low_water = max(self.workers, reserve // 2)
        return reserve
