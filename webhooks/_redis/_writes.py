"""The writes an ``atomic=True`` handler queues, and their form as ACK_WITH's arguments."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from asyncsdk import ConfigurationError

__all__ = ["Arg", "RedisWrites", "encode_writes"]

Arg = str | bytes | int | float


@attrs.define(eq=False)
class RedisWrites:
    """Redis commands an ``atomic=True`` handler queues; they run together with the entry's ack.

    ::

        @receiver.on_completed(atomic=True)
        async def record(event: ProcessCompleted, writes: RedisWrites) -> None:
            writes.call("HSET", f"photos:{event.order_id}", event.process_id, event.status)

    The commands run in one script on the inbox's Redis server, in the order queued, and only if
    this process still holds the entry; then the entry is acked in the same step.  So they are
    applied once per event, even when a process dies between the handler and the ack (the entry
    is handed out again and its handlers run again, but the first run's commands were never
    applied).  Replies are not returned: the handler decides what to write, Redis applies it
    later.  Use commands that cannot fail on their keys' types: Redis does not undo the commands
    before a failing one (as with MULTI/EXEC), and the entry is then retried.
    """

    commands: list[tuple[Arg, ...]] = attrs.field(factory=list, init=False)

    def call(self, command: str, *args: Arg) -> None:
        """Queue one Redis command, e.g. ``writes.call("HINCRBY", key, field, 1)``."""
        if not isinstance(command, str) or not command.strip():
            raise ConfigurationError(
                f"a Redis command name must be a non-empty str, not {command!r}"
            )
        for arg in args:
            if isinstance(arg, bool) or not isinstance(arg, str | bytes | int | float):
                raise ConfigurationError(
                    f"Redis command arguments must be str, bytes, int or float, not {arg!r};"
                    " encode it first (e.g. json.dumps)"
                )
        self.commands.append((command, *args))

    def __len__(self) -> int:
        return len(self.commands)


def encode_writes(commands: Sequence[Sequence[Arg]]) -> list[object]:
    """The ARGV tail of ACK_WITH: each command as its argument count, then its arguments."""
    out: list[object] = []
    for command in commands:
        out.append(len(command))
        out.extend(command)
    return out
