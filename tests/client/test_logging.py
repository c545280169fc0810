"""The debug line the request path logs for every attempt, without the key."""

from __future__ import annotations

import logging

import pytest

from asyncsdk import Client
from tests.client._fake import FakeService, Reply, process_json


async def test_every_attempt_is_logged_at_debug_without_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeService()
    await fake.start()
    try:
        fake.script(
            "GET",
            "/v3/process/pr1",
            Reply(status=503, json={"error": "busy", "key": "api_error_busy"}),
            Reply(status=200, json=process_json("pr1", status="done")),
        )
        key = "sk_test_logged_key_123"
        with caplog.at_level(logging.DEBUG, logger="asyncsdk"):
            async with Client(
                api_key=key, base_url=str(fake.url), backoff_initial=0.001, backoff_max=0.002
            ) as client:
                await client.processes.get("pr1")
        lines = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
        attempts = [line for line in lines if line.startswith("GET /v3/process/pr1")]
        assert len(attempts) == 2
        assert "-> 503 (attempt 1," in attempts[0]
        assert "-> 200 (attempt 2," in attempts[1]
        assert all(key not in record.getMessage() for record in caplog.records)
    finally:
        await fake.stop()
