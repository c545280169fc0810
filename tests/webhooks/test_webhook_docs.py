"""The example of docs/webhooks.md runs: mounted as shown, it accepts and handles a delivery."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from whtools import JSON, TOKEN, encode, eventually, idle, payload

from webhooks import RECEIVER_KEY, RedactingAccessLogger

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"


def first_example() -> str:
    code = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)[0]
    assert "web.run_app(app, " in code
    # Keep the run_app arguments for the test server instead of blocking in run_app.
    return code.replace("web.run_app(app, ", "run_options = dict(")


async def test_the_mounting_example_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASYNCSDK_WEBHOOK_TOKEN", TOKEN)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile(first_example(), str(DOC), "exec"), namespace)  # noqa: S102 - our own doc
    app: web.Application = namespace["app"]
    run_options = namespace["run_options"]
    # Beside the sandbox's 8080, as the getting-started page serves it.
    assert run_options == {"port": 8081, "access_log_class": RedactingAccessLogger}
    receiver = app[RECEIVER_KEY]
    server = TestServer(app, host="127.0.0.1")  # port 0 here: tests run side by side
    await server.start_server(access_log_class=run_options["access_log_class"])
    async with TestClient(server) as client:
        response = await client.post(f"/hooks/{TOKEN}", data=encode(payload()), headers=JSON)
        assert await response.json() == {"status": "accepted"}
        await idle(receiver)

        async def processed() -> bool:  # the count follows the ack, which idle() already saw
            return receiver.metrics.processed == 1

        await eventually(processed, "the event to count as processed")
    assert (tmp_path / "webhooks.sqlite3").exists()
