"""What an ``atomic=True`` handler queues with :class:`~webhooks.PostgresInbox`: statements and
functions of the connection, run in the transaction that acks the entry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs

from asyncsdk import ConfigurationError

__all__ = ["PostgresWrites", "Step"]

Step = Callable[[Any], Awaitable[object]]
"""A write: called with the asyncpg connection, inside the transaction that acks the entry."""
S = TypeVar("S", bound=Step)


@attrs.define(eq=False)
class PostgresWrites:
    """Writes an ``atomic=True`` handler queues; they run in the transaction that acks the entry.

    ::

        @receiver.on_completed(atomic=True)
        async def record(event: ProcessCompleted, writes: PostgresWrites) -> None:
            writes.execute(
                "INSERT INTO photos (process_id, status) VALUES ($1, $2)",
                event.process_id,
                event.status,
            )

            @writes.run
            async def count(conn: asyncpg.Connection) -> None:
                await conn.execute("UPDATE totals SET done = done + 1 WHERE order_id = $1", ...)

    ``execute`` queues one statement with its ``$n`` parameters; ``run`` queues an ``async``
    function that gets the asyncpg connection inside that transaction, to read and write as it
    needs (it must not commit, roll back or close it).  Both run in the order queued, in one
    transaction with the ack, and only if this process still holds the entry: they commit once
    per event, even when a process dies between the handler and the ack (the entry is handed out
    again and its handlers run again, but the first run's writes never committed).  A write that
    fails rolls the whole transaction back, ack included; the entry is handed out again once its
    claim times out.
    """

    steps: list[Step] = attrs.field(factory=list, init=False)

    def execute(self, query: str, *args: object) -> None:
        """Queue one SQL statement, e.g. ``writes.execute("DELETE FROM t WHERE id = $1", 7)``."""
        if not isinstance(query, str) or not query.strip():
            raise ConfigurationError(f"a SQL statement must be a non-empty str, not {query!r}")

        async def statement(conn: Any) -> object:
            return await conn.execute(query, *args)

        self.steps.append(statement)

    def run(self, step: S) -> S:
        """Queue ``async def step(conn)``, called inside the ack's transaction; returns ``step``
        (so it serves as a decorator)."""
        if not callable(step):
            raise ConfigurationError(f"run takes an async function of the connection, not {step!r}")
        self.steps.append(step)
        return step

    def __len__(self) -> int:
        return len(self.steps)
