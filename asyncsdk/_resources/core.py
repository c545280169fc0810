"""What every resource shares: the transport, the converter, the service's URLs, the decoders."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeAlias, TypeVar
from urllib.parse import quote

import attrs
import cattrs
from yarl import URL

from asyncsdk._limits import GenerationLimit
from asyncsdk._protocol.paging import dimensions
from asyncsdk._protocol.requests import Request, endpoint
from asyncsdk._protocol.responses import model_decoder
from asyncsdk._protocol.retry import RetryPolicy
from asyncsdk._resources.generations import Generations
from asyncsdk._settings import Timeout
from asyncsdk._telemetry import route_of
from asyncsdk._transport import Transport
from asyncsdk._uploads import MAX_UPLOAD_BYTES

__all__ = ["Core", "TimeoutArg"]

T = TypeVar("T")

#: What every method takes as ``timeout=``: a ``Timeout``, a total in seconds, or the client's.
TimeoutArg: TypeAlias = Timeout | float | None


@attrs.frozen(kw_only=True)
class Core:
    """What every resource shares: the transport, the converter and the settings they need."""

    transport: Transport
    converter: cattrs.Converter
    base_url: URL
    app_url: URL
    role_field: str
    min_poll_interval: float
    generation_limit: GenerationLimit | None = None
    max_upload_bytes: int = MAX_UPLOAD_BYTES
    #: The limits of each attempt and the retry policy of these resources;
    #: ``Client.with_options`` gives a copy its own.
    timeout: Timeout
    retry: RetryPolicy
    _fixed_urls: dict[tuple[str, ...], URL] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )
    _routes: dict[tuple[str, ...], str] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )
    _decoders: dict[type[Any], Callable[[Any], Any]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )
    #: Process creation under the generation limit (``generation_limit``).
    generations: Generations = attrs.field(
        default=attrs.Factory(lambda self: self._make_generations(), takes_self=True),
        init=False,
        eq=False,
        repr=False,
    )

    def _make_generations(self) -> Generations:
        return Generations(
            self.generation_limit,
            max_refusals=self.retry.max_retries,
            telemetry=self.transport.telemetry,
        )

    def url(self, *segments: str, params: Mapping[str, str] | None = None) -> URL:
        url = endpoint(self.base_url, *segments)
        return url.with_query(params) if params else url

    def fixed_url(self, *segments: str) -> URL:
        """:meth:`url` of a constant endpoint (no ids in it), built once."""
        url = self._fixed_urls.get(segments)
        if url is None:
            url = self._fixed_urls[segments] = endpoint(self.base_url, *segments)
        return url

    def fixed_route(self, *segments: str) -> str:
        """The route template of :meth:`fixed_url`, worked out once: a request's metrics need not
        work it out of each URL (the ``observe`` goals about client metrics in
        ``benchmarks/RESULTS.md``)."""
        return self._route(segments, self.fixed_url(*segments))

    def item_route(self, *collection: str) -> str:
        """The route template of one item of the constant endpoint ``collection``
        (``/v3/process/{process_id}``), worked out once, as :meth:`fixed_route`."""
        prefix = self.fixed_url(*collection)
        item = (*collection, "{item}")
        return self._route(item, prefix.with_path(f"{prefix.raw_path}/item", encoded=True))

    def _route(self, key: tuple[str, ...], url: URL) -> str:
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = route_of(url)[0]
        return route

    def send(
        self, request: Request, decode: Callable[[Any], T], timeout: TimeoutArg = None
    ) -> Coroutine[Any, Any, T]:
        """The transport's coroutine for ``request`` (returned, not awaited here, so a call
        costs no extra coroutine)."""
        timeout = self.timeout.with_total(timeout)
        return self.transport.request(request, decode, timeout=timeout, retry=self.retry)

    def get_one(
        self,
        cls: type[T],
        *segments: str,
        width: int | None,
        height: int | None,
        timeout: TimeoutArg,
        floor_key: str | None = None,
    ) -> Coroutine[Any, Any, T]:
        """GET one resource, with the spec's optional ``width``/``height`` resize parameters.

        ``segments``: the constant path (built once), then the resource's id, quoted per call.
        ``floor_key``: the key of the poll floor this GET respects (see ``Request.floor_key``).
        """
        *collection, item_id = segments
        prefix = self.fixed_url(*collection)
        url = prefix.with_path(f"{prefix.raw_path}/{quote(item_id, safe='')}", encoded=True)
        if width is not None or height is not None:
            url = url.with_query(dimensions(width, height))
        route = self.item_route(*collection)
        request = Request(method="GET", url=url, floor_key=floor_key, route=route)
        return self.send(request, self.decoder(cls), timeout)

    def decoder(self, cls: type[T]) -> Callable[[Any], T]:
        """The decoder of one JSON object into ``cls``, built once per class."""
        decode = self._decoders.get(cls)
        if decode is None:
            decode = self._decoders[cls] = model_decoder(self.converter, cls)
        return decode
