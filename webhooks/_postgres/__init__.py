"""The PostgreSQL backends: :class:`PostgresInbox` (the receiver's inbox) and
:class:`PostgresRegistry`.

Both need asyncpg (``pip install 'asyncsdk[postgres]'``), imported only when one is built.
"""

from webhooks._postgres._connect import DEFAULT_SCHEMA
from webhooks._postgres._inbox import PostgresInbox, PostgresWrites
from webhooks._postgres._registry import PostgresRegistry

__all__ = ["DEFAULT_SCHEMA", "PostgresInbox", "PostgresRegistry", "PostgresWrites"]
