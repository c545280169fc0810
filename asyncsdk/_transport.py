"""The one way a request reaches the network, and what a network failure becomes.

Every endpoint goes through :meth:`Transport.request`: the ``x-api-key`` header, the in-flight
limit, timeouts, retries with backoff, the translation of aiohttp's exceptions into ours
(:func:`translate`, raised from one place), and the reading of the answer into a model or an error
(``_protocol/responses.py``).  The decisions themselves (what to retry, how long to wait, what an
answer means) are the pure functions of ``_protocol/``; this module only carries them out.

Session ownership: a session passed in by the caller is used as it is and never closed.  Otherwise
the transport creates one lazily, inside the running event loop, with a connector limit equal to
the in-flight limit, and closes it in :meth:`Transport.close`.  The transport belongs to the event
loop of its first request: used from another loop it raises ``ConfigurationError`` at once.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, TypeVar

import aiohttp
from aiohttp import hdrs
from yarl import URL

from asyncsdk._downloads import DOWNLOAD_CHUNK, capped, result_too_large
from asyncsdk._errors import APIConnectionError, APITimeoutError, ConfigurationError
from asyncsdk._protocol.floor import PollFloor
from asyncsdk._protocol.requests import Request
from asyncsdk._protocol.responses import read_response, status_error
from asyncsdk._protocol.retry import RETRYABLE_STATUSES, RetryPolicy
from asyncsdk._settings import ApiKey, Timeout
from asyncsdk._telemetry import NO_TELEMETRY, ClientTelemetry, log_fields

__all__ = ["NETWORK_ERRORS", "USER_AGENT", "Transport", "drop_tracebacks", "translate"]

T = TypeVar("T")

USER_AGENT: Final = "asyncsdk/0.1.0"
_log = logging.getLogger("asyncsdk")

#: The headers of every request to the service (the API key is added per request).
_HEADERS: Final = MappingProxyType({"Accept": "application/json", "User-Agent": USER_AGENT})
#: Redirect statuses a download follows, and how many in a row (aiohttp's own default limit).
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS: Final = 10
#: How many distinct ``Timeout`` values keep their aiohttp ``ClientTimeout``.
_TIMEOUTS_KEPT: Final = 64


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


#: An answer: status, headers, body.
_Answer = tuple[int, Mapping[str, str], bytes]


def _slots_for(session: aiohttp.ClientSession | None, max_in_flight: int) -> int:
    """The in-flight limit, lowered to a caller's connector limits so no request waits for a
    connection inside aiohttp (where the wait would count against the request's timeout)."""
    slots = max_in_flight
    if session is not None and isinstance(session.connector, aiohttp.BaseConnector):
        for limit in (session.connector.limit, session.connector.limit_per_host):
            if limit:
                slots = min(slots, limit)
    return slots


class Transport:
    """Carries out :class:`~asyncsdk._protocol.Request` objects; see the module docstring."""

    def __init__(
        self,
        *,
        api_key: ApiKey,
        session: aiohttp.ClientSession | None,
        timeout: Timeout,
        retry: RetryPolicy,
        max_in_flight: int,
        min_poll_interval: float,
        telemetry: ClientTelemetry = NO_TELEMETRY,
    ) -> None:
        self._api_key = api_key
        self._session = session
        self._owns_session = session is None
        self._timeout = timeout
        self._retry = retry
        self._max_in_flight = max_in_flight
        self._slots = asyncio.Semaphore(_slots_for(session, max_in_flight))
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._floor = PollFloor(min_poll_interval)
        self._client_timeouts: dict[Timeout, aiohttp.ClientTimeout] = {}
        self.telemetry = telemetry

    def __repr__(self) -> str:
        return f"<Transport max_in_flight={self._max_in_flight} closed={self._closed}>"

    @property
    def closed(self) -> bool:
        return self._closed

    def _session_in_use(self) -> aiohttp.ClientSession:
        if self._closed:
            raise ConfigurationError(
                "client is closed; create a new Client (or keep using it inside `async with`)"
            )
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise ConfigurationError(
                "this Client was first used in another event loop (each asyncio.run() starts a "
                "new one); create the client inside the loop that uses it: one Client per "
                "asyncio.run(), e.g. `async with asyncsdk.Client() as client:` in main()"
            )
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._max_in_flight, limit_per_host=0)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=None)
            )
        elif self._session.closed:
            raise ConfigurationError(
                "the aiohttp session given to Client is closed; keep it open while the client "
                "is in use"
            )
        return self._session

    async def close(self) -> None:
        """Close the session if this transport created it.  Safe to call more than once."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None and self._owns_session and not session.closed:
            await session.close()

    async def request(
        self,
        request: Request,
        decode: Callable[[Any], T],
        *,
        timeout: Timeout | float | None = None,
        retry: RetryPolicy | None = None,
    ) -> T:
        """Send ``request`` (retrying where safe) and decode the answer with ``decode``.

        ``timeout`` and ``retry`` replace the transport's own for this request.  A caller's async
        iterator in its form that no attempt streamed (the client was closed, or the call
        cancelled or failed first) is closed before this returns or raises.
        """
        try:
            return await self._send(request, decode, timeout=timeout, retry=retry)
        finally:
            if request.form is not None:
                await request.form.close_unsent()

    async def _send(
        self,
        request: Request,
        decode: Callable[[Any], T],
        *,
        timeout: Timeout | float | None,
        retry: RetryPolicy | None,
    ) -> T:
        self._session_in_use()
        limits = self._timeout.with_total(timeout)
        policy = self._retry if retry is None else retry
        method = request.method
        attempt = 0
        debug = _log.isEnabledFor(logging.DEBUG)
        while True:
            if request.floor_key is not None:
                await self._keep_floor(request.floor_key)
            started = time.monotonic() if debug else 0.0
            try:
                with self.telemetry.attempt(request, attempt) as record:
                    if request.floor_key is None:
                        status, headers, body = await self._attempt(request, limits)
                    else:
                        status, headers, body = await self._floored_attempt(request, limits)
                    record.answered(status)
            except asyncio.CancelledError as exc:
                # Cancelled in flight (a caller's timeout, ``wait_for``): aiohttp's frames would
                # ride along under the caller's TimeoutError, the key in their locals.
                drop_tracebacks(exc)
                raise
            except NETWORK_ERRORS as exc:
                if debug:
                    _log.debug(
                        "%s %s -> %s (attempt %d, %.3f s)",
                        method,
                        request.url.path,
                        type(exc).__name__,
                        attempt + 1,
                        time.monotonic() - started,
                        extra=log_fields(request),
                    )
                failure = request.form.failure if request.form is not None else None
                url = str(request.url)
                error, retryable = translate(exc, method=method, url=url, timeout=limits)
                delay = None
                if failure is None and retryable:
                    delay = policy.after_failure(
                        method,
                        attempt,
                        request_sent=error.request_sent,
                        replayable=request.replayable,
                    )
                if delay is None:
                    drop_tracebacks(exc)
                    raise (failure or error) from exc
                reason = str(error)
                self.telemetry.retried(request, type(error).__name__)
            else:
                if debug:
                    _log.debug(
                        "%s %s -> %d (attempt %d, %.3f s)",
                        method,
                        request.url.path,
                        status,
                        attempt + 1,
                        time.monotonic() - started,
                        extra=log_fields(request),
                    )
                if request.form is not None and request.form.failure is not None:
                    raise request.form.failure
                delay = None
                if status in RETRYABLE_STATUSES:
                    delay = policy.after_status(
                        method,
                        attempt,
                        status,
                        headers,
                        replayable=request.replayable,
                        generation=request.generation,
                    )
                if delay is None:
                    if status == 401 and request.authenticated:
                        # Not the service's words alone: which key, from where, and the fix.
                        raise status_error(
                            status,
                            headers,
                            body,
                            method=method,
                            url=str(request.url),
                            hint=self._api_key.refused(),
                        )
                    return read_response(
                        status, headers, body, method=method, url=request.url, decode=decode
                    )
                reason = f"HTTP {status}"
                self.telemetry.retried(request, str(status))
            attempt += 1
            _log.info(
                "retrying %s %s in %.3f s (retry %d of %d) after %s",
                method,
                request.url,
                delay,
                attempt,
                policy.max_retries,
                reason,
                extra=log_fields(request),
            )
            await asyncio.sleep(delay)

    async def download(
        self,
        url: URL,
        write: Callable[[AsyncIterable[bytes]], Awaitable[T]],
        *,
        timeout: Timeout,
        max_bytes: int,
        check_url: Callable[[URL], URL],
    ) -> T:
        """GET ``url`` without the API key and hand the streamed body to ``write``.

        Takes a slot of the in-flight limit like any request; not retried (the caller decides);
        network failures and non-2xx answers become this package's errors.  Redirects are
        followed here, each target passed through ``check_url`` first; a body past
        ``max_bytes`` (announced or streamed) ends in ``ResultTooLargeError``.
        """
        method, shown = "GET", str(url.with_query(None))
        async with self._slots:
            session = self._session_in_use()
            try:
                async with asyncio.timeout(timeout.total):
                    for _ in range(_MAX_REDIRECTS + 1):
                        async with session.get(
                            url,
                            headers={"User-Agent": USER_AGENT},
                            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout.connect),
                            allow_redirects=False,
                            raise_for_status=False,
                        ) as response:
                            location = response.headers.get(hdrs.LOCATION)
                            if response.status in _REDIRECTS and location:
                                url = check_url(response.url.join(URL(location)))
                                shown = str(url.with_query(None))
                                continue
                            if response.status >= 300:
                                raise status_error(
                                    response.status,
                                    response.headers,
                                    await response.content.read(2048),
                                    method=method,
                                    url=shown,
                                    message="downloading a result failed with "
                                    f"HTTP {response.status}",
                                )
                            length = response.content_length
                            if length is not None and length > max_bytes:
                                raise result_too_large(max_bytes, shown)
                            chunks = response.content.iter_chunked(DOWNLOAD_CHUNK)
                            return await write(capped(chunks, max_bytes, shown))
                    raise APIConnectionError(
                        f"{method} {shown}: more than {_MAX_REDIRECTS} redirects",
                        method=method,
                        url=shown,
                    )
            except asyncio.CancelledError as exc:
                drop_tracebacks(exc)
                raise
            except NETWORK_ERRORS as exc:
                error, _ = translate(exc, method=method, url=shown, timeout=timeout)
                drop_tracebacks(exc)
                raise error from exc

    def _headers(self, request: Request) -> Mapping[str, str]:
        if request.authenticated:
            return {**_HEADERS, "x-api-key": self._api_key.reveal()}
        return _HEADERS

    def _client_timeout(self, limits: Timeout) -> aiohttp.ClientTimeout:
        """``limits`` as aiohttp's timeout of one attempt, built once each."""
        found = self._client_timeouts.get(limits)
        if found is None:
            if len(self._client_timeouts) >= _TIMEOUTS_KEPT:
                self._client_timeouts.clear()
            found = aiohttp.ClientTimeout(total=limits.total, sock_connect=limits.connect)
            self._client_timeouts[limits] = found
        return found

    async def _attempt(self, request: Request, limits: Timeout) -> _Answer:
        # The headers are built in the call so no local variable of this frame holds the key.
        # Waiting for a slot happens before the timeout starts, so a burst of calls queues here
        # instead of failing for want of a connection.
        async with self._slots:
            session = self._session_in_use()
            if request.form is None:
                return await self._exchange(session, request, limits, None)
            async with request.form.open() as data:
                return await self._exchange(session, request, limits, data)

    async def _keep_floor(self, key: str) -> None:
        """Wait until an attempt with this poll-floor key may be sent, and claim it."""
        wait = self._floor.wait_time(key, time.monotonic())
        while wait > 0:
            # Woken at the floor, or after an in-flight attempt's interval to look again.
            await asyncio.sleep(wait)
            wait = self._floor.wait_time(key, time.monotonic())
        self._floor.claim(key)

    async def _floored_attempt(self, request: Request, limits: Timeout) -> _Answer:
        """:meth:`_attempt`, telling the poll floor when it ended (answer or failure)."""
        try:
            return await self._attempt(request, limits)
        finally:
            if request.floor_key is not None:
                self._floor.answered(request.floor_key, time.monotonic())

    async def _exchange(
        self,
        session: aiohttp.ClientSession,
        request: Request,
        limits: Timeout,
        data: aiohttp.MultipartWriter | None,
    ) -> _Answer:
        # As in _attempt: the headers are built in the call, never held by a local variable.
        # aiohttp's own total timeout covers connecting, sending, and reading the whole answer.
        async with (
            session.request(
                request.method,
                request.url,
                json=request.json,
                data=data,
                headers=self._headers(request),
                timeout=self._client_timeout(limits),
                allow_redirects=False,
                raise_for_status=False,
            ) as response,
        ):
            return response.status, response.headers, await response.read()
