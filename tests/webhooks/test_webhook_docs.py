"""The example of docs/webhooks.md runs: mounted as shown, it accepts and handles a delivery."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from codeblocks import code_block, run_block
from whtools import JSON, TOKEN, encode, eventually, idle, payload

from webhooks import RECEIVER_KEY, RedactingAccessLogger

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"


async def test_the_mounting_example_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    program = run_block(DOC, "receiver")
    # Served beside the sandbox's 8080, as the getting-started page serves it, with the log
    # that masks the token.
    assert "port=8081, access_log_class=RedactingAccessLogger" in code_block(DOC, "receiver")
    app: web.Application = program["make_app"](TOKEN)
    receiver = app[RECEIVER_KEY]
    server = TestServer(app, host="127.0.0.1")  # port 0 here: tests run side by side
    await server.start_server(access_log_class=RedactingAccessLogger)
    async with TestClient(server) as client:
        response = await client.post(f"/hooks/{TOKEN}", data=encode(payload()), headers=JSON)
        assert await response.json() == {"status": "accepted"}
        await idle(receiver)

        async def processed() -> bool:  # the count follows the ack, which idle() already saw
            return receiver.metrics.processed == 1

        await eventually(processed, "the event to count as processed")
    assert (tmp_path / "webhooks.sqlite3").exists()
