"""aiohttp's exceptions, translated into this package's in one place.

:func:`translate` turns a network failure into an :class:`~asyncsdk.APIConnectionError` or
:class:`~asyncsdk.APITimeoutError` and says whether trying again could help;
:func:`drop_tracebacks` forgets the frames that would carry the API key in their locals.
"""

from __future__ import annotations

import errno
from typing import Final

import aiohttp

from asyncsdk._errors import APIConnectionError, APITimeoutError
from asyncsdk._settings import Timeout

__all__ = ["NETWORK_ERRORS", "drop_tracebacks", "translate"]

#: What a network attempt may raise instead of answering: aiohttp's errors, OS errors, a timeout.
NETWORK_ERRORS: Final = (aiohttp.ClientError, OSError, TimeoutError)
#: Host names of this machine, where a refused connection most likely means no sandbox runs.
LOCAL_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


def _address(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


def _not_connected(exc: aiohttp.ClientConnectorError) -> str:
    """Why connecting failed, for a person: the address, and what to do about it.

    aiohttp's own message names ``ssl:default`` even for an ``http://`` URL, which misleads.
    """
    address = _address(exc.host, exc.port)
    reason = exc.os_error.strerror or str(exc.os_error)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return f"the host name {exc.host!r} did not resolve ({reason}); check the address"
    if exc.os_error.errno != errno.ECONNREFUSED:
        return f"could not connect to {address}: {reason}"
    refused = f"could not connect to {address}: connection refused, nothing listens there"
    if exc.host in LOCAL_HOSTS:
        return (
            f"{refused}; start the sandbox on it (asyncsdk sandbox --port {exc.port}) or point "
            "base_url / ASYNCSDK_BASE_URL at the service"
        )
    return f"{refused}; check the address (base_url / ASYNCSDK_BASE_URL) and that the service is up"


def translate(
    exc: BaseException, *, method: str, url: str, timeout: Timeout
) -> tuple[APIConnectionError, bool]:
    """Our error for a network failure, and whether trying again could help.

    ``request_sent`` on the error is false only where the request surely never reached the server:
    the connection was refused, the name did not resolve, connecting timed out, or the TLS
    handshake failed (the one of these that another try would not help).
    """
    where = f"{method} {url}"

    def failed(message: str, *, sent: bool = True) -> APIConnectionError:
        return APIConnectionError(message, request_sent=sent, method=method, url=url)

    def timed_out(message: str, *, sent: bool = True) -> APITimeoutError:
        return APITimeoutError(message, request_sent=sent, method=method, url=url)

    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return timed_out(f"{where}: no connection within {timeout.connect} s", sent=False), True
    if isinstance(exc, aiohttp.ClientSSLError):
        return failed(f"{where}: TLS handshake failed: {exc}", sent=False), False
    if isinstance(exc, aiohttp.ClientConnectorError):
        return failed(f"{where}: {_not_connected(exc)}", sent=False), True
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return timed_out(f"{where}: reading the answer timed out: {exc}"), True
    if isinstance(exc, TimeoutError):
        return timed_out(f"{where}: no complete answer within {timeout.total} s"), True
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return failed(f"{where}: the server closed the connection without answering"), True
    if isinstance(exc, aiohttp.ClientPayloadError):
        return failed(f"{where}: the answer was cut off: {exc}"), True
    return failed(f"{where}: {type(exc).__name__}: {exc}"), True


def drop_tracebacks(exc: BaseException) -> None:
    """Forget the frames of a network error and of every exception it chains.

    aiohttp's frames hold the request headers, the ``x-api-key`` among them, in their locals;
    a traceback rendered with locals (``capture_locals``, error trackers) would print the key.
    The exceptions keep their types and messages.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        item.__traceback__ = None
        todo.extend((item.__cause__, item.__context__))
