"""What operators ask of an inbox: how deep and how old it is, and what to do with dead letters.

Every inbox of this package keeps :class:`InspectableInbox`: ``stats()`` here, and the
:class:`~webhooks.Inbox` contract's ``dead_letters``/``replay``, plus ``purge`` to drop a dead
letter for good.  ``asyncsdk inbox stats|dead|replay|purge`` runs them from the command line.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import attrs

from webhooks._contract import Inbox

__all__ = ["InboxStats", "InspectableInbox"]


@attrs.frozen(kw_only=True)
class InboxStats:
    """A look at the whole shared inbox."""

    depth: int
    """Unfinished entries: due, delayed or running (what backpressure counts)."""
    oldest_age: float | None
    """Seconds since the oldest unfinished entry was stored; ``None`` when there is none."""
    dead: int
    """Dead letters waiting for a replay or a purge."""
    durability: str | None = None
    """What a crash of the store's host can lose of the deliveries answered 2xx, as read from
    the store's configuration (:class:`~webhooks.RedisInbox`: ``appendonly``/``appendfsync``);
    ``None`` where the backend's promise does not depend on it (see docs/webhooks.md)."""
    lost: int = 0
    """Acknowledged entries whose writes the store was found to have lost, since the inbox was
    first used (:class:`~webhooks.RedisInbox`: its sequence of accepted entries went backwards,
    as a receiver running across a Redis restart found).  Those not handled yet were never
    handled; those handled already lost their dedup keys."""
    last_loss: str | None = None
    """When the last such loss was found, and the sequence's fall; ``None`` when there was none."""


@runtime_checkable
class InspectableInbox(Inbox, Protocol):
    """An inbox operators can inspect and clean up.

    ``stats()``
        :class:`InboxStats` of the whole inbox, every process's entries.

    ``purge(entry_id)``
        Drops a dead letter for good: never handed out or listed again; its dedup key stays
        claimed for the inbox's retention, as a finished entry's does, so the sender's retries of
        that event stay duplicates.  :class:`~webhooks.UnknownEntryError` if ``entry_id`` is not
        a dead letter.

    A replay (:meth:`~webhooks.Inbox.replay`) makes a dead letter pending again under the dedup
    claim it has held all along: no second claim, and the event is handled once more, once.
    """

    async def stats(self) -> InboxStats:
        """Depth, age of the oldest unfinished entry, and dead letters."""
        ...

    async def purge(self, entry_id: str) -> None:
        """Drop a dead letter for good; UnknownEntryError if there is none with that id."""
        ...
