"""Everything PostgreSQL: :class:`PostgresInbox`, :class:`PostgresRegistry`,
:class:`PostgresWrites` and :class:`PostgresBackend`, with their connection, schema, SQL and
batched puts.

They need asyncpg (``pip install 'asyncsdk[postgres]'``), imported only when one is built.
"""

from webhooks._postgres._backend import PostgresBackend
from webhooks._postgres._connect import DEFAULT_SCHEMA
from webhooks._postgres._inbox import PostgresInbox
from webhooks._postgres._registry import PostgresRegistry
from webhooks._postgres._writes import PostgresWrites

__all__ = [
    "DEFAULT_SCHEMA",
    "PostgresBackend",
    "PostgresInbox",
    "PostgresRegistry",
    "PostgresWrites",
]
