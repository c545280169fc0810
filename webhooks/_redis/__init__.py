"""Redis plumbing shared by :class:`~webhooks.RedisInbox` and :class:`RedisRegistry`.

Both need redis-py (``pip install 'asyncsdk[redis]'``), imported only when one is built.
"""

from webhooks._redis._connect import DEFAULT_PREFIX, DEFAULT_REDIS_URL
from webhooks._redis._registry import RedisRegistry

__all__ = ["DEFAULT_PREFIX", "DEFAULT_REDIS_URL", "RedisRegistry"]
