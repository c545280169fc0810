"""What aiohttp's server logs of a request it refuses before any route runs: one line, not a
traceback.

A request whose ``Content-Encoding`` aiohttp's server cannot decode (``br`` or ``zstd`` without
their decoders installed) is refused with 400 by aiohttp's parser, before the receiver or any
other route sees it, and aiohttp logs it on ``aiohttp.server`` at ERROR with a traceback: a
sender could fill the logs at will.  :func:`install` adds a filter (the logging module's own
means, nothing of aiohttp's is changed) that turns each such record into one DEBUG line on the
``webhooks`` logger, the level of every other refused delivery; every other record passes.
"""

from __future__ import annotations

import logging
from typing import Final

from aiohttp.http_exceptions import ContentEncodingError

__all__ = ["install"]

logger = logging.getLogger("webhooks")


class _UndecodableBodies(logging.Filter):
    """Drops ``aiohttp.server``'s records of a :class:`ContentEncodingError`, logging one line
    for each instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        refused = record.exc_info[1] if record.exc_info else None
        if not isinstance(refused, ContentEncodingError):
            return True
        logger.debug(
            "a request was refused with 400 before any route ran: %s",
            " ".join(refused.message.split()),
        )
        return False


_FILTER: Final = _UndecodableBodies()


def install() -> None:
    """Add the filter to ``aiohttp.server`` (once however often it is called)."""
    logging.getLogger("aiohttp.server").addFilter(_FILTER)
