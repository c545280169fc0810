"""Everything SQLite: :class:`SQLiteInbox` and the writer thread that owns its database."""

from webhooks._sqlite._inbox import SQLiteInbox

__all__ = ["SQLiteInbox"]
