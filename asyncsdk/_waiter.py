"""What the client needs from a webhook-fed registry in order to wait on it.

The registry itself lives in :mod:`webhooks` (in memory or on Redis); the client depends only on
this protocol, so the two halves stay apart and either can be used alone.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from asyncsdk._models import ProcessCompleted

__all__ = ["ResultWaiter"]


@runtime_checkable
class ResultWaiter(Protocol):
    """Anything that can await the ``process.completed`` event of one process."""

    @property
    def healthy(self) -> bool:
        """False when the receiver feeding this registry is known to be down; callers then poll."""
        ...

    async def wait(self, process_id: str, *, timeout: float | None = None) -> ProcessCompleted:
        """Return the event for ``process_id`` as soon as it lands (or at once if it already has).

        Raises ``TimeoutError`` (``asyncio.TimeoutError``) when ``timeout`` passes first, and an
        ``AsyncSDKError`` subclass when the registry shuts down while waiting.
        """
        ...
