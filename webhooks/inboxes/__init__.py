"""The inboxes: :class:`MemoryInbox`, :class:`SQLiteInbox` and :class:`RedisInbox`."""

from webhooks.inboxes.memory import MemoryInbox
from webhooks.inboxes.redis import RedisInbox
from webhooks.inboxes.sqlite import SQLiteInbox

__all__ = ["MemoryInbox", "RedisInbox", "SQLiteInbox"]
