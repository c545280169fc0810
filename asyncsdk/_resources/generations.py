"""Process creation under the generation limit: a place in the window first, and what a 429 means.

The service allows 10 generations per 10 minutes per account and answers a creation beyond that
with 429 and no ``Retry-After``.  With a :class:`~asyncsdk.GenerationLimit` the caller waits for a
place before the POST, and a 429 without ``Retry-After`` (another program spending the same
account) fills the limiter's window and waits for the next place.  Without one, that 429 is raised
at once as a ``RateLimitError`` whose ``retry_after`` is the limit's steady pace.  A 429 with
``Retry-After`` was already waited for by the transport (or was too long to wait for) and is
raised as it is.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, TypeVar

import attrs

from asyncsdk._errors import RateLimitError
from asyncsdk._limits import GenerationLimit
from asyncsdk._telemetry import NO_TELEMETRY, ClientTelemetry

__all__ = ["Generations"]

T = TypeVar("T")

_log = logging.getLogger("asyncsdk")
#: The service's documented limit, for the advice of an error raised without a limiter.
_DOCUMENTED: Final = GenerationLimit()


@attrs.frozen
class Generations:
    """Places in the generation window (``limit``; ``None``: no pacing) and 429 handling.

    ``max_refusals``: how many 429s without ``Retry-After`` one creation waits through.
    """

    limit: GenerationLimit | None
    max_refusals: int = 3
    telemetry: ClientTelemetry = NO_TELEMETRY
    """Times each wait for a place (the client's metrics)."""

    async def reserve(self) -> float | None:
        """Wait for a place in the window (at once without a limit); when it was counted."""
        if self.limit is None:
            return None
        with self.telemetry.generation_slot():
            return await self.limit.acquire()

    @contextlib.contextmanager
    def given_back_on_failure(self, reserved: float | None) -> Iterator[None]:
        """The steps between taking a place (:meth:`reserve`) and sending the creation: if they
        fail, the creation is never sent, and its place goes back to the limit."""
        try:
            yield
        except BaseException:
            if self.limit is not None and reserved is not None:
                self.limit.release(reserved)
            raise

    async def create(self, send: Callable[[], Awaitable[T]], reserved: float | None) -> T:
        """``send()`` the creation, whose place was counted at ``reserved``; wait out the limit's
        429s.  The place is counted again from the answer, when the service has counted it."""
        refusals = 0
        while True:
            try:
                created = await send()
            except RateLimitError as exc:
                if exc.retry_after is not None:
                    raise
                if self.limit is None:
                    raise _without_limiter(exc) from exc
                if refusals >= self.max_refusals:
                    raise
                refusals += 1
                if reserved is not None:
                    self.limit.settle(reserved)
                self.limit.refused()
                _log.info(
                    "the service refused a generation (429, the generation limit); waiting "
                    "%.0f s for the next place",
                    self.limit.wait_time(),
                )
                reserved = await self.limit.acquire()
            else:
                if self.limit is not None and reserved is not None:
                    self.limit.settle(reserved)
                return created


def _without_limiter(exc: RateLimitError) -> RateLimitError:
    pace = _DOCUMENTED.pace
    return RateLimitError(
        f"{exc.message}: the service allows {_DOCUMENTED.max_calls} generations per "
        f"{_DOCUMENTED.period / 60:g} minutes; try again in about {pace:g} s, or let the client "
        "wait for a place: Client(generation_limit=GenerationLimit())",
        key=exc.key,
        headers=exc.headers,
        body=exc.body,
        method=exc.method,
        url=exc.url,
        retry_after=pace,
    )
