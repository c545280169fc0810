"""A receiver process for the crash test: ``python receiver_script.py DB NAME RECORD MODE``.

MODE ``block``: handlers never finish (the process is to be killed mid-work).
MODE ``record``: handlers append ``process_id status`` lines to RECORD.
Serves on 127.0.0.1 (a free port); prints ``{"ready": NAME, "port": N}`` once serving; stops on
SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from aiohttp import web
from node_process import serve_until_terminated

from asyncsdk import ProcessCompleted
from webhooks import SQLiteInbox, TokenVerifier, WebhookReceiver

TOKEN = "tok-" + "a1b2c3d4" * 4


def append(path: str, line: str) -> None:
    with Path(path).open("a") as out:
        out.write(line)


def crash_receiver(db: str, record: str, mode: str) -> WebhookReceiver:
    """The crash test's receiver (on the SQLite inbox ``db``), whatever serves it."""
    receiver = WebhookReceiver(
        inbox=SQLiteInbox(db, claim_timeout=0.5),
        verifier=TokenVerifier(TOKEN),
        poll_interval=0.05,
        drain_timeout=0.1,
    )

    @receiver.on_completed()
    async def handle(event: ProcessCompleted) -> None:
        if mode == "block":
            await asyncio.Event().wait()
        append(record, f"{event.process_id} {event.status}\n")

    return receiver


async def main(db: str, name: str, record: str, mode: str) -> None:
    receiver = crash_receiver(db, record, mode)
    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    await serve_until_terminated(app, name)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
