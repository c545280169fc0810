"""The answer to a POST near a receiver's URL that no route of it takes: the prefix without its
trailing slash (``/hooks`` for a receiver at ``/hooks/``), or a path under the prefix past the
token (``/hooks/<token>/``).

A sender retries every non-2xx answer, so a misconfigured URL is retried for as long as the
sender tries: :class:`Misrouted` answers 404 with a body naming the URL to deliver to, and logs
one WARNING line, once per receiver, for the operator.  Neither names the path it got, which may
hold a token.
"""

from __future__ import annotations

import logging
from typing import Final

import attrs
from aiohttp import web

from webhooks._contract import Verifier

__all__ = ["REST_PARAM", "Misrouted"]

logger = logging.getLogger("webhooks")

REST_PARAM: Final = "rest"
"""The match-info name of what follows the prefix on the sub-application's catch-all route."""


@attrs.define(kw_only=True, eq=False)
class Misrouted:
    """Answers misrouted deliveries of one receiver, whose ``verifier`` says whether its URL ends
    with a token."""

    verifier: Verifier
    _logged: bool = attrs.field(default=False, init=False)

    async def slashless(self, request: web.Request) -> web.Response:
        """The prefix without its trailing slash (routed on the host application)."""
        return self._answer(request.path + "/")

    async def past_the_token(self, request: web.Request) -> web.Response:
        """A path under the prefix no route of the sub-application takes."""
        rest = request.match_info[REST_PARAM]
        return self._answer(request.path[: len(request.path) - len(rest)])

    def _answer(self, prefix: str) -> web.Response:
        return web.json_response({"error": self.error(prefix)}, status=404)

    def error(self, prefix: str) -> str:
        """The 404's error for a receiver at ``prefix`` (logged the first time)."""
        expected = f"{prefix}<token>" if self.verifier.path_tokens else prefix
        if not self._logged:
            self._logged = True
            logger.warning(
                "a webhook delivery came to a URL near the receiver at %s that no route takes;"
                " answered 404, and its sender will retry it until its URL is %s (logged once)",
                prefix,
                expected,
            )
        return f"no webhook receiver at this URL: deliver to {expected}"
