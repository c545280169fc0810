"""The Redis inbox's pipeline: script calls made close together share one round trip.

Calls queued while a pipeline is on the wire (or in the same turn of the event loop) go out
together in the next one; each script still runs atomically on its own, and each caller gets its
own script's reply (or error).  A server that lost the scripts (a restart) gets them loaded again
and the calls it refused are sent once more.  With a strict step (``WAIT``, ``WAITAOF`` or the
check of ``appendfsync always``), a pipeline holding puts ends with it, on the same connection,
and the puts are answered only once it confirms them.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from webhooks._errors import InboxError, InboxUnavailableError

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

    from webhooks._redis._durability import StrictStep

__all__ = ["PUTS", "ScriptPipeline"]

PUTS: Final = frozenset({"PUT", "PUT_CLAIMED"})
"""The scripts that store entries: those a strict step must confirm."""

_Queued = tuple[str, list[str], list[Any], "asyncio.Future[Any]"]
"""A script call waiting for the next pipeline: script name, keys, args, the caller's answer."""


class ScriptPipeline:
    """Sends queued calls of the registered ``scripts`` to ``redis`` in pipelines."""

    def __init__(self, redis: Redis, scripts: dict[str, AsyncScript]) -> None:
        self.redis = redis
        self.scripts = scripts
        self._queue: list[_Queued] = []
        self._sender: asyncio.Task[None] | None = None
        self._loaded = False
        self.after_puts: StrictStep | None = None
        """Sent after the puts of each pipeline: their answers wait for it to confirm them."""

    def queue(self, name: str, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        """Queue one script call for the next pipeline; the future gets redis-py's reply."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        self._queue.append((name, keys, args, answer))
        if self._sender is None:
            self._sender = loop.create_task(self._send(), name="webhooks-redis-inbox-send")
        return answer

    async def sent(self) -> None:
        """Wait until every queued call has been answered."""
        if self._sender is not None:
            await asyncio.wait([self._sender])

    async def _send(self) -> None:
        batch: list[_Queued] = []
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                await self._pipeline(batch)
        finally:
            self._sender = None
            for *_, answer in (*batch, *self._queue):
                if not answer.done():
                    answer.set_exception(
                        InboxUnavailableError("the Redis inbox call was cancelled")
                    )
            self._queue = []

    async def _pipeline(self, batch: list[_Queued]) -> None:
        from redis.exceptions import NoScriptError

        todo = batch
        for _ in range(2):  # the second pass after loading the script into a restarted server
            try:
                if not self._loaded:
                    await self._load_scripts()
                step = self.after_puts
                if step is not None and not any(call[0] in PUTS for call in todo):
                    step = None  # nothing to confirm
                async with self.redis.pipeline(transaction=False) as pipe:
                    for name, keys, args, _answer in todo:
                        pipe.evalsha(self.scripts[name].sha, len(keys), *keys, *args)
                    if step is not None:
                        pipe.execute_command(*step.command)
                    results = await pipe.execute(raise_on_error=False)
                unconfirmed = None if step is None else step.failure(results.pop())
                missing: list[_Queued] = []
                for call, result in zip(todo, results, strict=True):
                    answer = call[3]
                    if isinstance(result, NoScriptError):
                        missing.append(call)
                    elif answer.done():
                        pass  # the caller was cancelled; the script ran all the same
                    elif isinstance(result, BaseException):
                        answer.set_exception(result)
                    elif unconfirmed is not None and call[0] in PUTS:
                        answer.set_exception(
                            InboxUnavailableError(f"inbox put not confirmed: {unconfirmed}")
                        )
                    else:
                        answer.set_result(result)
                if not missing:
                    return
                todo = missing
                self._loaded = False  # the server lost its scripts (a restart): load them again
            except Exception as exc:  # handed to every caller in the batch
                for *_, answer in todo:
                    if not answer.done():
                        answer.set_exception(exc)
                return
        for *_, answer in todo:
            if not answer.done():
                answer.set_exception(InboxError("inbox: Redis keeps forgetting the inbox scripts"))

    async def _load_scripts(self) -> None:
        """Load every script in one round trip: before the first pipeline, and again once a
        server answered ``NOSCRIPT`` (it lost them).  A pipeline whose first call the server
        does not know runs the calls after it first: the second of two puts of one event would
        be stored, the first answered as its duplicate.  Loaded first, that happens only after
        a server lost its scripts."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for script in self.scripts.values():
                pipe.script_load(script.script)
            await pipe.execute()
        self._loaded = True
