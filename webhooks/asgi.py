"""A receiver as a plain ASGI application, for Starlette, FastAPI or any ASGI server.

::

    hooks = ReceiverASGI(receiver)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with hooks.serving():  # Starlette does not pass lifespan on to mounted apps
            yield

    app = FastAPI(lifespan=lifespan)
    app.mount("/hooks", hooks)

Routes under the mount: ``POST /`` and ``POST /{token}``; any other ``POST`` under it is
answered 404 naming the URL to deliver to, any other method 405, and a WebSocket is refused.
(Starlette's router answers ``POST /hooks``, without the slash, with a 307 to ``/hooks/``
before the receiver sees it: give senders the URL with its slash.)  Served on its own
(``uvicorn module:hooks``), it starts and drains the receiver with the ASGI ``lifespan``
messages.  Needs no web framework.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from types import MappingProxyType
from typing import Any, Final

from asyncsdk import ConfigurationError
from webhooks._core import ReceiverCore
from webhooks._intake import Answer, BodyUnreadable
from webhooks._verify import TOKEN_PARAM

__all__ = ["ReceiverASGI"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_NO_PARAMS: Final[MappingProxyType[str, str]] = MappingProxyType({})


class _ASGIBody:
    """An ASGI request's body as the intake reads it: ``http.request`` messages."""

    __slots__ = ("_more", "_receive")
    decoded: Final[tuple[str, ...]] = ()
    """An ASGI server passes the body on as it came: only an unencoded one is taken."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._more = True

    def arrived(self) -> bytes | None:
        return None  # ASGI gives the body only by awaiting ``receive``

    async def chunk(self) -> bytes:
        while self._more:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise BodyUnreadable("ClientDisconnected")
            self._more = bool(message.get("more_body", False))
            body: bytes = message.get("body", b"")
            if body:
                return body
        return b""


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers as a verifier sees them: lower-case names, the first value of each."""
    lowered: dict[str, str] = {}
    for name, value in scope["headers"]:
        lowered.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return lowered


class ReceiverASGI:
    """The ASGI application of one :class:`~webhooks.WebhookReceiver` or
    :class:`~webhooks.EventReceiver`: deliveries take the same path as under aiohttp (body cap,
    read timeout, content type, verification, parsing, backpressure, the durable put), with the
    same metrics, traces and redaction.

    Mounted in a Starlette or FastAPI app, start and drain the receiver in the host's lifespan
    with :meth:`serving`; served as the top-level application, the ASGI ``lifespan`` messages do
    it.  The aiohttp-only routes (``metrics_route``, ``health_routes``) are refused: serve them
    from the host framework.  An ASGI server passes a body on as it came, so a delivery with a
    ``Content-Encoding`` (gzip, say) is answered 415 naming ``identity``.
    """

    def __init__(self, receiver: ReceiverCore[Any]) -> None:
        if receiver.metrics_route or receiver.health_routes:
            raise ConfigurationError(
                "metrics_route and health_routes are routes of the aiohttp sub-application;"
                " under ASGI build the receiver without them and serve /metrics and the probes"
                " from the host application"
            )
        self._receiver = receiver
        # The package's own adapter reads the receiver's request path (one per receiver).
        self._intake = receiver._intake
        self._misrouted = receiver._misrouted

    def access_log_filter(self) -> logging.Filter:
        """A filter that shows the receiver's path tokens as ``***`` in an ASGI server's access
        log: ``logging.getLogger("uvicorn.access").addFilter(hooks.access_log_filter())``.

        A record whose arguments cannot be checked is dropped (fail closed)."""
        return _RedactingFilter(self._intake.verifier.path_tokens)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Start the receiver's workers; on leaving, refuse new deliveries (503 with
        ``Retry-After``) and drain (:meth:`~webhooks.WebhookReceiver.stop`)."""
        await self._receiver.start()
        try:
            yield
        finally:
            await self._receiver.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "websocket":  # closed before it is accepted: the server says 403
            await receive()
            await send({"type": "websocket.close"})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self._receiver.start()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._receiver.stop()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path, mount = _below_mount(scope)
        http1 = scope.get("http_version", "1.1") in ("1.0", "1.1")
        if scope["method"] != "POST":
            await _send(send, Answer(405, {"Allow": "POST"}, b""), http1=http1)
            return
        rest = path[1:]
        if path == "" or "/" in rest:
            error = self._misrouted.error(f"{mount.rstrip('/')}/")
            await _send(send, _json(404, {"error": error}), http1=http1)
            return
        params = MappingProxyType({TOKEN_PARAM: rest}) if rest else _NO_PARAMS
        answer = await self._intake.deliver(params, _headers(scope), _ASGIBody(receive))
        await _send(send, answer, http1=http1)


def _below_mount(scope: Scope) -> tuple[str, str]:
    """The request's path below the receiver's mount, and the mount's path as the sender
    addressed it (``root_path``).

    Starlette's ``Mount`` adds its prefix to ``root_path`` and keeps the whole path, as uvicorn
    (from 0.26) does with ``--root-path``.  A server that leaves its own ``--root-path`` out of
    the path (hypercorn) leaves it out of ``app_root_path`` too: the mount's part is the rest.
    """
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if not root:
        return path, ""
    for prefix in (root, _mount_part(root, scope.get("app_root_path", ""))):
        if prefix and (path == prefix or path.startswith(prefix + "/")):
            return path[len(prefix) :], root
    return path, root


def _mount_part(root: str, app_root: str) -> str:
    """What a mount added to ``root_path`` past the application's own root."""
    return root[len(app_root) :] if app_root and root.startswith(app_root) else ""


class _RedactingFilter(logging.Filter):
    """Replaces each path token in a log record's message and arguments with ``***``."""

    def __init__(self, tokens: tuple[str, ...]) -> None:
        super().__init__()
        self._tokens = tokens

    def _redact(self, text: str) -> str:
        for token in self._tokens:
            text = text.replace(token, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            record.msg = self._redact(str(record.msg))
            if isinstance(record.args, tuple):
                record.args = tuple(
                    self._redact(arg) if isinstance(arg, str) else arg for arg in record.args
                )
        except Exception:  # fail closed: a line that could not be checked is not logged
            return False
        return True


def _json(status: int, content: dict[str, str]) -> Answer:
    return Answer(status, {"Content-Type": "application/json; charset=utf-8"}, _dumps(content))


def _dumps(content: dict[str, str]) -> bytes:
    return json.dumps(content).encode()


async def _send(send: Send, answer: Answer, *, http1: bool) -> None:
    """Send ``answer``; over HTTP/1, one that closes says so (HTTP/2 has no such header: the
    server ends the stream)."""
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in answer.headers.items()
    ]
    headers.append((b"content-length", str(len(answer.body)).encode()))
    if answer.close and http1:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})
