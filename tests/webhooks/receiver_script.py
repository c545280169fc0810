"""A receiver process for the crash test: ``python receiver_script.py DB PORTFILE RECORD MODE``.

MODE ``block``: handlers never finish (the process is to be killed mid-work).
MODE ``record``: handlers append ``process_id status`` lines to RECORD.
Serves on 127.0.0.1 (port written to PORTFILE) and exits by itself after 60 seconds.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from aiohttp import web

from asyncsdk import ProcessCompleted
from webhooks import SQLiteInbox, TokenVerifier, WebhookReceiver

TOKEN = "tok-" + "a1b2c3d4" * 4


def append(path: str, line: str) -> None:
    with Path(path).open("a") as out:
        out.write(line)


def publish_port(path: str, port: int) -> None:
    """Written then renamed, so the test never reads a half-written file."""
    Path(path + ".tmp").write_text(str(port))
    Path(path + ".tmp").rename(path)


async def main(db: str, port_file: str, record: str, mode: str) -> None:
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

    app = web.Application()
    receiver.setup(app, prefix="/hooks/")
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    publish_port(port_file, runner.addresses[0][1])
    try:
        await asyncio.sleep(60)
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
