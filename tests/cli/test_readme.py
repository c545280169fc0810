"""The README's quickstart runs: an aiohttp service on the SDK, webhooks mounted beside it."""

from __future__ import annotations

import logging
import math
import secrets
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from codeblocks import ROOT, run_block

from asyncsdk import samples
from asyncsdk.sandbox import Sandbox, SandboxConfig
from webhooks import RedactingAccessLogger

README = ROOT / "README.md"


async def test_readme_quickstart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    namespace = run_block(README, "quickstart")
    assert namespace["RESULT_WAIT"] == 20.0  # the wait the README states
    monkeypatch.chdir(tmp_path)  # the example's SQLite inbox lands here
    token = secrets.token_urlsafe(24)
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    async with Sandbox(SandboxConfig(pending_delay=0.05, processing_delay=0.1)) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        monkeypatch.setenv("ASYNCSDK_BASE_URL", sb.base_url)
        app = namespace["make_app"](token)
        # As the README's run_app does: the access log hides the webhook token.
        server = TestServer(app, host="127.0.0.1", port=0)
        await server.start_server(access_log_class=RedactingAccessLogger)
        async with server, aiohttp.ClientSession() as session:
            sb.register_webhook(str(server.make_url(f"/hooks/{token}")))
            photo = samples.path("bedroom-empty.jpg").read_bytes()

            # 202 at once, with the process id and where to ask for the result.
            async with session.post(server.make_url("/stage"), data=photo) as response:
                assert response.status == 202
                accepted = await response.json()
                location = response.headers["Location"]
            process_id = accepted["process_id"]
            assert accepted == {"process_id": process_id, "status": "pending"}
            assert location == f"/stage/{process_id}"

            async with session.get(server.make_url(location)) as response:
                assert response.status == 200
                body = await response.json()
            assert body["status"] == "done"
            async with session.get(body["results"][0]) as image:
                assert image.content_type == "image/jpeg"

            # A file that is not a photo: 400 with the SDK's message, and nothing sent.
            async with session.post(server.make_url("/stage"), data=b"not a photo") as response:
                assert response.status == 400
                message = await response.text()
            assert "is not a JPG, PNG or WEBP image" in message
            assert sb.stats.orders_created == 1

            # A process still running: the GET answers 202 once the stated wait has passed.
            sb.config.pending_delay = math.inf
            async with session.post(server.make_url("/stage"), data=photo) as response:
                assert response.status == 202
                slow = await response.json()
            namespace["RESULT_WAIT"] = 0.3
            started = time.monotonic()
            async with session.get(server.make_url(f"/stage/{slow['process_id']}")) as response:
                assert response.status == 202
                assert (await response.json())["status"] == "processing"
            assert time.monotonic() - started < 5
            polled = sb.stats.requests["GET /v3/process/{id}"]
            assert polled == 1  # no webhook by half-time: the service was asked once

            # An id the service never made: 404, once the service has said so.
            async with session.get(server.make_url("/stage/no-such-process")) as response:
                assert response.status == 404
                assert "no process 'no-such-process'" in await response.text()
            assert sb.stats.requests["GET /v3/process/{id}"] == polled + 1

            # The generation window full: 429 with when to come back, and nothing uploaded.
            app[namespace["CLIENT"]].generation_limit.refused()
            async with session.post(server.make_url("/stage"), data=photo) as response:
                assert response.status == 429
                assert int(response.headers["Retry-After"]) >= 1
            assert sb.stats.orders_created == 2
        assert sb.stats.processes_created == 2
        # The finished process's result came by webhook: it was never polled.
        assert sb.stats.requests["GET /v3/process/{id}"] == 2
        assert any(d.delivered for d in sb.stats.deliveries)
    assert (tmp_path / "webhooks.sqlite3").exists()
    access = "\n".join(record.getMessage() for record in caplog.records)
    assert "/hooks/***" in access
    assert token not in access
