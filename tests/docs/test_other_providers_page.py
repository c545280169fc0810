"""The headers program of docs/other-providers.md, with the cookbook's GitHub verifier: a signed
delivery is stored once and handled under the type of its ``X-GitHub-Event``."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from codeblocks import ROOT, run_block

PAGE = ROOT / "docs" / "other-providers.md"
COOKBOOK = ROOT / "docs" / "cookbook.md"
SECRET = "gh-" + "s3cr3t" * 6


def signed(event: str, guid: str, body: bytes) -> dict[str, str]:
    signature = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": guid,
        "X-Hub-Signature-256": f"sha256={signature}",
    }


async def test_the_github_headers_program_stores_once_and_handles_by_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = run_block(PAGE, "github-headers")
    verifier = run_block(COOKBOOK, "github-receiver")["GitHubVerifier"](SECRET)
    receiver = program["github_receiver"](verifier, str(tmp_path / "github.sqlite3"))
    app = web.Application()
    receiver.setup(app, prefix="/github/")  # as the page says to mount it
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    body = json.dumps({"ref": "refs/heads/main", "after": "1f2e3d4c"}).encode()
    answers = []
    async with server, aiohttp.ClientSession() as session:
        for _ in range(2):  # a delivery, then its redelivery from the repository's settings
            headers = signed("push", "guid-1", body)
            async with session.post(server.make_url("/github/"), data=body, headers=headers) as r:
                answers.append((r.status, await r.json()))
        printed = ""
        async with asyncio.timeout(10):
            while "\n" not in printed:  # the handler prints once it has run
                printed += capsys.readouterr().out
                await asyncio.sleep(0.02)
    assert answers == [(200, {"status": "accepted"}), (200, {"status": "duplicate"})]
    assert printed == "push guid-1\n"
