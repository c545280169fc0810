"""Everything Redis: :class:`RedisInbox`, :class:`RedisRegistry`, :class:`RedisWrites` and
:class:`RedisBackend`, with their scripts, connection and durability checks.

They need redis-py (``pip install 'asyncsdk[redis]'``), imported only when one is built.
"""

from webhooks._redis._backend import RedisBackend
from webhooks._redis._connect import DEFAULT_PREFIX, DEFAULT_REDIS_URL
from webhooks._redis._durability import RELAXED
from webhooks._redis._inbox import RedisInbox
from webhooks._redis._registry import RedisRegistry
from webhooks._redis._writes import RedisWrites

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_REDIS_URL",
    "RELAXED",
    "RedisBackend",
    "RedisInbox",
    "RedisRegistry",
    "RedisWrites",
]
