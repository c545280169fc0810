"""The access logger that keeps receivers' path tokens out of aiohttp's access log."""

from __future__ import annotations

from collections.abc import Iterator

from aiohttp import web
from aiohttp.web_log import AccessLogger

from webhooks._aiohttp_intake import INTAKE_KEY
from webhooks._verify import TOKEN_PARAM

__all__ = ["RedactingAccessLogger"]


class RedactingAccessLogger(AccessLogger):
    """aiohttp's access logger, with the path below a mounted receiver shown as ``***`` and every
    live path token of a receiver on the app shown as ``***`` wherever it appears.

    Any method and any answer: a GET of the hook URL (405), a path with a stray trailing slash
    or in other letter case (404), a token in a query string, percent-encoded or not, holds the
    token as much as a delivery does.

    aiohttp takes the access logger where the server is made, not from the app, so pass it there:
    ``web.run_app(app, access_log_class=RedactingAccessLogger)`` or
    ``web.AppRunner(app, access_log_class=RedactingAccessLogger)``.
    """

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        """Log one request as aiohttp's access log does, its path tokens as ``***``."""
        redacted = None
        if isinstance(request, web.Request):
            try:
                redacted = _redacted_target(request)
            except Exception:  # fail closed: a line that could not be checked is not logged
                self.logger.info("request line withheld: it could not be checked for a token")
                return
        if redacted is not None:
            try:
                request = request.clone(rel_url=redacted)
            except RuntimeError:
                self.logger.info("webhook delivery (request line withheld: it holds a token)")
                return
        super().log(request, response, time)


def _receivers(app: web.Application, mount: str = "") -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each receiver served by ``app`` (mounted at ``mount``) or by a sub-application of it, at
    any depth: its mount point and its live path tokens."""
    if INTAKE_KEY in app:
        yield mount, app[INTAKE_KEY].verifier.path_tokens
    for resource in app.router.resources():
        if isinstance(resource, web.PrefixedSubAppResource):
            # A nested prefix is the whole path from the root; an app added for a domain
            # (``add_domain``) has none: it serves from the root of its host.
            info = resource.get_info()
            yield from _receivers(info["app"], info.get("prefix", "").rstrip("/"))


def _redacted_target(request: web.Request) -> str | None:
    """The request target with everything below a receiver's mount point, and every live path
    token of a receiver, as ``***``; ``None`` when there is nothing to hide."""
    url = request.rel_url
    apps = request.match_info.apps
    mounts: list[str] = []
    tokens: set[str] = set()
    for mount, path_tokens in _receivers(apps[0] if apps else request.app):
        mounts.append(mount)
        tokens.update(path_tokens)
    token = request.match_info.get(TOKEN_PARAM)
    if token:
        tokens.add(token)
    path, query = url.raw_path, url.raw_query_string
    if any(t in url.path + url.query_string and t not in path + query for t in tokens):
        # A token spelt with percent-escapes is still the token: log the decoded target.
        path, query = url.path, url.query_string
    for mount in mounts:
        if path.startswith(mount + "/") and len(path) > len(mount) + 1:
            path = f"{mount}/***"
            break
    target = path + (f"?{query}" if query else "")
    for live in tokens:
        target = target.replace(live, "***")
    return None if target == url.raw_path_qs else target
