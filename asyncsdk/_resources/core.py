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
    _fixed: dict[tuple[str, ...], tuple[URL, str]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )
    _items: dict[tuple[str, ...], tuple[URL, str]] = attrs.field(
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

    def fixed(self, *segments: str) -> tuple[URL, str]:
        """:meth:`url` of a constant endpoint (no ids in it) and its route template, built once:
        a request's metrics need not work the route out of each URL (the ``observe`` goals about
        client metrics in ``benchmarks/RESULTS.md``)."""
        found = self._fixed.get(segments)
        if found is None:
            url = endpoint(self.base_url, *segments)
            found = self._fixed[segments] = (url, route_of(url)[0])
        return found

    def _item(self, collection: tuple[str, ...]) -> tuple[URL, str]:
        """The constant endpoint ``collection`` and the route template of one item under it
        (``/v3/process/{process_id}``), built once."""
        found = self._items.get(collection)
        if found is None:
            prefix, _ = self.fixed(*collection)
            item = prefix.with_path(f"{prefix.raw_path}/item", encoded=True)
            found = self._items[collection] = (prefix, route_of(item)[0])
        return found

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
        prefix, route = self._item(segments[:-1])
        url = prefix.with_path(f"{prefix.raw_path}/{quote(segments[-1], safe='')}", encoded=True)
        if width is not None or height is not None:
            url = url.with_query(dimensions(width, height))
        request = Request(method="GET", url=url, floor_key=floor_key, route=route)
        return self.send(request, self.decoder(cls), timeout)

    def decoder(self, cls: type[T]) -> Callable[[Any], T]:
        """The decoder of one JSON object into ``cls``, built once per class."""
        decode = self._decoders.get(cls)
        if decode is None:
            decode = self._decoders[cls] = model_decoder(self.converter, cls)
        return decode
