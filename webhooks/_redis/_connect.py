"""What both Redis backends share: the lazy import of redis-py, the client, key names, errors.

redis-py is an optional dependency (``pip install 'asyncsdk[redis]'``): it is imported when a Redis
backend is built, never when :mod:`webhooks` is imported.
"""

from __future__ import annotations

import contextlib
import importlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from asyncsdk import ConfigurationError
from webhooks._checks import host_port, shown_url, url_scheme
from webhooks._redis._durability import Persistence

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_REDIS_URL",
    "check_prefix",
    "connect",
    "read_persistence",
    "require_redis",
    "translate_errors",
    "where",
    "whole_seconds",
]

DEFAULT_REDIS_URL: Final = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX: Final = "asyncsdk:"

_SOCKET_TIMEOUT: Final = 10.0
_MAX_CONNECTIONS: Final = 32


def require_redis() -> None:
    """Import redis-py, or explain how to install it."""
    try:
        importlib.import_module("redis.asyncio")
    except ImportError as exc:
        raise ConfigurationError(
            "the Redis backends need redis-py, which is not installed:"
            " pip install 'asyncsdk[redis]'"
        ) from exc


def connect(url: str) -> Redis:
    """A client for ``url`` that this package owns (and closes).

    A bounded, blocking pool: thousands of concurrent callers queue for at most
    ``_MAX_CONNECTIONS`` sockets instead of opening one each.
    """
    require_redis()
    import redis.asyncio

    if not isinstance(url, str) or url_scheme(url) not in {"redis", "rediss", "unix"}:
        raise ConfigurationError(
            f"url must be a redis://, rediss:// or unix:// URL such as {DEFAULT_REDIS_URL!r},"
            f" not {shown_url(url)}"
        )
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        max_connections=_MAX_CONNECTIONS,
        socket_timeout=_SOCKET_TIMEOUT,
        socket_connect_timeout=_SOCKET_TIMEOUT,
    )
    return redis.asyncio.Redis.from_pool(pool)


def check_prefix(prefix: object) -> str:
    if not isinstance(prefix, str) or not prefix:
        raise ConfigurationError(
            f"prefix must be a non-empty str such as {DEFAULT_PREFIX!r}, not {prefix!r}"
        )
    if any(c in prefix for c in "*?[]"):
        raise ConfigurationError(
            f"prefix {prefix!r} holds a glob character (* ? [ ]); pick one without, so the keys"
            " can be listed and deleted by pattern"
        )
    return prefix


def where(client: Redis) -> str:
    """host:port/db of a client, for error messages (never the password)."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{host_port(kwargs.get('host', '?'), kwargs.get('port', '?'))}/{kwargs.get('db', 0)}"


@contextlib.contextmanager
def translate_errors(
    unavailable: type[Exception], other: type[Exception], what: str, client: Redis
) -> Iterator[None]:
    """Turn redis-py's exceptions into ours: ``unavailable`` when Redis cannot be reached."""
    import redis.exceptions

    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError) as exc:
        raise unavailable(f"{what}: Redis at {where(client)} cannot be reached ({exc})") from exc
    except redis.exceptions.RedisError as exc:
        raise other(f"{what}: Redis at {where(client)} answered with an error ({exc})") from exc


def whole_seconds(seconds: float) -> int:
    """Seconds as Redis' EXPIRE takes them: a whole number, at least 1."""
    return max(1, math.ceil(seconds))


async def read_persistence(client: Redis) -> Persistence:
    """The server's persistence, in one round trip: ``INFO`` (server, replication, persistence)
    and ``CONFIG GET appendonly appendfsync save``, which a managed Redis may refuse (the reason is
    kept; ``INFO`` still tells ``appendonly``).  Errors reaching the server are redis-py's: the
    caller translates them."""
    sections = ("server", "replication", "persistence")
    async with client.pipeline(transaction=False) as pipe:
        for section in sections:
            pipe.info(section)
        pipe.config_get("appendonly")
        pipe.config_get("appendfsync")
        pipe.config_get("save")
        replies = await pipe.execute(raise_on_error=False)
    info: dict[str, object] = {}
    refused: list[str] = []
    for section, reply in zip(sections, replies, strict=False):
        if isinstance(reply, Exception):
            refused.append(f"INFO {section}: {reply}")
        else:
            info.update(reply)
    config: dict[str, object] | None = {}
    for reply in replies[len(sections) :]:
        if isinstance(reply, Exception):
            if config is not None:  # the first refusal says why
                refused.append(str(reply).strip())
            config = None
        elif config is not None:
            config.update(_decoded(reply))
    return Persistence.read(info, config, "; ".join(refused) or None)


def _decoded(config: dict[Any, Any]) -> dict[str, object]:
    return {
        (k.decode() if isinstance(k, bytes) else str(k)): (
            v.decode() if isinstance(v, bytes) else v
        )
        for k, v in config.items()
    }
