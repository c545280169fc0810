"""The client: settings, the resources hanging off it, and ``run()``.

Settings come from arguments, else from the environment (``ASYNCSDK_API_KEY``,
``ASYNCSDK_BASE_URL``, ``ASYNCSDK_APP_URL``).  The API key is held by an object whose repr is
masked; it goes into the ``x-api-key`` header and nowhere else (not into URLs, logs, reprs or
errors).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Self

import aiohttp
import attrs
from yarl import URL

from asyncsdk._convert import make_converter
from asyncsdk._errors import APIDecodeError, ConfigurationError, ValidationError
from asyncsdk._limits import GenerationLimit
from asyncsdk._models import Process
from asyncsdk._resources import V1, Core, Orders, Processes, Projects, Tools, check_widgets
from asyncsdk._sansio import ApiKey, RetryPolicy, Timeout, require_text
from asyncsdk._transport import Transport
from asyncsdk._uploads import Upload, UploadSource
from asyncsdk._waiter import ResultWaiter

__all__ = ["ENV_API_KEY", "ENV_APP_URL", "ENV_BASE_URL", "Client", "ClientSettings"]

ENV_API_KEY: Final = "ASYNCSDK_API_KEY"
ENV_BASE_URL: Final = "ASYNCSDK_BASE_URL"
ENV_APP_URL: Final = "ASYNCSDK_APP_URL"

DEFAULT_TIMEOUT: Final = Timeout()
ROLE_FIELDS: Final = ("asset_role", "asset_roles")


def _service_url(value: str | URL, what: str, env: str) -> URL:
    try:
        url = URL(value)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{what} is not a valid URL: {exc}") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(
            f"{what} must be an absolute http(s) URL such as https://api.example.com "
            f"(argument or {env}), not {str(value)!r}"
        )
    if url.user is not None or url.password is not None:
        raise ConfigurationError(
            f"{what} must not carry credentials; pass the API key as api_key or in {ENV_API_KEY}"
        )
    if url.query_string or url.fragment:
        raise ConfigurationError(f"{what} must not have a query string or fragment")
    return url.with_path(url.path.rstrip("/") or "/")


@attrs.frozen(kw_only=True)
class ClientSettings:
    """Everything a client was configured with, resolved and checked (the key stays masked)."""

    api_key: ApiKey
    base_url: URL
    app_url: URL
    timeout: Timeout
    retry: RetryPolicy
    max_in_flight: int
    role_field: str
    min_poll_interval: float
    strict: bool

    @classmethod
    def resolve(
        cls,
        *,
        api_key: str | None = None,
        base_url: str | URL | None = None,
        app_url: str | URL | None = None,
        timeout: Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        max_in_flight: int = 64,
        role_field: str = "asset_role",
        min_poll_interval: float = 5.0,
        strict: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> ClientSettings:
        """Arguments first, then the environment; ``ConfigurationError`` names what is missing."""
        env = os.environ if environ is None else environ
        key = api_key if api_key is not None else env.get(ENV_API_KEY, "")
        if not isinstance(key, str) or not key.strip():
            raise ConfigurationError(
                f"no API key: pass api_key=... to Client or set the {ENV_API_KEY} environment "
                "variable"
            )
        key = key.strip()
        if not key.isascii() or any(char.isspace() or not char.isprintable() for char in key):
            raise ConfigurationError(
                "the API key contains whitespace, control or non-ASCII characters; copy it "
                "again from the dashboard's API section"
            )
        base = base_url if base_url is not None else env.get(ENV_BASE_URL, "")
        if not base:
            raise ConfigurationError(
                f"no service address: pass base_url=... to Client or set the {ENV_BASE_URL} "
                "environment variable"
            )
        resolved_base = _service_url(base, "base_url", ENV_BASE_URL)
        app = app_url if app_url is not None else env.get(ENV_APP_URL, "")
        resolved_app = _service_url(app, "app_url", ENV_APP_URL) if app else resolved_base
        if isinstance(timeout, int | float) and not isinstance(timeout, bool):
            timeout = DEFAULT_TIMEOUT.with_total(timeout)
        if not isinstance(timeout, Timeout):
            raise ConfigurationError(
                f"timeout must be a Timeout or a number of seconds, not {timeout!r}"
            )
        if (
            isinstance(max_in_flight, bool)
            or not isinstance(max_in_flight, int)
            or max_in_flight < 1
        ):
            raise ConfigurationError(f"max_in_flight must be an int >= 1, not {max_in_flight!r}")
        if role_field not in ROLE_FIELDS:
            raise ConfigurationError(
                f"role_field must be 'asset_role' or 'asset_roles', not {role_field!r}"
            )
        if (
            isinstance(min_poll_interval, bool)
            or not isinstance(min_poll_interval, int | float)
            or min_poll_interval <= 0
        ):
            raise ConfigurationError(
                f"min_poll_interval must be a number of seconds > 0, not {min_poll_interval!r}"
            )
        return cls(
            api_key=ApiKey(key),
            base_url=resolved_base,
            app_url=resolved_app,
            timeout=timeout,
            retry=retry or RetryPolicy(),
            max_in_flight=max_in_flight,
            role_field=role_field,
            min_poll_interval=float(min_poll_interval),
            strict=strict,
        )


class Client:
    """The asyncio client of the service.

    ::

        async with Client() as client:          # key and address from the environment
            project = await client.projects.create("12 Oak Street")
            process = await client.run(ToolSlug.VIRTUAL_STAGING, "room.jpg", widgets=[...])

    ``session``: an ``aiohttp.ClientSession`` of your own, used as it is and never closed by the
    client.  Without one the client creates its own inside the running loop and closes it on
    ``close()`` / leaving ``async with``.  After that every call raises ``ConfigurationError``.

    ``timeout`` applies to each HTTP attempt (a number sets ``total`` only); every method also takes
    ``timeout=`` for one call.  Retries: see :class:`~asyncsdk.RetryPolicy`; ``max_retries`` and the
    backoff arguments tune it.  ``max_in_flight`` caps concurrent requests (extra calls queue).
    ``generation_limit`` paces process creation on the client side.  ``role_field`` picks the form
    field of upload roles (``asset_role`` repeated, or ``asset_roles``).  ``strict`` makes decoding
    reject unknown fields (for tests against recorded answers).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | URL | None = None,
        app_url: str | URL | None = None,
        session: aiohttp.ClientSession | None = None,
        timeout: Timeout | float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        max_in_flight: int = 64,
        generation_limit: GenerationLimit | None = None,
        role_field: str = "asset_role",
        min_poll_interval: float = 5.0,
        strict: bool = False,
        backoff_initial: float = 0.5,
        backoff_max: float = 8.0,
        max_retry_after: float = 60.0,
    ) -> None:
        retry = RetryPolicy(
            max_retries=max_retries,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
            max_retry_after=max_retry_after,
        )
        self.settings = ClientSettings.resolve(
            api_key=api_key,
            base_url=base_url,
            app_url=app_url,
            timeout=timeout,
            retry=retry,
            max_in_flight=max_in_flight,
            role_field=role_field,
            min_poll_interval=min_poll_interval,
            strict=strict,
        )
        del api_key  # from here on only the masked holder has it
        if session is not None and not isinstance(session, aiohttp.ClientSession):
            raise ConfigurationError(
                f"session must be an aiohttp.ClientSession, not {type(session).__name__}"
            )
        if generation_limit is not None and not isinstance(generation_limit, GenerationLimit):
            raise ConfigurationError(
                "generation_limit must be a GenerationLimit(max_calls=..., period=...)"
            )
        self._transport = Transport(
            api_key=self.settings.api_key,
            session=session,
            timeout=self.settings.timeout,
            retry=self.settings.retry,
            max_in_flight=self.settings.max_in_flight,
        )
        core = Core(
            transport=self._transport,
            converter=make_converter(strict=self.settings.strict),
            base_url=self.settings.base_url,
            app_url=self.settings.app_url,
            role_field=self.settings.role_field,
            min_poll_interval=self.settings.min_poll_interval,
            generation_limit=generation_limit,
        )
        self.projects = Projects(core)
        self.orders = Orders(core)
        self.processes = Processes(core)
        self.tools = Tools(core)
        self.v1 = V1(core)

    def __repr__(self) -> str:
        state = "closed" if self._transport.closed else "open"
        return (
            f"<Client base_url={str(self.settings.base_url)!r} "
            f"app_url={str(self.settings.app_url)!r} api_key=<hidden> {state}>"
        )

    @property
    def closed(self) -> bool:
        return self._transport.closed

    async def close(self) -> None:
        """Close the client's own session (never one passed in).  Safe to call twice."""
        await self._transport.close()

    async def __aenter__(self) -> Self:
        if self._transport.closed:
            raise ConfigurationError("client is closed; create a new Client")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def run(
        self,
        tool: str,
        *images: Upload | UploadSource,
        asset_map: Mapping[str, str | int] | None = None,
        widgets: Sequence[Mapping[str, Any]] | None = None,
        project_id: str | None = None,
        timeout: float = 600.0,
        registry: ResultWaiter | None = None,
        webhook_grace: float | None = None,
    ) -> Process:
        """Upload ``images`` as an order, run ``tool`` on them and wait for the result.

        A single image fills the tool's one slot ``<tool>-input-image``.  Tools with several slots
        need ``asset_map``; its values are indexes into ``images`` (or existing asset ids).
        ``timeout`` bounds the wait for the result.  A failed process is returned with status
        ``failed``; it is not raised.  When one request creates several processes, the first is
        the one waited for.
        """
        require_text(tool, "tool")
        if not images:
            raise ValidationError("run() needs at least one image")
        if asset_map is None and len(images) != 1:
            raise ValidationError(
                f"{tool} was given {len(images)} images: pass asset_map to say which image fills "
                f"which input slot, e.g. {{'{tool}-input-image': 0}}"
            )
        if asset_map is not None:
            for slot, target in asset_map.items():
                if isinstance(target, bool) or not isinstance(target, int | str):
                    raise ValidationError(
                        f"asset_map[{slot!r}] must be an index into images or an asset id"
                    )
                if isinstance(target, int) and not 0 <= target < len(images):
                    raise ValidationError(
                        f"asset_map[{slot!r}] = {target} is not an index of the "
                        f"{len(images)} images"
                    )
        check_widgets(widgets)
        order = await self.orders.create(*images, project_id=project_id)
        if asset_map is None:
            targets: Mapping[str, str | int] = {f"{tool}-input-image": 0}
        else:
            targets = asset_map
        resolved: dict[str, str] = {}
        for slot, target in targets.items():
            if isinstance(target, str):
                resolved[slot] = target
            elif target < len(order.assets):
                resolved[slot] = order.assets[target].id
            else:
                raise APIDecodeError(
                    f"order {order.order_id} lists {len(order.assets)} assets for "
                    f"{len(images)} uploaded images"
                )
        created = await self.processes.create(order.order_id, tool, resolved, widgets)
        if not created.process_ids:
            raise APIDecodeError(
                f"creating a {tool} process on order {order.order_id} returned no id"
            )
        return await self.processes.wait(
            created.process_ids[0],
            timeout=timeout,
            registry=registry,
            webhook_grace=webhook_grace,
        )
