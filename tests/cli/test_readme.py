"""The README's quickstart runs: an aiohttp service awaiting the SDK, webhooks mounted beside it."""

from __future__ import annotations

import secrets
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from codeblocks import ROOT, run_block

from asyncsdk import samples
from asyncsdk.sandbox import Sandbox, SandboxConfig

README = ROOT / "README.md"


async def test_readme_quickstart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    namespace = run_block(README, "quickstart")
    monkeypatch.chdir(tmp_path)  # the example's SQLite inbox lands here
    token = secrets.token_urlsafe(24)
    async with Sandbox(SandboxConfig(pending_delay=0.05, processing_delay=0.1)) as sb:
        monkeypatch.setenv("ASYNCSDK_API_KEY", sb.api_key)
        monkeypatch.setenv("ASYNCSDK_BASE_URL", sb.base_url)
        app = namespace["make_app"](token)
        async with TestServer(app, host="127.0.0.1", port=0) as server:
            sb.register_webhook(str(server.make_url(f"/hooks/{token}")))
            photo = samples.path("bedroom-empty.jpg").read_bytes()
            async with aiohttp.ClientSession() as session:
                response = await session.post(server.make_url("/stage"), data=photo)
                assert response.status == 200
                body = await response.json()
                result = await session.get(body["results"][0])
                assert result.content_type == "image/jpeg"
                result.release()
        assert sb.stats.processes_created == 1
        # The result came by webhook: the process was never polled.
        assert sb.stats.requests["GET /v3/process/{id}"] == 0
        assert any(d.delivered for d in sb.stats.deliveries)
    assert body["status"] == "done"
    assert (tmp_path / "webhooks.sqlite3").exists()
