"""What both Redis backends share: the lazy import of redis-py, the client, key names, errors.

redis-py is an optional dependency (``pip install 'asyncsdk[redis]'``): it is imported when a Redis
backend is built, never when :mod:`webhooks` is imported.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import urllib.parse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from asyncsdk import ConfigurationError
from webhooks._checks import host_port, shown_url, url_scheme
from webhooks._redis._durability import Persistence

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.sentinel import SentinelConnectionPool

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_REDIS_URL",
    "SENTINEL_SCHEME",
    "check_prefix",
    "close",
    "connect",
    "read_persistence",
    "require_redis",
    "translate_errors",
    "where",
    "whole_seconds",
]

DEFAULT_REDIS_URL: Final = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX: Final = "asyncsdk:"
SENTINEL_SCHEME: Final = "redis+sentinel"

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
    ``_MAX_CONNECTIONS`` sockets instead of opening one each.  A ``redis+sentinel://`` URL
    gives a client of the primary that Redis Sentinel names (:func:`_through_sentinel`).
    """
    require_redis()
    import redis.asyncio

    scheme = url_scheme(url) if isinstance(url, str) else ""
    if scheme == SENTINEL_SCHEME:
        return _through_sentinel(url)
    if scheme not in {"redis", "rediss", "unix"}:
        raise ConfigurationError(
            f"url must be a redis://, rediss://, unix:// or {SENTINEL_SCHEME}:// URL such as"
            f" {DEFAULT_REDIS_URL!r}, not {shown_url(url)}"
        )
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url,
        max_connections=_MAX_CONNECTIONS,
        socket_timeout=_SOCKET_TIMEOUT,
        socket_connect_timeout=_SOCKET_TIMEOUT,
    )
    return redis.asyncio.Redis.from_pool(pool)


def _through_sentinel(url: str) -> Redis:
    """A client of the primary that the Sentinels of
    ``redis+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]`` name.

    The user and password are the primary's; the Sentinels are asked without.  After a
    failover the client's next connection goes to the primary the Sentinels name then (redis-py's
    ``Sentinel.master_for``); the calls that were on the old one fail as a lost connection.
    """
    from redis.asyncio.sentinel import Sentinel

    parts = urllib.parse.urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    user, _, password = credentials.partition(":")
    path = [segment for segment in parts.path.split("/") if segment]
    example = f"{SENTINEL_SCHEME}://127.0.0.1:26379,127.0.0.2:26379/mymaster/0"
    if not hosts or not path or len(path) > 2 or parts.query:
        raise ConfigurationError(
            f"a Sentinel URL names its Sentinels, then the primary's service name and database,"
            f" such as {example!r} (no query), not {shown_url(url)}"
        )
    sentinels = []
    for host in hosts.split(","):
        name, _, port = host.rpartition(":")
        if not name or not port.isdigit():
            raise ConfigurationError(
                f"each Sentinel of {shown_url(url)} is HOST:PORT, as in {example!r}"
            )
        sentinels.append((name.strip("[]"), int(port)))
    db = path[1] if len(path) == 2 else "0"
    if not db.isdigit():
        raise ConfigurationError(f"the database of {shown_url(url)} is a number, as in {example!r}")
    timeouts = {"socket_timeout": _SOCKET_TIMEOUT, "socket_connect_timeout": _SOCKET_TIMEOUT}
    sentinel = Sentinel(  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        sentinels,
        sentinel_kwargs=timeouts,
        username=urllib.parse.unquote(user) or None,
        password=urllib.parse.unquote(password) or None,
        db=int(db),
        **timeouts,
    )
    primary: Redis = sentinel.master_for(
        path[0], connection_pool_class=_blocking_sentinel_pool(), max_connections=_MAX_CONNECTIONS
    )
    return primary


@functools.cache
def _blocking_sentinel_pool() -> type[SentinelConnectionPool]:
    """redis-py's pool of a Sentinel's primary, bounded as :func:`connect`'s pool is: its two
    public pool classes composed (they override no method in common)."""
    from redis.asyncio import BlockingConnectionPool
    from redis.asyncio.sentinel import SentinelConnectionPool

    class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
        """Connections to the primary the Sentinels name; callers past the bound wait."""

    return BlockingSentinelPool


async def close(client: Redis) -> None:
    """Close a client :func:`connect` made: its pool, and for a Sentinel URL the connections to
    the Sentinels that name its primary."""
    from redis.asyncio.sentinel import SentinelConnectionPool

    await client.aclose()
    pool = client.connection_pool
    if isinstance(pool, SentinelConnectionPool):
        for sentinel in pool.sentinel_manager.sentinels:
            await sentinel.aclose()


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
    from redis.asyncio.sentinel import SentinelConnectionPool

    pool = client.connection_pool
    kwargs = pool.connection_kwargs
    if isinstance(pool, SentinelConnectionPool):
        return f"{SENTINEL_SCHEME}:{pool.service_name}/{kwargs.get('db', 0)}"
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
    except redis.exceptions.AuthenticationError as exc:  # a ConnectionError, but no outage
        raise ConfigurationError(
            f"{what}: Redis at {where(client)} refused the user name or password of its URL"
            f" ({exc}): fix them in the URL (redis://USER:PASSWORD@host:port/db)"
        ) from exc
    except redis.exceptions.NoPermissionError as exc:
        raise other(
            f"{what}: Redis at {where(client)} refused a command to the URL's user ({exc}): give"
            " it the commands, keys and channels that 'Running on Redis in production' lists"
        ) from exc
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
