"""The inboxes: :class:`MemoryInbox`, :class:`SQLiteInbox`, :class:`RedisInbox` and
:class:`PostgresInbox`."""

from webhooks.inboxes.memory import MemoryInbox
from webhooks.inboxes.postgres import PostgresInbox
from webhooks.inboxes.redis import RedisInbox
from webhooks.inboxes.sqlite import SQLiteInbox

__all__ = ["MemoryInbox", "PostgresInbox", "RedisInbox", "SQLiteInbox"]
