"""A child process running keyed runs, which the kill tests SIGKILL and start again.

``python -m tests.reliability.keyed_child BASE_URL JOURNAL KEY...``: one keyed staging run of the
bedroom sample per key, all at once, on ``JOURNAL`` (``sqlite:PATH``, ``postgres:SCHEMA`` with the
DSN in ``ASYNCSDK_TEST_POSTGRES_DSN``, or ``redis:PREFIX`` with the URL in
``ASYNCSDK_TEST_REDIS_URL``); the API key in ``ASYNCSDK_API_KEY``; the journal's lease in
``KEYED_CHILD_LEASE`` (seconds, default 60).  Prints one JSON
object, each key's process id and status, and exits 0.  On SIGUSR1 it prints where each of its
tasks waits to stderr, which the tests ask for before they kill a child that did not finish.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import types

from asyncsdk import (
    Client,
    GenerationLimit,
    Journal,
    PostgresJournal,
    RedisJournal,
    SQLiteJournal,
)
from asyncsdk.samples import path as sample

STAGING = {"space": "bedroom", "style": "modern"}


async def open_journal(spec: str) -> Journal:
    kind, _, where = spec.partition(":")
    lease = float(os.environ.get("KEYED_CHILD_LEASE", "60"))
    if kind == "sqlite":
        return SQLiteJournal(where, lease=lease)
    if kind == "redis":
        return RedisJournal.connect(
            os.environ["ASYNCSDK_TEST_REDIS_URL"], prefix=where, lease=lease
        )
    dsn = os.environ["ASYNCSDK_TEST_POSTGRES_DSN"]
    return await PostgresJournal.connect(dsn, schema=where, lease=lease)


def print_tasks() -> None:
    """Where each task of this process waits, to stderr: the line of every coroutine down its
    chain of awaits, then what the innermost one awaits."""
    for task in asyncio.all_tasks():
        print(f"--- {task.get_name()}", file=sys.stderr)
        awaited: object = task.get_coro()
        while isinstance(awaited, types.CoroutineType):
            frame = awaited.cr_frame
            if frame is not None:
                print(f"  {frame.f_code.co_filename}:{frame.f_lineno}", file=sys.stderr)
            awaited = awaited.cr_await
        print(f"  awaits {awaited!r}", file=sys.stderr)
    sys.stderr.flush()


async def main(base_url: str, journal_spec: str, keys: list[str]) -> None:
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, print_tasks)
    journal = await open_journal(journal_spec)
    try:
        async with Client(
            base_url=base_url,
            journal=journal,
            min_poll_interval=0.01,
            backoff_initial=0.001,
            backoff_max=0.005,
            generation_limit=GenerationLimit(max_calls=100, period=0.01),
        ) as client:
            runs = [
                client.run(
                    "tool-virtual-staging", sample("bedroom-empty.jpg"), widgets=STAGING, key=k
                )
                for k in keys
            ]
            processes = await asyncio.gather(*runs)
    finally:
        await journal.close()
    print(json.dumps({k: [p.id, p.status] for k, p in zip(keys, processes, strict=True)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
