"""The PostgreSQL backends' shared parts: connection and schema, SQL, batched puts, the writes of
``atomic=True`` handlers, and :class:`PostgresRegistry`.  The inbox is
:class:`webhooks.inboxes.postgres.PostgresInbox`.

They need asyncpg (``pip install 'asyncsdk[postgres]'``), imported only when one is built.
"""

from webhooks._postgres._connect import DEFAULT_SCHEMA
from webhooks._postgres._registry import PostgresRegistry
from webhooks._postgres._writes import PostgresWrites

__all__ = ["DEFAULT_SCHEMA", "PostgresRegistry", "PostgresWrites"]
